package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"graphnode/mesh"
	"graphnode/node/control"
)

// readyRetry is how long the node waits before asking again peers that
// refused it (another partitioning, say): an operator may fix the peer
// and restart it without restarting this node.
const readyRetry = 2 * time.Second

// cluster is a node's part in the mesh: its server, the client it uses
// for its own requests (handshakes, split ids), and what its samplers
// report. The zero value is a node without a mesh.
type cluster struct {
	id    *mesh.Identity
	srv   *mesh.Server
	cli   *mesh.Client
	ready atomic.Bool

	closeOnce sync.Once
	splitMu   sync.Mutex
	splits    map[string][]uint64    // global ids of a split over every part; splitMu
	fetching  map[string]*splitFetch // a split being asked of the peers; splitMu
	traffic   traffic
}

// splitFetch is one split being asked of the peers, shared by every
// open_loader that needs it meanwhile.
type splitFetch struct {
	done    chan struct{} // closed once ids, err are set
	ids     []uint64
	err     error
	waiters int                // callers waiting on done; splitMu
	cancel  context.CancelFunc // stops the peer calls once no caller waits
}

// startMesh binds the mesh server and creates the client. Without a mesh
// the node is ready at once.
func (n *Node) startMesh() error {
	if !n.cfg.MeshEnabled() {
		return nil
	}
	c := &n.mesh
	if n.cfg.Client() {
		cli, err := mesh.NewClient(n.clientConfig())
		if err != nil {
			return fmt.Errorf("node: mesh: %w", err)
		}
		c.cli = cli
		n.kv.cli.Store(cli)
		return nil
	}
	srv, err := mesh.Listen(context.Background(), n.cfg.MeshListen(), n.serverConfig())
	if err != nil {
		return fmt.Errorf("node: mesh.listen: %w", err)
	}
	cli, err := mesh.NewClient(n.clientConfig())
	if err != nil {
		srv.Close()
		return fmt.Errorf("node: mesh: %w", err)
	}
	c.srv, c.cli = srv, cli
	n.kv.cli.Store(cli)
	return nil
}

// serverConfig is the mesh server of this node. A peer's call may wait
// mesh.timeout (the same on every node) for its answer: the server gives
// a request as long, never less than mesh's default, so that a request
// the operator allowed more time is not cut at 30 s. Kv requests get the
// kv call timeout, as the client's kv calls do.
func (n *Node) serverConfig() mesh.ServerConfig {
	c := &n.mesh
	return mesh.ServerConfig{
		Identity: c.id, Cluster: n.cfg.Mesh.Cluster, Checksum: n.manifest.Checksum,
		Part: n.cfg.Node.Part, Owners: n.cfg.meshOwners(), Handler: meshHandler{n.handler, n.kv, n}, Logger: n.log,
		RequestTimeout: max(n.cfg.MeshTimeoutDuration(), mesh.DefaultServerRequestTimeout),
		KVTimeout:      n.cfg.kvCallTimeout(),
		Outbound:       func() []mesh.PeerStats { return c.cli.Metrics() },
	}
}

// clientConfig is the mesh client of this node (and, through the spec,
// of its samplers).
func (n *Node) clientConfig() mesh.ClientConfig {
	return mesh.ClientConfig{
		Identity: n.mesh.id, Cluster: n.cfg.Mesh.Cluster, Checksum: n.manifest.Checksum,
		Part: n.cfg.ownPart(), Peers: n.cfg.meshPeers(),
		Timeout: n.cfg.MeshTimeoutDuration(), Retries: n.cfg.meshRetries(),
		KVTimeout: n.cfg.kvCallTimeout(),
	}
}

// closeMesh closes the server (releasing the UDP port) and the client.
// Idempotent.
func (n *Node) closeMesh() {
	n.mesh.closeOnce.Do(func() {
		if n.mesh.srv != nil {
			n.mesh.srv.Close()
		}
		if n.mesh.cli != nil {
			n.mesh.cli.Close()
		}
	})
}

// peerWaitLog is how often the node logs again that peers it cannot
// reach (down, or a wrong address in mesh.peers) are still not ready;
// refusals are logged when they change.
const peerWaitLog = time.Minute

// awaitPeers waits until every peer has answered the handshake, whatever
// the start order, then reports the node ready. A refusal is logged and
// asked again every readyRetry; so is a peer that has not answered
// within mesh.timeout, logged again every peerWaitLog while it does not.
// The node keeps serving meanwhile.
func (n *Node) awaitPeers(ctx context.Context) {
	if n.mesh.cli == nil {
		n.becomeReady()
		return
	}
	n.status("waiting for peers " + strings.Join(n.peerNames(), ", "))
	var last string
	var logged time.Time
	round := max(n.cfg.MeshTimeoutDuration(), time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, round)
		err := n.mesh.cli.WaitReady(rctx)
		cancel()
		if err == nil {
			if n.kv != nil {
				// Before ready: trainers wait for it.
				n.kv.checkDeclaredAtStart(ctx)
				n.kv.checkLoadedAtStart(ctx)
				n.kv.checkLostAtStart(ctx)
			}
			n.becomeReady()
			return
		}
		if ctx.Err() != nil {
			return
		}
		// An unavailable peer's error counts its attempts: it differs
		// every round. A refusal is logged when it changes, which a
		// certificate's validity does not do by the time it states.
		if msg := refusalKey(err.Error()); msg != last && (errors.Is(err, mesh.ErrRefused) || time.Since(logged) >= peerWaitLog) {
			n.log.Error("peers not ready", "err", err)
			n.status("peers not ready: " + err.Error())
			last, logged = msg, time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(readyRetry):
		}
	}
}

