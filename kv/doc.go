// Package kv is the parameter server (DESIGN.md §9): named float32 tables
// of rows × dim, sharded over the nodes, whose owning shard applies the
// optimiser to pushed gradients, as DGL-KE's KVStore does. Sparse
// embeddings (KG entities and relations) are pushed asynchronously; dense
// model parameters go through synchronous steps. kv imports no other
// project package: it knows tables, ids and bytes, not the mesh.
//
// # Who calls what
//
// Every node runs one Store holding its shard of every table (Config.Part
// is its partition index; a table's Bounds say which global rows each
// shard owns: the partition book's bounds for entity tables, EvenBounds for
// dense ones). The daemon (package node):
//
//  1. builds the Store with New, the same []Spec on every node, and, to
//     resume, calls Store.Load(dir) before serving; tables declared at run
//     time are added with Store.Create (the same Spec on every node)
//     and removed with Store.Drop;
//  2. serves kv messages from peers with Handler.Handle: the mesh carries
//     them as opaque bytes (the first byte is the Kind), the daemon hands
//     the request and the stream's context to Handle and sends back the
//     bytes it returns; Handle blocks for a PushSync until the step ends;
//  3. builds each trainer's Client with NewClient(specs, localStore,
//     NewWireTransport(call)), where call sends bytes to the node serving a
//     part and returns its answer;
//  4. calls Client.LeaveTable(ctx, table, rank) for each Sync table the
//     trainer pushed steps to (or Store.LeaveTable on every node) when a
//     trainer's connection drops, and cancels that trainer's in-flight
//     requests; Client.Leave leaves every Sync table, the tables of other
//     jobs whose ranks have the same numbers included;
//  5. calls Store.PrepareSave(ctx, dir, id) and commits it on every node
//     for a kv_save (id the coordinator's), and Store.SaveExit(dir) on
//     SIGTERM, after trainers stop: an exit save is written beside the
//     node's part of the last coordinated save, never over it
//     (checkpoint_saveid.go), and leaves out a table created over
//     files of the name's earlier table that it did not load, which the
//     caller marks with Store.KeepFiles (checkpoint_keep.go).
//
// Trainers only see Client: Pull, Push (Async tables), PushSync and
// PullVersion (Sync tables). The Client splits ids by owner (binary search
// over Bounds), sends one request per remote shard concurrently, serves its
// own node's shard from the local Store directly while they are in flight,
// and scatters the rows back into the caller's order.
//
// # Concurrency and ordering
//
// Store, Handler, Client and WireTransport are safe for concurrent use.
// A shard's rows are guarded by 256 striped row locks: a Push holds a
// row's lock while it updates the row and its optimiser state, so pushes of
// several trainers run in parallel, each row update is atomic, and a Pull
// returns every row as it was between two updates (not the batch as a
// whole: async pushes interleave, Hogwild-style, as in DGL-KE). A Push
// checks every id before it changes anything; duplicate ids in one push are
// summed in order of appearance and the optimiser runs once per distinct
// row. Sync tables change only inside a step, under the table's exclusive
// lock, so a Pull of a Sync table sees exactly one version. Save holds each
// table's exclusive lock while it writes that table: one consistent
// snapshot per file; pushes to it wait.
//
// Weights and optimiser state are flat pointer-free slices: the garbage
// collector never scans them.
//
// # Optimisers (float32, in this order; products rounded before the add)
//
//	SGD      w -= lr·g
//	Adagrad  (DGL-KE's sparse Adagrad, dglke/kvserver.py _push_handler)
//	         s_r += Σ_j g_j² / dim        one accumulator per row
//	         w_j += (-lr·g_j) / (sqrt(s_r) + eps)     DGL-KE: eps = 1e-10
//	         (a push's repeated ids are summed first, one step per row, as
//	         torch's sparse gradients are; DGL-KE's handler steps per
//	         occurrence, and node kge pushes no id twice. DGL's own
//	         SparseAdagrad differs twice: an accumulator per element, not
//	         per row, and a row's repeated gradients averaged, not summed)
//	Adam     (torch.optim.Adam; step count t per row as DGL's SparseAdam)
//	         t += 1; m = β1·m + (1-β1)·g; v = β2·v + (1-β2)·g²
//	         w += -(lr/(1-β1^t)) · (m / (sqrt(v)/sqrt(1-β2^t) + eps))
//	Average  w = avg   (Sync tables only: an all-reduce for trainers that
//	                    run their own optimiser, as train's GraphSAGE does)
//
// # Synchronous steps
//
// A Sync table's shard has a version, the number of steps applied. Step s
// is accepted only at version s. Each of the W trainers calls
// PushSync(step s, trainer k, world W, gradient for every row of the
// shard); the calls block. When the W-th arrives the shard averages the
// gradients in trainer order ((g0+…+g(W-1))/W), applies the optimiser
// once, bumps the version to s+1 and releases every caller with nil. The
// step fails for every waiter with ErrStepFailed and a message naming the
// missing trainers when a trainer Leaves, a waiter's context ends (its
// connection dropped), Config.SyncTimeout passes after the first push, or
// Load or LoadTable restores the table (the rows and version are then the
// checkpoint's, or the initial ones if the load fails); otherwise the rows
// and version stay as they were. A push whose step is not the step being
// gathered is refused (ErrStep). A departed trainer is remembered, so a
// later step that needs it fails at once. Which later steps: a push or
// leave may carry a session, a nonce of the trainer's connection that the
// node draws (PushSyncSession, LeaveTableSession). With sessions, a
// departure fails the steps of the processes there when it came, and of
// no process that pushed first after it (a rerun of a crashed job trains
// whichever rank pushes first), and two sessions pushing one rank's step
// are both told that two trainers share the rank (see syncState in
// sync.go). Without (an older sender), a departure counts until a
// departed trainer pushes again: that is a new process, and every
// departure remembered until then is forgotten. Each shard decides on its own: when a step fails on one shard after it
// succeeded on another, the shards' versions differ and the job should
// resume from the last checkpoint (as a failed collective ends a PyTorch
// DDP job). PullVersion(v) waits until version >= v and returns rows of
// such a version: when Load sets the version back below v (during the
// wait or between the wait and the read), it waits again.
//
// # Wire messages
//
// Little-endian; [kind u8][WireVersion u8] then the fields listed in
// wire.go. Decoders check each count against the bytes left before they
// allocate, refuse trailing bytes and never panic; each has a fuzz target
// that re-encodes what it accepts. An ErrorMsg carries a code naming the
// sentinel (RemoteError unwraps to it) and the shard's error text.
//
// # Checkpoint files
//
// Save writes <table>.part<K>.kvt per table into dir as one atomic step:
// every table to a fsynced temporary file, then the save journal
// part<K>.kvsave naming them (written, fsynced and renamed itself), then
// the renames, a fsync of dir and the journal's removal. Save, Load and
// Recover first finish a save whose journal a crash left behind and remove
// temporaries that no journal names, so a checkpoint is always one save's
// tables, never some new and some old (journal.go has the format; a
// journal that fails its CRC, names a file that is not a temporary of
// this part, or whose files show a temporary lost rather than renamed,
// is refused with ErrCorrupt, before any rename). Load refuses a file whose magic,
// major version, CRCs or size are wrong (ErrCorrupt, ErrVersion), or whose
// table differs from the configured one in name, part, parts, rows, shard
// range, dim, optimiser or mode, or whose rows are numbered by another
// partitioning (id set, when both name one) (ErrMismatch, naming the
// field; ErrResized, which is also ErrMismatch, when the rows and the
// shard range alone differ: an earlier model of another size saved
// under the name); the error names the file.
//
//	offset  size  field
//	     0     8  magic "GNODEKVT"
//	     8     2  major version (1)     readers refuse any other
//	    10     2  minor version (2; 0 is read as one legacy save)
//	    12     4  flags                 bit 0: optimiser state follows rows
//	                                    bit 1: an exit save (SaveExit)
//	    16     8  file size
//	    24     4  part K                28  4  parts P
//	    32     8  rows (whole table)    40  8  shard start   48  8  shard end
//	    56     4  dim
//	    60     1  init kind             61  1  optimiser     62  1  mode
//	    63     1  name length
//	    64     8  init seed
//	    72  5×4   init scale, lr, eps, beta1, beta2   (float32)
//	    92     4  id set (Spec.IDSet; minor 2, zero before: unknown)
//	    96     8  version (sync steps or pushes applied)
//	   104    64  name, NUL-padded
//	   168     4  CRC-32C of bytes [0, 168)
//	   172     8  save id (minor 1; zero in minor 0, as the rest to 192)
//	   180     8  exit save: the coordinated save it follows, else 0
//	   188     4  CRC-32C of bytes [0, 188)
//	   192        body, n = shard rows:
//	              rows           n·dim float32
//	              adagrad: acc   n float32
//	              adam:    m, v  n·dim float32 each; t  n uint32
//	  end-4    4  CRC-32C of the body
//
//	┌──────────────┬──────────────┬─────────────────┬───────┐
//	│ header 192 B │ rows n·dim·4 │ optimiser state │ CRC   │
//	└──────────────┴──────────────┴─────────────────┴───────┘
package kv
