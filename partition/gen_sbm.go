package partition

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
)

// SBMConfig configures the stochastic block model generator: Blocks equal
// communities that are also the label classes, edges that stay inside
// their block with probability Homophily, and features that are a noisy
// block centroid. Zero fields other than FeatDim, Seed and Workers select
// the DefaultSBMConfig value.
//
// The defaults make a node-classification task that needs the structure:
// with 16 blocks, 64 features, Signal 0.2 and Noise 1, nearest-centroid
// accuracy on a node's own features is about 0.39 (chance 0.0625), and on
// the mean of its ~20 neighbours' features, half of them in its block,
// about 0.82 (TestSBMFeatures measures both); a 2-layer GraphSAGE, which
// combines the two over two hops, ends well above chance and short of
// 1.0. Raise Signal to make features alone sufficient, raise Homophily to
// make the structure almost give the answer away (0.7: 0.97), lower it to
// take its help away (1/Blocks: none).
type SBMConfig struct {
	Nodes  int // default 200,000
	Blocks int // communities = classes; default 16

	// AvgDegree is the mean number of directed edges per node (default
	// 20), at most Nodes-1 (the complete graph). Every node draws
	// AvgDegree/2 partners and each draw adds both directions, so the
	// graph is undirected by construction; no pair is drawn twice.
	AvgDegree float64
	// Homophily is the probability that a draw stays in the node's block
	// (default 0.5); the other draws pick one of the other blocks
	// uniformly. It is then also the expected fraction of intra-block
	// edges.
	Homophily float64

	FeatDim int     // float32 features per node; 0 = none (the CLI uses 64)
	Signal  float64 // standard deviation of the block centroids' entries; default 0.2
	Noise   float64 // standard deviation of the per-node noise; default 1

	// TrainFrac, ValFrac and TestFrac are fractions of the non-isolated
	// nodes; all three zero selects 0.1, 0.05, 0.05.
	TrainFrac, ValFrac, TestFrac float64

	Seed    uint64
	Workers int // goroutines; 0 = GOMAXPROCS, at most MaxGenWorkers. The graph does not depend on it.

	// Exact takes every field as given, zero included (the CLI, whose
	// flags start at DefaultSBMConfig's values): otherwise a zero field
	// stands for its default, and homophily, signal or noise 0 cannot be
	// asked for.
	Exact bool
}

// DefaultSBMConfig is the demo graph: 200k nodes, 16 blocks, degree 20,
// homophily 0.5, 64 features, signal 0.2, noise 1.
func DefaultSBMConfig() SBMConfig {
	return SBMConfig{
		Nodes: 200_000, Blocks: 16, AvgDegree: 20, Homophily: 0.5,
		FeatDim: 64, Signal: 0.2, Noise: 1,
		TrainFrac: 0.1, ValFrac: 0.05, TestFrac: 0.05,
		Seed: 1,
	}
}

func (c SBMConfig) withDefaults() SBMConfig {
	if c.Workers <= 0 {
		c.Workers = RMATConfig{}.withDefaults().Workers
	}
	if c.Exact {
		return c
	}
	d := DefaultSBMConfig()
	for _, f := range []struct{ v, d *float64 }{
		{&c.AvgDegree, &d.AvgDegree}, {&c.Homophily, &d.Homophily},
		{&c.Signal, &d.Signal}, {&c.Noise, &d.Noise},
	} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	if c.Blocks == 0 {
		c.Blocks = d.Blocks
	}
	if c.TrainFrac == 0 && c.ValFrac == 0 && c.TestFrac == 0 {
		c.TrainFrac, c.ValFrac, c.TestFrac = d.TrainFrac, d.ValFrac, d.TestFrac
	}
	return c
}

