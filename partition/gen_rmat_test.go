package partition

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func genTestRMAT(t testing.TB, cfg RMATConfig) *Graph {
	t.Helper()
	g, err := RMAT(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestRMATCounts(t *testing.T) {
	for _, tc := range []struct {
		nodes      int
		edges      int64
		undirected bool
	}{
		{1, 10, false},
		{2, 100, true},
		{1000, 20_000, false}, // not a power of two
		{1025, 20_000, true},  // just above one: most walks land beyond and are redrawn
		{1 << 12, 70_000, false},
		{500, 0, false},
	} {
		t.Run(fmt.Sprintf("n=%d/e=%d/undirected=%v", tc.nodes, tc.edges, tc.undirected), func(t *testing.T) {
			cfg := DefaultRMATConfig()
			cfg.Nodes, cfg.Edges, cfg.Undirected, cfg.FeatDim, cfg.Classes = tc.nodes, tc.edges, tc.undirected, 3, 5
			g := genTestRMAT(t, cfg)
			want := tc.edges
			if tc.undirected {
				want *= 2
			}
			if int64(len(g.Src)) != want || len(g.Dst) != len(g.Src) || g.Stats.EdgesRead != want {
				t.Fatalf("edges %d/%d, EdgesRead %d, want %d", len(g.Src), len(g.Dst), g.Stats.EdgesRead, want)
			}
			loops := int64(0)
			for e := range g.Src {
				if int(g.Src[e]) >= tc.nodes || int(g.Dst[e]) >= tc.nodes {
					t.Fatalf("edge %d: %d -> %d, nodes %d", e, g.Src[e], g.Dst[e], tc.nodes)
				}
				if g.Src[e] == g.Dst[e] {
					loops++
				}
				if tc.undirected && e%2 == 1 && (g.Src[e] != g.Dst[e-1] || g.Dst[e] != g.Src[e-1]) {
					t.Fatalf("edge %d is not the reverse of %d", e, e-1)
				}
			}
			if loops != g.Stats.SelfLoops {
				t.Errorf("Stats.SelfLoops = %d, counted %d", g.Stats.SelfLoops, loops)
			}
			if g.NumNodes != tc.nodes || len(g.Labels) != tc.nodes || len(g.Feat) != 3*tc.nodes {
				t.Errorf("nodes %d, labels %d, feat %d", g.NumNodes, len(g.Labels), len(g.Feat))
			}
			for _, l := range g.Labels {
				if l < 0 || l >= 5 {
					t.Fatalf("label %d out of 0..4", l)
				}
			}
		})
	}
}

// TestRMATDegrees checks the heavy tail and the scrambling on 2^16 nodes:
// the largest degree is far above the mean, and degree is not correlated
// with the node id (unscrambled R-MAT puts the hubs at the lowest ids).
func TestRMATDegrees(t *testing.T) {
	cfg := DefaultRMATConfig()
	cfg.Nodes, cfg.Edges, cfg.FeatDim, cfg.Classes = 1<<16, 1<<19, 0, 0
	g := genTestRMAT(t, cfg)
	deg := make([]float64, g.NumNodes)
	for e := range g.Src {
		deg[g.Src[e]]++
		deg[g.Dst[e]]++
	}
	mean := 2 * float64(len(g.Src)) / float64(g.NumNodes)
	maxDeg := slices.Max(deg)
	t.Logf("mean degree %.1f, max %.0f, self loops %d", mean, maxDeg, g.Stats.SelfLoops)
	if maxDeg < 20*mean {
		t.Errorf("max degree %.0f < 20 x mean %.1f", maxDeg, mean)
	}
	ids := make([]float64, g.NumNodes)
	for i := range ids {
		ids[i] = float64(i)
	}
	if r := genPearson(ids, deg); math.Abs(r) > 0.03 {
		t.Errorf("correlation of id and degree %.3f, want |r| <= 0.03", r)
	}
	// Without the permutation the same walk is strongly correlated, so the
	// check above has power.
	unscrambled := make([]float64, g.NumNodes)
	thr := rmatThresholds(cfg.withDefaults())
	pcg := genPCG(1, 99, 0)
	for range 1 << 19 {
		u, v, _ := rmatPair(pcg, thr)
		unscrambled[u]++
		unscrambled[v]++
	}
	if r := genPearson(ids, unscrambled); r > -0.1 {
		t.Errorf("unscrambled correlation %.3f, want < -0.1", r)
	}
}

func genPearson(x, y []float64) float64 {
	n := float64(len(x))
	var sx, sy, sxx, syy, sxy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
		sxx += x[i] * x[i]
		syy += y[i] * y[i]
		sxy += x[i] * y[i]
	}
	return (sxy - sx*sy/n) / math.Sqrt((sxx-sx*sx/n)*(syy-sy*sy/n))
}

func TestRMATDeterministic(t *testing.T) {
	gen := func(seed uint64, workers int) *Graph {
		cfg := DefaultRMATConfig()
		cfg.Nodes, cfg.Edges, cfg.FeatDim, cfg.Classes = 3000, 3*rmatChunk+17, 4, 3
		cfg.Seed, cfg.Workers = seed, workers
		return genTestRMAT(t, cfg)
	}
	a, b, c := gen(7, 1), gen(7, 2), gen(8, 2)
	if !genSameGraph(a, b) {
		t.Error("seed 7: 1 and 2 workers differ")
	}
	if genSameGraph(a, c) {
		t.Error("seeds 7 and 8 give the same graph")
	}
}

func genSameGraph(a, b *Graph) bool {
	return a.NumNodes == b.NumNodes && slices.Equal(a.Src, b.Src) && slices.Equal(a.Dst, b.Dst) &&
		slices.Equal(a.Feat, b.Feat) && slices.Equal(a.Labels, b.Labels) &&
		slices.Equal(a.Train, b.Train) && slices.Equal(a.Val, b.Val) && slices.Equal(a.Test, b.Test) &&
		a.Stats == b.Stats
}

// TestRMATFeatures checks that labels are learnable from the features.
func TestRMATFeatures(t *testing.T) {
	cfg := DefaultRMATConfig()
	cfg.Nodes, cfg.Edges, cfg.FeatDim, cfg.Classes = 4000, 40_000, 16, 8
	g := genTestRMAT(t, cfg)
	if acc := genCentroidAccuracy(g, g.Feat); acc < 0.9 {
		t.Errorf("nearest-centroid accuracy %.3f, want >= 0.9", acc)
	}
}

func TestRMATSplits(t *testing.T) {
	cfg := DefaultRMATConfig()
	cfg.Nodes, cfg.Edges, cfg.FeatDim = 1<<14, 1<<15, 0
	g := genTestRMAT(t, cfg)
	active := len(genNonIsolated(g))
	if active > g.NumNodes*9/10 {
		t.Fatalf("%d of %d nodes have edges; the test wants isolated ones", active, g.NumNodes)
	}
	genCheckSplits(t, g, active, 0.1, 0.05, 0.05)
}

// genCheckSplits asserts sizes floor(frac*active), sorted, disjoint, and only
// nodes with edges.
func genCheckSplits(t *testing.T, g *Graph, active int, train, val, test float64) {
	t.Helper()
	deg := make([]int, g.NumNodes)
	for e := range g.Src {
		deg[g.Src[e]]++
		deg[g.Dst[e]]++
	}
	seen := make(map[uint32]string)
	for _, s := range []struct {
		name string
		ids  []uint32
		frac float64
	}{{"train", g.Train, train}, {"val", g.Val, val}, {"test", g.Test, test}} {
		if want := int(s.frac * float64(active)); len(s.ids) != want {
			t.Errorf("%s: %d nodes, want %d", s.name, len(s.ids), want)
		}
		if !slices.IsSorted(s.ids) {
			t.Errorf("%s not sorted", s.name)
		}
		for _, u := range s.ids {
			if other, ok := seen[u]; ok {
				t.Fatalf("node %d in %s and %s", u, other, s.name)
			}
			seen[u] = s.name
			if deg[u] == 0 {
				t.Fatalf("%s holds isolated node %d", s.name, u)
			}
		}
	}
}

func TestRMATConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  RMATConfig
		want []string
	}{
		{RMATConfig{Nodes: 0, Edges: -1}, []string{"partition: rmat: nodes = 0", "edges = -1"}},
		{RMATConfig{Nodes: 8, A: 0.6, B: 0.3, C: 0.3}, []string{"a, b, c"}},
		{RMATConfig{Nodes: 8, Noise: 0.5}, []string{"noise = 0.5"}},
		{RMATConfig{Nodes: 8, FeatDim: -2, Classes: -1, TestFrac: 2}, []string{"feat dim = -2", "classes = -1", "fractions"}},
		// NaN fails every check (it passed them, then panicked).
		{RMATConfig{Nodes: 8, TrainFrac: math.NaN()}, []string{"fractions = NaN"}},
		{RMATConfig{Nodes: 8, A: math.NaN(), B: 0.2, C: 0.2}, []string{"a, b, c = NaN"}},
		{RMATConfig{Nodes: 8, Noise: math.NaN()}, []string{"noise = NaN"}},
		{RMATConfig{Nodes: 8, FeatDim: MaxGenFeatDim + 1}, []string{"feat dim = 1048577: want 0..1048576"}},
		// Labels are int32: 5e9 classes made negative labels ("nan").
		{RMATConfig{Nodes: 8, Classes: 5_000_000_000}, []string{"classes = 5000000000: want 0..2147483647 (labels are int32)"}},
		{RMATConfig{Nodes: 8, Workers: MaxGenWorkers + 1}, []string{"workers = 257: want 0 (all CPUs, at most 256) to 256"}},
	} {
		err := tc.cfg.Validate()
		if err == nil {
			t.Errorf("%+v: no error", tc.cfg)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	}
}

