package multilevel

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// mlFromEdges builds a Graph from undirected pairs through Symmetrize.
func mlFromEdges(t testing.TB, n int, src, dst []uint32) *Graph {
	t.Helper()
	indptr := make([]uint64, n+1)
	for _, u := range src {
		indptr[u+1]++
	}
	for i := 0; i < n; i++ {
		indptr[i+1] += indptr[i]
	}
	indices := make([]uint32, len(src))
	fill := slices.Clone(indptr[:n])
	for i, u := range src {
		indices[fill[u]] = dst[i]
		fill[u]++
	}
	g, err := Symmetrize(n, indptr, indices)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// mlTestRMAT is a seeded R-MAT graph (a, b, c = 0.57, 0.19, 0.19) on 2^scale
// vertices with scrambled ids, as undirected pairs.
func mlTestRMAT(t testing.TB, scale int, edges int, seed uint64) *Graph {
	rng := rand.New(rand.NewPCG(seed, 1))
	n := 1 << scale
	mask := uint64(n - 1)
	scramble := func(x uint64) uint32 { // a bijection on [0, 2^scale)
		x = (x*0x9e3779b97f4a7c15 + seed) & mask
		x ^= x >> (scale / 2)
		return uint32((x * 0xbf58476d1ce4e5b9) & mask)
	}
	src := make([]uint32, edges)
	dst := make([]uint32, edges)
	for i := range src {
		var u, v uint64
		for l := 0; l < scale; l++ {
			r := rng.Float64()
			switch {
			case r < 0.57:
			case r < 0.76:
				v |= 1 << l
			case r < 0.95:
				u |= 1 << l
			default:
				u |= 1 << l
				v |= 1 << l
			}
		}
		src[i], dst[i] = scramble(u), scramble(v)
	}
	return mlFromEdges(t, n, src, dst)
}

// mlGrid is a w×h 4-neighbour grid.
func mlGrid(t testing.TB, w, h int) *Graph {
	var src, dst []uint32
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			v := uint32(y*w + x)
			if x+1 < w {
				src, dst = append(src, v), append(dst, v+1)
			}
			if y+1 < h {
				src, dst = append(src, v), append(dst, v+uint32(w))
			}
		}
	}
	return mlFromEdges(t, w*h, src, dst)
}

// mlCliques is c cliques of size s, clique i joined to clique i+1 by one
// edge.
func mlCliques(t testing.TB, c, s int) *Graph {
	var src, dst []uint32
	for q := 0; q < c; q++ {
		base := uint32(q * s)
		for i := uint32(0); i < uint32(s); i++ {
			for j := i + 1; j < uint32(s); j++ {
				src, dst = append(src, base+i), append(dst, base+j)
			}
		}
		if q+1 < c {
			src, dst = append(src, base+uint32(s)-1), append(dst, base+uint32(s))
		}
	}
	return mlFromEdges(t, c*s, src, dst)
}

func mlRun1(t *testing.T, g *Graph, opts Options) ([]uint32, Quality) {
	t.Helper()
	parts, err := Partition(context.Background(), g, opts)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Measure(g, parts, opts.Parts)
	if err != nil {
		t.Fatal(err)
	}
	if q.Empty != 0 {
		t.Errorf("%d empty parts", q.Empty)
	}
	return parts, q
}