// Validate reports every bad field of c (after defaults), joined.
func (c SBMConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("partition: sbm: "+format, args...))
	}
	if c.Nodes < 2 || uint64(c.Nodes) > math.MaxUint32 {
		bad("nodes = %d: want 2..%d", c.Nodes, uint64(math.MaxUint32))
	}
	if c.Blocks < 1 || c.Blocks > c.Nodes/2 {
		bad("blocks = %d: want 1..nodes/2 (%d) so that every block has two nodes", c.Blocks, c.Nodes/2)
	}
	// Checks are written so that NaN fails them.
	if !(c.AvgDegree >= 0 && c.AvgDegree <= 1e6) {
		bad("avg degree = %g: want 0..1e6", c.AvgDegree)
	} else if c.Nodes >= 2 && c.AvgDegree > float64(c.Nodes-1) {
		// More pairs than a simple graph holds: the draws repeated pairs
		// that the partitioner drops.
		bad("avg degree = %g with %d nodes: want at most nodes-1 = %d, the complete graph", c.AvgDegree, c.Nodes, c.Nodes-1)
	}
	if !(c.Homophily >= 0 && c.Homophily <= 1) {
		bad("homophily = %g: want 0..1", c.Homophily)
	}
	if c.FeatDim < 0 || c.FeatDim > MaxGenFeatDim {
		bad("feat dim = %d: want 0..%d", c.FeatDim, MaxGenFeatDim)
	}
	if !(c.Signal >= 0 && c.Noise >= 0 && !math.IsInf(c.Signal, 0) && !math.IsInf(c.Noise, 0)) {
		bad("signal, noise = %g, %g: want finite and >= 0", c.Signal, c.Noise)
	}
	if p := checkGenWorkers(c.Workers); p != "" {
		bad("%s", p)
	}
	errs = append(errs, genCheckFracs("sbm", c.TrainFrac, c.ValFrac, c.TestFrac)...)
	return errors.Join(errs...)
}

// SBMLeast is what every graph SBM generates from a config holds at
// least, known before it is drawn (SBMConfig.Least).
type SBMLeast struct {
	MaxDegree        int // of the graph, in edges either way (no less than the mean)
	Train, Val, Test int // nodes of each split
}

// Least is what every graph SBM generates from c holds at least: a
// caller that must not wait for the graph (node demo's check of its
// rings, which batches of the largest degree and splits fill) refuses on
// it only what would be refused once the graph is drawn. The splits are
// fractions of the non-isolated nodes, among them every node that draws
// a partner: all of them from a mean degree of 2, else one a pair. No
// pair is drawn twice nor is a loop, so the degrees add up to twice the
// pairs. c must be valid.
func (c SBMConfig) Least() SBMLeast {
	c = c.withDefaults()
	n := int64(c.Nodes)
	pairs := int64(math.Floor(float64(c.Nodes) * (c.AvgDegree / 2))) // as SBM's pairOff(n)
	drawers := float64(min(n, pairs))
	return SBMLeast{
		MaxDegree: int((2*pairs + n - 1) / n),
		// As genSplits takes them: each of the same count of candidates.
		Train: int(c.TrainFrac * drawers), Val: int(c.ValFrac * drawers), Test: int(c.TestFrac * drawers),
	}
}

// sbmChunk is the number of nodes whose draws share one RNG stream.
const sbmChunk = 4096

