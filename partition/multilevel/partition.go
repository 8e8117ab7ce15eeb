package multilevel

// Multilevel partitioning, after Karypis and Kumar, "A Fast and High
// Quality Multilevel Scheme for Partitioning Irregular Graphs" (SISC
// 1998), "Multilevel k-way Partitioning Scheme for Irregular Graphs"
// (JPDC 1998) and, for several constraints, "Multilevel Algorithms for
// Multi-Constraint Graph Partitioning" (SC 1998), as METIS 5 implements
// them:
//
//  1. Bisect recursively. The input is split in two by a multilevel
//     bisection, each half again, k-1 bisections for k parts; a half of
//     k0 parts is given k0/k of every constraint.
//  2. Each bisection coarsens its graph: it repeatedly matches vertices
//     and contracts each pair into one vertex (weights add, parallel
//     edges merge and add their weights) until about 100 vertices remain
//     or a level keeps more than 90% of the vertices. The first level
//     (all edges weigh 1) matches at random; later levels visit vertices
//     in random order, low degree first, and pair each with the
//     unmatched neighbour across the heaviest edge (sorted heavy-edge
//     matching). When more than 10% stay unmatched — the leaves of a
//     hub in a power-law graph — 2-hop matching pairs vertices that
//     share a neighbour or their whole neighbourhood. No coarse vertex
//     passes 1.5 × total/coarsenTo in any constraint.
//  3. It grows 8 bisections of the coarsest graph breadth-first from
//     random seeds, refines each with FM and keeps the best, then
//     projects it back level by level with FM (Fiduccia–Mattheyses:
//     hill-climbing moves with rollback) on every level. Under several
//     constraints each side keeps a queue per constraint and a side past
//     its bound gives away vertices of the constraint it passes (see
//     mlFM). The bisection kept then meets a second candidate, the
//     vertices of highest degree against the rest, refined with FM on
//     the bisected graph itself: on power-law graphs core against
//     periphery cuts less than anything the hierarchy can draw (see
//     degreeSplit).
//  4. The k parts are refined once on the input with greedy k-way
//     boundary moves (METIS's Greedy_KWayOptimize) that keep every part
//     within its bound (see refineStrict): up to 10 passes, each taking
//     boundary vertices from a max-heap of ed−id and moving each to the
//     best-connected adjacent part for a non-negative gain.
//
// Hill-climbing FM with rollback on every level of the whole graph finds
// far smaller cuts on power-law graphs than the k-way scheme of METIS's
// kmetis (coarsen once, partition the coarsest graph, greedy k-way moves
// on the way up), and on the R-MAT and BlogCatalog graphs of perf/metis
// takes less time and memory, from 2 to 128 parts and under one, two or
// three constraints (see rbScheme). The two halves of a bisection are
// independent and, below 2^22 adjacency entries, run on two goroutines
// when a worker is free. Each bisection of an input under 2^15 entries
// keeps the best of several tries (Cora: 2), run concurrently while
// workers are free (see bisectBest): a try costs a fraction of a
// millisecond there and one unlucky bisection is a large share of a
// small cut. Larger inputs get one try: on BlogCatalog (668 k entries)
// four concurrent tries of the whole recursion took twice the wall time,
// four times the CPU time and 1.6 times the memory of one, for cuts
// within 1% of one try's.
//
// Time is O(E) per level and pass. On power-law graphs edges barely
// collapse (coarse vertices gather distinct neighbours), so every level
// costs about E; a bisection of n vertices has about log2(n/100) levels,
// and each vertex takes part in about log2 k bisections. Refinement
// passes touch boundary vertices only and, for k <= 16, k-way moves are
// weighed in O(k) from a per-vertex row of part connectivity.
//
// Memory: the input graph (4 bytes per adjacency entry and none for unit
// weights), the hierarchy (8 bytes per coarse adjacency entry; on
// power-law graphs each level is nearly as large as the input, so this
// dominates: 16 levels for 1 M vertices bisected down to 100), and per
// level being refined 16 bytes per vertex plus 4k bytes per vertex for
// k <= 16. Contraction writes each coarse row once into room for all
// its members' entries and closes the gaps afterwards; a level waiting
// for uncoarsening keeps its adjacency and edge weights packed (each
// array in the fewest whole bytes that hold its largest value: 3 + 1
// bytes per entry on the 1 M vertex R-MAT graph, 2 + 2 on BlogCatalog;
// see mlPacked), unpacked when its turn comes; coarse levels are dropped
// as soon as they are projected, and the subgraphs of recursive
// bisection keep unit weights implicit. The unpacked arrays of the
// levels go round a pool per goroutine (mlPool): the two pairs
// allocated for the first two levels of a bisection serve all of its
// later levels, so coarsening neither faults in fresh pages nor leaves
// garbage per level. While its arrays are small (below 1 MiB per kind)
// the pool keeps every array it is given, the offsets, vertex weights
// and maps of the levels and the subgraphs of recursive bisection
// included, so that on small graphs one hierarchy's arrays serve every
// later bisection and try (Cora into 8 parts allocated 2.8 MB, not 9.4,
// with 6 tries of the whole recursion; 1.6 MB now, with 2 per bisection).
// Matching, contraction slots, FM and k-way refinement state and
// projected assignments live in a scratch per goroutine, reused from
// level to level and bisection to bisection (graphs up to 2^18
// vertices; see mlScratch).
//
// Determinism: the assignment is a function of the graph, Parts,
// Imbalance and Seed. Random choices come from generators seeded by Seed
// and used by one goroutine each; the parallel steps (contraction,
// projection, degree computation, the tries of a bisection, the halves of a
// bisection, each with a generator drawn before it starts) write
// per-vertex or per-try results that do not depend on how work is split
// among Workers, so any Workers value gives the same assignment.

