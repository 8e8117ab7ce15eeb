package sample

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// refBatch is the obviously correct reference: maps and slices, the PyG
// loop written out, the same choice functions.
type refBatch struct {
	nid      []uint64
	row, col []int64
	nsn, nse []int64
}

func refSample(nb map[uint64][]uint64, ws map[uint64][]float32, fanouts []int, weighted bool, key BatchKey, seeds []uint64) refBatch {
	var c Chooser
	var r refBatch
	pos := map[uint64]int{}
	for _, v := range seeds {
		pos[v] = len(r.nid)
		r.nid = append(r.nid, v)
	}
	r.nsn = append(r.nsn, int64(len(seeds)))
	frontier := slices.Clone(seeds)
	for hop, f := range fanouts {
		var next []uint64
		edges := 0
		for _, v := range frontier {
			stream := NodeStream(key.Stream(), hop, v)
			var idx []uint32
			if weighted && ws[v] != nil {
				idx = c.Weighted(stream, ws[v], f, nil)
			} else {
				idx = c.Uniform(stream, len(nb[v]), f, nil)
			}
			for _, i := range idx {
				u := nb[v][i]
				if _, ok := pos[u]; !ok {
					pos[u] = len(r.nid)
					r.nid = append(r.nid, u)
					next = append(next, u)
				}
				r.row = append(r.row, int64(pos[u]))
				r.col = append(r.col, int64(pos[v]))
				edges++
			}
		}
		r.nsn = append(r.nsn, int64(len(next)))
		r.nse = append(r.nse, int64(edges))
		frontier = next
	}
	return r
}

func TestSampleMatchesReference(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		n, m     int
		fanouts  []int
		weighted bool
	}{
		{50, 300, []int{3, 2}, false},
		{200, 3000, []int{15, 10, 5}, false},
		{200, 3000, []int{5, 5}, true},
		{100, 800, []int{-1, 2}, false},
		{100, 800, []int{-1, -1}, true},
		{300, 2000, []int{0, 4}, false},
		{1000, 20000, []int{40, 1}, false},
	} {
		name := fmt.Sprintf("n=%d/m=%d/fanout=%v/weighted=%v", tc.n, tc.m, tc.fanouts, tc.weighted)
		t.Run(name, func(t *testing.T) {
			g := randGraph(uint64(tc.n+tc.m), tc.n, tc.m, tc.weighted, Schema{FeatDim: 2, LabelDim: 1})
			whole := g.whole(t)
			nb, ws := g.adjacency(t)
			s := newSampler(t, whole, whole, tc.fanouts, tc.weighted)
			for bi := range 8 {
				key := BatchKey{Seed: 5, Epoch: 1, Rank: 0, Batch: uint64(bi)}
				seeds := []uint64{uint64(bi), uint64(bi*7+3) % uint64(tc.n), uint64(tc.n - 1 - bi)}
				b, err := s.Sample(ctx, key, seeds)
				if err != nil {
					t.Fatal(err)
				}
				want := refSample(nb, ws, tc.fanouts, tc.weighted, key, seeds)
				if !slices.Equal(b.NID, want.nid) || !slices.Equal(b.Row, want.row) || !slices.Equal(b.Col, want.col) ||
					!slices.Equal(b.NumSampledNodes, want.nsn) || !slices.Equal(b.NumSampledEdges, want.nse) {
					t.Fatalf("batch %d differs from the reference:\n got  n_id %v\n want n_id %v\n got  nsn %v nse %v\n want nsn %v nse %v",
						bi, b.NID, want.nid, b.NumSampledNodes, b.NumSampledEdges, want.nsn, want.nse)
				}
				checkInvariants(t, b, nb, ws, tc.fanouts, tc.weighted)
				for i, v := range seeds {
					if y := b.Y[i]; y != int64(g.labels[v]) {
						t.Fatalf("y[%d] = %d, want label %d of node %d", i, y, g.labels[v], v)
					}
				}
			}
		})
	}
}

