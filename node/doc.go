// Package node is the daemon of one host (`node run`): it serves the host's
// partition to trainers over a Unix control socket and runs each loader's
// sampler subprocesses. It wires the other packages together — csr (the
// mapped partition), sample (plans, samplers, batch records), shm (ring
// files), mesh (the other partitions' nodes), partition (graph.toml and
// the partition book) — and holds no per-edge loop of its own.
//
// Nothing imports this package but cmd/node (and perf); the trainer-side
// Go client is node/client, and the wire messages both sides share are
// node/control (documented for other languages in docs/control.md).
//
// # Lifecycle
//
//  1. LoadConfig reads node.toml (unknown keys and every bad value are
//     reported together, each with its key); cmd/node builds the logger.
//  2. New validates the config (and that control.socket's directory
//     exists, which Validate leaves out under /run: a unit's
//     RuntimeDirectory= makes it at start), maps the partition file,
//     reads graph.toml (the partition book and the partition-set
//     checksum) and, with a [mesh], loads the node's certificate.
//  3. Run removes ring files of dead nodes (shm.RemoveStale), binds the
//     socket (refusing one another node answers on) and the mesh's UDP
//     port, logs "serving", and serves trainers and peers at once. In the
//     background it waits until every peer has answered the mesh
//     handshake (whatever the start order; refusals are logged and asked
//     again every 2 s), then logs "node ready" with the peers, sets
//     stats' ready and calls OnReady (systemd READY=1). Without a mesh
//     that happens at once. OnStatus hears each change of what the node
//     is doing (waiting for which peers, why they refuse, serving,
//     draining, writing the checkpoint): systemd's STATUS= lines;
//     OnStopping hears that the shutdown begins (STOPPING=1). Every
//     second it looks at the socket's path: a socket file removed (by
//     hand, or a cleaner of /tmp or /run) is bound again there as the
//     first was and accepted on alike, the old listener closed and its
//     connections served on; a path that holds another file is left as
//     it is, and logged with why (socket.go, checkSocket).
//  4. Each connection may open loaders. open_loader is checked against the
//     partition set (seeds, worst-case record against ring size),
//     then the node creates the ring (with the socket's group, as listen
//     read it from the bound socket, and its group access: 0660 when the
//     group may connect, else 0600) and
//     starts W processes of its own executable, `node sampler`, each with
//     its SamplerSpec as JSON on stdin and Pdeathsig SIGKILL, so that no
//     sampler outlives the node. Each sampler first raises its
//     oom_score_adj SamplerOOMScoreAdj above the node's, so that the OOM
//     killer takes a sampler (one loader fails) before the node.
//  5. A loader lives as long as the connection that opened it: when the
//     trainer closes it or dies, its samplers get SIGTERM (SIGKILL after
//     samplers.drain_timeout) and its ring file is removed.
//  6. A sampler that exits on its own with a failure is logged with its
//     exit status. If it died before attaching to its sub-ring, the node
//     writes an error record there; otherwise the ring layer reports the
//     dead producer to the trainer (shm.ErrProducerDead) within a second.
//  7. On cancellation Run drains: every loader is closed as in 5 — the
//     samplers write the batches in hand and end-of-stream — then the
//     socket file is removed (the one bound last, if the path still holds
//     it) and the mesh port released (also by Close,
//     whatever happened). The caller then calls Close. A loader still
//     opening when the drain begins is waited for: it removes its ring,
//     stops its samplers and answers "node is stopping" (a client
//     node's, still waiting for its sampling node, gives up at once).
//     Control connections answer the request in hand by the end of the
//     drain's samplers.drain_timeout, or within answerGrace of the
//     drain's end if that is later, so Run's drain lasts at most
//     drain_timeout and answerGrace before the kv checkpoint.
//
// # Cluster
//
// A partition set of several parts runs one `node run` per part, each
// with a [mesh] table naming every part's node (config_mesh.go). Every
// node serves its part to peers (handler.go: mesh.Handler plus the
// optional split and label handlers): SampleNeighbors calls
// sample.SampleNeighbors on the mapped part with the request's key, hop,
// fanout, weighting and exclusions (a link batch's seed edges, left out
// before drawing), so a remote expansion equals a local one; rows,
// labels and split ids are read from the mapping. The server never waits
// on samplers or loaders. The hello carries graph.toml's checksum, so a
// node serving another partitioning is refused.
//
// A loader's seeds are the split over the whole set: the node asks each
// peer once per split for its ids (SplitRequest, cached) and concatenates
// them in part order, which is ascending; rank r of W takes its
// contiguous share (sample.NewPlan). Explicit seed_ids may name any node.
// The node hands the seeds, the book and the mesh peers to its samplers
// in their spec (seed_ids once, as the seeds); a spec larger than a
// sampler reads (MaxSamplerSpec, 64 MiB: some 6.7 million seeds of a
// 100-million-node graph) is refused at open_loader, with the key split
// or seed_ids. Each sampler dials the peers itself (the identity the node
// loaded at its start, handed in the spec, not the certificate files
// read again; its own connections) and plugs in meshRemote (one SampleRequest per peer
// per hop; sample sends them before it samples the local nodes) and
// clusterSource (remote.go): owned rows from the mapping, rows of the
// part file's cache section (found by rank in a bitmap over cache_ids,
// counted as hits), the rest in one PullRequest per peer per batch, sent
// as soon as the batch is sampled (prefetch); in the batch's turn to
// write, owned and cached rows are copied straight into its ring record
// and the pulled rows from the answers, so x is written once, as with a
// single part. Seed labels come likewise in one LabelRequest per peer. A peer that is down fails the call after mesh.timeout with an
// error naming it, which the sampler writes as an error record.
//
// Samplers print "mesh <json>" lines beside their progress lines (cache
// counters and their mesh client's per-peer metrics); the node sums them
// into stats: per peer, requests, errors, bytes and p50/p99 latency in
// (served) and out (this node's and its samplers' calls).
//
// The invariant of DESIGN.md §5 holds: the batches of an N-node cluster
// equal, byte for byte, those of one process sampling sample.NewUnion of
// the same part files (cluster_test.go).
//
// # Server-client mode (relay.go, remote_loader.go)
//
// A client node (node.role = "client") has no part and no samplers: it
// reads graph.toml alone (partition.OpenManifest: the book and the
// checksum its hello must carry), dials every part's node with a mesh
// client and serves no mesh port. A trainer's open_loader request is sent
// as it is, in a mesh LoaderOpenRequest on a QUIC connection of the
// loader's own (a stalled trainer blocks no other), to the node of part
// rank·P/W,
// which opens an ordinary loader (ring, samplers, its own [samplers]
// defaults) and becomes its consumer; the client node creates a ring of
// the same shape and, per sub-ring, a goroutine that asks for that
// sub-ring's stream and copies each record (checked with sample.Decode)
// into its own sub-ring. The trainer reads it as any ring. A stream that
// fails ends with an error record naming the sampling node's part. Its
// kvServer has no Store: every kv request goes to the shards' owners over
// the mesh, and kv_create and kv_save to every sampling node. The sampling node closes a remote loader when
// every sub-ring's stream has ended, when the client's connection closes,
// when it drains, or when no stream came within 30 s of the opening.
//
// # Parameter server (kv.go, kv_conn.go, config_kv.go)
//
// Every node holds a kv.Store with its shard of every table: those of
// [[kv.tables]] (the same list on every node) from the start, and those
// trainers declare with kv_create at run time. "nodes" tables follow the
// partition book (a node owns its graph nodes' rows); dense tables use
// kv.EvenBounds over the parts. kv_create creates the table here and then
// on every peer (a node-level JSON request carried in a KVPushRequest:
// a mesh kv body starting with '{' is the node's, any other is kv's), so
// all shards exist when the trainer gets its answer; an equal spec is a
// no-op, another spec an error naming the field. When a peer refuses, a
// table this request created here is dropped again, so no node keeps a
// spec the cluster refused by its own doing; the peers that accepted it
// keep it (one may hold trained rows), and the same kv_create again
// completes it (kv_save refuses it until then). kv_drop removes a table from
// every node the same way (kv.Store.Drop: a step waiting on it fails); one
// that fails part-way is finished by kv_drop again, and a node whose shard
// it removed with trained rows keeps a dropped marker, so that a kv_create
// of the table beside a peer's kept rows is refused (kv_trained.go).
//
// Trainers reach kv only through their own node: a control frame whose
// body does not start with '{' (nor with a node-data kind, below) is a
// kv wire message (docs/control.md).
// The node decodes it and runs it through one kv.Client per table, which
// serves this node's shard from the Store and sends one mesh kv request
// per other shard (pulls as KVPullRequest, which the mesh may retry;
// pushes, synchronous pushes and leaves as KVPushRequest, never retried).
// Mesh kv calls are bounded by kv.sync_timeout + 10 s on both sides, so
// the shard, not the mesh, decides that a step failed. Peers' kv requests
// go to kv.Handler on the mesh server's goroutines; the handler's context
// ends when the caller's connection or stream does.
//
// # Node data (data.go)
//
// A control frame whose body starts with control.KindFeatRequest or
// KindLabelRequest asks for the features or labels of nodes by global id
// (DGL's DistGraph.ndata). The node answers through the same FeatureSource
// and LabelSource its samplers use: the partition alone in a set of one
// part; the partition, the cache section and one pull per peer in a
// cluster (clusterSource, made at the first request); the peers alone on
// a client node.
//
// # Fetching the partition's files (fetch.go)
//
// With node.fetch (and in `node fetch`), Fetch reads the files the node
// needs and lacks from its peers before New opens them (mesh ReadFile, in
// chunks at an offset; graph.toml over a fetch-only connection when there
// is none), writes each to <name>.fetch, and renames it once its size and
// CRC-32C are graph.toml's; a download with another CRC-32C is fetched
// again from its start without the peers that gave its bytes. Every
// server node serves the files of its directory that graph.toml lists
// (Node.ReadFile, which checks sizes, not CRCs).
//
// Each control connection has a reader goroutine, so a trainer's hang-up
// is seen while a synchronous push is blocked: the push's context ends,
// and every rank the connection pushed steps for leaves every shard
// (Store.Leave here, LeaveRequest to the peers), so the step fails at
// once for the other trainers with an error naming the rank, instead of
// at the sync timeout. kv_done before closing marks a clean finish. The
// connection's synchronous pushes and leaves carry a session drawn at its
// first push (kv_conn.go), so the shards tell a rerun's trainers from the
// departed ones of the job before, and name two trainers of one rank.
//
// kv_save checkpoints this node's shards into kv.checkpoint_dir and asks
// every peer to do the same; at shutdown (SIGTERM), after the control
// connections have ended, the node checkpoints again (kv.save_on_exit),
// beside its part of the last kv_save, never over it; a kv_create that
// loads a table asks every peer which save its shard came from and
// refuses a mix (kv_save_check.go).
// With kv.load, the declared tables are restored at start and created
// tables when their checkpoint file exists.
//
// # Sampler processes
//
// RunSampler is the body of `node sampler`: it maps the partition (the
// page cache is shared by every sampler and the node: no copy) through
// the descriptor the node hands down, and refuses a file that is not the
// one the node opened and checked (openPart), attaches
// as producer of sub-ring w, and makes batches w, w+W, … of each epoch
// with Concurrency goroutines, one sample.Sampler each, writing records
// strictly in batch order (see epochBatches), an end-of-epoch record after
// each epoch and end-of-stream after the last. Progress lines on stdout
// feed the node's stats. Every read of the mapping, the node's and the
// samplers', goes through csr.Graph.Read once per request or batch, so a
// part file truncated or rewritten in place under the node is an error
// that names it, not a SIGBUS (partfile.go).
//
// Node's methods are safe for concurrent use; Run is called once.
package node
