package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"graphnode/csr"
	"graphnode/node/control"
	"graphnode/partition"
	"graphnode/shm"

	"golang.org/x/sys/unix"
)

// ErrServing: another node already listens on the configured socket.
var ErrServing = errors.New("socket in use")

// RingPrefix starts the name of every ring file a node creates
// (shm.Name): "graphnode-<pid namespace>-<node pid>-<loader id>.ring".
const RingPrefix = "graphnode"

// Node is the daemon of one host: it serves one partition to trainers over
// the control socket and runs their loaders' samplers.
type Node struct {
	cfg      Config
	log      *slog.Logger
	graph    *csr.Graph
	part     string // path of the partition file
	gid      int    // control.group, given to the socket; -1 for none
	manifest *partition.Manifest
	// manifestData is manifest encoded, served to peers fetching it (the
	// encoding is deterministic: it is what the checksum hashes).
	manifestData []byte
	book         partition.Book
	handler      *handler // answers peers' mesh requests
	kv           *kvServer
	mesh         cluster
	// Executable is re-executed as `Executable sampler`; it defaults to
	// this process's own binary (samplerExecutable). Tests point it at a
	// built binary.
	Executable string
	// SamplerStderr receives the samplers' logs; default os.Stderr.
	SamplerStderr io.Writer
	// OnReady, when set, is called once the socket accepts trainers and
	// every mesh peer has answered the handshake (systemd's READY=1).
	OnReady func()
	// OnStatus, when set, is called with a one-line description of what
	// the node is doing whenever that changes: waiting for peers (and
	// why they are not ready), serving, draining, writing a checkpoint
	// (systemd's STATUS=, shown by systemctl status).
	OnStatus func(status string)
	// OnStopping, when set, is called once when Run starts to shut down
	// (its context ended, or the socket failed), before the drain
	// (systemd's STOPPING=1).
	OnStopping func()

	// data answers trainers' node-data requests (data.go).
	data struct {
		once   sync.Once
		src    dataSource
		schema dataSchema
		err    error
	}

	// ringAccess is every ring file's mode and group: the socket's group
	// access (listen sets it, before any loader can open).
	ringAccess ringAccess

	// bound is set once Run has bound the control socket: from then on
	// the socket file is this node's to remove (Abandon), if it is still
	// the file it bound (sock.file).
	bound atomic.Bool
	// sock is the control socket as bound, by listen and then by each
	// rebind, and the listener Run accepts on (socket.go).
	sock struct {
		// One removeSocket or checkSocket at a time: Abandon beside Run's
		// end, a check beside either.
		sync.Mutex
		ln   *net.UnixListener // Run accepts on it
		file os.FileInfo       // the socket file as bound
		// stopped: Run accepts no more, or removeSocket ran; no socket is
		// bound again.
		stopped bool
		removed bool // removeSocket removed it
		// lost says why the path was last found without the socket and
		// it was not bound again, told when that was logged; "" while
		// the path holds it (checkSocket).
		lost string
		told time.Time
	}
	// sockCheck is how often Run looks at its control socket's path;
	// 0 is socketCheck. Tests shorten it.
	sockCheck    time.Duration
	started      time.Time
	maxDeg       int  // largest degree of the partition set (of this part with an older graph.toml), bounds fanout -1
	maxDegExact  bool // maxDeg is the set's (graph.toml records every part's, or there is one part)
	opened       atomic.Uint64
	batches      atomic.Uint64
	sampledEdges atomic.Uint64 // of the batches written, from samplers' progress lines
	failures     atomic.Uint64

	// starting counts the loaders reserved but not yet started or
	// refused (reserveLoader to doneStarting).
	// INVARIANT: Add is called only under mu while !mu.draining, so
	// drain's Wait sees every loader that can still start.
	starting sync.WaitGroup
	// stopping is closed when drain begins: a loader opening on a
	// sampling node (a client node's) gives up then, instead of holding
	// the drain up until that node answers. Made by New.
	stopping chan struct{}

	mu struct {
		sync.Mutex
		loaders  map[uint64]*loader
		nextID   uint64
		draining bool
		// drainBy is when the drain that began ends at the latest:
		// its start plus samplers.drain_timeout (answerDeadline).
		drainBy time.Time
		// releasing counts the closings under way that will give
		// loader slots back: a trainer that hung up or closed a loader
		// (its samplers still stopping), a peer's remote loader ending.
		// An open_loader at samplers.max_loaders waits for them
		// (awaitSlot) rather than being refused for a slot its own
		// trainer has just let go of.
		releasing int
		// released, when not nil, is closed when releasing changes.
		released chan struct{}
		// relayClosed: when this node (a client node) last closed a
		// loader sampled by each part's node (startRelay).
		relayClosed map[int]time.Time
		// holders are the control connections that own loaders: one
		// whose trainer hung up gives its slots back as soon as its
		// reader sees the end, which may come after the trainer's next
		// open_loader.
		holders map[*net.UnixConn]struct{}
	}
}