// SBM generates a stochastic block model graph in O(edges): node u draws
// floor((u+1)m)-floor(um) partners (m = AvgDegree/2, so the total is
// exactly floor(Nodes*m) pairs), each in u's block with probability
// Homophily (never u itself) and otherwise uniformly in another block, and
// every pair adds both directions. No pair is drawn twice: a draw that
// repeats an earlier pair is drawn again (sbmDistinct), so the graph has
// exactly that many distinct pairs. Blocks are equal-sized and assigned by
// a seeded shuffle, so ids carry no block locality. Labels are the blocks.
func SBM(ctx context.Context, cfg SBMConfig, progress Progress) (*Graph, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n, nb := cfg.Nodes, cfg.Blocks
	m := cfg.AvgDegree / 2
	pairOff := func(u int) int64 { return int64(math.Floor(float64(u) * m)) }
	pairs := pairOff(n)

	g := &Graph{
		Name: "sbm", NumNodes: n,
		Src: make([]uint32, 2*pairs), Dst: make([]uint32, 2*pairs),
		LabelDim: 1, NumClasses: nb, Labels: make([]int32, n),
	}
	lr := genRand(cfg.Seed, streamLabel, 0)
	for i := range g.Labels {
		g.Labels[i] = int32(i % nb)
	}
	lr.Shuffle(n, func(i, j int) { g.Labels[i], g.Labels[j] = g.Labels[j], g.Labels[i] })
	// members[start[b]:start[b+1]] are block b's nodes.
	start := make([]int, nb+1)
	for _, b := range g.Labels {
		start[b+1]++
	}
	for b := range nb {
		start[b+1] += start[b]
	}
	members := make([]uint32, n)
	fill := slices.Clone(start[:nb])
	for u, b := range g.Labels {
		members[fill[b]] = uint32(u)
		fill[b]++
	}

	model := &sbmModel{labels: g.Labels, members: members, start: start, homophily: cfg.Homophily}
	rep := &genReporter{p: progress}
	var done atomic.Int64
	chunks := (n + sbmChunk - 1) / sbmChunk
	err := genParallel(ctx, cfg.Workers, chunks, func(c int) error {
		r := genRand(cfg.Seed, streamEdges, uint64(c))
		lo, hi := c*sbmChunk, min((c+1)*sbmChunk, n)
		p := pairOff(lo)
		for u := lo; u < hi; u++ {
			for end := pairOff(u + 1); p < end; p++ {
				v := model.partner(r, u)
				g.Src[2*p], g.Dst[2*p] = uint32(u), v
				g.Src[2*p+1], g.Dst[2*p+1] = v, uint32(u)
			}
		}
		rep.report("sbm edges", done.Add(2*(p-pairOff(lo))), 2*pairs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := sbmDistinct(ctx, g, model, cfg.Seed, cfg.Workers); err != nil {
		return nil, err
	}
	g.Stats.EdgesRead = int64(len(g.Src))
	if err := genFeatures(ctx, g, cfg.FeatDim, cfg.Signal, cfg.Noise, cfg.Seed, cfg.Workers, rep); err != nil {
		return nil, err
	}
	genSplits(g, genNonIsolated(g), cfg.TrainFrac, cfg.ValFrac, cfg.TestFrac, cfg.Seed)
	return g, nil
}

// genFeatRows is the number of feature rows one RNG stream fills.
const genFeatRows = 4096

// genFeatures fills g.Feat with dim floats per node: the node's class
// centroid (entries N(0, signal^2), drawn once per class) plus N(0,
// noise^2). Without labels every node uses centroid zero.
func genFeatures(ctx context.Context, g *Graph, dim int, signal, noise float64, seed uint64, workers int, rep *genReporter) error {
	if dim == 0 {
		return nil
	}
	classes := max(g.NumClasses, 1)
	cent := make([]float64, classes*dim)
	if g.Labels != nil {
		cr := genRand(seed, streamCentroid, 0)
		for i := range cent {
			cent[i] = signal * cr.NormFloat64()
		}
	}
	n := g.NumNodes
	g.FeatDim = dim
	g.Feat = make([]float32, n*dim)
	chunks := (n + genFeatRows - 1) / genFeatRows
	var done atomic.Int64
	return genParallel(ctx, workers, chunks, func(c int) error {
		r := genRand(seed, streamFeat, uint64(c))
		lo, hi := c*genFeatRows, min((c+1)*genFeatRows, n)
		for u := lo; u < hi; u++ {
			k := 0
			if g.Labels != nil && g.Labels[u*g.LabelDim] >= 0 {
				k = int(g.Labels[u*g.LabelDim])
			}
			ctr := cent[k*dim : (k+1)*dim]
			row := g.Feat[u*dim : (u+1)*dim]
			for j := range row {
				row[j] = float32(ctr[j] + noise*r.NormFloat64())
			}
		}
		rep.report("features", done.Add(int64(hi-lo)), int64(n))
		return nil
	})
}

// genNonIsolated lists, in order, the nodes with at least one edge.
func genNonIsolated(g *Graph) []uint32 {
	seen := make([]uint64, (g.NumNodes+63)/64)
	for _, ends := range [][]uint32{g.Src, g.Dst} {
		for _, u := range ends {
			seen[u>>6] |= 1 << (u & 63)
		}
	}
	var out []uint32
	for u := range g.NumNodes {
		if seen[u>>6]&(1<<(u&63)) != 0 {
			out = append(out, uint32(u))
		}
	}
	return out
}

// genSplits shuffles cand and takes the first floor(frac*len(cand)) nodes
// as train, the next as val, then test; each split is sorted.
func genSplits(g *Graph, cand []uint32, train, val, test float64, seed uint64) {
	r := genRand(seed, streamSplit, 0)
	r.Shuffle(len(cand), func(i, j int) { cand[i], cand[j] = cand[j], cand[i] })
	n := float64(len(cand))
	take := func(frac float64) []uint32 {
		k := int(frac * n)
		s := slices.Clone(cand[:k])
		cand = cand[k:]
		slices.Sort(s)
		return s
	}
	g.Train, g.Val, g.Test = take(train), take(val), take(test)
}

// MaxGenFeatDim bounds the generators' features per node: far beyond any
// model's input, and small enough that nodes × features cannot overflow.
const MaxGenFeatDim = 1 << 20

func genCheckFracs(kind string, train, val, test float64) []error {
	if !(train >= 0 && val >= 0 && test >= 0 && train+val+test <= 1+1e-9) { // NaN fails
		return []error{fmt.Errorf("partition: %s: train, val, test fractions = %g, %g, %g: want non-negative with sum <= 1", kind, train, val, test)}
	}
	return nil
}
