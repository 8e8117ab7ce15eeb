package partition_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"graphnode/partition"
)

// adjOf builds an Adj from rows (each sorted here).
func adjOf(rows ...[]uint32) *partition.Adj {
	a := &partition.Adj{Indptr: []uint64{0}}
	for _, r := range rows {
		r = slices.Clone(r)
		slices.Sort(r)
		a.Indices = append(a.Indices, r...)
		a.Indptr = append(a.Indptr, uint64(len(a.Indices)))
	}
	return a
}

// TestEstimateHeatRepeatsByHand: one seed (0) in one batch, on trees
// whose rows repeat entries or hold self loops, so that the estimate is
// exact: a node listed m times among d entries is in a draw of f with
// chance 1 − C(d−m, f)/C(d, f), read once, and a node picking itself
// reads nothing new.
func TestEstimateHeatRepeatsByHand(t *testing.T) {
	for _, tt := range []struct {
		name    string
		adj     *partition.Adj
		fanouts []int
		want    []float64
	}{
		// row(0) = [1 1 2 3]: one draw takes 1 at 2/4; 1 (row [1 4])
		// then takes itself or 4 at 1/2 each. Entries taken as
		// independent picks, and the self loop as a read, gave 1 a
		// heat of 0.561 and 4 0.219.
		{"fanout 1,1", adjOf([]uint32{1, 1, 2, 3}, []uint32{1, 4}, nil, nil, nil), []int{1, 1},
			[]float64{1, 0.5, 0.25, 0.25, 0.25}},
		// Two of the 4 entries: 1 is among them at 1 − C(2,2)/C(4,2).
		{"fanout 2,1", adjOf([]uint32{1, 1, 2, 3}, []uint32{1, 4}, nil, nil, nil), []int{2, 1},
			[]float64{1, 5.0 / 6, 0.5, 0.5, 5.0 / 12}},
		// A draw larger than the row takes every entry: 1 for certain.
		{"fanout 5,-1", adjOf([]uint32{1, 1, 2, 3}, []uint32{1, 4}, nil, nil, nil), []int{5, -1},
			[]float64{1, 1, 1, 1, 1}},
		// Backtracking over repeated entries: 0 takes 1 or 5; 1 (row
		// [2 2 3]) takes 2 at 2/3; 2 (row [1 1 1 4]) takes 1, already
		// read, at 3/4, or 4.
		{"back", adjOf([]uint32{1, 5}, []uint32{2, 2, 3}, []uint32{1, 1, 1, 4}, nil, nil, nil), []int{1, 1, 1},
			[]float64{1, 0.5, 1.0 / 3, 1.0 / 6, 1.0 / 12, 0.5}},
		// Self loops everywhere: 0 = [0 1 2], 1 = [1 3], 2 = [2], 3 = [3].
		{"self loops", adjOf([]uint32{0, 1, 2}, []uint32{1, 3}, []uint32{2}, []uint32{3}), []int{1, 1},
			[]float64{1, 1.0 / 3, 1.0 / 3, 1.0 / 6}},
	} {
		h, err := partition.EstimateHeat(context.Background(), tt.adj, [][]uint32{{0}}, partition.HeatOptions{Fanouts: tt.fanouts, BatchSize: 1, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		for v, want := range tt.want {
			if got := float64(h.At(uint32(v), 0)); math.Abs(got-want) > 1e-6 {
				t.Errorf("%s: heat of %d = %g, want %g", tt.name, v, got, want)
			}
		}
	}
}

// reshaped is adj with every row's entries repeated copies(u, v) times
// (0 drops one) and, with loops, a self loop added to every row.
func reshaped(adj *partition.Adj, loops bool, copies func(u, v uint32) int) *partition.Adj {
	out := &partition.Adj{Direction: adj.Direction, Indptr: []uint64{0}}
	for u := range uint32(adj.NumNodes()) {
		start := len(out.Indices)
		for _, v := range adj.Row(u) {
			for range copies(u, v) {
				out.Indices = append(out.Indices, v)
			}
		}
		if loops {
			out.Indices = append(out.Indices, u)
		}
		slices.Sort(out.Indices[start:])
		out.Indptr = append(out.Indptr, uint64(len(out.Indices)))
	}
	return out
}

// TestEstimateHeatMatchesSamplingRepeats holds the estimate to the real
// sampler (fanouts 10,5, batch 64, 40 epochs) on graphs whose rows hold
// self loops (--self-loops keep) or repeated entries (--duplicates keep),
// beside the same graph without them. Tolerance: the total no further
// from the sampled one than without them plus 1 point (the sampling
// noise of 40 epochs is about 0.1), and Pearson r ≥ 0.97. Measured
// (go test ./partition -run SamplingRepeats -v; total/sampled, r):
//
//	graph                    without          with
//	sbm, self loops          0.996  0.990     0.996  0.989
//	rmat, self loops         1.001  0.999     1.000  0.999
//	sbm, entries ×3          0.996  0.990     0.996  0.986
//	rmat, entries ×1 to ×3   1.001  0.999     1.002  0.999
//
// When the estimate took each copy for a pick of its own and a node's
// pick of itself for a read, the totals with them were ×1.161, ×1.172,
// ×1.516 and ×1.276.
func TestEstimateHeatMatchesSamplingRepeats(t *testing.T) {
	if testing.Short() {
		t.Skip("samples 40 epochs of 8 graphs")
	}
	sbm, rmat := sbmAdj(t, 10000, 0.2), rmatAdj(t, 1<<13, 80_000)
	once := func(u, v uint32) int { return 1 }
	thrice := func(u, v uint32) int { return 3 }
	mixed := func(u, v uint32) int { return 1 + int((u*7+v*13)%3) }
	for _, tt := range []struct {
		name   string
		adj    testAdj
		loops  bool
		copies func(u, v uint32) int
	}{
		{"sbm, self loops", sbm, true, once},
		{"rmat, self loops", rmat, true, once},
		{"sbm, entries ×3", sbm, false, thrice},
		{"rmat, entries ×1 to ×3", rmat, false, mixed},
	} {
		fanouts, batch := []int{10, 5}, 64
		var ratios [2]float64
		for i, adj := range []*partition.Adj{tt.adj.Adj, reshaped(tt.adj.Adj, tt.loops, tt.copies)} {
			got := sampledTouches(t, adj, tt.adj.train, fanouts, batch, 40)
			r, ratio, se, sg := heatAgainst(t, adj, tt.adj.train, fanouts, batch, got)
			ratios[i] = ratio
			t.Logf("%s (%s): %.0f reads per epoch, sampled %.0f (×%.3f), Pearson r %.4f",
				tt.name, []string{"plain", "with them"}[i], se, sg, ratios[i], r)
			if r < 0.97 {
				t.Errorf("%s: r = %.4f, want ≥ 0.97", tt.name, r)
			}
		}
		if math.Abs(ratios[1]-1) > math.Abs(ratios[0]-1)+0.01 {
			t.Errorf("%s: total ×%.3f of the sampled, without them ×%.3f: want within 1 point as close", tt.name, ratios[1], ratios[0])
		}
	}
}