// status reports what the node does now to OnStatus.
func (n *Node) status(s string) {
	if n.OnStatus != nil {
		n.OnStatus(s)
	}
}

// New validates cfg and opens this host's partition. The caller must
// Close the Node after Run returns (or instead of calling Run).
func New(cfg Config, log *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err := cfg.CheckSocketDir(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	// Validate refuses a read-only rings.dir; whether this node's user may
	// write there is for the node to find. Else every open_loader would be
	// refused, a relayed one included.
	if err := unix.Access(cfg.Rings.Dir, unix.W_OK|unix.X_OK); err != nil {
		return nil, fmt.Errorf("node: rings.dir: %q cannot be written by this node (uid %d): %v (every loader's ring is created there): %w",
			cfg.Rings.Dir, os.Getuid(), err, ErrConfig)
	}
	gid, _ := cfg.GroupID()
	if cfg.Client() {
		n := &Node{cfg: cfg, log: log, gid: gid, SamplerStderr: os.Stderr, stopping: make(chan struct{})}
		if err := n.openSet(); err != nil {
			return nil, err
		}
		n.mu.loaders = map[uint64]*loader{}
		n.mu.relayClosed = map[int]time.Time{}
		return n, nil
	}
	part := PartPath(cfg.Node.Parts, cfg.Node.Part)
	g, err := csr.Open(part, csr.OpenOptions{Verify: cfg.Node.Verify})
	if err != nil {
		return nil, fmt.Errorf("node: node.part = %d: %w", cfg.Node.Part, err)
	}
	if m := g.Meta(); int(m.Part) != cfg.Node.Part {
		g.Close()
		return nil, fmt.Errorf("node: node.part = %d: %s holds partition %d: %w", cfg.Node.Part, part, m.Part, ErrConfig)
	}
	var maxDeg int
	// The file may be copied over between Open and here, as at any read.
	if err := g.Read(func() error { maxDeg = maxDegree(g.Indptr()); return nil }); err != nil {
		g.Close()
		return nil, fmt.Errorf("node: node.part = %d: %w", cfg.Node.Part, err)
	}
	n := &Node{
		cfg: cfg, log: log, graph: g, part: part, gid: gid,
		SamplerStderr: os.Stderr, maxDeg: maxDeg, stopping: make(chan struct{}),
	}
	if err := n.openSet(); err != nil {
		g.Close()
		return nil, err
	}
	// Samplers of a cluster expand nodes of every part: fanout -1 is
	// bounded by the largest degree of the set.
	if d, ok := n.manifest.MaxDegree(); ok {
		n.maxDeg, n.maxDegExact = max(n.maxDeg, int(d)), true
	} else if !n.multi() {
		n.maxDegExact = true
	} else {
		log.Warn("graph.toml records no part's largest degree (written by an older node partition): the worst-case record of a fanout -1 loader is bounded by this part's, and a batch through a larger degree of another part can outgrow its sub-ring; partition again to record it",
			"parts", cfg.Node.Parts)
	}
	exe, err := samplerExecutable()
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("node: find own executable for samplers: %w", err)
	}
	n.Executable = exe
	n.mu.loaders = map[uint64]*loader{}
	n.mu.relayClosed = map[int]time.Time{}
	return n, nil
}

// Close releases the mesh port and unmaps the partition. Call it after
// Run has returned (or instead of Run).
func (n *Node) Close() error {
	n.closeMesh()
	if n.graph == nil {
		return nil
	}
	return n.graph.Close()
}