// checkInvariants asserts what holds for any batch: edges exist, fanouts
// bound each expanded node, n_id has no duplicates, -1 takes everything,
// counts add up.
func checkInvariants(t *testing.T, b *Batch, nb map[uint64][]uint64, ws map[uint64][]float32, fanouts []int, weighted bool) {
	t.Helper()
	seen := map[uint64]bool{}
	for _, v := range b.NID {
		if seen[v] {
			t.Fatalf("node %d twice in n_id", v)
		}
		seen[v] = true
	}
	var sum int64
	for _, c := range b.NumSampledNodes {
		sum += c
	}
	if sum != int64(len(b.NID)) {
		t.Fatalf("num_sampled_nodes %v add up to %d, n_id has %d", b.NumSampledNodes, sum, len(b.NID))
	}
	perNode := map[int64]int{}
	e := 0
	lo := int64(0)
	for hop, f := range fanouts {
		hi := lo + b.NumSampledNodes[hop]
		clear(perNode)
		for range b.NumSampledEdges[hop] {
			r, c := b.Row[e], b.Col[e]
			e++
			if c < lo || c >= hi {
				t.Fatalf("hop %d: edge %d expands position %d, frontier is [%d, %d)", hop, e-1, c, lo, hi)
			}
			u, v := b.NID[r], b.NID[c]
			if _, ok := slices.BinarySearch(nb[v], u); !ok {
				t.Fatalf("hop %d: edge %d→%d is not in the graph", hop, u, v)
			}
			perNode[c]++
		}
		for c := lo; c < hi; c++ {
			v := b.NID[c]
			deg := len(nb[v])
			if weighted && ws[v] != nil {
				deg = 0
				for _, w := range ws[v] {
					if w > 0 {
						deg++
					}
				}
			}
			want := deg
			if f >= 0 {
				want = min(f, deg)
			}
			if perNode[c] != want {
				t.Fatalf("hop %d: node %d (degree %d, fanout %d) has %d edges, want %d", hop, v, deg, f, perNode[c], want)
			}
		}
		lo = hi
	}
	if e != len(b.Row) {
		t.Fatalf("num_sampled_edges cover %d of %d edges", e, len(b.Row))
	}
}

func TestSampleErrors(t *testing.T) {
	ctx := context.Background()
	g := randGraph(1, 30, 100, false, Schema{})
	whole := g.whole(t)
	s := newSampler(t, whole, whole, []int{2}, false)
	for _, tc := range []struct {
		name  string
		seeds []uint64
		want  error
	}{
		{"duplicate", []uint64{1, 2, 1}, ErrInvalid},
		{"empty", nil, ErrInvalid},
		{"outside", []uint64{1, 30}, ErrNotOwned},
	} {
		if _, err := s.Sample(ctx, BatchKey{}, tc.seeds); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	// The sampler recovers after an error.
	if b, err := s.Sample(ctx, BatchKey{}, []uint64{3}); err != nil || b.NID[0] != 3 {
		t.Errorf("after errors: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Sample(cctx, BatchKey{}, []uint64{3}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
	err := (&Config{Fanouts: []int{-2}, Schema: Schema{FeatDim: 3}}).Validate()
	for _, part := range []string{"fanouts[0]", "local", "features"} {
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), part) {
			t.Errorf("Validate = %v, want it to name %q", err, part)
		}
	}
}

// A steady-state batch allocates nothing.
func TestSampleNoAllocs(t *testing.T) {
	ctx := context.Background()
	g := randGraph(3, 2000, 30000, false, Schema{FeatDim: 8, LabelDim: 1})
	whole := g.whole(t)
	s := newSampler(t, whole, whole, []int{10, 5}, false)
	seeds := []uint64{1, 500, 999, 1500, 7}
	buf := aligned(1 << 20)
	run := func() {
		b, err := s.Sample(ctx, BatchKey{Batch: 1}, seeds)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Gather(ctx, b); err != nil {
			t.Fatal(err)
		}
		if _, err := Encode(buf, b); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Errorf("%v allocations per batch, want 0", n)
	}
}
