// Package client is the Go trainer's side of a node: OpenLoader asks the
// node on its control socket for a loader, maps the loader's ring, and
// Next/All hand out decoded batches that view ring memory (no copy).
//
// Order: batch i of an epoch comes from sub-ring i mod W, so batches
// arrive in index order whatever the samplers' timing. After an epoch's
// last batch Next returns ErrEndOfEpoch once (it has read the end-of-epoch
// record of every sub-ring); after the last epoch, io.EOF. A sampler's
// error record or death is an error wrapping ErrSampler that names the
// worker (and, for a death, its pid and exit status as the node saw them);
// a node that shuts down mid-stream gives ErrStopped. Errors are sticky.
//
// The loader belongs to the control connection: Close — or the trainer's
// exit — makes the node stop the samplers and remove the ring. A Loader is
// not safe for concurrent use, and a Batch is valid until the next Next.
//
// DialKV opens a connection for the parameter server: Create (kv_create),
// Drop (kv_drop), Pull, PullVersion, Push, PushSync, Save (kv_save) and
// Done (kv_done), forwarded by the node to the shards that own the rows.
// A connection that drops without Done makes the node fail the
// synchronous steps of the ranks it pushed for, naming them. Sync is an
// all-reduce over a synchronous kv table with the "average" optimiser; it
// has train.Sync's method set, so `node train` hands it to the GraphSAGE
// trainer.
//
// DialData opens a connection for node data: Features and Labels of any
// node of the partition set by global id (DGL's DistGraph.ndata), which
// the node gathers from its part, its cache section and its peers.
package client
