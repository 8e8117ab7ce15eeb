package multilevel

import (
	"context"
	"slices"
	"testing"
)

// mlCorePeriphery is a clique of c core vertices (ids 0..c-1), each
// with one pendant vertex (id c+i hangs on core vertex i). Split in
// halves by count, core against periphery cuts the c pendant edges; any
// split of the clique cuts more.
func mlCorePeriphery(t testing.TB, c int) *Graph {
	var src, dst []uint32
	for i := range uint32(c) {
		for j := i + 1; j < uint32(c); j++ {
			src, dst = append(src, i), append(dst, j)
		}
		src, dst = append(src, i), append(dst, uint32(c)+i)
	}
	return mlFromEdges(t, 2*c, src, dst)
}

// TestDegreeOrder: decreasing degree, ties by increasing id; weighted
// graphs by the sum of their edge weights.
func TestDegreeOrder(t *testing.T) {
	// A star on 0 (degree 3), an edge 4-5 and the path 1-2: degrees 3,
	// 2, 2, 1, 1, 1.
	g := mlFromEdges(t, 6, []uint32{0, 0, 0, 4, 1}, []uint32{1, 2, 3, 5, 2})
	if got, want := mlDegreeOrder(&mlScratch{}, g), []uint32{0, 1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("unit weights: order %v, want %v", got, want)
	}
	// The same graph with edge 4-5 weighing 10: 4 and 5 come first.
	w := *g
	w.Adjwgt = make([]int32, len(g.Adjncy))
	for v := range g.NumVertices() {
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			w.Adjwgt[e] = 1
			if u := g.Adjncy[e]; (v == 4 && u == 5) || (v == 5 && u == 4) {
				w.Adjwgt[e] = 10
			}
		}
	}
	if got, want := mlDegreeOrder(&mlScratch{}, &w), []uint32{4, 5, 0, 1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("weighted: order %v, want %v", got, want)
	}
}

// TestDegreeSplit: the core-periphery split replaces a worse bisection,
// is turned down by a better one, and makes way for a balanced one when
// it cannot be balanced itself.
func TestDegreeSplit(t *testing.T) {
	const c = 8
	g := mlCorePeriphery(t, c)
	n := g.NumVertices()
	core := make([]uint32, n) // the core on side 0
	for v := c; v < n; v++ {
		core[v] = 1
	}
	halves := make([]uint32, n) // core 0-3 and their pendants on side 0
	for v := range n {
		if v%c >= c/2 {
			halves[v] = 1
		}
	}
	if got := mlCut(g, halves); got != 16 {
		t.Fatalf("halves cut %d, want 16", got)
	}
	r := newMLRun(context.Background(), 1, 1)
	r.keepScratchFor(n)
	side := slices.Clone(halves)
	r.degreeSplit(g, 0.5, 1.0, side, 0, 16)
	if !slices.Equal(side, core) {
		t.Errorf("from a cut of 16: side %v, want core against periphery %v (cut %d)", side, core, c)
	}

	// A path: the split by degree cuts it next to an end and in the middle;
	// the multilevel bisection, one cut in the middle, stays.
	path := mlGrid(t, 16, 1)
	half := make([]uint32, 16)
	for v := 8; v < 16; v++ {
		half[v] = 1
	}
	r = newMLRun(context.Background(), 1, 1)
	r.keepScratchFor(16)
	side = slices.Clone(half)
	r.degreeSplit(path, 0.5, 1.0, side, 0, 1)
	if !slices.Equal(side, half) {
		t.Errorf("path: side %v, want the cut of 1 kept", side)
	}

	// A bisection over its bound gives way to the balanced split, whose
	// cut is larger.
	lopsided := make([]uint32, n)
	lopsided[n-1] = 1
	side = slices.Clone(lopsided)
	r = newMLRun(context.Background(), 1, 1)
	r.keepScratchFor(n)
	r.degreeSplit(g, 0.5, 1.0, side, 0.4, 1)
	var zeros int
	for _, s := range side {
		if s == 0 {
			zeros++
		}
	}
	if zeros != n/2 {
		t.Errorf("over its bound: side 0 holds %d of %d vertices, want %d", zeros, n, n/2)
	}
}

// TestDegreeSplitRMAT: on a power-law graph the bisection that Partition
// keeps is never worse than the multilevel bisection alone, and the
// split by degree beats it.
func TestDegreeSplitRMAT(t *testing.T) {
	g := mlTestRMAT(t, 12, 1<<15, 1)
	r := newMLRun(context.Background(), 1, 1)
	r.keepScratchFor(g.NumVertices())
	ml, exc, cut, err := r.bisect(g, 0.5, 1.03)
	if err != nil {
		t.Fatal(err)
	}
	if exc != 0 {
		t.Fatalf("multilevel bisection over its bound by %g", exc)
	}
	side := slices.Clone(ml)
	r.degreeSplit(g, 0.5, 1.03, side, exc, cut)
	got := mlCut(g, side)
	if got >= cut {
		t.Errorf("cut %d after the degree split, multilevel %d: want fewer", got, cut)
	}
	q, err := Measure(g, side, 2)
	if err != nil {
		t.Fatal(err)
	}
	if q.Balance[0] > 1.03+1e-9 {
		t.Errorf("balance %.4f, want <= 1.03", q.Balance[0])
	}
}