func TestMultilevelQuality(t *testing.T) {
	for _, tc := range []struct {
		name       string
		g          *Graph
		parts      int
		imbalance  float64
		maxCut     int64
		maxBalance float64
	}{
		{"two cliques of 10", mlCliques(t, 2, 10), 2, 1.0, 1, 1.0},
		{"four cliques of 8", mlCliques(t, 4, 8), 4, 1.0, 3, 1.0},
		{"ring of 1000", mlRing(t, 1000), 4, 1.03, 4, 1.03},
		{"ring of 1000, exact", mlRing(t, 1000), 4, 1.0, 8, 1.0},
		{"grid 64x64 into 2", mlGrid(t, 64, 64), 2, 1.03, 64 * 13 / 10, 1.03},
		{"grid 64x64 into 4", mlGrid(t, 64, 64), 4, 1.03, 128 * 13 / 10, 1.03},
		{"grid 64x64 into 4, exact", mlGrid(t, 64, 64), 4, 1.0, 128 * 25 / 10, 1.0},
		{"grid 32x32 into 8", mlGrid(t, 32, 32), 8, 1.03, 160 * 13 / 10, 1.03},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, q := mlRun1(t, tc.g, Options{Parts: tc.parts, Imbalance: tc.imbalance, Seed: 1})
			if q.EdgeCut > tc.maxCut {
				t.Errorf("cut %d, want <= %d", q.EdgeCut, tc.maxCut)
			}
			if q.Balance[0] > tc.maxBalance+1e-9 {
				t.Errorf("balance %.4f, want <= %.4f", q.Balance[0], tc.maxBalance)
			}
		})
	}
}

// mlRing is a cycle of n vertices.
func mlRing(t testing.TB, n int) *Graph {
	src := make([]uint32, n)
	dst := make([]uint32, n)
	for i := range src {
		src[i], dst[i] = uint32(i), uint32((i+1)%n)
	}
	return mlFromEdges(t, n, src, dst)
}

// mlSetWeights gives g the constraints kinds (see Weights),
// with every every-th vertex a training seed.
func mlSetWeights(t testing.TB, g *Graph, kinds []string, every int) {
	n := g.NumVertices()
	indptr := make([]uint64, n+1)
	for v := 0; v < n; v++ {
		indptr[v+1] = uint64(g.Xadj[v+1])
	}
	var train []uint32
	for v := 0; v < n; v += every {
		train = append(train, uint32(v))
	}
	vwgt, nc, err := Weights(kinds, indptr, train)
	if err != nil {
		t.Fatal(err)
	}
	g.Vwgt, g.Ncon = vwgt, nc
}

// Several constraints are held within the bound, and the cut stays far
// below what the k-way scheme, which served them before, left. On this
// graph, seed 3, nodes and train into 2 / 4 / 8 parts: 35.4% / 59.0% /
// 71.8% of the edges then, 14.6% / 34.0% / 52.1% now; nodes, edges and
// train into 8 parts: 78.9% with the heaviest part 8.5% over the average
// then, 72.4% within 1.03 now. The bounds below sit between. The queue
// per constraint in 2-way FM and the bisections' allowance compounding to
// the bound (see recursive) keep three constraints within 1.03.
func TestMultilevelMultiConstraint(t *testing.T) {
	g := mlTestRMAT(t, 14, 1<<17, 7)
	for _, tc := range []struct {
		kinds  []string
		maxCut [3]float64 // share of edges, into 2 / 4 / 8 parts
	}{
		{[]string{"nodes", "train"}, [3]float64{0.25, 0.45, 0.62}},
		{[]string{"nodes", "edges", "train"}, [3]float64{0.45, 0.65, 0.77}},
	} {
		mlSetWeights(t, g, tc.kinds, 10)
		for i, k := range []int{2, 4, 8} {
			_, q := mlRun1(t, g, Options{Parts: k, Seed: 3})
			for c, b := range q.Balance {
				if b > 1.03+1e-9 {
					t.Errorf("%v, k=%d: constraint %d balance %.4f, want <= 1.03", tc.kinds, k, c, b)
				}
			}
			if frac := float64(q.EdgeCut) / float64(g.NumEdges()); frac > tc.maxCut[i] {
				t.Errorf("%v, k=%d: cut %.3f of edges, want <= %.2f", tc.kinds, k, frac, tc.maxCut[i])
			}
		}
	}
}

func TestMultilevelDeterministic(t *testing.T) {
	g := mlTestRMAT(t, 12, 1<<15, 5)
	var first []uint32
	for _, workers := range []int{1, 2, 2} {
		parts, _ := mlRun1(t, g, Options{Parts: 4, Seed: 11, Workers: workers})
		if first == nil {
			first = parts
		} else if !slices.Equal(first, parts) {
			t.Fatalf("workers=%d: assignment differs from the first run", workers)
		}
	}
	other, _ := mlRun1(t, g, Options{Parts: 4, Seed: 12})
	if slices.Equal(first, other) {
		t.Error("seeds 11 and 12 gave the same assignment")
	}
}

