package partition

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"graphnode/csr"
)

func TestAssignRandomBalance(t *testing.T) {
	for _, tt := range []struct{ n, parts int }{{10, 3}, {1000, 7}, {5, 5}, {1, 1}, {64, 4}} {
		g := &Graph{NumNodes: tt.n}
		got, err := Assign(context.Background(), g, nil, AssignOptions{Method: MethodRandom, Parts: tt.parts, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		sizes := make([]int, tt.parts)
		for _, p := range got {
			sizes[p]++
		}
		lo, hi := tt.n/tt.parts, (tt.n+tt.parts-1)/tt.parts
		for p, s := range sizes {
			if s < lo || s > hi {
				t.Errorf("n=%d parts=%d: part %d has %d nodes, want %d..%d (%v)", tt.n, tt.parts, p, s, lo, hi, sizes)
			}
		}
	}
}

func TestAssignRandomSeed(t *testing.T) {
	g := &Graph{NumNodes: 500}
	a1, _ := Assign(context.Background(), g, nil, AssignOptions{Method: MethodRandom, Parts: 4, Seed: 1})
	a2, _ := Assign(context.Background(), g, nil, AssignOptions{Method: MethodRandom, Parts: 4, Seed: 1})
	a3, _ := Assign(context.Background(), g, nil, AssignOptions{Method: MethodRandom, Parts: 4, Seed: 2})
	if !slices.Equal(a1, a2) {
		t.Error("same seed, different assignment")
	}
	if slices.Equal(a1, a3) {
		t.Error("different seeds, same assignment")
	}
}

func TestAssignErrors(t *testing.T) {
	g := &Graph{Name: "g", NumNodes: 3}
	adj := &Adj{Indptr: make([]uint64, 4)}
	for _, tt := range []struct {
		opts AssignOptions
		want string
	}{
		{AssignOptions{Method: MethodFreq, Parts: 2}, `partition: method freq: graph "g" has no training split`},
		{AssignOptions{Method: MethodMetis, Parts: 2, Balance: []string{"nodes", "train"}}, `partition: balance train: graph "g" has no training split`},
		{AssignOptions{Method: MethodRandom, Parts: 2, Balance: []string{"nodes", "edges"}}, `partition: method random cannot balance "edges": it balances nodes`},
		{AssignOptions{Method: MethodRandom, Parts: 2, Balance: []string{"train"}}, `partition: method random cannot balance "train": it balances nodes`},
		{AssignOptions{Method: MethodMetis, Parts: 2, Imbalance: 0.9}, "partition: imbalance 0.9: want a number ≥ 1"},
		{AssignOptions{Method: "hash", Parts: 2}, `partition: method "hash": want random, metis or freq`},
		{AssignOptions{Method: MethodRandom, Parts: 0}, "partition: 0 parts: want at least 1"},
		{AssignOptions{Method: MethodRandom, Parts: 4}, "partition: 4 parts for 3 nodes"},
	} {
		_, err := Assign(context.Background(), g, adj, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want %q", tt.opts, err, tt.want)
		}
	}
	// An empty input (or one whose every edge was dropped) has no
	// partitioning: parts that own no node, whatever their count.
	empty := &Graph{Name: "e", Stats: Stats{EdgesRead: 2, DanglingDrop: 2}}
	for _, m := range []string{MethodRandom, MethodMetis} {
		_, err := Assign(context.Background(), empty, &Adj{Indptr: make([]uint64, 1)}, AssignOptions{Method: m, Parts: 1})
		want := `partition: graph "e" has no nodes (2 edges read, 2 dropped as dangling): nothing to partition: bad input`
		if err == nil || err.Error() != want {
			t.Errorf("%s, 0 nodes: err = %v, want %q", m, err, want)
		}
	}
}

// TestAssignOptionsValidateAll: Validate reports every bad option, not
// the first (a bad method went unsaid beside a bad part count).
func TestAssignOptionsValidateAll(t *testing.T) {
	for _, tt := range []struct {
		opts AssignOptions
		want string
	}{
		{AssignOptions{Method: "bogus", Parts: 0, Imbalance: 0.5},
			"partition: 0 parts: want at least 1\npartition: imbalance 0.5: want a number ≥ 1\npartition: method \"bogus\": want random, metis or freq"},
		{AssignOptions{Method: MethodRandom, Parts: -1, Balance: []string{"nodes", "edges", "train"}},
			"partition: -1 parts: want at least 1\npartition: method random cannot balance \"edges\": it balances nodes\npartition: method random cannot balance \"train\": it balances nodes"},
		// An unknown method balances nothing known: its balance is not refused besides.
		{AssignOptions{Method: "bogus", Parts: 2, Balance: []string{"nodes", "edges"}}, `partition: method "bogus": want random, metis or freq`},
	} {
		if err := tt.opts.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("%+v: err = %v, want %q", tt.opts, err, tt.want)
		}
	}
}

func TestParseBalance(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
		err  string
	}{
		{"nodes", []string{"nodes"}, ""},
		{"", nil, `partition: balance "": entry 1 is empty: want a list of nodes, edges and train`},
		{"nodes,,edges", nil, `partition: balance "nodes,,edges": entry 2 is empty: want a list of nodes, edges and train`},
		{"nodes,edges,", nil, `partition: balance "nodes,edges,": entry 3 is empty: want a list of nodes, edges and train`},
		{" nodes , edges ", []string{"nodes", "edges"}, ""},
		{"train,edges", []string{"nodes", "train", "edges"}, ""},
		{"nodes,edges,train,edges", []string{"nodes", "edges", "train"}, ""},
		{"nodes,vertices", nil, `partition: balance "vertices": want a list of nodes, edges and train`},
	} {
		got, err := ParseBalance(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%q: %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// twoCliques is two 4-cliques, 0..3 and 4..7, joined by the edge 3-4,
// undirected, with nodes 0 and 5 in the training split.
func twoCliques(t *testing.T) (*Graph, *Adj) {
	g := &Graph{Name: "cliques", NumNodes: 8, Train: []uint32{0, 5}}
	for _, c := range [][]uint32{{0, 1, 2, 3}, {4, 5, 6, 7}} {
		for i, u := range c {
			for _, v := range c[i+1:] {
				g.Src, g.Dst = append(g.Src, u), append(g.Dst, v)
			}
		}
	}
	g.Src, g.Dst = append(g.Src, 3), append(g.Dst, 4)
	adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{Undirected: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g, adj
}

func TestAssignMetisTwoCliques(t *testing.T) {
	for _, balance := range [][]string{{"nodes"}, {"nodes", "edges"}, {"nodes", "edges", "train"}} {
		g, adj := twoCliques(t)
		got, err := Assign(context.Background(), g, adj, AssignOptions{Method: MethodMetis, Parts: 2, Seed: 1, Balance: balance, Imbalance: 1.0})
		if err != nil {
			t.Fatal(err)
		}
		var cut int
		for u := range uint32(8) {
			for _, v := range adj.Row(u) {
				if got[u] != got[v] {
					cut++
				}
			}
		}
		// The bridge 3-4 is stored twice (both directions).
		if cut != 2 || got[0] == got[7] {
			t.Errorf("balance %v: assignment %v cuts %d stored edges, want the bridge only (2)", balance, got, cut)
		}
	}
}

// freqGraph is a 2000-node test graph with its adjacency.
func freqGraph(t *testing.T) (*Graph, *Adj) {
	g := testGraph(2000, 12000, false, false)
	adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{Undirected: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g, adj
}

func TestAssignFreqBalance(t *testing.T) {
	g, adj := freqGraph(t)
	n := g.NumNodes
	for _, tt := range []struct {
		parts int
		imb   float64
	}{{3, 1.0}, {4, 1.0}, {7, 1.0}, {4, 1.1}, {3, 1.5}} {
		got, err := Assign(context.Background(), g, adj, AssignOptions{Method: MethodFreq, Parts: tt.parts, Seed: 9, Imbalance: tt.imb, Fanouts: []int{5, 3}})
		if err != nil {
			t.Fatal(err)
		}
		sizes := make([]int, tt.parts)
		for _, p := range got {
			sizes[p]++
		}
		lo, hi := n/tt.parts, (n+tt.parts-1)/tt.parts
		if tt.imb > 1 {
			avg := float64(n) / float64(tt.parts)
			lo, hi = int(math.Ceil(avg/tt.imb)), int(avg*tt.imb)
		}
		for p, s := range sizes {
			if s < lo || s > hi {
				t.Errorf("parts=%d imbalance=%g: part %d has %d nodes, want %d..%d (%v)", tt.parts, tt.imb, p, s, lo, hi, sizes)
			}
		}
		// Every seed stays with its chunk.
		for p, chunk := range SeedChunks(g.Train, tt.parts, 9) {
			for _, v := range chunk {
				if got[v] != uint32(p) {
					t.Fatalf("parts=%d: seed %d of chunk %d assigned to %d", tt.parts, v, p, got[v])
				}
			}
		}
	}
}

func TestAssignFreqSeed(t *testing.T) {
	g, adj := freqGraph(t)
	run := func(seed uint64, workers int) []uint32 {
		got, err := Assign(context.Background(), g, adj, AssignOptions{Method: MethodFreq, Parts: 4, Seed: seed, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	a := run(1, 1)
	if b := run(1, 3); !slices.Equal(a, b) {
		t.Error("same seed, different workers: different assignment")
	}
	if c := run(2, 1); slices.Equal(a, c) {
		t.Error("different seeds, same assignment")
	}
}

// TestAssignFreqLocality: on a graph of 8 communities with 90% of edges
// inside them, freq serves more of each trainer's expected feature reads
// locally than random (0.42 against 0.32) and cuts fewer edges (0.59
// against 0.75); metis, which sees the structure whole, does far better
// on both (0.09 cut, 0.87 local).
func TestAssignFreqLocality(t *testing.T) {
	ctx := context.Background()
	cfg := SBMConfig{Nodes: 4000, Blocks: 8, AvgDegree: 10, Homophily: 0.9, TrainFrac: 0.2, ValFrac: 0.05, TestFrac: 0.05, Seed: 3, Workers: 1}
	fanouts := []int{10, 5}
	measure := func(method string) (cut, local float64) {
		g, err := SBM(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		adj, err := BuildAdj(ctx, g, csr.In, CleanOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Assign(ctx, g, adj, AssignOptions{Method: method, Parts: 4, Seed: 1, Fanouts: fanouts})
		if err != nil {
			t.Fatal(err)
		}
		var edges int
		for u := range uint32(g.NumNodes) {
			for _, v := range adj.Row(u) {
				if got[u] != got[v] {
					edges++
				}
			}
		}
		seeds := make([][]uint32, 4)
		for _, v := range g.Train {
			seeds[got[v]] = append(seeds[got[v]], v)
		}
		heat, err := EstimateHeat(ctx, adj, seeds, HeatOptions{Fanouts: fanouts})
		if err != nil {
			t.Fatal(err)
		}
		return float64(edges) / float64(adj.NumEdges()), TotalShares(EstimateShares(heat, got, nil)).Local
	}
	rc, rl := measure(MethodRandom)
	fc, fl := measure(MethodFreq)
	mc, ml := measure(MethodMetis)
	t.Logf("edge cut / local reads: random %.3f / %.3f, freq %.3f / %.3f, metis %.3f / %.3f", rc, rl, fc, fl, mc, ml)
	if rc < 0.7 || rl > 0.4 || fc > 0.85*rc || fl < 1.2*rl || mc > 0.2 || ml < 0.8 {
		t.Errorf("edge cut / local reads: random %.3f / %.3f, freq %.3f / %.3f, metis %.3f / %.3f", rc, rl, fc, fl, mc, ml)
	}
}

// TestAssignFreqBalanceEdges: on a power-law graph freq alone can give
// one part the hubs (R-MAT, 2 parts, seed 1: 1.14 × the mean of stored
// edges); with --balance edges every part stores at most imbalance ×
// the mean (within one node's row: the bound is checked before a node
// is placed), nodes stay within their bounds, every trainer's seeds
// stay in its part, and the local share of reads stays near that of
// freq alone.
func TestAssignFreqBalanceEdges(t *testing.T) {
	ctx := context.Background()
	g, err := RMAT(ctx, RMATConfig{Nodes: 20000, Edges: 200000, Noise: 0.1, Seed: 1, Workers: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	adj, err := BuildAdj(ctx, g, csr.In, CleanOptions{Undirected: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, E := g.NumNodes, float64(adj.NumEdges())
	fanouts := []int{10, 5}
	type result struct{ edgeMax, nodeMax, local float64 }
	run := func(parts int, seed uint64, balance []string) result {
		got, err := Assign(ctx, g, adj, AssignOptions{Method: MethodFreq, Parts: parts, Seed: seed, Balance: balance, Fanouts: fanouts})
		if err != nil {
			t.Fatal(err)
		}
		edges := make([]float64, parts)
		nodes := make([]float64, parts)
		for v, p := range got {
			edges[p] += float64(adj.Indptr[v+1] - adj.Indptr[v])
			nodes[p]++
		}
		for p, chunk := range SeedChunks(g.Train, parts, seed) {
			for _, v := range chunk {
				if got[v] != uint32(p) {
					t.Fatalf("%d parts, balance %v: seed %d of chunk %d assigned to %d", parts, balance, v, p, got[v])
				}
			}
		}
		// The trainers of a freq partitioning read its seed chunks.
		heat, err := EstimateHeat(ctx, adj, SeedChunks(g.Train, parts, seed), HeatOptions{Fanouts: fanouts})
		if err != nil {
			t.Fatal(err)
		}
		return result{
			edgeMax: slices.Max(edges) / (E / float64(parts)),
			nodeMax: slices.Max(nodes) / (float64(n) / float64(parts)),
			local:   TotalShares(EstimateShares(heat, got, nil)).Local,
		}
	}
	for _, parts := range []int{2, 4, 8} {
		for _, seed := range []uint64{1, 2, 3, 4, 5} {
			free := run(parts, seed, nil)
			even := run(parts, seed, []string{BalanceNodes, BalanceEdges})
			t.Logf("%d parts, seed %d: edges max/mean %.3f → %.3f, nodes %.3f → %.3f, local reads %.3f → %.3f",
				parts, seed, free.edgeMax, even.edgeMax, free.nodeMax, even.nodeMax, free.local, even.local)
			mean := E / float64(parts)
			if lim := float64(max(uint64(math.Ceil(mean)), uint64(DefaultImbalance*mean))) / mean; even.edgeMax > lim+1e-12 {
				t.Errorf("%d parts, seed %d: balance edges left a part with %.4f × the mean of stored edges, want ≤ %.4f", parts, seed, even.edgeMax, lim)
			}
			if even.nodeMax > DefaultImbalance+1e-9 {
				t.Errorf("%d parts, seed %d: balance edges left a part with %.3f × the mean of nodes", parts, seed, even.nodeMax)
			}
			if even.local < free.local-0.05 {
				t.Errorf("%d parts, seed %d: balance edges lost locality: %.3f local reads against %.3f", parts, seed, even.local, free.local)
			}
		}
	}
}

// TestAssignFreqBalanceEdgesCora: on Cora (undirected, Planetoid's
// per-class split) the freq partitioner under --balance nodes,edges,train
// left one part with 1.075 (3 parts), 1.085 (4) and 1.133 (8) × the mean
// stored edges, against the 1.03 asked: hot hubs filled a part's edges
// early and the light nodes it had to take at the end, to reach its
// least node count, pushed it over. A part keeps room for those now.
func TestAssignFreqBalanceEdgesCora(t *testing.T) {
	ctx := context.Background()
	dir := rdDataDir(t, "cora")
	for _, parts := range []int{3, 4, 8} {
		g, err := Read(ctx, dir, ReadOptions{Format: FormatLINQS})
		if err != nil {
			t.Fatal(err)
		}
		split, err := ParseSplit("per-class:20,500,1000")
		if err != nil {
			t.Fatal(err)
		}
		split.Seed = 1
		if _, err := Split(g, split); err != nil {
			t.Fatal(err)
		}
		adj, err := BuildAdj(ctx, g, csr.In, CleanOptions{Undirected: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Assign(ctx, g, adj, AssignOptions{Method: MethodFreq, Parts: parts, Seed: 1,
			Balance: []string{BalanceNodes, BalanceEdges, BalanceTrain}, Imbalance: DefaultImbalance, Fanouts: DefaultFanouts(), BatchSize: DefaultBatchSize})
		if err != nil {
			t.Fatal(err)
		}
		edges := make([]uint64, parts)
		for v, p := range got {
			edges[p] += adj.Indptr[v+1] - adj.Indptr[v]
		}
		mean := float64(adj.NumEdges()) / float64(parts)
		bound := max(uint64(math.Ceil(mean)), uint64(DefaultImbalance*mean))
		if heavy := slices.Max(edges); heavy > bound {
			t.Errorf("%d parts: a part stores %d edges (%.3f × the mean), want at most %d", parts, heavy, float64(heavy)/mean, bound)
		}
	}
}
