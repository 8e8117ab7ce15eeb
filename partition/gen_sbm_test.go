package partition

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// genSmallSBM is the default model shrunk so that tests stay fast.
func genSmallSBM() SBMConfig {
	c := DefaultSBMConfig()
	c.Nodes = 20_000
	return c
}

func TestSBMShape(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nodes     int
		deg       float64
		wantPairs int64
	}{
		{"even degree", 20_000, 20, 200_000},
		{"odd degree", 10_001, 7, 35_003}, // floor(10001*3.5)
		{"degree 1", 1_000, 1, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := genSmallSBM()
			cfg.Nodes, cfg.AvgDegree = tc.nodes, tc.deg
			g, err := SBM(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Src) != int(2*tc.wantPairs) || len(g.Dst) != len(g.Src) {
				t.Fatalf("edges = %d, want %d", len(g.Src), 2*tc.wantPairs)
			}
			if g.Stats.EdgesRead != 2*tc.wantPairs || g.Stats.SelfLoops != 0 {
				t.Errorf("stats = %+v", g.Stats)
			}
			for e := 0; e < len(g.Src); e += 2 {
				if g.Src[e] != g.Dst[e+1] || g.Dst[e] != g.Src[e+1] {
					t.Fatalf("edge %d has no reverse at %d", e, e+1)
				}
				if g.Src[e] == g.Dst[e] {
					t.Fatalf("self loop at edge %d", e)
				}
				if int(g.Src[e]) >= tc.nodes || int(g.Dst[e]) >= tc.nodes {
					t.Fatalf("edge %d: %d -> %d out of range", e, g.Src[e], g.Dst[e])
				}
			}
			// Blocks are equal-sized up to one node.
			size := make([]int, cfg.Blocks)
			for _, l := range g.Labels {
				size[l]++
			}
			if lo, hi := slices.Min(size), slices.Max(size); hi-lo > 1 {
				t.Errorf("block sizes %d..%d, want within 1", lo, hi)
			}
			if g.FeatDim != 64 || len(g.Feat) != tc.nodes*64 || g.NumClasses != 16 {
				t.Errorf("feat dim %d (%d values), classes %d", g.FeatDim, len(g.Feat), g.NumClasses)
			}
		})
	}
}