import (
	"context"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
)

// mlStream is the second PCG word of the multilevel generator.
const mlStream = 0x6d6c6b776179 // "mlkway"

// Bisections of an input with fewer than mlBisectTriesAdj/t adjacency
// entries keep the best of t tries (see bisectBest), t a power of two so
// that the tries fill two workers evenly, at most mlBisectMaxTries: the
// bisections of a small graph cost fractions of a millisecond each, and
// one unlucky bisection is a large share of a small cut. Cora (10556
// entries) gets 2: over seeds 1–100 it cuts 192 / 319 / 517 edges into 2
// / 4 / 8 parts on average, where one try cut 199 / 331 / 530 and
// gpmetis, over its seeds 1–60, 192 / 329 / 524. Larger inputs get one.
const (
	mlBisectMaxTries = 8
	mlBisectTriesAdj = 1 << 15
)

// Options configure Partition.
type Options struct {
	Parts int // number of parts, 1..NumVertices
	// Imbalance bounds every part's weight in every constraint at
	// Imbalance × total/Parts; 0 means 1.03 (METIS's default ufactor 30).
	Imbalance float64
	Seed      uint64
	Workers   int      // goroutines for the parallel steps; 0 = GOMAXPROCS
	Progress  Progress // stages StageBisect, StageRefine
}

// mlRun is one call of Partition: its context, generator and workers.
type mlRun struct {
	ctx      context.Context
	rng      *rand.PCG // the run's generator (a concrete source: shuffle draws from it in a loop)
	workers  int
	progress *mlProgress // the call's, shared by every run derived from it
	// share is the part of its bisections' units r credits to progress:
	// a try of a bisection among t credits 1/t.
	share float64
	ws    *mlScratch // nil until first use; see scratch
	tries int        // per bisection; see bisectBest
	// shared is the call's pool of idle workers and scratches; nil when
	// r's work runs on its goroutine alone.
	shared *mlShared
	// noScratch: r's graph has more than mlScratchMaxVertices vertices.
	noScratch bool
}

// newMLRun is a run with its own generator seeded by seed.
func newMLRun(ctx context.Context, seed uint64, workers int) *mlRun {
	return &mlRun{ctx: ctx, rng: rand.NewPCG(seed, mlStream), workers: workers, share: 1}
}

// shuffle permutes p uniformly at random (Fisher–Yates) from r's generator,
// two positions from each 64-bit draw, each bounded by a multiply and a
// shift (a bias below (i+1)/2^32, nothing at these sizes). rand.Shuffle
// calls a swap function and draws once per position with a rejection
// test: on Cora it took 86 of the 1430 µs of a bisection.
func (r *mlRun) shuffle(p []uint32) {
	i := len(p) - 1
	for ; i > 1; i -= 2 {
		x := r.rng.Uint64()
		j := int((x >> 32) * uint64(i+1) >> 32)
		p[i], p[j] = p[j], p[i]
		j = int((x & 0xffffffff) * uint64(i) >> 32)
		p[i-1], p[j] = p[j], p[i-1]
	}
	if i == 1 {
		j := int((r.rng.Uint64() >> 32) * 2 >> 32)
		p[1], p[j] = p[j], p[1]
	}
}

// mlShared is what the runs of one Partition call share: a token per
// worker busy with a half of the recursion or a try of a bisection
// besides the goroutine that started it, and the scratches such
// goroutines leave, for the next to start.
type mlShared struct {
	spare chan struct{}
	mu    sync.Mutex
	free  []*mlScratch
}