// Run serves the control socket until ctx is cancelled, then drains: every
// loader's samplers are told to stop (SIGTERM: they finish the batch in
// hand and write end-of-stream), waited for up to samplers.drain_timeout
// (then killed), their rings removed, and the socket removed. With
// kv.save_on_exit the tables are checkpointed once the control
// connections have ended; a checkpoint that fails is Run's error, after
// the rest of the shutdown. A socket file removed while Run serves is
// bound again (checkSocket).
func (n *Node) Run(ctx context.Context) error {
	n.started = time.Now()
	n.removeStale()
	n.checkRingDir()
	ln, err := n.listen()
	if err != nil {
		return err
	}
	n.bound.Store(true)
	if err := n.startMesh(); err != nil {
		ln.Close()
		n.removeSocket()
		return err
	}
	defer n.closeMesh()
	stopMetrics, err := n.serveMetrics(n.cfg.Metrics.Listen)
	if err != nil {
		ln.Close()
		n.removeSocket()
		return err
	}
	defer stopMetrics()
	attrs := n.describeSelf()
	if n.mesh.srv != nil {
		attrs = append(attrs, "mesh", n.mesh.srv.Addr().String(), "cluster", n.cfg.Mesh.Cluster)
	}
	n.log.Info("serving", attrs...)
	readyCtx, stopReady := context.WithCancel(ctx)
	var readyDone sync.WaitGroup
	readyDone.Go(func() { n.awaitPeers(readyCtx) })
	readyDone.Go(func() { n.watchCerts(readyCtx) })
	if n.kv != nil {
		readyDone.Go(func() { n.kv.keepMarkers(readyCtx) })
	}
	readyDone.Go(func() { n.keepSocket(readyCtx) })
	defer func() {
		stopReady()
		readyDone.Wait()
	}()

	var conns sync.WaitGroup
	connCtx, stopConns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConns()
	go func() {
		<-ctx.Done()
		n.stopAccepting()
	}()
	var acceptErr error
	for backoff := time.Duration(0); ; {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, net.ErrClosed) {
				// A rebind closed it: accept on the socket bound in its
				// place, as on the first.
				if next := n.listener(); next != nil && next != ln {
					ln = next
					continue
				}
				break
			}
			if !acceptRetries(err) {
				n.log.Error("accept failed", "socket", n.cfg.Control.Socket, "err", err)
				acceptErr = fmt.Errorf("node: control.socket %s: accept: %w", n.cfg.Control.Socket, err)
				break
			}
			// Out of descriptors or memory for a moment: the node stays
			// up (it used to stop and exit 0, which no restart policy
			// on failure brings back), and tries again.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			n.log.Warn("accept failed, retrying", "socket", n.cfg.Control.Socket, "err", err, "in", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		conns.Add(1)
		go func() {
			defer conns.Done()
			n.serveConn(connCtx, c.(*net.UnixConn))
		}()
	}
	n.stopAccepting() // an accept error ended the loop: no socket is bound again
	if n.OnStopping != nil {
		n.OnStopping()
	}
	n.drain()
	stopConns()
	conns.Wait()
	var saveErr error
	if n.cfg.saveOnExit() {
		// Trainers are gone: the shards hold their last complete steps.
		n.status("stopping: writing the kv checkpoint to " + n.cfg.KV.CheckpointDir)
		if info, err := n.kv.save(context.Background(), false); err != nil {
			// The previous checkpoint is intact (kv.Store.Save), but
			// what was trained since is lost: the exit status says so.
			n.log.Error("kv checkpoint at shutdown failed", "dir", n.cfg.KV.CheckpointDir, "err", err)
			saveErr = fmt.Errorf("kv checkpoint at shutdown: %w (the previous checkpoint in %s, if any, is intact)", err, n.cfg.KV.CheckpointDir)
		} else if len(info.Tables) > 0 { // none: the kv server said there was nothing to save
			n.log.Info("kv checkpoint written", "dir", info.Dir, "tables", info.Tables)
		}
	}
	if _, err := n.removeSocket(); err != nil {
		n.log.Warn("remove socket", "socket", n.cfg.Control.Socket, "err", err)
	}
	n.log.Info("node stopped", "socket", n.cfg.Control.Socket)
	return errors.Join(acceptErr, saveErr)
}

