package partition

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
)

// RMATConfig configures the R-MAT generator (Chakrabarti, Zhan, Faloutsos
// 2004) as Graph500 uses it. DefaultRMATConfig gives the values the CLI
// starts from.
type RMATConfig struct {
	Nodes int   // node count, any value >= 1 (not necessarily a power of two)
	Edges int64 // generated pairs; see Undirected

	// A, B and C are the quadrant probabilities (D = 1-A-B-C). All three
	// zero selects Graph500's 0.57, 0.19, 0.19.
	A, B, C float64
	// Noise is the per-level noise of Seshadhri, Pinar and Kolda's "noisy
	// SKG": level l draws mu_l uniformly in [-Noise, Noise] and uses
	// A-2mu*A/(A+D), B+mu, C+mu, D-2mu*D/(A+D), which smooths the
	// staircase of plain R-MAT degree distributions. 0 turns it off; 0.1 is
	// the value the paper recommends and the CLI default.
	Noise float64

	FeatDim int // float32 features per node; 0 = none
	Classes int // label classes; 0 = no labels

	// TrainFrac, ValFrac and TestFrac are fractions of the non-isolated
	// nodes (R-MAT leaves many nodes without edges). All three zero selects
	// 0.1, 0.05, 0.05.
	TrainFrac, ValFrac, TestFrac float64

	// Undirected makes every generated pair add both directions, so Edges
	// counts undirected edges and the graph holds 2*Edges directed edges.
	Undirected bool

	Seed    uint64
	Workers int // goroutines; 0 = GOMAXPROCS, at most MaxGenWorkers. The graph does not depend on it.
}

// DefaultRMATConfig is a small R-MAT graph with the Graph500 parameters,
// noise on, 100 features and 47 classes (the shape of ogbn-products).
func DefaultRMATConfig() RMATConfig {
	return RMATConfig{
		Nodes: 1 << 16, Edges: 1 << 20,
		A: 0.57, B: 0.19, C: 0.19, Noise: 0.1,
		FeatDim: 100, Classes: 47,
		TrainFrac: 0.1, ValFrac: 0.05, TestFrac: 0.05,
		Seed: 1,
	}
}

// withDefaults fills the fields whose zero value means "default".
func (c RMATConfig) withDefaults() RMATConfig {
	if c.A == 0 && c.B == 0 && c.C == 0 {
		c.A, c.B, c.C = 0.57, 0.19, 0.19
	}
	if c.TrainFrac == 0 && c.ValFrac == 0 && c.TestFrac == 0 {
		c.TrainFrac, c.ValFrac, c.TestFrac = 0.1, 0.05, 0.05
	}
	if c.Workers <= 0 {
		c.Workers = min(runtime.GOMAXPROCS(0), MaxGenWorkers)
	}
	return c
}

// MaxGenWorkers bounds the goroutines of the generators and of WriteOGB:
// more than any machine has cores to run, and each writer goroutine keeps
// two formatted chunks (megabytes each) in flight, so that 100 million of
// them went to the kernel's OOM killer (or the runtime's "out of memory"
// crash) instead of writing.
const MaxGenWorkers = 256

// checkGenWorkers is the Validate problem of a Workers field, "" if none.
func checkGenWorkers(workers int) string {
	if workers > MaxGenWorkers {
		return fmt.Sprintf("workers = %d: want 0 (all CPUs, at most %d) to %d", workers, MaxGenWorkers, MaxGenWorkers)
	}
	return ""
}

// Validate reports every bad field of c (after defaults), joined.
func (c RMATConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("partition: rmat: "+format, args...))
	}
	if c.Nodes < 1 || uint64(c.Nodes) > math.MaxUint32 {
		bad("nodes = %d: want 1..%d", c.Nodes, uint64(math.MaxUint32))
	}
	maxEdges := int64(math.MaxInt32) * 8 // far beyond memory; keeps 2*Edges in int
	if c.Edges < 0 || c.Edges > maxEdges {
		bad("edges = %d: want 0..%d", c.Edges, maxEdges)
	}
	// Checks are written so that NaN fails them.
	d := 1 - c.A - c.B - c.C
	if !(c.A >= 0 && c.B >= 0 && c.C >= 0 && d >= -1e-9) {
		bad("a, b, c = %g, %g, %g: want non-negative with a+b+c <= 1", c.A, c.B, c.C)
	} else if lim := math.Min(math.Min(c.B, c.C), (c.A+d)/2); !(c.Noise >= 0 && c.Noise <= lim) {
		bad("noise = %g: want 0..%g (min of b, c, (a+d)/2)", c.Noise, lim)
	}
	if c.FeatDim < 0 || c.FeatDim > MaxGenFeatDim {
		bad("feat dim = %d: want 0..%d", c.FeatDim, MaxGenFeatDim)
	}
	// Labels are int32 (Graph.Labels): 5e9 classes wrapped to negative
	// labels, which read as missing ("nan").
	if c.Classes < 0 || c.Classes > math.MaxInt32 {
		bad("classes = %d: want 0..%d (labels are int32)", c.Classes, math.MaxInt32)
	}
	if p := checkGenWorkers(c.Workers); p != "" {
		bad("%s", p)
	}
	errs = append(errs, genCheckFracs("rmat", c.TrainFrac, c.ValFrac, c.TestFrac)...)
	return errors.Join(errs...)
}

