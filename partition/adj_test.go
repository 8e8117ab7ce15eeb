package partition

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"graphnode/csr"
)

// edge is (src, dst) as the input states it, with a relation.
type edge struct{ src, dst, rel uint32 }

// adjEdges lists a's edges as the input would state them, in row order.
func adjEdges(a *Adj) []edge {
	var out []edge
	for v := 0; v < a.NumNodes(); v++ {
		for i := a.Indptr[v]; i < a.Indptr[v+1]; i++ {
			e := edge{src: a.Indices[i], dst: uint32(v)}
			if a.Direction == csr.Out {
				e.src, e.dst = e.dst, e.src
			}
			if a.Etypes != nil {
				e.rel = a.Etypes[i]
			}
			out = append(out, e)
		}
	}
	return out
}

func sortedEdges(es []edge) []edge {
	es = slices.Clone(es)
	slices.SortFunc(es, func(a, b edge) int {
		if a.src != b.src {
			return int(a.src) - int(b.src)
		}
		if a.dst != b.dst {
			return int(a.dst) - int(b.dst)
		}
		return int(a.rel) - int(b.rel)
	})
	return es
}

// cleanGraph: 4 nodes with ids 10..13; a duplicate 0->1, self loops at 1
// and 3, a reciprocal pair 0->1 / 1->0.
func cleanGraph() *Graph {
	return &Graph{
		Name: "clean", NumNodes: 4,
		Src: []uint32{0, 0, 1, 1, 2, 3},
		Dst: []uint32{1, 1, 1, 0, 3, 3},
		IDs: IDMap{Ints: []uint64{10, 11, 12, 13}},
	}
}

func TestBuildAdjPolicies(t *testing.T) {
	tests := []struct {
		name    string
		opts    CleanOptions
		want    []edge // sorted
		stats   Stats
		wantErr string
	}{
		{"defaults", CleanOptions{},
			[]edge{{0, 1, 0}, {1, 0, 0}, {1, 1, 0}, {2, 3, 0}, {3, 3, 0}},
			Stats{SelfLoops: 2, Duplicates: 1}, ""},
		{"drop self loops", CleanOptions{SelfLoops: Drop},
			[]edge{{0, 1, 0}, {1, 0, 0}, {2, 3, 0}},
			Stats{SelfLoops: 2, SelfLoopsDrop: 2, Duplicates: 1}, ""},
		{"keep duplicates", CleanOptions{Duplicates: Keep},
			[]edge{{0, 1, 0}, {0, 1, 0}, {1, 0, 0}, {1, 1, 0}, {2, 3, 0}, {3, 3, 0}},
			Stats{SelfLoops: 2}, ""},
		{"undirected", CleanOptions{SelfLoops: Drop, Undirected: true},
			// 4 non-loop edges + 4 reverses = 8 entries; 0-1 appears 4 times.
			[]edge{{0, 1, 0}, {1, 0, 0}, {2, 3, 0}, {3, 2, 0}},
			Stats{SelfLoops: 2, SelfLoopsDrop: 2, ReverseAdded: 4, Duplicates: 4}, ""},
		{"undirected keep duplicates", CleanOptions{Duplicates: Keep, Undirected: true},
			// 0->1 twice and 1->0 once, each with its reverse.
			[]edge{{0, 1, 0}, {0, 1, 0}, {0, 1, 0}, {1, 0, 0}, {1, 0, 0}, {1, 0, 0}, {1, 1, 0}, {2, 3, 0}, {3, 2, 0}, {3, 3, 0}},
			Stats{SelfLoops: 2, ReverseAdded: 4}, ""},
		{"self loops error", CleanOptions{SelfLoops: Error}, nil, Stats{}, "2 self loops (policy error), at nodes 11, 13"},
		{"duplicates error", CleanOptions{Duplicates: Error}, nil, Stats{}, "duplicate edge 10 -> 11"},
		{"bad policy", CleanOptions{SelfLoops: Add}, nil, Stats{}, `partition: policy "add": want one of keep, drop, error (self loops)`},
		// Both bad policies, not the first alone.
		{"bad policies", CleanOptions{SelfLoops: Add, Duplicates: "twice"}, nil, Stats{},
			"partition: policy \"add\": want one of keep, drop, error (self loops)\npartition: policy \"twice\": want one of keep, drop, error (duplicates)"},
	}
	for _, tt := range tests {
		for _, dir := range []csr.Direction{csr.In, csr.Out} {
			t.Run(fmt.Sprintf("%s/%s", tt.name, dir), func(t *testing.T) {
				g := cleanGraph()
				a, err := BuildAdj(context.Background(), g, dir, tt.opts, nil)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := sortedEdges(adjEdges(a)); !slices.Equal(got, tt.want) {
					t.Errorf("edges = %v, want %v", got, tt.want)
				}
				if g.Stats != tt.stats {
					t.Errorf("stats = %+v, want %+v", g.Stats, tt.stats)
				}
				if g.Src != nil || g.Dst != nil {
					t.Error("BuildAdj left the edge arrays in the graph")
				}
				if a.NumEdges() != uint64(len(tt.want)) || len(a.Indices) != len(tt.want) {
					t.Errorf("NumEdges %d, len(Indices) %d, want %d", a.NumEdges(), len(a.Indices), len(tt.want))
				}
			})
		}
	}
}

