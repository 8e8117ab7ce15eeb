package partition

import (
	"context"
	"math"
	"slices"
	"testing"

	"graphnode/csr"
)

// fuzzAssignInput decodes a graph and assignment options from b: up to
// 64 nodes, directed edges from byte pairs (self loops and repeats kept
// for BuildAdj to clean), a training split from a bit mask, a method
// with a balance it supports, 1 to 8 parts, imbalance 1, 1.03 or 1.1,
// and fanouts of 1 to 3 hops. ok is false when b is too short.
func fuzzAssignInput(t *testing.T, b []byte) (g *Graph, adj *Adj, opts AssignOptions, ok bool) {
	if len(b) < 6 {
		return nil, nil, AssignOptions{}, false
	}
	n := 1 + int(b[0])%64
	method := []string{MethodRandom, MethodMetis, MethodFreq}[int(b[1])%3]
	balances := map[string][][]string{
		MethodRandom: {{BalanceNodes}},
		MethodMetis:  {{BalanceNodes}, {BalanceNodes, BalanceEdges}, {BalanceNodes, BalanceTrain}, {BalanceNodes, BalanceEdges, BalanceTrain}},
		MethodFreq:   {{BalanceNodes}, {BalanceNodes, BalanceTrain}, {BalanceNodes, BalanceEdges}, {BalanceNodes, BalanceEdges, BalanceTrain}},
	}[method]
	opts = AssignOptions{
		Method:    method,
		Parts:     1 + int(b[2])%min(n, 8),
		Seed:      uint64(b[3]),
		Balance:   balances[int(b[1]/3)%len(balances)],
		Imbalance: []float64{1, 1.03, 1.1}[int(b[4])%3],
		Fanouts:   []int{1 + int(b[5])%4, 1 + int(b[5]>>2)%3, -1}[:1+int(b[5]>>4)%3],
	}
	mask := b[5]
	b = b[6:]
	g = &Graph{Name: "fuzz", NumNodes: n}
	for ; len(b) >= 2; b = b[2:] {
		g.Src, g.Dst = append(g.Src, uint32(int(b[0])%n)), append(g.Dst, uint32(int(b[1])%n))
	}
	for v := range uint32(n) {
		if mask>>(v%8)&1 != 0 || v == 0 {
			g.Train = append(g.Train, v)
		}
	}
	adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{Undirected: mask&1 != 0}, nil)
	if err != nil {
		t.Fatalf("BuildAdj: %v", err)
	}
	return g, adj, opts, true
}

// FuzzAssign runs every method on arbitrary small graphs and checks what
// each promises: no error for valid options, every node in a part below
// Parts, no part empty, the same assignment from one worker and from
// two, the adjacency untouched; random sizes within one of each other,
// freq sizes within its capacity and every training chunk in its part,
// metis under nodes alone within the imbalance bound.
func FuzzAssign(f *testing.F) {
	f.Add([]byte{9, 0, 3, 1, 0, 0xff, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 6, 7, 7, 8})
	f.Add([]byte{30, 1, 4, 2, 1, 0x35, 0, 1, 1, 2, 2, 0, 5, 6, 6, 7, 7, 5, 2, 5})
	f.Add([]byte{63, 4, 7, 3, 2, 0x0f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{20, 2, 5, 4, 0, 0x81, 1, 1, 2, 2, 3, 4, 4, 3})
	f.Add([]byte{12, 5, 3, 5, 0, 0xa7, 0, 11, 11, 0, 3, 9})
	// Found by fuzzing: freq, 15 nodes into 8 parts within 1.0, where a
	// capacity 2 above its bound filled a part to 3.
	f.Add([]byte("\x8e2700\xf7010"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, adj, opts, ok := fuzzAssignInput(t, b)
		if !ok {
			return
		}
		indptr, indices := slices.Clone(adj.Indptr), slices.Clone(adj.Indices)
		n, P := g.NumNodes, opts.Parts
		var first []uint32
		for _, workers := range []int{1, 2} {
			opts.Workers = workers
			got, err := Assign(context.Background(), g, adj, opts)
			if err != nil {
				t.Fatalf("%+v: %v", opts, err)
			}
			if len(got) != n || slices.ContainsFunc(got, func(p uint32) bool { return int(p) >= P }) {
				t.Fatalf("%+v: assignment %v for %d nodes, %d parts", opts, got, n, P)
			}
			if first == nil {
				first = got
			} else if !slices.Equal(first, got) {
				t.Fatalf("%+v: two workers gave another assignment than one", opts)
			}
		}
		if !slices.Equal(adj.Indptr, indptr) || !slices.Equal(adj.Indices, indices) {
			t.Fatal("Assign changed the adjacency")
		}
		size := make([]int, P)
		for _, p := range first {
			size[p]++
		}
		if slices.Contains(size, 0) {
			t.Fatalf("%+v: an empty part: sizes %v", opts, size)
		}
		avg := float64(n) / float64(P)
		switch {
		case opts.Method == MethodRandom:
			if slices.Max(size)-slices.Min(size) > 1 {
				t.Fatalf("random: sizes %v, want within one of each other", size)
			}
		case opts.Method == MethodFreq:
			lo := min(n/P, int(math.Ceil(avg/opts.Imbalance)))
			hi := max((n+P-1)/P, int(opts.Imbalance*avg))
			if slices.Min(size) < lo || slices.Max(size) > hi {
				t.Fatalf("freq %+v: sizes %v, want %d..%d", opts, size, lo, hi)
			}
			for p, chunk := range SeedChunks(g.Train, P, opts.Seed) {
				for _, v := range chunk {
					if first[v] != uint32(p) {
						t.Fatalf("freq: seed %d of chunk %d in part %d", v, p, first[v])
					}
				}
			}
		case len(opts.Balance) == 1:
			if hi := max(int(math.Ceil(avg)), int(opts.Imbalance*avg)); slices.Max(size) > hi {
				t.Fatalf("metis %+v: sizes %v, bound %d", opts, size, hi)
			}
		}
	})
}