// TestSBMHomophily checks the measured fraction of intra-block edges
// against the configured one within 0.01 (the standard error with 100k
// pairs is below 0.0015).
func TestSBMHomophily(t *testing.T) {
	for _, h := range []float64{0.1, 0.7, 0.95, 1} {
		cfg := genSmallSBM()
		cfg.Nodes, cfg.AvgDegree, cfg.Homophily, cfg.FeatDim = 10_000, 20, h, 0
		g, err := SBM(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		same := 0
		for e := range g.Src {
			if g.Labels[g.Src[e]] == g.Labels[g.Dst[e]] {
				same++
			}
		}
		got := float64(same) / float64(len(g.Src))
		if math.Abs(got-h) > 0.01 {
			t.Errorf("homophily %g: measured %.4f", h, got)
		}
	}
}

// TestSBMFeatures checks the documented difficulty of the default model:
// nearest-centroid accuracy on own features is well above chance but far
// from perfect, and averaging over neighbours (what a GNN layer does)
// raises it a lot.
func TestSBMFeatures(t *testing.T) {
	g, err := SBM(context.Background(), genSmallSBM(), nil)
	if err != nil {
		t.Fatal(err)
	}
	own := genCentroidAccuracy(g, g.Feat)
	agg := genCentroidAccuracy(g, genNeighbourMean(g))
	t.Logf("nearest-centroid accuracy: own features %.3f, neighbour mean %.3f (chance %.3f)", own, agg, 1/16.0)
	if own < 0.25 || own > 0.55 {
		t.Errorf("own-feature accuracy %.3f, want 0.25..0.55", own)
	}
	if agg < own+0.25 || agg > 0.95 {
		t.Errorf("neighbour-mean accuracy %.3f, want own %.3f + 0.25 .. 0.95", agg, own)
	}
}

// genCentroidAccuracy estimates class centroids of feat on the train
// split and classifies the test split by the nearest one.
func genCentroidAccuracy(g *Graph, feat []float32) float64 {
	d, k := g.FeatDim, g.NumClasses
	cent := make([]float64, k*d)
	cnt := make([]int, k)
	for _, u := range g.Train {
		c := int(g.Labels[u])
		cnt[c]++
		for j := range d {
			cent[c*d+j] += float64(feat[int(u)*d+j])
		}
	}
	for c := range k {
		for j := range d {
			cent[c*d+j] /= float64(max(cnt[c], 1))
		}
	}
	right := 0
	for _, u := range g.Test {
		best, bestDist := -1, math.Inf(1)
		for c := range k {
			dist := 0.0
			for j := range d {
				x := float64(feat[int(u)*d+j]) - cent[c*d+j]
				dist += x * x
			}
			if dist < bestDist {
				best, bestDist = c, dist
			}
		}
		if int32(best) == g.Labels[u] {
			right++
		}
	}
	return float64(right) / float64(len(g.Test))
}

// genNeighbourMean is, per node, the mean feature row over its out-edges.
func genNeighbourMean(g *Graph) []float32 {
	d := g.FeatDim
	sum := make([]float64, len(g.Feat))
	deg := make([]int, g.NumNodes)
	for e := range g.Src {
		u, v := int(g.Src[e]), int(g.Dst[e])
		deg[u]++
		for j := range d {
			sum[u*d+j] += float64(g.Feat[v*d+j])
		}
	}
	out := make([]float32, len(sum))
	for i := range out {
		out[i] = float32(sum[i] / float64(max(deg[i/d], 1)))
	}
	return out
}

func TestSBMDeterministic(t *testing.T) {
	gen := func(seed uint64, workers int) *Graph {
		cfg := genSmallSBM()
		cfg.Nodes, cfg.Seed, cfg.Workers = 10_000, seed, workers
		g, err := SBM(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	a, b, c := gen(5, 1), gen(5, 3), gen(6, 2)
	if !genSameGraph(a, b) {
		t.Error("seed 5: 1 and 3 workers differ")
	}
	if genSameGraph(a, c) {
		t.Error("seeds 5 and 6 give the same graph")
	}
}

func TestSBMSplits(t *testing.T) {
	cfg := genSmallSBM()
	cfg.TrainFrac, cfg.ValFrac, cfg.TestFrac = 0.5, 0.2, 0.1
	g, err := SBM(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	genCheckSplits(t, g, len(genNonIsolated(g)), 0.5, 0.2, 0.1)
}

func TestSBMConfigErrors(t *testing.T) {
	cfg := SBMConfig{Nodes: 10, Blocks: 6, Homophily: 2, FeatDim: -1, TrainFrac: 0.9, ValFrac: 0.9, Workers: 1 << 20}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"partition: sbm: blocks = 6", "homophily = 2", "feat dim = -1", "fractions", "workers = 1048576: want 0 (all CPUs, at most 256) to 256"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := SBM(context.Background(), cfg, nil); err == nil {
		t.Error("SBM accepted a bad config")
	}
	dense := SBMConfig{Nodes: 100, Blocks: 4, AvgDegree: 200}
	if err := dense.Validate(); err == nil || !strings.Contains(err.Error(), "avg degree = 200 with 100 nodes: want at most nodes-1 = 99") {
		t.Errorf("avg degree beyond the complete graph: %v", err)
	}
	dense.AvgDegree = 99
	if err := dense.Validate(); err != nil {
		t.Errorf("the complete graph: %v", err)
	}
	nan := SBMConfig{Nodes: 100, Blocks: 2, AvgDegree: math.NaN(), Homophily: math.NaN(), TrainFrac: math.NaN()}
	err = nan.Validate()
	for _, want := range []string{"avg degree = NaN", "homophily = NaN", "fractions = NaN"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NaN fields: %v, lacks %q", err, want)
		}
	}
}

// TestSBMExactZero: with Exact, a zero field is zero: homophily 0 puts
// every edge between blocks (without it, 0 stood for the default 0.5).
func TestSBMExactZero(t *testing.T) {
	cfg := DefaultSBMConfig()
	cfg.Nodes, cfg.Blocks, cfg.FeatDim, cfg.Homophily, cfg.Exact = 2000, 4, 0, 0, true
	g, err := SBM(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range g.Src {
		if g.Labels[g.Src[i]] == g.Labels[g.Dst[i]] {
			t.Fatalf("edge %d -> %d inside block %d at homophily 0", g.Src[i], g.Dst[i], g.Labels[g.Src[i]])
		}
	}
	cfg.Exact = false
	g, err = SBM(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	inside := 0
	for i := range g.Src {
		if g.Labels[g.Src[i]] == g.Labels[g.Dst[i]] {
			inside++
		}
	}
	if f := float64(inside) / float64(len(g.Src)); f < 0.45 || f > 0.55 {
		t.Errorf("without Exact, homophily 0 is the default 0.5: %.3f of edges inside blocks", f)
	}
}

func TestSBMCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SBM(ctx, genSmallSBM(), nil); err != context.Canceled {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func BenchmarkSBM(b *testing.B) {
	cfg := DefaultSBMConfig()
	b.ReportAllocs()
	var edges int
	for b.Loop() {
		g, err := SBM(context.Background(), cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		edges = len(g.Src)
	}
	b.ReportMetric(float64(edges)*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
}

// TestSBMDistinct: no pair is drawn twice, down to the complete graph
// (100 nodes of degree 99 gave 4408 distinct pairs of 4950, which node
// partition dropped to fewer edges than asked), and the graph still
// depends on the seed alone.
func TestSBMDistinct(t *testing.T) {
	for _, tc := range []struct {
		nodes, blocks  int
		deg, homophily float64
	}{
		{100, 16, 99, 0.5}, // complete: the last pairs come from the free list
		{100, 4, 60, 0.9},  // blocks of 25 cannot hold 90% of 3000 pairs
		{101, 2, 7, 1},
		{20_000, 16, 20, 0.5},
	} {
		t.Run(fmt.Sprintf("nodes=%d/blocks=%d/deg=%g/homophily=%g", tc.nodes, tc.blocks, tc.deg, tc.homophily), func(t *testing.T) {
			gen := func(workers int) *Graph {
				cfg := genSmallSBM()
				cfg.Nodes, cfg.Blocks, cfg.AvgDegree, cfg.Homophily, cfg.FeatDim, cfg.Workers, cfg.Exact = tc.nodes, tc.blocks, tc.deg, tc.homophily, 0, workers, true
				g, err := SBM(context.Background(), cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			g := gen(1)
			want := int(float64(tc.nodes) * tc.deg / 2)
			seen := map[uint64]bool{}
			for e := 0; e < len(g.Src); e += 2 {
				if g.Src[e] != g.Dst[e+1] || g.Dst[e] != g.Src[e+1] || g.Src[e] == g.Dst[e] {
					t.Fatalf("edges %d, %d: %d -> %d, %d -> %d", e, e+1, g.Src[e], g.Dst[e], g.Src[e+1], g.Dst[e+1])
				}
				seen[uint64(min(g.Src[e], g.Dst[e]))<<32|uint64(max(g.Src[e], g.Dst[e]))] = true
			}
			if len(g.Src) != 2*want || len(seen) != want {
				t.Errorf("%d edges, %d distinct pairs; want %d pairs", len(g.Src), len(seen), want)
			}
			if !genSameGraph(g, gen(3)) {
				t.Error("1 and 3 workers differ")
			}
		})
	}
}

// TestSBMLeast: what Least says of a config before the graph is drawn
// holds of the graph SBM draws from it: its largest degree and splits are
// no smaller, and equal where they do not depend on the draws (every node
// draws a partner from a mean degree of 2, so none is isolated).
func TestSBMLeast(t *testing.T) {
	for _, tc := range []struct {
		nodes int
		deg   float64
		exact bool // the splits are exact
	}{
		{2000, 20, true},
		{10_001, 7, true},
		{1000, 2, true},
		{1000, 1, false},
		{1000, 0.3, false},
		{5, 4, true}, // the complete graph: every degree is 4
	} {
		t.Run(fmt.Sprintf("nodes=%d/deg=%g", tc.nodes, tc.deg), func(t *testing.T) {
			cfg := genSmallSBM()
			cfg.Nodes, cfg.AvgDegree, cfg.Blocks = tc.nodes, tc.deg, 2
			cfg.TrainFrac, cfg.ValFrac, cfg.TestFrac = 0.5, 0.3, 0.15
			least := cfg.Least()
			g, err := SBM(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			deg := make([]int, g.NumNodes)
			for _, v := range g.Dst {
				deg[v]++
			}
			got := SBMLeast{MaxDegree: slices.Max(deg), Train: len(g.Train), Val: len(g.Val), Test: len(g.Test)}
			if got.MaxDegree < least.MaxDegree || got.Train < least.Train || got.Val < least.Val || got.Test < least.Test {
				t.Fatalf("the graph has %+v, less than Least's %+v", got, least)
			}
			if least.Train == 0 || least.MaxDegree == 0 {
				t.Errorf("Least = %+v: nothing known", least)
			}
			if tc.exact && (got.Train != least.Train || got.Val != least.Val || got.Test != least.Test) {
				t.Errorf("splits %+v, Least says %+v: every node draws a partner", got, least)
			}
			if tc.nodes == 5 && got.MaxDegree != least.MaxDegree {
				t.Errorf("the complete graph's degree %d, Least says %d", got.MaxDegree, least.MaxDegree)
			}
		})
	}
}