// clockTimes matches the times an error states (x509: "current time
// 2026-11-29T10:14:30Z is after 2026-11-29T10:14:28Z").
var clockTimes = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)

// refusalKey is msg without the times it states: an expired peer
// certificate's refusal names the current time, and was logged (and
// the status rewritten) every round, for as long as it lasted.
func refusalKey(msg string) string { return clockTimes.ReplaceAllString(msg, "<time>") }

// describeSelf is what the node serves, as log attributes.
func (n *Node) describeSelf() []any {
	if n.graph == nil {
		return []any{"socket", n.cfg.Control.Socket, "role", RoleClient, "parts", n.book.Parts(), "name", n.cfg.Node.Name}
	}
	m := n.graph.Meta()
	return []any{"socket", n.cfg.Control.Socket, "part", m.Part, "parts", m.NumParts,
		"nodes", n.graph.NumNodes(), "edges", n.graph.NumEdges(), "name", n.cfg.Node.Name}
}

func (n *Node) becomeReady() {
	n.mesh.ready.Store(true)
	n.log.Info("node ready", append(n.describeSelf(), "peers", n.peerNames())...)
	if n.graph == nil {
		n.status(fmt.Sprintf("serving trainers on %s with loaders sampled by the %d nodes of %s", n.cfg.Control.Socket, n.book.Parts(), n.cfg.Mesh.Cluster))
	} else {
		m := n.graph.Meta()
		n.status(fmt.Sprintf("serving part %d of %d (%d nodes, %d edges) on %s", m.Part, m.NumParts,
			n.graph.NumNodes(), n.graph.NumEdges(), n.cfg.Control.Socket))
	}
	if n.OnReady != nil {
		n.OnReady()
	}
}

// peerNames lists the peers this node dials (cfg.meshPeers: every part
// but its own, all of them on a client node) as part=name@addr, in part
// order.
func (n *Node) peerNames() []string {
	peers := n.cfg.meshPeers()
	names := make([]string, 0, len(peers))
	for _, p := range slices.Sorted(maps.Keys(peers)) {
		names = append(names, fmt.Sprintf("%d=%s@%s", p, peers[p].Name, peers[p].Addr))
	}
	return names
}

// globalSplit is the split over every part: this part's ids and each
// peer's, asked once per split and kept. Concurrent callers for a split
// share one fetch; other splits do not wait for it; a caller whose ctx
// ends returns at once, and the fetch stops once no caller waits. A
// failed fetch is not kept: the next caller asks again.
func (n *Node) globalSplit(ctx context.Context, split string) ([]uint64, error) {
	c := &n.mesh
	c.splitMu.Lock()
	if ids, ok := c.splits[split]; ok {
		c.splitMu.Unlock()
		return ids, nil
	}
	f := c.fetching[split]
	if f == nil {
		// The fetch outlives the caller that starts it: others may wait
		// on it. Each peer call is bounded by mesh.timeout.
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &splitFetch{done: make(chan struct{}), cancel: cancel}
		if c.fetching == nil {
			c.fetching = map[string]*splitFetch{}
		}
		c.fetching[split] = f
		go n.fetchSplit(fctx, split, f)
	}
	f.waiters++
	c.splitMu.Unlock()
	select {
	case <-f.done:
		return f.ids, f.err
	case <-ctx.Done():
		c.splitMu.Lock()
		f.waiters--
		if f.waiters == 0 && c.fetching[split] == f {
			delete(c.fetching, split)
			f.cancel()
		}
		c.splitMu.Unlock()
		return nil, fmt.Errorf("node: %s split of the partition set: %w", split, ctx.Err())
	}
}

// fetchSplit asks every peer for its part of split and completes f,
// keeping the ids when every part answered.
func (n *Node) fetchSplit(ctx context.Context, split string, f *splitFetch) {
	defer f.cancel()
	ids, err := n.askSplit(ctx, split)
	c := &n.mesh
	c.splitMu.Lock()
	defer c.splitMu.Unlock()
	if c.fetching[split] == f {
		delete(c.fetching, split)
	}
	if err == nil {
		if c.splits == nil {
			c.splits = map[string][]uint64{}
		}
		c.splits[split] = ids
	}
	f.ids, f.err = ids, err
	close(f.done)
}