func TestMultilevelEdgeCases(t *testing.T) {
	g := mlCliques(t, 2, 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Partition(ctx, g, Options{Parts: 2}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v, want context.Canceled", err)
	}
	for _, opts := range []Options{{Parts: 0}, {Parts: 21}, {Parts: 2, Imbalance: 0.9}} {
		if _, err := Partition(context.Background(), g, opts); err == nil {
			t.Errorf("%+v: no error", opts)
		}
	}
	parts, err := Partition(context.Background(), g, Options{Parts: 1})
	if err != nil || slices.Max(parts) != 0 {
		t.Errorf("one part: %v, %v", parts, err)
	}
	// 20 parts of 20 vertices: every part gets exactly one.
	_, q := mlRun1(t, g, Options{Parts: 20, Imbalance: 1.0})
	if q.Balance[0] != 1 {
		t.Errorf("20 parts: balance %g", q.Balance[0])
	}
	// Edgeless graph.
	empty := &Graph{Xadj: make([]int64, 101), Ncon: 1}
	_, q = mlRun1(t, empty, Options{Parts: 4, Imbalance: 1.0})
	if q.Balance[0] != 1 || q.EdgeCut != 0 {
		t.Errorf("edgeless: %+v", q)
	}
}

func TestSymmetrizeCSR(t *testing.T) {
	// 0->1, 1->0 (both ways), 0->0 (loop), 1->2 twice, 3 isolated.
	indptr := []uint64{0, 2, 5, 5, 5}
	indices := []uint32{1, 0, 0, 2, 2}
	g, err := Symmetrize(4, indptr, indices)
	if err != nil {
		t.Fatal(err)
	}
	wantXadj := []int64{0, 1, 3, 4, 4}
	if !slices.Equal(g.Xadj, wantXadj) {
		t.Errorf("xadj %v, want %v", g.Xadj, wantXadj)
	}
	var rows [][]uint32
	for v := 0; v < 4; v++ {
		row := slices.Clone(g.Adjncy[g.Xadj[v]:g.Xadj[v+1]])
		slices.Sort(row)
		rows = append(rows, row)
	}
	want := [][]uint32{{1}, {0, 2}, {1}, {}}
	for v := range want {
		if !slices.Equal(rows[v], want[v]) {
			t.Errorf("row %d = %v, want %v", v, rows[v], want[v])
		}
	}
	if g.Adjwgt != nil || g.NumEdges() != 2 {
		t.Errorf("adjwgt %v, edges %d", g.Adjwgt, g.NumEdges())
	}
	for _, bad := range []struct {
		n       int
		indptr  []uint64
		indices []uint32
	}{
		{2, []uint64{0, 1}, []uint32{0}},
		{2, []uint64{0, 1, 1}, []uint32{5}},
		{2, []uint64{0, 2, 1}, []uint32{1, 0}},
	} {
		if _, err := Symmetrize(bad.n, bad.indptr, bad.indices); !errors.Is(err, ErrBadGraph) {
			t.Errorf("%+v: err = %v, want ErrBadGraph", bad, err)
		}
	}
}

func TestMeasurePartition(t *testing.T) {
	g := mlRing(t, 6) // 0-1-2-3-4-5-0
	q, err := Measure(g, []uint32{0, 0, 1, 1, 2, 2}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if q.EdgeCut != 3 || q.CommVolume != 6 || q.Balance[0] != 1 || q.Empty != 0 {
		t.Errorf("quality %+v", q)
	}
	q, _ = Measure(g, []uint32{0, 0, 0, 0, 1, 1}, 3)
	if q.EdgeCut != 2 || q.Balance[0] != 2 || q.Empty != 1 {
		t.Errorf("quality %+v", q)
	}
}

func TestMultilevelTriesBySize(t *testing.T) {
	for _, tc := range []struct{ adj, want int }{
		{0, mlBisectMaxTries},
		{1000, mlBisectMaxTries},
		{mlBisectTriesAdj / 8, 8},
		{mlBisectTriesAdj/8 + 1, 4},
		{10556, 2}, // Cora
		{mlBisectTriesAdj / 2, 2},
		{mlBisectTriesAdj/2 + 1, 1},
		{mlBisectTriesAdj, 1},
		{667966, 1}, // BlogCatalog
	} {
		if got := mlBisectTries(tc.adj); got != tc.want {
			t.Errorf("mlBisectTries(%d) = %d, want %d", tc.adj, got, tc.want)
		}
	}
}

// Small graphs take the path of several concurrent tries, larger ones
// the path whose recursion halves run concurrently (at every depth into
// 16 parts): neither may depend on the worker count.
func TestMultilevelDeterministicPaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		g     *Graph
		parts int
	}{
		{"several tries", mlGrid(t, 32, 32), 4},
		{"one try, halves in parallel", mlTestRMAT(t, 13, 1<<16, 3), 8},
		{"one try, 16 parts", mlTestRMAT(t, 13, 1<<16, 3), 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first []uint32
			for _, workers := range []int{1, 2, 3} {
				parts, q := mlRun1(t, tc.g, Options{Parts: tc.parts, Seed: 5, Workers: workers})
				if q.Balance[0] > 1.03+1e-9 {
					t.Errorf("workers=%d: balance %.4f", workers, q.Balance[0])
				}
				if first == nil {
					first = parts
				} else if !slices.Equal(first, parts) {
					t.Fatalf("workers=%d: assignment differs from workers=1", workers)
				}
			}
		})
	}
}

