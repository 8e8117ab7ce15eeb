package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"graphnode/csr"
	"graphnode/mesh"
	"graphnode/node/control"
	"graphnode/partition"
	"graphnode/sample"
	"graphnode/shm"
)

// meshCluster is an in-process cluster: one mesh server per part with the
// daemon's handler, and the part files.
type meshCluster struct {
	parts    string
	m        *partition.Manifest
	book     partition.Book
	certs    string
	addrs    []string
	parts_   []*sample.CSR
	handlers []*handler
	srvs     []*mesh.Server
	maxMsg   int // the servers' and clients' mesh MaxMessage; 0: the default
}

func meshClusterParts(t testing.TB, n int, cache float64, ft csr.ElemType, dim int) (string, *partition.Manifest) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "parts")
	return dir, SBMPartsForTest(t, dir, 1500, 10, dim, n, cache, ft)
}

// SBMPartsForTest writes into dir a random partitioning into parts of a
// stochastic block model graph (4 blocks, seed 7, half the nodes in
// training, a tenth each in val and test) of nodes nodes, average degree
// avgDegree and dim features of type ft, with a cache of that ratio
// (fanouts 5,5) when it is not 0. The node_test package's clusters use
// it too.
func SBMPartsForTest(t testing.TB, dir string, nodes int, avgDegree float64, dim, parts int, cache float64, ft csr.ElemType) *partition.Manifest {
	t.Helper()
	ctx := context.Background()
	g, err := partition.SBM(ctx, partition.SBMConfig{Nodes: nodes, Blocks: 4, AvgDegree: avgDegree, FeatDim: dim, Seed: 7,
		TrainFrac: 0.5, ValFrac: 0.1, TestFrac: 0.1, Workers: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	adj, err := partition.BuildAdj(ctx, g, csr.In, partition.CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assign, err := partition.Assign(ctx, g, adj, partition.AssignOptions{Method: partition.MethodRandom, Parts: parts, Seed: 3, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	wo := partition.WriteOptions{Parts: parts, Method: partition.MethodRandom, Workers: 1, FeatType: ft}
	if cache > 0 {
		wo.Fanouts, wo.Cache = []int{5, 5}, partition.CacheOptions{Ratio: cache}
	}
	m, err := partition.Write(ctx, dir, g, adj, assign, wo)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func startMeshCluster(t testing.TB, n int, cache float64, ft csr.ElemType, maxMsg int) *meshCluster {
	return startMeshClusterDim(t, n, cache, ft, maxMsg, 8)
}

func startMeshClusterDim(t testing.TB, n int, cache float64, ft csr.ElemType, maxMsg, dim int) *meshCluster {
	t.Helper()
	return startMeshClusterWrapped(t, n, cache, ft, maxMsg, dim, nil)
}

// startMeshClusterWrapped is startMeshClusterDim with part p's server
// answering through wrap(p, its handler), when wrap is not nil.
func startMeshClusterWrapped(t testing.TB, n int, cache float64, ft csr.ElemType, maxMsg, dim int, wrap func(int, *handler) mesh.Handler) *meshCluster {
	t.Helper()
	dir, _ := meshClusterParts(t, n, cache, ft, dim)
	m, err := partition.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	book, err := m.Book()
	if err != nil {
		t.Fatal(err)
	}
	c := &meshCluster{parts: dir, m: m, book: book, certs: filepath.Join(t.TempDir(), "certs"), maxMsg: maxMsg}
	var names []string
	for p := range n {
		names = append(names, fmt.Sprintf("host%d", p))
	}
	if err := mesh.WriteCluster(c.certs, mesh.ClusterSpec{Cluster: "test", Nodes: names}); err != nil {
		t.Fatal(err)
	}
	for p := range n {
		g, err := csr.Open(PartPath(dir, p), csr.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		h, err := newHandler(g)
		if err != nil {
			t.Fatal(err)
		}
		c.parts_ = append(c.parts_, h.part)
		c.handlers = append(c.handlers, h)
		var served mesh.Handler = h
		if wrap != nil {
			served = wrap(p, h)
		}
		id, err := mesh.LoadIdentity(c.certs, names[p])
		if err != nil {
			t.Fatal(err)
		}
		srv, err := mesh.Listen(context.Background(), "127.0.0.1:0", mesh.ServerConfig{
			Identity: id, Cluster: "test", Checksum: m.Checksum, Part: p, Handler: served, MaxMessage: maxMsg,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		c.srvs = append(c.srvs, srv)
		c.addrs = append(c.addrs, srv.Addr().String())
	}
	return c
}

// client is part p's (sampler's) mesh client to every other part.
func (c *meshCluster) client(t testing.TB, p int) *mesh.Client {
	t.Helper()
	id, err := mesh.LoadIdentity(c.certs, fmt.Sprintf("host%d", p))
	if err != nil {
		t.Fatal(err)
	}
	peers := map[int]mesh.Peer{}
	for q, a := range c.addrs {
		if q != p {
			peers[q] = mesh.Peer{Name: fmt.Sprintf("host%d", q), Addr: a}
		}
	}
	cli, err := mesh.NewClient(mesh.ClientConfig{Identity: id, Cluster: "test", Checksum: c.m.Checksum, Part: p, Peers: peers, Timeout: 5 * time.Second,
		MaxMessage: c.maxMsg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// sameAsUnion samples batch key of seeds with ref (one process over the
// union, gathering its own rows) and with s (a part's sampler, pulling
// through src), and says whether their records differ; a failure of s
// is returned, ref's fails t.
func sameAsUnion(ctx context.Context, t *testing.T, ref, s *sample.Sampler, src *clusterSource, key sample.BatchKey, seeds []uint64) error {
	t.Helper()
	want, err := ref.Sample(ctx, key, seeds)
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Gather(ctx, want); err != nil {
		t.Fatal(err)
	}
	wrec := encodeRecord(t, want, nil)
	got, err := s.Sample(ctx, key, seeds)
	if err != nil {
		return err
	}
	if !bytes.Equal(wrec, encodeRecord(t, got, src.prefetch(ctx, got.NID))) {
		return errors.New("record differs from the union's")
	}
	return nil
}

func encodeRecord(t *testing.T, b *sample.Batch, x sample.FeatureSource) []byte {
	t.Helper()
	size, err := sample.EncodedSize(b)
	if err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, size)
	if x != nil {
		_, err = sample.EncodeGather(context.Background(), rec, b, x)
	} else {
		_, err = sample.Encode(rec, b)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestDistributedMatchesUnion: the sampler of part p (meshRemote and
// clusterSource, as RunSampler wires them, x prefetched as epochBatches
// does) produces records byte-identical to sampling the union, for
// several partitionings, caches, dtypes and seeds owned anywhere.
func TestDistributedMatchesUnion(t *testing.T) {
	for _, tc := range []struct {
		n       int
		cache   float64
		ft      csr.ElemType
		fanouts []int
	}{
		{2, 0, csr.TypeF32, []int{5, 3}},
		{3, 0.3, csr.TypeF32, []int{-1, 4}},
		{3, 0.3, csr.TypeF16, []int{4, -1, 2}},
	} {
		t.Run(fmt.Sprintf("n=%d,cache=%g,%v", tc.n, tc.cache, tc.ft), func(t *testing.T) {
			c := startMeshCluster(t, tc.n, tc.cache, tc.ft, 0)
			ctx := context.Background()
			u, err := sample.NewUnion(c.book, func() []sample.Partition {
				var ps []sample.Partition
				for _, p := range c.parts_ {
					ps = append(ps, p)
				}
				return ps
			}())
			if err != nil {
				t.Fatal(err)
			}
			usrc := sample.NewLocalSource(u)
			ref, err := sample.New(sample.Config{Fanouts: tc.fanouts, Local: u, Schema: u.Schema(), Features: usrc, Labels: usrc})
			if err != nil {
				t.Fatal(err)
			}
			for p := range tc.n {
				cli := c.client(t, p)
				src, err := newClusterSource(c.parts_[p], c.book, cli)
				if err != nil {
					t.Fatal(err)
				}
				s, err := sample.New(sample.Config{Fanouts: tc.fanouts, Local: c.parts_[p], Remote: newMeshRemote(cli, c.book), Book: c.book,
					Schema: c.parts_[p].Schema(), Features: src, Labels: src})
				if err != nil {
					t.Fatal(err)
				}
				all := make([]uint64, c.book.NumNodes())
				for i := range all {
					all[i] = uint64(i)
				}
				plan, err := sample.NewPlan(all, sample.PlanOptions{BatchSize: 97, Shuffle: true, Seed: 11 + uint64(p), WorldSize: 1})
				if err != nil {
					t.Fatal(err)
				}
				ep := plan.Epoch(0, nil)
				for b := range min(ep.NumBatches(), 6) {
					if err := sameAsUnion(ctx, t, ref, s, src, ep.Key(b), ep.Batch(b)); err != nil {
						t.Fatalf("part %d batch %d: %v", p, b, err)
					}
				}
				if tc.cache > 0 && src.hits.Load() == 0 {
					t.Errorf("part %d: no cache hits", p)
				}
			}
		})
	}
}

// TestHandlerRefusesOversizedAnswers: a peer's request whose answer
// would pass the server's MaxMessage (here 1 MiB) is refused by the
// handler before it builds the answer: a pull of 131 k rows of 1 KiB, a
// sample of one degree-17 node repeated 262 k times at fanout -1. The
// handler used to build the whole answer first (153 MB for that pull,
// 320 MB for that sample, the sample's kept in its free list) for the
// server to refuse it. Requests within the limit are answered.
func TestHandlerRefusesOversizedAnswers(t *testing.T) {
	const maxMsg = 1 << 20
	c := startMeshClusterDim(t, 2, 0, csr.TypeF32, maxMsg, 256)
	cli := c.client(t, 0)
	lo, hi := c.book.Range(1)
	best, deg := lo, 0
	for v := lo; v < hi; v++ {
		if d := len(c.parts_[1].Neighbors(uint32(v - lo))); d > deg {
			best, deg = v, d
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func(n int) error
		n    int // ids of a request just under MaxMessage
		want string
	}{
		{"pull", func(n int) error {
			var resp mesh.PullResponse
			return cli.Pull(ctx, 1, &mesh.PullRequest{IDs: repeatID(lo, n)}, &resp)
		}, (maxMsg - 64) / 8, "node: pull of 131064 rows of 1024 bytes: over the answer limit of 1048576 bytes"},
		{"sample", func(n int) error {
			var resp mesh.SampleResponse
			return cli.Sample(ctx, 1, &mesh.SampleRequest{Fanout: -1, IDs: repeatID(best, n), Narrow: true}, &resp)
		}, (maxMsg - 64) / 4, "node: sample request of 262128 ids at fanout -1: the answer could reach"},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := tc.call(tc.n)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, mesh.ErrTooLarge) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s of %d ids: %v, want ErrTooLarge with %q", tc.name, tc.n, err, tc.want)
		}
		// The request itself crosses the process twice (client and
		// server): a few times MaxMessage, not the answer's size.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32*maxMsg {
			t.Errorf("%s of %d ids: %d MB allocated for a refused request", tc.name, tc.n, alloc>>20)
		}
		if err := tc.call(100); err != nil {
			t.Errorf("%s of 100 ids: %v", tc.name, err)
		}
	}
}

// repeatID is n copies of id.
func repeatID(id uint64, n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = id
	}
	return ids
}

// spec is the spec of worker w of W of a loader of part p over the
// cluster, as the node writes it.
func (c *meshCluster) spec(t *testing.T, p, w, W int, ring string, o control.LoaderOptions) *SamplerSpec {
	t.Helper()
	var seeds []uint64
	for q := range c.parts_ {
		g := c.parts_[q].Graph()
		mask, err := g.Mask(o.Split)
		if err != nil {
			t.Fatal(err)
		}
		for it := mask.Iterator(); it.HasNext(); {
			seeds = append(seeds, g.Meta().Start+uint64(it.Next()))
		}
	}
	peers := map[int]SpecPeer{}
	for q, a := range c.addrs {
		if q != p {
			peers[q] = SpecPeer{Name: fmt.Sprintf("host%d", q), Addr: a}
		}
	}
	o.Workers = W
	id, err := mesh.LoadIdentity(c.certs, fmt.Sprintf("host%d", p))
	if err != nil {
		t.Fatal(err)
	}
	return &SamplerSpec{Part: PartPath(c.parts, p), PartID: c.parts_[p].Graph().Identity(), Ring: ring, Worker: w, Workers: W, Options: o, Seeds: seeds,
		Mesh: &SamplerMesh{Identity: id.PEM(), Node: fmt.Sprintf("host%d", p), Cluster: "test", Checksum: c.m.Checksum, Part: p,
			Peers: peers, Timeout: 3 * time.Second, Retries: 1, Bounds: c.book.Bounds, MaxMessage: c.maxMsg}}
}

// union samples o's batches over the union in this process.
func (c *meshCluster) union(t *testing.T, o control.LoaderOptions, seeds []uint64) [][][]byte {
	t.Helper()
	var ps []sample.Partition
	for _, p := range c.parts_ {
		ps = append(ps, p)
	}
	u, err := sample.NewUnion(c.book, ps)
	if err != nil {
		t.Fatal(err)
	}
	src := sample.NewLocalSource(u)
	s, err := sample.New(sample.Config{Fanouts: o.Fanouts, Local: u, Schema: u.Schema(), Features: src, Labels: src})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sample.NewPlan(seeds, planOptions(o))
	if err != nil {
		t.Fatal(err)
	}
	out := make([][][]byte, o.Epochs)
	for e := range o.Epochs {
		ep := plan.Epoch(uint64(e), nil)
		for b := range ep.NumBatches() {
			batch, err := s.Sample(context.Background(), ep.Key(b), ep.Batch(b))
			if err == nil {
				err = s.Gather(context.Background(), batch)
			}
			if err != nil {
				t.Fatal(err)
			}
			out[e] = append(out[e], encodeRecord(t, batch, nil))
		}
	}
	return out
}

// TestRunSamplerMatchesUnion runs the sampler body in this process
// (with -race), concurrency 3, against in-process peers; then again
// with part 1's server closed after a few batches: every batch record
// read must equal the union's, and the stream must end with an error
// record, never a short or altered batch.
func TestRunSamplerMatchesUnion(t *testing.T) {
	for _, vanish := range []bool{false, true} {
		t.Run(fmt.Sprintf("vanish=%v", vanish), func(t *testing.T) {
			c := startMeshCluster(t, 3, 0.2, csr.TypeF32, 0)
			o := control.LoaderOptions{Split: "train", Fanouts: []int{5, 3}, BatchSize: 32, Shuffle: true, Epochs: 2, Seed: 5,
				WorldSize: 1, Concurrency: 3, Features: true, Labels: true}
			const W = 2
			ringPath := filepath.Join(t.TempDir(), "ring")
			specs := make([]*SamplerSpec, W)
			for w := range W {
				specs[w] = c.spec(t, 0, w, W, ringPath, o)
			}
			want := c.union(t, o, specs[0].Seeds)
			// Sub-rings of about four batches: the samplers cannot run
			// ahead of the reader to the end while the peer is still
			// there, and miss its going (the vanish case passed or not
			// by timing).
			var most int
			for _, ep := range want {
				for _, rec := range ep {
					most = max(most, len(rec))
				}
			}
			sub := max(4*(most+shm.RecordHeaderSize), shm.RecordHeaderSize+maxControlRecord)
			sub = (sub + shm.PageSize - 1) / shm.PageSize * shm.PageSize
			ring, err := shm.Create(ringPath, shm.Options{SubRings: W, Capacity: int64(W * sub)})
			if err != nil {
				t.Fatal(err)
			}
			defer ring.Remove()
			cons, err := ring.Consumer()
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			if n := len(want[0]) + len(want[1]); n < 5+2*W*4+4 {
				t.Fatalf("%d batches: too few to outlast the ring after the peer goes", n)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, W)
			for w := range W {
				go func() { done <- RunSampler(ctx, specs[w], slog.New(slog.DiscardHandler), io.Discard) }()
			}
			rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer rcancel()
			read, sawErr := 0, false
		loop:
			for e := 0; e < o.Epochs; e++ {
				for b := 0; ; b++ {
					w := b % W
					rec, err := cons.Next(rctx, w)
					if err != nil {
						t.Fatalf("epoch %d batch %d: %v", e, b, err)
					}
					v, err := sample.Decode(rec)
					if err != nil {
						t.Fatal(err)
					}
					switch v.Header.Kind {
					case sample.KindError:
						t.Logf("error record after %d batches: %s", read, v.Message)
						sawErr = true
						cons.Release(w)
						break loop
					case sample.KindEndOfEpoch:
						if b != len(want[e]) {
							t.Fatalf("epoch %d: end of epoch after %d batches, want %d", e, b, len(want[e]))
						}
						cons.Release(w)
						// the other sub-ring's end of epoch
						for w2 := range W {
							if w2 == w {
								continue
							}
							rec, err := cons.Next(rctx, w2)
							if err != nil {
								t.Fatal(err)
							}
							if v, _ := sample.Decode(rec); v.Header.Kind != sample.KindEndOfEpoch {
								if v.Header.Kind == sample.KindError {
									t.Logf("error record: %s", v.Message)
									sawErr = true
									cons.Release(w2)
									break loop
								}
								t.Fatalf("sub-ring %d: kind %v, want end of epoch", w2, v.Header.Kind)
							}
							cons.Release(w2)
						}
						continue loop
					}
					if !bytes.Equal(rec, want[e][b]) {
						t.Fatalf("epoch %d batch %d: record differs from the union's", e, b)
					}
					cons.Release(w)
					read++
					if vanish && read == 5 {
						c.srvs[1].Close()
					}
				}
			}
			if vanish != sawErr {
				t.Fatalf("vanish %v, error record %v", vanish, sawErr)
			}
			cancel()
			for range W {
				if err := <-done; err != nil && !vanish {
					t.Errorf("RunSampler: %v", err)
				} else if err != nil {
					t.Logf("RunSampler: %v", err)
				}
			}
			_ = errors.Is
		})
	}
}

// gatedSplits is a part's handler whose split answers wait for their
// split's gate (a split without one answers at once), and fail while
// fail is set; asked counts the split requests per split.
type gatedSplits struct {
	*handler
	mu    sync.Mutex
	gates map[string]chan struct{}
	asked map[string]int
	fail  atomic.Bool
}

func (g *gatedSplits) SplitIDs(ctx context.Context, req *mesh.SplitRequest) (*mesh.SplitResponse, error) {
	g.mu.Lock()
	g.asked[req.Split]++
	gate := g.gates[req.Split]
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if g.fail.Load() {
		return nil, errors.New("node: split files unreadable")
	}
	return g.handler.SplitIDs(ctx, req)
}

func (g *gatedSplits) count(split string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asked[split]
}

// TestGlobalSplitSharedFetch: while part 1 holds its train split back,
// concurrent requests for it share one request to the peer; a val
// request is answered meanwhile; a caller whose context ends returns at
// once; once the peer answers every waiter gets the same ids. A failed
// fetch is not kept: the next request asks again. globalSplit held one
// lock over its peer calls: the val request and the cancelled caller
// waited behind the stuck train fetch.
func TestGlobalSplitSharedFetch(t *testing.T) {
	var gated *gatedSplits
	trainGate := make(chan struct{})
	c := startMeshClusterWrapped(t, 2, 0, csr.TypeF32, 0, 8, func(p int, h *handler) mesh.Handler {
		if p != 1 {
			return h
		}
		gated = &gatedSplits{handler: h, gates: map[string]chan struct{}{"train": trainGate}, asked: map[string]int{}}
		return gated
	})
	released := sync.OnceFunc(func() { close(trainGate) })
	defer released()
	n := &Node{book: c.book, handler: c.handlers[0]}
	n.mesh.cli = c.client(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := func(split string) []uint64 {
		var ids []uint64
		for _, h := range c.handlers {
			l, err := h.split(split)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, l...)
		}
		return ids
	}

	type result struct {
		ids []uint64
		err error
	}
	const waiters = 4
	results := make(chan result, waiters)
	for range waiters {
		go func() {
			ids, err := n.globalSplit(ctx, "train")
			results <- result{ids, err}
		}()
	}
	waitUntil(t, "the peer asked for train", func() bool { return gated.count("train") > 0 })

	// Another split does not wait for the stuck one.
	vctx, vcancel := context.WithTimeout(ctx, 5*time.Second)
	ids, err := n.globalSplit(vctx, "val")
	vcancel()
	if err != nil || !slices.Equal(ids, want("val")) {
		t.Errorf("val while train is stuck: %d ids, %v; want the %d val ids", len(ids), err, len(want("val")))
	}

	// A caller that hangs up returns with its context's error.
	gone, hangUp := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() {
		_, err := n.globalSplit(gone, "train")
		left <- err
	}()
	hangUp()
	select {
	case err := <-left:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled caller: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("a caller whose context ended still waits for the stuck train fetch")
	}

	released()
	for range waiters {
		r := <-results
		if r.err != nil || !slices.Equal(r.ids, want("train")) {
			t.Errorf("waiter: %d ids, %v; want the %d train ids", len(r.ids), r.err, len(want("train")))
		}
	}
	if got := gated.count("train"); got != 1 {
		t.Errorf("peer asked %d times for train by %d concurrent callers, want once", got, waiters)
	}

	// Errors are not kept: the next request asks again.
	gated.fail.Store(true)
	if _, err := n.globalSplit(ctx, "test"); err == nil || !strings.Contains(err.Error(), "split files unreadable") {
		t.Errorf("test split from a failing peer: %v, want its error", err)
	}
	gated.fail.Store(false)
	ids, err = n.globalSplit(ctx, "test")
	if err != nil || !slices.Equal(ids, want("test")) {
		t.Errorf("test split after the peer recovered: %d ids, %v; want the %d test ids", len(ids), err, len(want("test")))
	}
	if got := gated.count("test"); got != 2 {
		t.Errorf("peer asked %d times for test, want twice (the failure not kept)", got)
	}
	// Kept once answered: no further request.
	if _, err := n.globalSplit(ctx, "test"); err != nil || gated.count("test") != 2 {
		t.Errorf("test split asked again: %v, %d requests; want the kept ids", err, gated.count("test"))
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// syncBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAwaitPeersLogsUnreachable: a peer at an address nobody answers
// on (a wrong port in mesh.peers) is logged, named with its address,
// once a mesh timeout has passed, and the status says so; the node used
// to wait in silence for ever (the status said "waiting for peers").
func TestAwaitPeersLogsUnreachable(t *testing.T) {
	certs := filepath.Join(t.TempDir(), "certs")
	if err := mesh.WriteCluster(certs, mesh.ClusterSpec{Cluster: "test", Nodes: []string{"host0", "host1"}}); err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close()
	cfg := DefaultConfig()
	cfg.Node.Name, cfg.Node.Part = "host0", 0
	cfg.Mesh.Certs, cfg.Mesh.Cluster, cfg.Mesh.Timeout = certs, "test", "1s"
	cfg.Mesh.Peers = []MeshPeer{{Part: 1, Name: "host1", Addr: dead}}
	var logs syncBuffer
	n := &Node{cfg: cfg, log: slog.New(slog.NewTextHandler(&logs, nil)), manifest: &partition.Manifest{Checksum: "sum-1"}}
	var mu sync.Mutex
	var status []string
	n.OnStatus = func(s string) {
		mu.Lock()
		status = append(status, s)
		mu.Unlock()
	}
	if n.mesh.id, err = mesh.LoadIdentity(certs, "host0"); err != nil {
		t.Fatal(err)
	}
	if n.mesh.cli, err = mesh.NewClient(n.clientConfig()); err != nil {
		t.Fatal(err)
	}
	defer n.mesh.cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	n.awaitPeers(ctx)
	if n.mesh.ready.Load() {
		t.Fatal("ready without its peer")
	}
	want := "peer host1 (" + dead
	if l := logs.String(); !strings.Contains(l, "peers not ready") || !strings.Contains(l, want) || !strings.Contains(l, "unavailable") {
		t.Errorf("log after 8 s:\n%s\nwant a line naming %s unavailable", l, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if last := status[len(status)-1]; !strings.Contains(last, want) {
		t.Errorf("status %q, want it naming %s", last, want)
	}
}