// rmatChunk is the number of pairs one RNG stream generates. It fixes the
// graph for a seed whatever the number of workers.
const rmatChunk = 1 << 16

// RNG streams of the generators: each (seed, stream, index) gets its own.
const (
	streamEdges uint64 = iota + 1
	streamPerm
	streamNoise
	streamCentroid
	streamFeat
	streamSplit
	streamLabel
	streamRedraw
)

// RMAT generates an R-MAT graph. Each pair walks ceil(log2 Nodes) levels
// of the quadrant recursion; a pair with an endpoint >= Nodes is redrawn,
// and the walk's ids are then mapped through a seeded pseudo-random
// permutation of 0..Nodes-1 (a hash bijection, as Graph500 scrambles
// them) so that ids carry no degree locality. Pairs are generated in
// chunks of rmatChunk, chunk k from its own stream (Seed, k), so the graph
// depends on the seed only. Self loops and duplicate edges are kept (Clean
// applies policies); self loops are counted in Stats.
//
// Labels are a hash of (seed, node) modulo Classes; features are the
// class's random centroid plus unit Gaussian noise, so a model can learn
// labels from features although the structure carries no class signal.
// Splits draw from the non-isolated nodes.
func RMAT(ctx context.Context, cfg RMATConfig, progress Progress) (*Graph, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n := cfg.Nodes
	pairs := cfg.Edges
	stride := int64(1)
	if cfg.Undirected {
		stride = 2
	}
	g := &Graph{
		Name:     "rmat",
		NumNodes: n,
		Src:      make([]uint32, pairs*stride),
		Dst:      make([]uint32, pairs*stride),
	}
	thr := rmatThresholds(cfg)
	scramble := newRMATScramble(n, cfg.Seed)

	rep := &genReporter{p: progress}
	var done, loops atomic.Int64
	chunks := int((pairs + rmatChunk - 1) / rmatChunk)
	err := genParallel(ctx, cfg.Workers, chunks, func(c int) error {
		lo := int64(c) * rmatChunk
		hi := min(lo+rmatChunk, pairs)
		pcg := genPCG(cfg.Seed, streamEdges, uint64(c))
		var selfLoops int64
		for i := lo; i < hi; i++ {
			u, v, ok := rmatPair(pcg, thr)
			if !ok {
				return fmt.Errorf("partition: rmat: a, b, c = %g, %g, %g (noise %g): after %d walks not one pair of ids fell below the %d nodes; raise a, or take a power of two nodes",
					cfg.A, cfg.B, cfg.C, cfg.Noise, rmatMaxWalks, n)
			}
			u, v = scramble.apply(u), scramble.apply(v)
			if u == v {
				selfLoops += stride
			}
			j := i * stride
			g.Src[j], g.Dst[j] = u, v
			if stride == 2 {
				g.Src[j+1], g.Dst[j+1] = v, u
			}
		}
		loops.Add(selfLoops)
		rep.report("rmat edges", done.Add(hi-lo), pairs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	g.Stats.EdgesRead = int64(len(g.Src))
	g.Stats.SelfLoops = loops.Load()

	if cfg.Classes > 0 {
		g.LabelDim, g.NumClasses = 1, cfg.Classes
		g.Labels = make([]int32, n)
		for i := range g.Labels {
			g.Labels[i] = int32(genMix(cfg.Seed^streamLabel, uint64(i)) % uint64(cfg.Classes))
		}
	}
	if err := genFeatures(ctx, g, cfg.FeatDim, 1, 1, cfg.Seed, cfg.Workers, rep); err != nil {
		return nil, err
	}
	genSplits(g, genNonIsolated(g), cfg.TrainFrac, cfg.ValFrac, cfg.TestFrac, cfg.Seed)
	return g, nil
}

// rmatLevels is ceil(log2 n), the depth of the quadrant recursion.
func rmatLevels(n int) int { return bits.Len(uint(n - 1)) }

// rmatLevel is one level of the walk: the cumulative quadrant
// probabilities quantised to 16 bits (so that one 64-bit draw serves four
// levels; the resolution, 1.5e-5, is far below the noise the parameters
// are chosen with), and the largest id prefix that can still end below n.
type rmatLevel struct {
	t   [3]uint32
	lim uint32
}

func rmatThresholds(cfg RMATConfig) []rmatLevel {
	levels := rmatLevels(cfg.Nodes)
	thr := make([]rmatLevel, levels)
	noise := genRand(cfg.Seed, streamNoise, 0)
	a, b, c := cfg.A, cfg.B, cfg.C
	d := max(0, 1-a-b-c)
	q := func(p float64) uint32 { return uint32(math.Round(min(1, max(0, p)) * 65536)) }
	for l := range thr {
		la, lb, lc := a, b, c
		if cfg.Noise > 0 && a+d > 0 {
			mu := cfg.Noise * (2*noise.Float64() - 1)
			la = a - 2*mu*a/(a+d)
			lb, lc = b+mu, c+mu
		}
		thr[l] = rmatLevel{
			t:   [3]uint32{q(la), q(la + lb), q(la + lb + lc)},
			lim: uint32((cfg.Nodes - 1) >> (levels - 1 - l)),
		}
	}
	return thr
}

// rmatMaxWalks bounds the walks of one pair: parameters under which
// almost every walk leaves the n nodes (quadrant A, the only one always
// inside, near 0, and n not a power of two) would otherwise loop for ever,
// deaf to cancellation. Parameters anyone generates with need a handful.
const rmatMaxWalks = 1 << 24

// rmatPair walks the quadrant recursion until both ends fall below n,
// starting over as soon as a prefix is too large, at most rmatMaxWalks
// times (ok false). The quadrant choice is branch-free: a branch per
// level would be mispredicted half the time and cost more than the random
// numbers.
func rmatPair(pcg *rand.PCG, thr []rmatLevel) (u, v uint32, ok bool) {
	walks := 0
walk:
	for {
		if walks++; walks > rmatMaxWalks {
			return 0, 0, false
		}
		u, v = 0, 0
		var r uint64
		left := 0
		for l := range thr {
			if left == 0 {
				r, left = pcg.Uint64(), 4
			}
			x := uint32(r & 0xffff)
			r >>= 16
			left--
			t := &thr[l].t
			// ge_k is 1 when x >= t[k]: t[k]-x-1 wraps around exactly then
			// (both are at most 65536).
			ge0 := (t[0] - x - 1) >> 31
			ge1 := (t[1] - x - 1) >> 31
			ge2 := (t[2] - x - 1) >> 31
			// A: 000, B: 100, C: 110, D: 111 -> src bit ge1, dst bit ge0^ge1^ge2.
			u = u<<1 | ge1
			v = v<<1 | ge0 ^ ge1 ^ ge2
			if u > thr[l].lim || v > thr[l].lim {
				continue walk
			}
		}
		return u, v, true
	}
}

// genMix is SplitMix64's finaliser over a^b: a cheap, well-mixed hash.
func genMix(a, b uint64) uint64 {
	z := a ^ (b + 0x9e3779b97f4a7c15)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// genPCG is the PCG stream of (seed, stream, index); distinct triples give
// unrelated streams.
func genPCG(seed, stream, index uint64) *rand.PCG {
	return rand.NewPCG(genMix(seed, stream), genMix(genMix(seed, ^stream), index))
}

func genRand(seed, stream, index uint64) *rand.Rand {
	return rand.New(genPCG(seed, stream, index))
}

// rmatScramble is a seeded bijection of 0..n-1: three rounds of multiply
// by an odd constant and xor-shift, each a bijection of the L-bit words
// (L = ceil(log2 n)), with cycle walking to stay below n (fewer than two
// steps on average since 2^L < 2n). Unlike a permutation table it costs
// no memory and no cache miss per edge, which doubled generation speed on
// 2^20 nodes.
type rmatScramble struct {
	n, mask uint64
	shift   uint
	mul     [3]uint64
	add     [3]uint64
}

func newRMATScramble(n int, seed uint64) rmatScramble {
	levels := rmatLevels(n)
	s := rmatScramble{n: uint64(n), mask: 1<<levels - 1, shift: uint(max(1, (levels+1)/2))}
	r := genPCG(seed, streamPerm, 0)
	for i := range s.mul {
		s.mul[i] = r.Uint64() | 1
		s.add[i] = r.Uint64()
	}
	return s
}

func (s rmatScramble) apply(x uint32) uint32 {
	y := uint64(x)
	for {
		for i := range s.mul {
			y = (y*s.mul[i] + s.add[i]) & s.mask
			y ^= y >> s.shift
		}
		if y < s.n {
			return uint32(y)
		}
	}
}

// genParallel runs fn(0..n-1) on workers goroutines, each taking the next
// index, checking ctx between indices. It returns the first error.
func genParallel(ctx context.Context, workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range min(workers, max(n, 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				err := ctx.Err()
				if err == nil {
					err = fn(i)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// genReporter serialises progress reports from several workers and keeps
// each stage's count from going backwards when workers finish out of order.
type genReporter struct {
	p  Progress
	mu sync.Mutex
	// guarded by mu
	stage string
	last  int64
}

func (r *genReporter) report(stage string, done, total int64) {
	if r.p == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if stage != r.stage {
		r.stage, r.last = stage, 0
	}
	if done < r.last {
		return
	}
	r.last = done
	r.p(stage, done, total)
}