// takeScratch returns an idle scratch, or nil (the taker makes one).
func (sh *mlShared) takeScratch() *mlScratch {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.free) == 0 {
		return nil
	}
	ws := sh.free[len(sh.free)-1]
	sh.free = sh.free[:len(sh.free)-1]
	return ws
}

// spawn runs fn on another goroutine, counted in wg, when a worker is
// spare, and reports whether it did. fn gets an idle scratch (nil: it
// makes one) and returns the scratch it ended with, which is kept for
// the next goroutine; the worker is spare again when fn returns. A nil
// sh has no spare worker.
func (sh *mlShared) spawn(wg *sync.WaitGroup, fn func(ws *mlScratch) *mlScratch) bool {
	if sh == nil {
		return false
	}
	select {
	case sh.spare <- struct{}{}:
		wg.Go(func() {
			sh.putScratch(fn(sh.takeScratch()))
			<-sh.spare
		})
		return true
	default:
		return false
	}
}

// putScratch keeps ws for the next goroutine that starts.
func (sh *mlShared) putScratch(ws *mlScratch) {
	if ws == nil {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.free = append(sh.free, ws)
}

// Partition partitions g into opts.Parts parts with few cut edges and
// every constraint balanced within opts.Imbalance (see the algorithm at
// the top of this file). It returns the part of every vertex; every part
// is non-empty. Balance may be unattainable when single vertices are
// heavier than the slack; the result is then as balanced as the greedy
// moves could make it, and Measure reports it.
func Partition(ctx context.Context, g *Graph, opts Options) ([]uint32, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	n, k := g.NumVertices(), opts.Parts
	if k < 1 || k > n {
		return nil, errorOf(nil, itoa(k), " parts for ", itoa(n), " vertices: want 1..", itoa(n))
	}
	ub := opts.Imbalance
	if ub == 0 {
		ub = 1.03
	}
	if ub < 1 || math.IsNaN(ub) {
		return nil, errorOf(nil, "imbalance ", strconv.FormatFloat(opts.Imbalance, 'g', -1, 64), ": want >= 1")
	}
	r := newPartitionRun(ctx, g, opts)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if k == 1 {
		return make([]uint32, n), nil
	}
	where, err := r.rbScheme(g, k, ub)
	if err != nil {
		return nil, err
	}
	mlFillEmpty(g, where, k)
	return where, nil
}

// newPartitionRun is the run of a Partition call of g with opts (whose
// Parts is checked): its generator, workers, tries and progress.
func newPartitionRun(ctx context.Context, g *Graph, opts Options) *mlRun {
	r := newMLRun(ctx, opts.Seed, opts.Workers)
	r.progress = newMLProgress(opts.Progress, g.NumVertices(), opts.Parts)
	r.tries = mlBisectTries(len(g.Adjncy))
	if r.workers <= 0 {
		r.workers = runtime.GOMAXPROCS(0)
	}
	if r.workers > 1 {
		r.shared = &mlShared{spare: make(chan struct{}, r.workers-1)}
	}
	return r
}

// mlBounds are the heaviest and lightest weights a part may have in
// every constraint of g for k parts within ub.
func mlBounds(g *Graph, k int, ub float64) (maxw, minw []int64) {
	tot := g.totals()
	maxw = make([]int64, len(tot))
	minw = make([]int64, len(tot))
	for c, t := range tot {
		avg := float64(t) / float64(k)
		maxw[c] = max(int64(math.Ceil(avg)), int64(ub*avg))
		minw[c] = int64(avg / ub)
	}
	return maxw, minw
}

// rbScheme bisects g recursively into k parts and refines the result once
// with greedy k-way moves within ub; the bisections of small graphs keep
// the best of several tries.
//
// It serves every k and any number of constraints. It replaced the
// k-way scheme (coarsen once, bisect the coarsest graph, greedy k-way
// moves on every level on the way up), whose cuts were about gpmetis's.
// On the graphs of perf/metis (see its README), under one constraint:
// the 1 M vertex R-MAT graph into 2 / 4 / 8 parts, 6.4% / 20.5% / 37.1%
// of the edges cut where the k-way scheme cut 26.0% / 48.6% / 68.9%;
// into 12 to 128 parts 0.63–0.92 × gpmetis's cut where the k-way scheme
// cut 0.99–1.14 ×, in 0.39–0.48 × gpmetis's time (k-way: 0.53–1.16 ×)
// and 0.74–0.79 × its memory (0.73–0.82 ×); BlogCatalog into 12 to 128
// parts 0.87–1.00 × the cut (k-way: 1.01 ×) in 0.36–0.67 × the time
// (0.89–1.05 ×) and 0.92–0.96 × the memory (1.20–1.72 ×). Under several
// constraints (perf/metis -balance), into 2 / 4 / 8 parts: rmat1m under
// nodes and train 8.8% / 23.8% / 41.1% cut where the k-way scheme cut
// 27.1% / 58.3% / 73.2% and gpmetis 23.7% / 53.9% / 74.2%; under nodes
// and edges 0.97–1.00 × gpmetis's cut (k-way: 1.01–1.05 ×) in 0.22–0.30
// × its time and 0.67–0.73 × its memory; Cora under three constraints
// into 8 parts 0.99 × gpmetis's cut (k-way: 1.33 ×).
//
// Under one constraint each bisection may be off its target by
// ub^(1/ln k) and the final refinement restores the bound; under several
// that repair can fail (three constraints left 4 parts 17% off balance
// before 2-way FM kept a queue per constraint), so each bisection gets
// ub^(1/⌈log2 k⌉), which compounds to ub (see recursive).
func (r *mlRun) rbScheme(g *Graph, k int, ub float64) ([]uint32, error) {
	maxw, minw := mlBounds(g, k, ub)
	tr := r.derive(r.rng.Uint64(), r.workers, r.ws)
	where, err := tr.recursive(g, k, ub)
	if err != nil {
		return nil, err
	}
	r.progress.finish()
	if err := newKway(tr, g, where, k, maxw, minw).refineStrict(); err != nil {
		return nil, err
	}
	r.progress.report(StageRefine, 1, 1)
	return where, nil
}

// mlBisectTries is how many tries each bisection of an input with adj
// adjacency entries keeps the best of (see mlBisectTriesAdj).
func mlBisectTries(adj int) int {
	t := mlBisectTriesAdj / max(adj, 1)
	if t < 1 {
		return 1
	}
	return min(mlBisectMaxTries, 1<<(bits.Len(uint(t))-1))
}

// mlFillEmpty gives every empty part one vertex of the part with the most
// vertices (its first), so that no partition owns nothing. Only tiny or
// extreme inputs need it.
func mlFillEmpty(g *Graph, where []uint32, k int) {
	count := make([]int, k)
	for _, p := range where {
		count[p]++
	}
	for p := range count {
		if count[p] > 0 {
			continue
		}
		big := 0
		for q := range count {
			if count[q] > count[big] {
				big = q
			}
		}
		for v, q := range where {
			if int(q) == big {
				where[v] = uint32(p)
				count[big]--
				count[p]++
				break
			}
		}
	}
}

// Quality measures an assignment.
type Quality struct {
	EdgeCut int64 // total weight of edges whose ends are in different parts
	// CommVolume sums, over vertices, the number of parts other than its
	// own among its neighbours: the copies of its data other parts need.
	CommVolume int64
	// Balance is, per constraint, the heaviest part's weight over the
	// average part weight (1 is perfect).
	Balance []float64
	Empty   int // parts that own no vertex
}

// Measure computes edge cut, communication volume and balance
// of parts (one part below k per vertex) on g.
func Measure(g *Graph, parts []uint32, k int) (Quality, error) {
	n := g.NumVertices()
	if len(parts) != n || k < 1 {
		return Quality{}, errorOf(nil, "measure: ", itoa(len(parts)), " parts entries for ", itoa(n), " vertices, k = ", itoa(k))
	}
	nc := g.ncon()
	pw := make([]int64, k*nc)
	count := make([]int64, k)
	seen := make([]int, k) // seen[p] == v+1: p already counted for v
	var q Quality
	for v := 0; v < n; v++ {
		p := parts[v]
		if int(p) >= k {
			return Quality{}, errorOf(nil, "measure: vertex ", itoa(v), " in part ", itoa(p), " of ", itoa(k))
		}
		count[p]++
		for c := 0; c < nc; c++ {
			pw[int(p)*nc+c] += g.vwgt(v, c)
		}
		seen[p] = v + 1
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			o := parts[g.Adjncy[e]]
			if o == p {
				continue
			}
			q.EdgeCut += g.ewgt(e)
			if seen[o] != v+1 {
				seen[o] = v + 1
				q.CommVolume++
			}
		}
	}
	q.EdgeCut /= 2
	tot := g.totals()
	q.Balance = make([]float64, nc)
	for c := 0; c < nc; c++ {
		var mx int64
		for p := 0; p < k; p++ {
			mx = max(mx, pw[p*nc+c])
		}
		if tot[c] > 0 {
			q.Balance[c] = float64(mx) / (float64(tot[c]) / float64(k))
		}
	}
	for _, c := range count {
		if c == 0 {
			q.Empty++
		}
	}
	return q, nil
}