func TestBuildAdjRowsKeyedByExpandedNode(t *testing.T) {
	// 0->2, 1->2: with In, row 2 holds 0 and 1; with Out, rows 0 and 1 hold 2.
	for _, tt := range []struct {
		dir    csr.Direction
		indptr []uint64
		idx    []uint32
	}{
		{csr.In, []uint64{0, 0, 0, 2}, []uint32{0, 1}},
		{csr.Out, []uint64{0, 1, 2, 2}, []uint32{2, 2}},
	} {
		g := &Graph{NumNodes: 3, Src: []uint32{1, 0}, Dst: []uint32{2, 2}}
		a, err := BuildAdj(context.Background(), g, tt.dir, CleanOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Indptr, tt.indptr) || !slices.Equal(a.Indices, tt.idx) {
			t.Errorf("%s: indptr %v indices %v, want %v %v", tt.dir, a.Indptr, a.Indices, tt.indptr, tt.idx)
		}
	}
}

func TestBuildAdjRelationsAndWeights(t *testing.T) {
	// 0 -r1-> 1 twice (weights 1, 2: the first survives), 0 -r0-> 1 once:
	// different relations between one pair are distinct edges.
	g := &Graph{
		NumNodes: 2,
		Src:      []uint32{0, 0, 0},
		Dst:      []uint32{1, 1, 1},
		Etypes:   []uint32{1, 1, 0},
		Weights:  []float32{1, 2, 3},
	}
	a, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Indices, []uint32{0, 0}) || !slices.Equal(a.Etypes, []uint32{0, 1}) || !slices.Equal(a.Weights, []float32{3, 1}) {
		t.Errorf("indices %v etypes %v weights %v, want [0 0] [0 1] [3 1]", a.Indices, a.Etypes, a.Weights)
	}
	if g.Stats.Duplicates != 1 {
		t.Errorf("duplicates = %d, want 1", g.Stats.Duplicates)
	}
}

func TestBuildAdjRejectsBadInput(t *testing.T) {
	g := &Graph{Name: "g", NumNodes: 2, Src: []uint32{0, 5}, Dst: []uint32{1, 1}}
	_, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), "edge 1 (5 -> 1) names a node beyond 2 nodes") {
		t.Errorf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g = &Graph{NumNodes: 2, Src: []uint32{0}, Dst: []uint32{1}}
	if _, err := BuildAdj(ctx, g, csr.In, CleanOptions{}, nil); err != context.Canceled {
		t.Errorf("cancelled: err = %v", err)
	}
}

// TestBuildAdjMatchesReference compares a random multigraph, built with
// rows sorted on all cores, against a map-based reference.
func TestBuildAdjMatchesReference(t *testing.T) {
	const n, m = 3000, 60000
	rng := rand.New(rand.NewPCG(1, 2))
	g := &Graph{NumNodes: n, Src: make([]uint32, m), Dst: make([]uint32, m), Weights: make([]float32, m)}
	first := make(map[edge]float32)
	for e := range m {
		u, v := uint32(rng.IntN(n)), uint32(rng.IntN(n/10)) // skewed: many duplicates
		g.Src[e], g.Dst[e], g.Weights[e] = u, v, float32(e)
		k := edge{src: u, dst: v}
		if _, ok := first[k]; !ok {
			first[k] = float32(e)
		}
	}
	for _, dir := range []csr.Direction{csr.In, csr.Out} {
		h := *g
		a, err := BuildAdj(context.Background(), &h, dir, CleanOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := adjEdges(a)
		if len(got) != len(first) || h.Stats.Duplicates != int64(m-len(first)) {
			t.Fatalf("%s: %d edges, %d duplicates; want %d, %d", dir, len(got), h.Stats.Duplicates, len(first), m-len(first))
		}
		for i, e := range got {
			w, ok := first[e]
			if !ok || a.Weights[i] != w {
				t.Fatalf("%s: edge %v weight %v, want present with weight %v", dir, e, a.Weights[i], w)
			}
		}
		for v := 0; v < n; v++ {
			if !slices.IsSorted(a.Row(uint32(v))) {
				t.Fatalf("%s: row %d not sorted", dir, v)
			}
		}
	}
}

// BenchmarkBuildAdj builds the adjacency of a random graph with 1 M
// edges over 100 k nodes (default policies: duplicates dropped).
func BenchmarkBuildAdj(b *testing.B) {
	const n, m = 100_000, 1_000_000
	rng := rand.New(rand.NewPCG(1, 1))
	src, dst := make([]uint32, m), make([]uint32, m)
	for e := range m {
		src[e], dst[e] = uint32(rng.IntN(n)), uint32(rng.IntN(n))
	}
	b.ReportAllocs()
	b.SetBytes(8 * m)
	for b.Loop() {
		g := &Graph{NumNodes: n, Src: src, Dst: dst}
		if _, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(m)*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
}
