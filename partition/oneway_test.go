package partition

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"graphnode/csr"
)

// oneWayAdj builds the adjacency of the edges src[i] -> dst[i] of n
// nodes, duplicates dropped, in direction dir.
func oneWayAdj(t testing.TB, n int, src, dst, rel []uint32, dir csr.Direction, undirected bool) *Adj {
	t.Helper()
	g := &Graph{Name: "oneway", NumNodes: n, Src: src, Dst: dst, Etypes: rel}
	a, err := BuildAdj(context.Background(), g, dir, CleanOptions{Undirected: undirected}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestOneWay(t *testing.T) {
	// A chain 0 -> 1 -> … -> 9999 spans every worker's rows; a pair
	// reciprocal at its far end alone makes it two-way.
	const long = 10_000
	var chainSrc, chainDst []uint32
	for v := range uint32(long - 1) {
		chainSrc, chainDst = append(chainSrc, v), append(chainDst, v+1)
	}
	for _, tt := range []struct {
		name       string
		n          int
		src, dst   []uint32
		rel        []uint32
		undirected bool
		want       bool
	}{
		{name: "path one way", n: 3, src: []uint32{0, 1}, dst: []uint32{1, 2}, want: true},
		{name: "path downwards", n: 3, src: []uint32{2, 1}, dst: []uint32{1, 0}, want: true},
		{name: "one reverse", n: 3, src: []uint32{0, 1, 1}, dst: []uint32{1, 2, 0}, want: false},
		{name: "path with --undirected", n: 3, src: []uint32{0, 1}, dst: []uint32{1, 2}, undirected: true, want: false},
		{name: "self loops alone", n: 3, src: []uint32{0, 2}, dst: []uint32{0, 2}, want: false},
		{name: "no edges", n: 3, want: false},
		{name: "no nodes", n: 0, want: false},
		// Row 0 holds its self loop before the larger neighbour 1.
		{name: "self loop then one way", n: 2, src: []uint32{0, 1}, dst: []uint32{0, 0}, want: true},
		{name: "loops do not pair", n: 2, src: []uint32{0, 1, 0}, dst: []uint32{0, 1, 1}, want: true},
		{name: "relations differ", n: 2, src: []uint32{0, 1}, dst: []uint32{1, 0}, rel: []uint32{0, 1}, want: false},
		{name: "long chain", n: long, src: chainSrc, dst: chainDst, want: true},
		{name: "long chain, last pair both ways", n: long,
			src: append(append([]uint32(nil), chainSrc...), long-1), dst: append(append([]uint32(nil), chainDst...), long-2), want: false},
	} {
		for _, dir := range []csr.Direction{csr.In, csr.Out} {
			t.Run(fmt.Sprintf("%s/%s", tt.name, dir), func(t *testing.T) {
				a := oneWayAdj(t, tt.n, append([]uint32(nil), tt.src...), append([]uint32(nil), tt.dst...), tt.rel, dir, tt.undirected)
				got, checked, err := a.OneWay(context.Background())
				if err != nil || got != tt.want || checked != a.NumEdges() {
					t.Errorf("OneWay = %v, %d checked, %v; want %v, all %d", got, checked, err, tt.want, a.NumEdges())
				}
			})
		}
	}
}

func TestOneWayCancelled(t *testing.T) {
	const n = 1 << 18 // more edges than are read between two looks at ctx
	src, dst := make([]uint32, n-1), make([]uint32, n-1)
	for v := range uint32(n - 1) {
		src[v], dst[v] = v, v+1
	}
	a := oneWayAdj(t, n, src, dst, nil, csr.In, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, _, err := a.OneWay(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("OneWay with a cancelled context = %v, %v; want context.Canceled", got, err)
	}
}

// TestOneWaySample: past the sample, edges spread over the stored order
// are checked, the first among them.
func TestOneWaySample(t *testing.T) {
	const n = 1000
	var src, dst []uint32
	for v := range uint32(n - 1) {
		src, dst = append(src, v), append(dst, v+1)
	}
	for _, tt := range []struct {
		name       string
		src, dst   []uint32
		undirected bool
		want       bool
	}{
		{"chain", src, dst, false, true},
		{"chain both ways", src, dst, true, false},
		// Position 0 is checked: row 0 of direction in, edge 1 -> 0,
		// whose reverse 0 -> 1 the chain holds.
		{"first pair both ways", append(append([]uint32(nil), src...), 1), append(append([]uint32(nil), dst...), 0), false, false},
	} {
		a := oneWayAdj(t, n, append([]uint32(nil), tt.src...), append([]uint32(nil), tt.dst...), nil, csr.In, tt.undirected)
		got, checked, err := a.oneWay(context.Background(), 7)
		if err != nil || got != tt.want || checked != 7 {
			t.Errorf("%s: oneWay(7) = %v, %d checked, %v; want %v, 7 checked", tt.name, got, checked, err, tt.want)
		}
	}
}

// BenchmarkOneWay measures the check on an R-MAT graph of 16M edges at
// its worst, a one-way graph (every pair u < v stored as u -> v alone),
// where every edge of the sample is checked, and on the graph as
// generated, where it stops at the first reciprocal pair.
func BenchmarkOneWay(b *testing.B) {
	cfg := DefaultRMATConfig()
	cfg.Nodes, cfg.Edges, cfg.FeatDim, cfg.Classes = 1<<20, 16<<20, 0, 0
	g, err := RMAT(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	src, dst := g.Src, g.Dst
	upSrc, upDst := make([]uint32, len(src)), make([]uint32, len(dst))
	for e := range src {
		upSrc[e], upDst[e] = min(src[e], dst[e]), max(src[e], dst[e])
	}
	for _, bc := range []struct {
		name     string
		src, dst []uint32
		want     bool
	}{{"graph=rmat-oneway", upSrc, upDst, true}, {"graph=rmat", src, dst, false}} {
		a := oneWayAdj(b, cfg.Nodes, bc.src, bc.dst, nil, csr.In, false)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var checked uint64
			for b.Loop() {
				got, k, err := a.OneWay(context.Background())
				if err != nil || got != bc.want {
					b.Fatalf("OneWay = %v, %v; want %v", got, err, bc.want)
				}
				checked = k
			}
			b.ReportMetric(float64(a.NumEdges()), "edges")
			b.ReportMetric(float64(checked), "sampled")
		})
	}
}