// Abandon removes the files of this node that would outlive its process:
// the rings of its loaders and, once Run has bound it, the control
// socket. It is for a process about to exit without the drain (a second
// stop signal): a ring on a tmpfs holds its memory (rings.size, 1 GB by
// default, per loader) until the file goes, which without Abandon is the
// next start's sweep of stale rings. Samplers and trainers keep what they
// have mapped. Safe to call concurrently with Run; it returns the paths
// removed, and its errors name the file.
func (n *Node) Abandon() ([]string, error) {
	removed, err := shm.RemoveOwn(n.cfg.Rings.Dir, RingPrefix)
	if n.bound.Load() {
		if ok, e := n.removeSocket(); ok {
			removed = append(removed, n.cfg.Control.Socket)
		} else if e != nil {
			err = errors.Join(err, e)
		}
	}
	return removed, err
}

// removeStale deletes ring files whose creating node is dead.
func (n *Node) removeStale() {
	removed, err := shm.RemoveStale(n.cfg.Rings.Dir, RingPrefix)
	for _, p := range removed {
		n.log.Info("removed stale ring", "ring", p)
	}
	if err != nil {
		n.log.Warn("remove stale rings", "dir", n.cfg.Rings.Dir, "err", err)
	}
}

// checkRingDir warns when rings.size is more than the filesystem of
// rings.dir holds in all (a container's /dev/shm is 64 MiB, rings.size
// defaults to 1GB): every loader that does not set a smaller ring_size
// would be refused, which is better known at start than at the first
// open_loader. The node still starts: trainers may ask for less.
func (n *Node) checkRingDir() {
	_, total, err := shm.DirSpace(n.cfg.Rings.Dir)
	if err != nil || total == 0 {
		return
	}
	size := n.cfg.RingSizeBytes()
	if size > total {
		n.log.Warn("rings.size is more than rings.dir holds: a loader that does not set a smaller ring_size will be refused; "+
			"enlarge the filesystem (docker run --shm-size, the tmpfs's size=) or lower rings.size",
			"dir", n.cfg.Rings.Dir, "size", n.cfg.Rings.Size, "dir_size", shm.ApproxSize(total))
		return
	}
	// A tmpfs may be larger than the memory there is (its default is
	// half the host's, whatever a container may use): the ring is then
	// refused at open_loader (shm.ErrNoMemory) rather than the node
	// killed for it, and said here first.
	if free, ok := shm.MemAvailable(); ok && size > free && shm.InMemory(n.cfg.Rings.Dir) {
		n.log.Warn("rings.size is more than the memory available: a loader that does not set a smaller ring_size will be refused; "+
			"lower rings.size",
			"dir", n.cfg.Rings.Dir, "size", n.cfg.Rings.Size, "available", shm.ApproxSize(free))
	}
}

// stats snapshots the node for a stats request.
func (n *Node) stats() *control.Stats {
	s := &control.Stats{
		Node: n.cfg.Node.Name, PID: os.Getpid(), Part: n.cfg.ownPart(), Checksum: n.manifest.Checksum,
		Uptime: time.Since(n.started).Seconds(), Opened: n.opened.Load(),
		Batches: n.batches.Load(), SampledEdges: n.sampledEdges.Load(), Failures: n.failures.Load(),
		Loaders: []control.LoaderStats{},
		Ready:   n.mesh.ready.Load(), Mesh: n.meshStats(),
	}
	if n.graph != nil {
		s.Nodes, s.Edges, s.CacheRows = int64(n.graph.NumNodes()), int64(n.graph.NumEdges()), len(n.graph.CacheIDs())
	}
	s.CacheHits, s.CacheMisses = n.mesh.traffic.cache()
	if !n.cfg.Client() {
		// A trainer that will ask for kv_save checks this before it trains.
		s.KV = &control.KVStats{CheckpointDir: n.cfg.KV.CheckpointDir, Tables: []control.KVTableStats{}}
		if n.kv != nil {
			s.KV.Tables = append(s.KV.Tables, n.kv.tableStats()...)
		}
	}
	n.mu.Lock()
	for _, l := range n.mu.loaders {
		if l.started() {
			s.Loaders = append(s.Loaders, l.stats())
		}
	}
	n.mu.Unlock()
	sortLoaders(s.Loaders)
	return s
}

// every calls fn at once, then every period until ctx ends: the node's
// background checks (its socket, its certificates, the kv markers).
func every(ctx context.Context, period time.Duration, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		fn()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
