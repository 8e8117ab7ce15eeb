package multilevel

import (
	"context"
	"slices"
	"testing"
)

func TestMLPool(t *testing.T) {
	var p mlPool
	if a := p.getAdj(10); len(a) != 10 || cap(a) != 10 {
		t.Fatalf("empty pool: len %d cap %d, want a fresh array of 10", len(a), cap(a))
	}
	big, small := make([]uint32, 100), make([]uint32, 40)
	p.put(big, nil)
	p.put(small, nil)
	if len(p.wgt) != 0 {
		t.Fatalf("put(nil) kept %d weight arrays", len(p.wgt))
	}
	// The smallest array that holds the request, sliced to it.
	a := p.getAdj(30)
	if len(a) != 30 || cap(a) != 40 || &a[:1][0] != &small[0] {
		t.Fatalf("getAdj(30): len %d cap %d, want the 40-entry array", len(a), cap(a))
	}
	if a := p.getAdj(200); cap(a) != 200 || len(p.adj) != 1 {
		t.Fatalf("getAdj(200): cap %d and %d left, want a fresh array and the 100-entry one kept", cap(a), len(p.adj))
	}
	// Small arrays are all kept: 100, 10 and 70 entries.
	p.put(make([]uint32, 10), nil)
	p.put(make([]uint32, 70), nil)
	if got := mlPoolCaps(p.adj); !slices.Equal(got, []int{10, 70, 100}) {
		t.Fatalf("pool holds capacities %v, want [10 70 100]", got)
	}
	p.put(nil, make([]int32, 8))
	if b := p.bytes(); b != 4*(10+70+100+8) {
		t.Fatalf("bytes() = %d, want %d", b, 4*(10+70+100+8))
	}
	// Offsets and vertex weights take 8 bytes an entry.
	p.putLevel(nil, make([]int64, 3), make([]int64, 5))
	if b := p.bytes(); b != 4*(10+70+100+8)+8*(3+5) {
		t.Fatalf("bytes() with int64 arrays = %d, want %d", b, 4*(10+70+100+8)+8*(3+5))
	}
	p.clear()
	if len(p.adj)+len(p.wgt)+len(p.i64) != 0 || p.bytes() != 0 {
		t.Fatalf("clear left %d arrays", len(p.adj)+len(p.wgt)+len(p.i64))
	}
	// Over mlPoolKeepBytes, a third array pushes out the smallest.
	big1 := mlPoolKeepBytes / 4
	for _, n := range []int{big1, 10, big1 + 7} {
		p.put(nil, make([]int32, n))
	}
	if got := mlPoolCaps(p.wgt); !slices.Equal(got, []int{big1, big1 + 7}) {
		t.Fatalf("pool holds capacities %v, want [%d %d]", got, big1, big1+7)
	}
	// Small arrays kept below the threshold all go once a large one
	// passes it, but for the largest of them: two arrays remain.
	p.clear()
	for _, n := range []int{100, 30, 70, 50, 10} {
		p.put(nil, make([]int32, n))
	}
	p.put(nil, make([]int32, big1+1))
	if got := mlPoolCaps(p.wgt); !slices.Equal(got, []int{100, big1 + 1}) {
		t.Fatalf("pool holds capacities %v, want [100 %d]", got, big1+1)
	}
}

func mlPoolCaps[T uint32 | int32](list [][]T) []int {
	var caps []int
	for _, a := range list {
		caps = append(caps, cap(a))
	}
	slices.Sort(caps)
	return caps
}

// The pool recycles the arrays of coarse levels and never those of the
// caller's graph (levels[0] of the top bisection, under one constraint
// or two): Partition must leave its input as it was.
func TestMultilevelLeavesInput(t *testing.T) {
	g := mlTestRMAT(t, 13, 1<<16, 21)
	weighted := mlTestRMAT(t, 13, 1<<17, 22) // over mlPackMinAdj entries
	weighted.Adjwgt = make([]int32, len(weighted.Adjncy))
	for v := range weighted.NumVertices() {
		for e := weighted.Xadj[v]; e < weighted.Xadj[v+1]; e++ {
			u := weighted.Adjncy[e]
			weighted.Adjwgt[e] = int32(1 + (uint32(v)^u)%5) // symmetric
		}
	}
	// nodes and degree, as --balance nodes,edges gives them
	twoCon := func(g *Graph) *Graph {
		c := *g
		c.Ncon = 2
		c.Vwgt = make([]int64, 2*g.NumVertices())
		for v := range g.NumVertices() {
			c.Vwgt[2*v], c.Vwgt[2*v+1] = 1, g.Xadj[v+1]-g.Xadj[v]
		}
		return &c
	}
	for _, tc := range []struct {
		name  string
		g     *Graph
		parts int
	}{
		{"bisection", g, 2},
		{"recursive bisection", g, 8},
		{"recursive bisection, 16 parts", g, 16},
		{"k-way", twoCon(g), 16},
		{"weighted, recursive", weighted, 4},
		{"weighted, k-way", twoCon(weighted), 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xadj, adj, wgt, vwgt := slices.Clone(tc.g.Xadj), slices.Clone(tc.g.Adjncy), slices.Clone(tc.g.Adjwgt), slices.Clone(tc.g.Vwgt)
			if _, err := Partition(context.Background(), tc.g, Options{Parts: tc.parts, Seed: 3}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(xadj, tc.g.Xadj) || !slices.Equal(adj, tc.g.Adjncy) || !slices.Equal(wgt, tc.g.Adjwgt) || !slices.Equal(vwgt, tc.g.Vwgt) {
				t.Fatal("Partition changed its input graph")
			}
		})
	}
}
