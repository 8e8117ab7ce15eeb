package partition_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"graphnode/csr"
	"graphnode/partition"
	"graphnode/sample"
)

// handAdj: row(0) = [1 2], row(1) = [2 3 4], row(2) = [], row(3) = [0],
// row(4) = [0] (direction in: row v lists v's in-neighbours).
func handAdj() *partition.Adj {
	return &partition.Adj{
		Direction: csr.In,
		Indptr:    []uint64{0, 2, 5, 5, 6, 7},
		Indices:   []uint32{1, 2, 2, 3, 4, 0, 0},
	}
}

func TestEstimateHeatByHand(t *testing.T) {
	for _, tt := range []struct {
		name    string
		seeds   []uint32
		fanouts []int
		want    []float64
	}{
		// Seed 0; hop 1 picks 1 of its 2 in-neighbours: 1 and 2 at 1/2
		// each; hop 2 expands 1 (2 of 3: 2/3 each of 2, 3, 4, times 1/2)
		// and 2 (no neighbours).
		{"fanout 1,2", []uint32{0}, []int{1, 2}, []float64{1, 0.5, 0.5 + 1.0/3, 1.0 / 3, 1.0 / 3}},
		// Seed 3: hop 1 takes its only neighbour 0; hop 2 takes both of 0's.
		{"fanout 1,2 from 3", []uint32{3}, []int{1, 2}, []float64{1, 1, 1, 1, 0}},
		// -1 takes all: seed 1 reaches 2, 3, 4; hop 2 reaches 0 twice.
		{"fanout -1,-1", []uint32{1}, []int{-1, -1}, []float64{2, 1, 1, 1, 1}},
		// Two seeds add up.
		{"two seeds", []uint32{3, 4}, []int{1}, []float64{2, 0, 0, 1, 1}},
		// Fanout 0 samples nothing.
		{"fanout 0", []uint32{0}, []int{0, 5}, []float64{1, 0, 0, 0, 0}},
	} {
		h, err := partition.EstimateHeat(context.Background(), handAdj(), [][]uint32{tt.seeds}, partition.HeatOptions{Fanouts: tt.fanouts, Workers: 1})
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

func TestEstimateHeatParts(t *testing.T) {
	// Two partitions at once equal two single estimates, whatever the
	// number of workers.
	adj := sbmAdj(t, 20000, 0.3)
	a, b := adj.train[:len(adj.train)/2], adj.train[len(adj.train)/2:]
	ctx := context.Background()
	both, err := partition.EstimateHeat(ctx, adj.Adj, [][]uint32{a, b}, partition.HeatOptions{Fanouts: []int{10, 5}, BatchSize: 64, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	one, err := partition.EstimateHeat(ctx, adj.Adj, [][]uint32{b}, partition.HeatOptions{Fanouts: []int{10, 5}, BatchSize: 64, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for v := range uint32(one.NumNodes()) {
		if both.At(v, 1) != one.At(v, 0) {
			t.Fatalf("node %d: heat %g for part 1 of 2, %g alone", v, both.At(v, 1), one.At(v, 0))
		}
	}
	// Each seed contributes 1 + f1' + f1'·f2' touches at most.
	if tot := both.Total(0); tot < float64(len(a)) || tot > float64(len(a))*(1+10+50) {
		t.Errorf("total heat %g for %d seeds", tot, len(a))
	}
}

func TestEstimateHeatErrors(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		seeds   [][]uint32
		fanouts []int
		want    string
	}{
		{[][]uint32{{0}}, nil, "partition: fanouts []: want 1 to 32 hops"},
		{[][]uint32{{0}}, []int{5, -2}, "partition: fanouts [5 -2]: hop 2 is -2, want -1 (all) or a count from 0 to 2147483647"},
		{[][]uint32{{9}}, []int{5}, "partition: heat: seed 9 of part 0 beyond 5 nodes"},
		{nil, []int{5}, "partition: heat: no partitions"},
	} {
		_, err := partition.EstimateHeat(ctx, handAdj(), tt.seeds, partition.HeatOptions{Fanouts: tt.fanouts, Workers: 1})
		if err == nil || err.Error() != tt.want {
			t.Errorf("%v %v: err %v, want %q", tt.seeds, tt.fanouts, err, tt.want)
		}
	}
}

type testAdj struct {
	*partition.Adj
	train []uint32
}

// sbmAdj is an undirected community graph of n nodes, average degree 10.
func sbmAdj(t testing.TB, n int, trainFrac float64) testAdj {
	ctx := context.Background()
	g, err := partition.SBM(ctx, partition.SBMConfig{Nodes: n, Blocks: 8, AvgDegree: 10, Homophily: 0.6,
		TrainFrac: trainFrac, ValFrac: 0.01, TestFrac: 0.01, Seed: 5, Workers: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	adj, err := partition.BuildAdj(ctx, g, csr.In, partition.CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return testAdj{adj, g.Train}
}

// rmatAdj is a directed power-law graph.
func rmatAdj(t testing.TB, n int, m int64) testAdj {
	ctx := context.Background()
	g, err := partition.RMAT(ctx, partition.RMATConfig{Nodes: n, Edges: m, Noise: 0.1, TrainFrac: 0.3, ValFrac: 0.01, TestFrac: 0.01, Seed: 2, Workers: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	adj, err := partition.BuildAdj(ctx, g, csr.In, partition.CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return testAdj{adj, g.Train}
}

// sampledTouches samples every batch of `epochs` epochs of seeds with the
// real sampler and returns, per node, its feature reads per epoch (its
// appearances in n_id).
func sampledTouches(t *testing.T, adj *partition.Adj, seeds []uint32, fanouts []int, batch, epochs int) []float64 {
	n := adj.NumNodes()
	indices := make([]uint64, len(adj.Indices))
	for i, v := range adj.Indices {
		indices[i] = uint64(v)
	}
	mem, err := sample.NewMem(sample.MemData{Indptr: adj.Indptr, Indices: indices})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sample.New(sample.Config{Fanouts: fanouts, Local: mem})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, len(seeds))
	for i, v := range seeds {
		ids[i] = uint64(v)
	}
	plan, err := sample.NewPlan(ids, sample.PlanOptions{BatchSize: batch, Shuffle: true, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	count := make([]float64, n)
	var buf []uint64
	for e := range uint64(epochs) {
		ep := plan.Epoch(e, buf)
		buf = ep.Order()
		for b := range ep.NumBatches() {
			bt, err := s.Sample(context.Background(), ep.Key(b), ep.Batch(b))
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range bt.NID {
				count[id]++
			}
		}
	}
	for v := range count {
		count[v] /= float64(epochs)
	}
	return count
}

// heatAgainst estimates the heat of seeds in adj (one part) and
// compares it with got, the reads per node and epoch of actually
// sampling them: Pearson r over the nodes, the ratio of the totals, and
// both totals.
func heatAgainst(t *testing.T, adj *partition.Adj, seeds []uint32, fanouts []int, batch int, got []float64) (r, ratio, est, sampled float64) {
	t.Helper()
	heat, err := partition.EstimateHeat(context.Background(), adj, [][]uint32{seeds}, partition.HeatOptions{Fanouts: fanouts, BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	per := make([]float64, heat.NumNodes())
	for v := range per {
		per[v] = float64(heat.At(uint32(v), 0))
		est += per[v]
		sampled += got[v]
	}
	return pearson(per, got), est / sampled, est, sampled
}

// pearson is the correlation of x and y.
func pearson(x, y []float64) float64 {
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(len(x))
	my /= float64(len(y))
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	return sxy / math.Sqrt(sxx*syy)
}

// TestEstimateHeatMatchesSampling compares the estimate with the reads of
// the real sampler (fanouts 10,5, batch 64), averaged over 10 epochs. A
// count of visits overcounts, most on hubs; the deduplication model
// brings total and per-node counts close. Tolerance: Pearson r ≥ 0.95
// and the total within 15%. Measured (go test ./partition -run
// MatchesSampling -v; per-node r is limited by the sampling noise of 10
// epochs: with 20 epochs on twice the nodes it is 0.986 and 0.999):
//
//	graph                    estimate                 total/sampled  Pearson r
//	sbm n=10000 (undirected) visits (batch 0)         1.189          0.964
//	                         dedup (batch 64)         0.993          0.966
//	rmat n=8192 (directed)   visits (batch 0)         1.879          0.788
//	                         dedup (batch 64)         0.999          0.998
//
// (Every batch estimated at an even share of the epoch, the last one
// not at its own size: 0.996 and 1.002. When a node was expanded at
// every hop that reached it: 1.000 and 1.007.) Smaller batches on
// clustered graphs: freq_real_test.go.
//
// Without the backtracking correction the sbm visit count was ×1.190
// with r 0.871 on n=20000: returns to the parent are its largest error
// on undirected graphs.
func TestEstimateHeatMatchesSampling(t *testing.T) {
	if testing.Short() {
		t.Skip("samples up to 200 epochs")
	}
	sbm, rmat, few := sbmAdj(t, 10000, 0.2), rmatAdj(t, 1<<13, 80_000), sbmAdj(t, 10000, 0.015)
	for _, tt := range []struct {
		name       string
		adj        testAdj
		fanouts    []int
		batch      int
		epochs     int     // sampled: enough that a node's mean is more than noise
		minR, maxX float64 // least correlation, largest |total/sampled - 1|
	}{
		{"sbm n=10000", sbm, []int{10, 5}, 64, 10, 0.95, 0.15},
		{"rmat n=8192 m=80000", rmat, []int{10, 5}, 64, 10, 0.95, 0.15},
		// Epochs of one or two batches: seeds, and neighbours taken
		// whole, are read in a batch for certain, which a count of
		// visits spread over the batches at random took for 1 − 1/e.
		{"sbm n=10000, one batch, seeds only", few, []int{0}, 1024, 1, 0.999, 0.001},
		{"sbm n=10000, one batch", few, []int{10, 5}, 1024, 200, 0.95, 0.15},
		{"sbm n=10000, one batch, every neighbour", few, []int{-1, -1}, 1024, 1, 0.999, 0.01},
		// Three hops in two batches (100 and 50 seeds): each branch is
		// taken as independent of the others, which two neighbours of one
		// seed are not (r 0.90, the total 1.6% low; both batches at an
		// even 75, r 0.88 and 0.6% high; a node expanded at every hop
		// that reached it, 0.90 with the total 1.4% high; the estimate
		// before that, 0.92 with the total 14% low).
		{"sbm n=10000, two batches", few, []int{15, 10, 5}, 100, 1000, 0.88, 0.05},
		{"rmat n=8192 m=80000, every neighbour", rmat, []int{-1}, 1024, 100, 0.995, 0.01},
	} {
		got := sampledTouches(t, tt.adj.Adj, tt.adj.train, tt.fanouts, tt.batch, tt.epochs)
		for _, batch := range []int{0, tt.batch} {
			r, ratio, se, sg := heatAgainst(t, tt.adj.Adj, tt.adj.train, tt.fanouts, batch, got)
			t.Logf("%s: %d seeds, fanouts %v, estimate batch %d: %.0f reads per epoch, sampled %.0f (×%.3f), Pearson r %.4f",
				tt.name, len(tt.adj.train), tt.fanouts, batch, se, sg, ratio, r)
			if batch > 0 && (r < tt.minR || math.Abs(ratio-1) > tt.maxX) {
				t.Errorf("%s: r = %.4f (want ≥ %g), total ×%.3f (want within %g of 1)", tt.name, r, tt.minR, ratio, tt.maxX)
			}
		}
	}
}

// TestTrainerSeedsMatchPlan: the estimate's seeds of part p are what a
// loader of rank p of as many trainers as parts gets (sample.NewPlan).
func TestTrainerSeedsMatchPlan(t *testing.T) {
	for _, tt := range []struct{ n, parts int }{{0, 2}, {1, 3}, {10, 3}, {11, 4}, {3695, 2}, {7, 7}} {
		train := make([]uint64, tt.n)
		for i := range train {
			train[i] = uint64(3*i + 1)
		}
		got := partition.TrainerSeeds(train, tt.parts)
		for p := range tt.parts {
			plan, err := sample.NewPlan(train, sample.PlanOptions{BatchSize: 1, Rank: p, WorldSize: tt.parts})
			if err != nil {
				t.Fatal(err)
			}
			want := plan.Epoch(0, nil).Order()
			if !slices.Equal(got[p], want) && len(got[p])+len(want) > 0 {
				t.Errorf("%d seeds, %d parts: part %d gets %v, rank %d's share is %v", tt.n, tt.parts, p, got[p], p, want)
			}
		}
	}
}

// TestSeedChunksAreTrainerShares: the freq partitioner's chunk p, which
// part p owns, has the size of rank p's share of split train, the larger
// shares first (3695 training nodes into 2: 1848 and 1847). Boundaries
// t·p/P gave 1847 and 1848, so one of rank 0's seeds was part 1's.
func TestSeedChunksAreTrainerShares(t *testing.T) {
	for _, tc := range []struct{ train, parts int }{{3695, 2}, {10, 3}, {7, 4}, {2, 3}} {
		train := make([]uint32, tc.train)
		for i := range train {
			train[i] = uint32(3 * i)
		}
		chunks := partition.SeedChunks(train, tc.parts, 5)
		shares := partition.TrainerSeeds(train, tc.parts)
		var all []uint32
		for p := range chunks {
			if len(chunks[p]) != len(shares[p]) || !slices.IsSorted(chunks[p]) {
				t.Errorf("%d into %d: chunk %d holds %d seeds (sorted %v), rank %d's share %d", tc.train, tc.parts, p, len(chunks[p]), slices.IsSorted(chunks[p]), p, len(shares[p]))
			}
			all = append(all, chunks[p]...)
		}
		slices.Sort(all)
		if !slices.Equal(all, train) {
			t.Errorf("%d into %d: the chunks are not a split of the training nodes", tc.train, tc.parts)
		}
	}
}

// BenchmarkEstimateHeat: the estimate for 4 partitions' seeds on an
// R-MAT graph of 2^17 nodes and 1.3 M edges, fanouts 15,10,5, batch 1024
// (what --method freq and node inspect run, at a size that fits a
// benchmark).
func BenchmarkEstimateHeat(b *testing.B) {
	g := rmatAdj(b, 1<<17, 1_300_000)
	seeds := partition.TrainerSeeds(g.train, 4)
	opts := partition.HeatOptions{Fanouts: []int{15, 10, 5}, BatchSize: 1024}
	b.ResetTimer()
	for b.Loop() {
		if _, err := partition.EstimateHeat(context.Background(), g.Adj, seeds, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEstimateHeatSmallChances: a hub in the row of each of N seeds
// beside D−1 others, batch 1, fanout 1: each seed's batch picks it with
// chance 1/D, so its heat is N·(1 − (1 − 1/(N·D))^N) ≈ N/D. Each
// branch's chance, 1/(N·D), is below float32's resolution near 1: taken
// there, the hub's heat was 4.6% low at D = 4000 and 0 at D = 40000.
func TestEstimateHeatSmallChances(t *testing.T) {
	for _, c := range []struct{ N, D int }{{1000, 4000}, {1000, 40000}} {
		N, D := c.N, c.D
		n := 1 + N + D
		a := &partition.Adj{Indptr: make([]uint64, n+1)}
		for u := 1; u <= N; u++ {
			a.Indices = append(a.Indices, 0)
			for f := range D - 1 {
				a.Indices = append(a.Indices, uint32(N+1+f))
			}
			a.Indptr[u+1] = uint64(len(a.Indices))
		}
		for v := N + 1; v <= n; v++ {
			a.Indptr[v] = uint64(len(a.Indices))
		}
		seeds := make([]uint32, N)
		for i := range seeds {
			seeds[i] = uint32(i + 1)
		}
		h, err := partition.EstimateHeat(context.Background(), a, [][]uint32{seeds}, partition.HeatOptions{Fanouts: []int{1}, BatchSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		w := 1 / (float64(N) * float64(D))
		want := float64(N) * -math.Expm1(float64(N)*math.Log1p(-w))
		if got := float64(h.At(0, 0)); math.Abs(got-want) > 1e-3*want {
			t.Errorf("N=%d D=%d: hub heat %g, want %g", N, D, got, want)
		}
	}
}

// TestEstimateHeatPartsAlone: partitions estimated together get what
// each gets alone, whether its epoch ends with a short batch (two
// columns of the estimate) or not, so the columns of one partition fold
// into its own heat and no other's. Seed counts 256, 300 and 0 in
// batches of 128: 2 × 128, 2 × 128 and 44, no batch. The part with the
// short batch is not the first, so that its one column of the second
// pass (column 0 there) folded into part 0 fails.
func TestEstimateHeatPartsAlone(t *testing.T) {
	a := sbmAdj(t, 4000, 0.2)
	seeds := [][]uint32{a.train[300:556], a.train[:300], nil}
	opts := partition.HeatOptions{Fanouts: []int{10, 5}, BatchSize: 128, Workers: 2}
	ctx := context.Background()
	all, err := partition.EstimateHeat(ctx, a.Adj, seeds, opts)
	if err != nil {
		t.Fatal(err)
	}
	for p, s := range seeds {
		alone, err := partition.EstimateHeat(ctx, a.Adj, [][]uint32{s}, opts)
		if err != nil {
			t.Fatal(err)
		}
		for v := range alone.NumNodes() {
			if got, want := all.At(uint32(v), p), alone.At(uint32(v), 0); got != want {
				t.Fatalf("part %d, node %d: %g together, %g alone", p, v, got, want)
			}
		}
		if p == 2 && alone.Total(0) != 0 {
			t.Errorf("part without seeds: %g reads", alone.Total(0))
		}
	}
	// The short batch of 44 seeds reads more than 44/128 of a full one:
	// the second part reads more than 300/256 × the first's.
	if r := all.Total(1) / all.Total(0); r <= 300.0/256 {
		t.Errorf("reads of 300 seeds / 256 seeds = %.4f, want > %.4f", r, 300.0/256)
	}
}