// A goroutine's scratch keeps what the last bisection left in it: a
// recursion must give the same result with a fresh scratch and with one
// used on another, larger graph before.
func TestMultilevelScratchReuse(t *testing.T) {
	small, big := mlGrid(t, 24, 24), mlTestRMAT(t, 12, 1<<15, 9)
	run := func(ws *mlScratch) []uint32 {
		r := newMLRun(context.Background(), 4, 1)
		r.ws = ws
		where, err := r.recursive(small, 4, 1.03)
		if err != nil {
			t.Fatal(err)
		}
		return where
	}
	fresh := run(nil)
	used := &mlScratch{}
	r := newMLRun(context.Background(), 8, 1)
	r.ws = used
	if _, err := r.recursive(big, 8, 1.03); err != nil {
		t.Fatal(err)
	}
	if got := run(used); !slices.Equal(got, fresh) {
		t.Error("a used scratch changes the result")
	}
	if cut := mlCut(small, fresh); cut > 24*3*13/10 {
		t.Errorf("grid 24x24 into 4: cut %d", cut)
	}
}

// Recursive bisection keeps a scratch only for graphs of at most
// mlScratchMaxVertices vertices: one kept for a large input would stay
// resident to the end of the run (the k-way scheme once did that); its
// halves, below the limit, keep theirs (see TestMultilevelScratchReuse).
func TestMultilevelScratchOnlyForSmallGraphs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rows     int
		wantKept bool
	}{
		{"large", mlScratchMaxVertices/64 + 1, false},
		{"small", 64, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := mlGrid(t, tc.rows, 64)
			r := newMLRun(context.Background(), 3, 1)
			if _, err := r.recursive(g, 2, 1.03); err != nil {
				t.Fatal(err)
			}
			// r.ws may exist for its pool (see mlRun.pool); buffers of
			// the input's size are what must not stay.
			if kept := r.ws != nil && cap(r.ws.match) >= g.NumVertices(); kept != tc.wantKept {
				t.Errorf("%d vertices: scratch kept %v, want %v", g.NumVertices(), kept, tc.wantKept)
			}
		})
	}
}