// askSplit is the split over every part, asked now. Parts own ascending
// id ranges, so the concatenation in part order is ascending.
func (n *Node) askSplit(ctx context.Context, split string) ([]uint64, error) {
	c := &n.mesh
	parts := n.book.Parts()
	lists := make([][]uint64, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		if p == n.cfg.Node.Part {
			lists[p], errs[p] = n.handler.split(split)
			errs[p] = n.partErr(errs[p]) // the mask is read from the mapped file
			continue
		}
		wg.Go(func() {
			var resp mesh.SplitResponse
			errs[p] = c.cli.Split(ctx, p, &mesh.SplitRequest{Split: split}, &resp)
			lists[p] = resp.IDs
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, &control.Error{Key: "split", Msg: fmt.Sprintf("%s split of the partition set: %v", split, err)}
	}
	var all []uint64
	for p, l := range lists {
		lo, hi := n.book.Range(p)
		if len(l) > 0 && (l[0] < lo || l[len(l)-1] >= hi) {
			return nil, &control.Error{Key: "split", Msg: fmt.Sprintf("part %d answered %s ids outside its range [%d, %d)", p, split, lo, hi)}
		}
		all = append(all, l...)
	}
	return all, nil
}

// clusterSeeds are a loader's seeds in a partition set of several parts:
// the split over every part, or explicit seed_ids of any node.
func (n *Node) clusterSeeds(ctx context.Context, o control.LoaderOptions) ([]uint64, error) {
	if o.SeedEdges != nil {
		return edgeSeeds(o, n.book.NumNodes())
	}
	if o.Split == "" {
		total := n.book.NumNodes()
		for i, id := range o.SeedIDs {
			if id >= total {
				return nil, &control.Error{Key: "seed_ids", Msg: fmt.Sprintf("seed_ids[%d] = %d is not a node of the graph (ids 0..%d)", i, id, total-1)}
			}
		}
		return o.SeedIDs, nil
	}
	ids, err := n.globalSplit(ctx, o.Split)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, &control.Error{Key: "split", Msg: fmt.Sprintf("the partition set has no %s nodes (%s)", o.Split, emptySplitHint)}
	}
	return ids, nil
}

// meshStats snapshots the mesh for a stats response; nil without one.
func (n *Node) meshStats() *control.MeshStats {
	c := &n.mesh
	if c.cli == nil {
		return nil
	}
	s := &control.MeshStats{Cluster: n.cfg.Mesh.Cluster, Checksum: n.manifest.Checksum}
	if c.srv != nil { // a client node serves no mesh port
		s.Listen = c.srv.Addr().String()
	}
	byName := map[string]*control.PeerStats{}
	peers := n.cfg.meshPeers()
	parts := make([]int, 0, len(peers))
	for p := range peers {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		s.Peers = append(s.Peers, control.PeerStats{Part: p, Name: peers[p].Name, Addr: peers[p].Addr})
	}
	for i := range s.Peers {
		byName[s.Peers[i].Name] = &s.Peers[i]
	}
	get := func(name string) *control.PeerStats {
		if ps := byName[name]; ps != nil {
			return ps
		}
		s.Peers = append(s.Peers, control.PeerStats{Part: -1, Name: name})
		// Re-point every entry: append may have moved the slice.
		for i := range s.Peers {
			byName[s.Peers[i].Name] = &s.Peers[i]
		}
		return byName[name]
	}
	if c.srv != nil {
		for _, m := range c.srv.Metrics() {
			addTraffic(&get(m.Peer).In, m)
		}
	}
	for _, m := range c.cli.Metrics() {
		addTraffic(&get(m.Peer).Out, m)
	}
	for _, m := range c.traffic.snapshot() {
		addTraffic(&get(m.Peer).Out, m)
	}
	ready := c.ready.Load()
	for i := range s.Peers {
		s.Peers[i].Ready = ready && s.Peers[i].Part >= 0
	}
	return s
}

// addTraffic adds m's counters to t; latencies keep the larger.
func addTraffic(t *control.TrafficStats, m mesh.PeerStats) {
	t.Requests += m.Requests
	t.Errors += m.Errors
	t.BytesSent += m.BytesSent
	t.BytesReceived += m.BytesReceived
	t.P50Ms = max(t.P50Ms, float64(m.P50)/float64(time.Millisecond))
	t.P99Ms = max(t.P99Ms, float64(m.P99)/float64(time.Millisecond))
}

// samplerMesh is the mesh part of a sampler's spec; nil with one part.
func (n *Node) samplerMesh() *SamplerMesh {
	if !n.multi() || n.mesh.id == nil {
		return nil
	}
	cc := n.clientConfig()
	m := &SamplerMesh{
		Identity: n.mesh.id.PEM(), Node: n.cfg.Node.Name, Cluster: cc.Cluster, Checksum: cc.Checksum,
		Part: cc.Part, Peers: map[int]SpecPeer{}, Timeout: cc.Timeout, Retries: cc.Retries,
		Bounds: n.book.Bounds, MaxMessage: cc.MaxMessage,
	}
	for p, peer := range cc.Peers {
		m.Peers[p] = SpecPeer{Name: peer.Name, Addr: peer.Addr}
	}
	return m
}
