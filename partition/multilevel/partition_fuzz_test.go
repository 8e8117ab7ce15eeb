package multilevel

import (
	"context"
	"slices"
	"testing"
)

// mlFuzzGraph decodes a small graph from b: up to 63 vertices, edges
// from byte pairs (self loops and repeats dropped), edge weights and up
// to 3 vertex weight constraints (weights may be 0) when the flags ask,
// and the options to partition it with. ok is false when b is too short.
func mlFuzzGraph(b []byte) (g *Graph, opts Options, ok bool) {
	if len(b) < 4 {
		return nil, Options{}, false
	}
	n := 2 + int(b[0])%62
	flags := b[2]
	opts = Options{Parts: 1 + int(b[1])%min(n, 17), Seed: uint64(b[3])}
	if flags&16 != 0 {
		opts.Imbalance = 1
	}
	ewgt, nc := flags&1 != 0, 1
	if flags&2 != 0 {
		nc = 1 + int(flags>>2&3)%3
	}
	b = b[4:]
	step := 2
	if ewgt {
		step = 3
	}
	rows := make([][]uint32, n)
	wgts := make([][]int32, n)
	seen := map[[2]uint32]bool{}
	for ; len(b) >= step; b = b[step:] {
		u, v := uint32(int(b[0])%n), uint32(int(b[1])%n)
		if u == v || seen[[2]uint32{min(u, v), max(u, v)}] {
			continue
		}
		seen[[2]uint32{min(u, v), max(u, v)}] = true
		w := int32(1)
		if ewgt {
			w = 1 + int32(b[2])%100
		}
		rows[u], rows[v] = append(rows[u], v), append(rows[v], u)
		wgts[u], wgts[v] = append(wgts[u], w), append(wgts[v], w)
	}
	g = &Graph{Xadj: make([]int64, 1, n+1), Ncon: nc}
	for v := range n {
		g.Adjncy = append(g.Adjncy, rows[v]...)
		if ewgt {
			g.Adjwgt = append(g.Adjwgt, wgts[v]...)
		}
		g.Xadj = append(g.Xadj, int64(len(g.Adjncy)))
	}
	if ewgt && g.Adjwgt == nil {
		g.Adjwgt = []int32{}
	}
	if flags&2 != 0 {
		// Weights 0..7 from the vertex, constraint and flags: zero
		// weights and whole constraints of zeros included.
		g.Vwgt = make([]int64, n*nc)
		for i := range g.Vwgt {
			g.Vwgt[i] = int64(mlMix(uint64(i)^uint64(flags)<<32) % 8)
		}
	}
	return g, opts, true
}

// FuzzPartition partitions arbitrary small graphs, weighted or not,
// under one to three constraints, and checks what Partition promises on
// any input: no error, every vertex in a part below k, no part empty,
// the input untouched, the same assignment from one worker and from two,
// and, with unit vertex weights, every part within the bound.
func FuzzPartition(f *testing.F) {
	f.Add([]byte{10, 2, 0, 1, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 6, 7, 7, 8, 8, 9, 9, 5, 4, 5})
	f.Add([]byte{40, 7, 1, 3, 0, 1, 5, 1, 2, 9, 30, 31, 2, 0, 39, 7})
	f.Add([]byte{20, 4, 2 | 4, 9, 0, 1, 1, 2, 2, 3, 3, 0, 10, 11, 11, 12})
	f.Add([]byte{63, 16, 3 | 8 | 16, 200, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{5, 4, 16, 0})
	// Found by fuzzing: 12 edgeless vertices with weights 0..7 into 10
	// parts leave parts empty before mlFillEmpty; 50 edgeless vertices
	// into 17 parts within 1.0 pass the bound before k-way refinement.
	f.Add([]byte("\n920"))
	f.Add([]byte("0200"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, opts, ok := mlFuzzGraph(b)
		if !ok {
			return
		}
		orig := &Graph{Xadj: slices.Clone(g.Xadj), Adjncy: slices.Clone(g.Adjncy), Adjwgt: slices.Clone(g.Adjwgt), Vwgt: slices.Clone(g.Vwgt), Ncon: g.Ncon}
		n, k := g.NumVertices(), opts.Parts
		var first []uint32
		for _, workers := range []int{1, 2} {
			opts.Workers = workers
			parts, err := Partition(context.Background(), g, opts)
			if err != nil {
				t.Fatalf("workers %d: %v", workers, err)
			}
			if len(parts) != n {
				t.Fatalf("workers %d: %d parts entries for %d vertices", workers, len(parts), n)
			}
			count := make([]int, k)
			for v, p := range parts {
				if int(p) >= k {
					t.Fatalf("workers %d: vertex %d in part %d of %d", workers, v, p, k)
				}
				count[p]++
			}
			if i := slices.Index(count, 0); i >= 0 {
				t.Fatalf("workers %d: part %d empty: %v", workers, i, count)
			}
			if first == nil {
				first = parts
			} else if !slices.Equal(first, parts) {
				t.Fatalf("workers 2 gave another assignment than workers 1")
			}
		}
		if !slices.Equal(g.Xadj, orig.Xadj) || !slices.Equal(g.Adjncy, orig.Adjncy) || !slices.Equal(g.Adjwgt, orig.Adjwgt) || !slices.Equal(g.Vwgt, orig.Vwgt) {
			t.Fatal("Partition changed its input")
		}
		if g.Vwgt == nil {
			ub := opts.Imbalance
			if ub == 0 {
				ub = 1.03
			}
			maxw, _ := mlBounds(g, k, ub)
			count := make([]int64, k)
			for _, p := range first {
				count[p]++
			}
			if slices.Max(count) > maxw[0] {
				t.Fatalf("%d vertices into %d parts within %g: part sizes %v, bound %d", n, k, ub, count, maxw[0])
			}
		}
	})
}