// Recursive bisection leaves the input balanced; its final k-way
// refinement must keep it so and never give back cut. Refinement with
// slack (as on the coarse levels of the k-way scheme) overfilled parts
// and the balancing that followed undid more cut than it had saved: on
// BlogCatalog, whose hubs make single moves heavy, by a fifth.
func TestMultilevelFinalRefinementStrict(t *testing.T) {
	g := mlBlogCatalog(t)
	for _, k := range []int{4, 8} {
		for seed := uint64(1); seed <= 2; seed++ {
			r := newMLRun(context.Background(), seed, 1)
			const ub = 1.03
			where, err := r.recursive(g, k, ub)
			if err != nil {
				t.Fatal(err)
			}
			before := mlCut(g, where)
			maxw, minw := mlBounds(g, k, ub)
			s := newKway(r, g, where, k, maxw, minw)
			balanced := s.balanced()
			if err := s.refineStrict(); err != nil {
				t.Fatal(err)
			}
			if got := mlCut(g, where); got != s.cut || (balanced && got > before) {
				t.Errorf("k=%d seed %d: cut %d after refinement (state says %d), %d before", k, seed, got, s.cut, before)
			}
			q, err := Measure(g, where, k)
			if err != nil {
				t.Fatal(err)
			}
			if q.Balance[0] > ub+1e-9 {
				t.Errorf("k=%d seed %d: balance %.4f", k, seed, q.Balance[0])
			}
		}
	}
}

// Recursive bisection serves every part count and constraint count;
// into 16 parts it must keep every constraint within the bound and,
// under several constraints too, not depend on the worker count.
func TestMultilevelManyParts(t *testing.T) {
	g := mlTestRMAT(t, 13, 1<<16, 3)
	const k = 16
	_, q := mlRun1(t, g, Options{Parts: k, Seed: 2})
	if q.Balance[0] > 1.03+1e-9 || q.Empty != 0 {
		t.Errorf("one constraint: balance %.4f, %d empty parts", q.Balance[0], q.Empty)
	}
	mlSetWeights(t, g, []string{"nodes", "edges", "train"}, 7)
	var first []uint32
	for _, workers := range []int{1, 2, 3} {
		where, q := mlRun1(t, g, Options{Parts: k, Seed: 2, Workers: workers})
		if first == nil {
			first = where
			for c, b := range q.Balance {
				if b > 1.03+1e-9 {
					t.Errorf("three constraints: constraint %d balance %.4f", c, b)
				}
			}
			if q.Empty != 0 {
				t.Errorf("three constraints: %d empty parts", q.Empty)
			}
		} else if !slices.Equal(first, where) {
			t.Fatalf("three constraints, workers=%d: assignment differs from workers=1", workers)
		}
	}
}

// shuffle is a permutation, uniform over the positions: over 200 000
// shuffles of 5 elements each element lands in each position 40 000
// times, within 2 000 (more than 10 standard deviations).
func TestMLShuffle(t *testing.T) {
	r := newMLRun(context.Background(), 1, 1)
	const n, runs = 5, 200000
	var count [n][n]int
	p := make([]uint32, n)
	for range runs {
		for i := range p {
			p[i] = uint32(i)
		}
		r.shuffle(p)
		seen := 0
		for pos, v := range p {
			count[v][pos]++
			seen |= 1 << v
		}
		if seen != 1<<n-1 {
			t.Fatalf("shuffle gave %v, not a permutation", p)
		}
	}
	for v := range count {
		for pos, c := range count[v] {
			if c < runs/n-2000 || c > runs/n+2000 {
				t.Errorf("element %d at position %d %d times, want about %d", v, pos, c, runs/n)
			}
		}
	}
	for _, m := range []int{0, 1, 2} { // the short cases of the loop
		q := make([]uint32, m)
		for i := range q {
			q[i] = uint32(i)
		}
		r.shuffle(q)
		if m == 2 && q[0]+q[1] != 1 {
			t.Errorf("shuffle of 2 gave %v", q)
		}
	}
}

// mlHeavyGrid is a w×h grid whose edges weigh heavy, but for the w/2-1 –
// w/2 column of horizontal edges, which weigh 1: the best bisection cuts
// those h edges.
func mlHeavyGrid(t testing.TB, w, h int, heavy int32) *Graph {
	g := mlGrid(t, w, h)
	g.Adjwgt = make([]int32, len(g.Adjncy))
	for v := range w * h {
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			a, b := min(int(g.Adjncy[e]), v), max(int(g.Adjncy[e]), v)
			if b == a+1 && a%w == w/2-1 {
				g.Adjwgt[e] = 1
			} else {
				g.Adjwgt[e] = heavy
			}
		}
	}
	return g
}

