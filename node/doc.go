// Package node is the daemon of one host (`node run`): it serves the host's
// partition to trainers over a Unix control socket and runs each loader's
// sampler subprocesses. It wires the other packages together — csr (the
// mapped partition), sample (plans, samplers, batch records), shm (ring
// files) — and holds no per-edge loop of its own.
//
// Nothing imports this package but cmd/node (and perf); the trainer-side
// Go client is node/client, and the wire messages both sides share are
// node/control (documented for other languages in docs/control.md).
//
// # Lifecycle
//
//  1. LoadConfig reads node.toml (unknown keys and every bad value are
//     reported together, each with its key); cmd/node builds the logger.
//  2. New validates the config and maps the partition file.
//  3. Run removes ring files of dead nodes (shm.RemoveStale), binds the
//     socket (refusing one another node answers on), logs "node ready",
//     and serves connections until its context is cancelled.
//  4. Each connection may open loaders. open_loader is checked against the
//     partition (seeds owned here, worst-case record against ring size),
//     then the node creates the ring (mode 0600, or 0660 with a group) and
//     starts W processes of its own executable, `node sampler`, each with
//     its SamplerSpec as JSON on stdin and Pdeathsig SIGKILL, so that no
//     sampler outlives the node.
//  5. A loader lives as long as the connection that opened it: when the
//     trainer closes it or dies, its samplers get SIGTERM (SIGKILL after
//     samplers.drain_timeout) and its ring file is removed.
//  6. A sampler that exits on its own with a failure is logged with its
//     exit status. If it died before attaching to its sub-ring, the node
//     writes an error record there; otherwise the ring layer reports the
//     dead producer to the trainer (shm.ErrProducerDead) within a second.
//  7. On cancellation Run drains: every loader is closed as in 5 — the
//     samplers write the batches in hand and end-of-stream — then the
//     socket file is removed. The caller then calls Close.
//
// # Sampler processes
//
// RunSampler is the body of `node sampler`: it maps the partition (the
// page cache is shared by every sampler and the node: no copy), attaches
// as producer of sub-ring w, and makes batches w, w+W, … of each epoch
// with Concurrency goroutines, one sample.Sampler each, writing records
// strictly in batch order (see epochBatches), an end-of-epoch record after
// each epoch and end-of-stream after the last. Progress lines on stdout
// feed the node's stats.
//
// Node's methods are safe for concurrent use; Run is called once.
package node