// TestRMATWalksEnd: parameters under which no walk ends below the node
// count (quadrant A never drawn, 3 nodes) fail after a bounded number of
// walks, naming them; they looped for ever, deaf to cancellation.
func TestRMATWalksEnd(t *testing.T) {
	cfg := RMATConfig{Nodes: 3, Edges: 10, A: 0, B: 0, C: 1e-9, Noise: 0, Seed: 1, Workers: 1}
	_, err := RMAT(context.Background(), cfg, nil)
	if want := "after 16777216 walks not one pair of ids fell below the 3 nodes"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("RMAT of a = 0 on 3 nodes: %v, want %q", err, want)
	}
}

func TestRMATProgress(t *testing.T) {
	cfg := DefaultRMATConfig()
	cfg.Nodes, cfg.Edges, cfg.FeatDim = 1000, 5*rmatChunk, 2
	last := map[string]int64{}
	_, err := RMAT(context.Background(), cfg, func(stage string, done, total int64) {
		if done < last[stage] {
			t.Errorf("%s went back from %d to %d", stage, last[stage], done)
		}
		last[stage] = done
	})
	if err != nil {
		t.Fatal(err)
	}
	if last["rmat edges"] != cfg.Edges || last["features"] != 1000 {
		t.Errorf("last reports %v", last)
	}
}

func BenchmarkRMAT(b *testing.B) {
	for _, nodes := range []int{1 << 16, 1 << 20} {
		b.Run(fmt.Sprintf("nodes=%d/edges=%d", nodes, 16*nodes), func(b *testing.B) {
			cfg := DefaultRMATConfig()
			cfg.Nodes, cfg.Edges, cfg.FeatDim, cfg.Classes = nodes, int64(16*nodes), 0, 0
			b.ReportAllocs()
			b.SetBytes(8 * cfg.Edges)
			for b.Loop() {
				genTestRMAT(b, cfg)
			}
			b.ReportMetric(float64(cfg.Edges)*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
		})
	}
}