// Edge weights up to MaxInt32 are valid (ReadMETIS takes them), and
// contraction adds the weights of parallel edges: the sums wrapped
// past MaxInt32, so that heavy coarse edges looked light, and the
// bisection cut 86 to 316 heavy edges of a grid with a cut of 40 light
// ones. Coarse weights now saturate at MaxInt32.
func TestMultilevelHeavyEdgeWeights(t *testing.T) {
	const w, h = 120, 40
	for _, heavy := range []int32{1 << 10, 1 << 28, 1 << 30, math.MaxInt32} {
		g := mlHeavyGrid(t, w, h, heavy)
		for seed := uint64(0); seed < 3; seed++ {
			_, q := mlRun1(t, g, Options{Parts: 2, Seed: seed})
			if q.EdgeCut != h {
				t.Errorf("edges of %d, seed %d: cut %d, want the %d light edges", heavy, seed, q.EdgeCut, h)
			}
		}
	}
}

// The k-way refinement's per-vertex rows of part connectivity are
// int32: a hub whose edges to a part weigh 6 × 2^30 in all saw -2^31
// there and stayed where 2 × 2^30 held it. Rows that could wrap are no
// longer kept; such moves are weighed from the adjacency.
func TestKwayHeavyEdgeWeights(t *testing.T) {
	// Hub 0 and leaves 1..8, every edge 2^30; the hub is in part 0 with
	// leaves 1 and 2, which weigh 26, leaves 3..8 (10 each) are in part
	// 1. No leaf fits in the other part; the hub does, and moving it
	// gains 4 × 2^30.
	const n = 9
	g := &Graph{Xadj: make([]int64, 1, n+1), Vwgt: []int64{1, 26, 26, 10, 10, 10, 10, 10, 10}, Ncon: 1}
	for v := range n {
		if v == 0 {
			for u := 1; u < n; u++ {
				g.Adjncy = append(g.Adjncy, uint32(u))
			}
		} else {
			g.Adjncy = append(g.Adjncy, 0)
		}
		g.Xadj = append(g.Xadj, int64(len(g.Adjncy)))
	}
	g.Adjwgt = make([]int32, len(g.Adjncy))
	for i := range g.Adjwgt {
		g.Adjwgt[i] = 1 << 30
	}
	where := []uint32{0, 0, 0, 1, 1, 1, 1, 1, 1}
	r := newMLRun(context.Background(), 1, 1)
	s := newKway(r, g, where, 2, []int64{61, 61}, []int64{0, 0})
	if err := s.refineStrict(); err != nil {
		t.Fatal(err)
	}
	if got, want := mlCut(g, where), int64(2)<<30; got != want || s.cut != want {
		t.Errorf("cut %d after refinement (state says %d), want %d: %v", got, s.cut, want, where)
	}
}

// Part weights and bounds are sums of vertex weights in int64. Weights
// whose total did not fit wrapped: Partition went ahead, and Measure
// called the result balanced (balance 0). Validate now refuses them.
func TestMultilevelWeightTotalOverflow(t *testing.T) {
	g := mlGrid(t, 10, 10)
	g.Vwgt = make([]int64, 2*100)
	g.Ncon = 2
	for v := range 100 {
		g.Vwgt[2*v], g.Vwgt[2*v+1] = 1, math.MaxInt64/64
	}
	_, err := Partition(context.Background(), g, Options{Parts: 2})
	if !errors.Is(err, ErrBadGraph) || !strings.Contains(err.Error(), "constraint 1 sum past") {
		t.Errorf("weights summing past 2^63: err = %v, want ErrBadGraph", err)
	}
	for v := range 100 {
		g.Vwgt[2*v+1] = math.MaxInt64 / 100
	}
	if _, err := Partition(context.Background(), g, Options{Parts: 2}); err != nil {
		t.Errorf("weights summing to just under 2^63: %v", err)
	}
}
