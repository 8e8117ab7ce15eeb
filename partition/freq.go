package partition

// The access-frequency estimate behind the frequency partitioner, the
// hot-node cache and the expected feature-read shares of `node inspect`.
//
// Definition. For partition p with training seeds S_p, fanouts f_1..f_K
// and batch size B (an epoch of ⌊|S_p|/B⌋ batches of B seeds and, when B
// does not divide |S_p|, one of the rest), the heat of node v is the
// expected number of times its feature row is read in one epoch of
// mini-batches covering S_p once. It is computed for one batch of each
// size b, whose seeds are a random b of S_p, as the chance h_K(v) that
// the batch reads v, and summed over the epoch's batches:
//
//	π_0(v) = h_0(v) = b/|S_p| if v ∈ S_p, else 0
//	w_k(u) = π_{k-1}(u) · r_k(u),  r_k(u) = min(1, f_k/deg(u))  (f_k = -1: 1)
//	a_k(u, v) = max(0, w_k(u) − [u ∈ row(v)] · r_k(u) · w_{k-1}(v))
//	ρ_k(v) = 1 − Π_{u ≠ v : v ∈ row(u)} (1 − a_k(u, v))
//	π_k(v) = ρ_k(v) · (1 − h_{k-1}(v))
//	h_k(v) = h_{k-1}(v) + π_k(v)
//	heat(v) = Σ over the epoch's batches of h_K(v)
//
// ρ_k(v) is the chance that hop k reaches v, π_k(v) that v is new at hop
// k (reached, and not read before: only then does hop k+1 expand it), and
// h_k(v) that v is read by hop k. row(u) is u's stored neighbour list
// (what the sampler draws from: in-neighbours for direction in) and
// deg(u) its length; r_k(u) is the chance that uniform sampling without
// replacement picks a given entry, and w_k(u) the chance that u, new at
// hop k−1 of the batch, picks it.
//
// A row may list v m > 1 times (--duplicates keep; a knowledge graph's
// relations): the sampler draws entries, so those copies are one branch
// whose r_k(u) is q(deg(u), f_k, m) = 1 − C(deg(u)−m, f_k)/C(deg(u), f_k),
// the chance the draw takes at least one, and likewise for the copies of
// u in row(v) in the backtracking term (freq_repeat.go). The sampler's
// deduplication within a batch (DESIGN.md §5: a node is read and
// expanded once per batch) is modelled thrice:
//
//   - Self loops: v, expanded, picking itself finds itself in n_id, so
//     u = v is no branch of ρ_k(v). Counted as one, a self loop on every
//     node of a random graph made the estimate ×1.2 the reads.
//   - Backtracking: u, reached from v, picking v again finds it in n_id.
//     The subtracted term is the part of u's picks of v that is such a
//     return (only where the edge is reciprocal).
//   - Repeats: a node reached along several branches, or at several
//     hops, of one batch is read once, and expanded once: at the hop
//     after the first that reached it. Each branch and hop is taken as
//     independent of the others, so the chance of none is the product
//     of theirs, and of ρ_k(v) the part 1 − h_{k−1}(v) is new. A seed,
//     or a node every neighbour of a seed is sure to reach, is read in
//     its batch for certain (chance 1, read once). The estimate before
//     summed visits and spread them over the nb = ⌈|S_p|/B⌉ batches at
//     random, reading a node in nb·(1 − e^{−x/nb}) of them: a seed,
//     visited once, counted 1 − 1/e in an epoch of one batch, and Cora's
//     140 training seeds with --fanouts 0 were 88 reads. Then it
//     expanded a node at every hop that reached it (π_k = ρ_k): a hub
//     reached at hops 1 and 2 was expanded at hops 2 and 3, and
//     BlogCatalog's reads came out ×1.09 at batch 64 (then ×1.02, now,
//     with its last batch of 7 at its own size, ×1.00).
//
// Without a batch size (B = 0) visits are summed instead (w_k from the
// visits x_{k−1}, x_k(v) = Σ a_k(u, v), heat the sum over hops, a run of
// m copies m visits): the heat counts visits, GLT's estimate less
// backtracking and self loops.
//
// What is left, measured against the real sampler by freq_test.go,
// freq_repeat_test.go and freq_real_test.go. Their tolerance, from
// batches of 64 seeds up: total reads within 15% on generated graphs
// (measured: within 1%) and within 7% on Cora and BlogCatalog (within
// 3%), Pearson r ≥ 0.95 per node; where an epoch ends with a small
// batch, Cora's 140 seeds in batches of 128 and 12, within 12%
// (measured ×1.07). Below that, on clustered graphs, the first item
// below is the error, and it is larger:
//
//   - Chances are per node, not per seed. Two paths to v from one seed
//     are not independent: both are there when that seed is in the
//     batch. The products above take them for paths from two seeds, so
//     a node that one seed's tree reaches along m paths (cycles near the
//     seed) counts for up to m reads. Where a batch holds many seeds
//     their trees overlap and the products saturate; where it holds few
//     (a small batch, or a small last one) each tree is read on its own
//     and the estimate counts its paths more than its nodes. Worst on
//     clustered graphs whose fanouts take whole rows: Cora's 140 training
//     seeds (Planetoid, fanouts 15,10,5) read ×1.67 at batch 1, ×1.29 at
//     16, ×1.03 at 70, ×1.00 at 140, and ×1.07 in batches of 128 (and
//     12); BlogCatalog ×1.00 at 64. Removing it needs each seed's (or
//     batch's) own tree: a cost of the sum of the seeds' K-hop
//     neighbourhoods, which the estimate avoids.
//   - Two neighbours of one seed are not independent draws (without
//     replacement), and what is new at hop k is judged from the chances
//     of the earlier hops, not from which seeds gave them.
//
// The last batch of an epoch is estimated at its own size. Estimating
// every batch at |S_p|/⌈|S_p|/B⌉ seeds read a small last batch as half
// of a large one: BlogCatalog's 1031 training seeds in batches of 1024
// and 7 came out ×1.38 (now ×1.00), Cora's 140 in batches of 128 and 12
// ×1.31 (now ×1.07). Batches of two sizes cost a second pass, on the
// partitions whose last batch is shorter, on the first pass's working
// arrays: BenchmarkEstimateHeat (4 partitions, each with one) 60 → 84
// ms and 16 → 18 MB allocated; `node partition --method freq
// --cache-ratio 0.2` of an R-MAT graph of 1 M nodes and 10 M edges into
// 4 parts 2.8–2.9 → 3.2–3.5 s, peak RSS the same (292–296 MiB).
//
// Computation. Each hop is a pull over the transpose: for every target v,
// the sum over the nodes u whose row holds v, in ascending u, accumulated
// in float64 and stored as float32. Targets are split among workers, and
// each target's sum is computed by one worker in a fixed order, so the
// result does not depend on the number of workers or on scheduling.
//
// Memory: the transpose (4 bytes and 1 bit per edge, 4 more where some
// row repeats an entry, 12 bytes per node) plus four float32 arrays of
// nodes × parts, and, where some partition's last batch is shorter, one
// more for the second pass's result (nodes × those partitions), whose
// working arrays are the first pass's.

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Heat is the expected number of feature reads of every node by one epoch
// of each partition's training seeds: Val[v*Parts+p] is node v's heat for
// partition p. Nodes are whatever index space the estimate was built in
// (old node indices in the pipeline, new global ids in Inspect).
type Heat struct {
	Parts int
	Val   []float32
}

// NumNodes is the number of nodes the heat covers.
func (h *Heat) NumNodes() int { return len(h.Val) / max(h.Parts, 1) }

// At is node v's heat for partition p.
func (h *Heat) At(v uint32, p int) float32 { return h.Val[int(v)*h.Parts+p] }

// Total is partition p's expected number of feature reads, over all nodes.
func (h *Heat) Total(p int) float64 {
	var s float64
	for i := p; i < len(h.Val); i += h.Parts {
		s += float64(h.Val[i])
	}
	return s
}

// ValidFanouts checks a fanout list: 1 to 32 hops, each -1 (all) or a
// count from 0 to 2^31 − 1, the most a loader's request carries (a
// larger one, recorded here, was refused only when a trainer opened its
// loader).
func ValidFanouts(fanouts []int) error {
	if len(fanouts) == 0 || len(fanouts) > 32 {
		return fmt.Errorf("partition: fanouts %v: want 1 to 32 hops", fanouts)
	}
	for k, f := range fanouts {
		if f < -1 || f > math.MaxInt32 {
			return fmt.Errorf("partition: fanouts %v: hop %d is %d, want -1 (all) or a count from 0 to %d", fanouts, k+1, f, math.MaxInt32)
		}
	}
	return nil
}

// TrainerSeeds splits the training nodes, given in ascending global id
// order, among parts trainers as a loader over split "train" with rank p
// of world size parts takes them (sample.NewPlan without drop_last):
// contiguous shares whose sizes differ by at most one, the first ones
// larger. Each part's node serves the rank of the same index (one
// trainer beside every node, README), so S_p is rank p's share, which
// holds training nodes of other parts wherever the parts' training
// counts differ. (partition cannot import sample; freq_test.go holds
// the two to the same shares.)
func TrainerSeeds[T any](train []T, parts int) [][]T {
	out := make([][]T, parts)
	q, rem := len(train)/parts, len(train)%parts
	for p := range out {
		lo := p*q + min(p, rem)
		hi := lo + q
		if p < rem {
			hi++
		}
		out[p] = train[lo:hi:hi]
	}
	return out
}

// HeatOptions describe the sampling whose reads EstimateHeat estimates.
type HeatOptions struct {
	Fanouts []int // per hop; -1 takes all neighbours
	// BatchSize is the trainers' batch size, which the deduplication model
	// needs; 0 estimates plain visits without it.
	BatchSize int
	Workers   int // goroutines; 0 = GOMAXPROCS. The result does not depend on it.
}

// EstimateHeat estimates, for every partition p, the heat of every node of
// adj when sampling seeds[p] (see the definition above).
func EstimateHeat(ctx context.Context, adj *Adj, seeds [][]uint32, opts HeatOptions) (*Heat, error) {
	t, err := buildTranspose(ctx, adj.NumNodes(), []heatRows[uint32]{{indptr: adj.Indptr, indices: adj.Indices}})
	if err != nil {
		return nil, err
	}
	return t.heat(ctx, seeds, opts)
}

// heatRows is a run of consecutive rows starting at node start, as a
// pipeline Adj (uint32 neighbours) or a part file (uint64 global ids).
type heatRows[T uint32 | uint64] struct {
	start   uint32
	indptr  []uint64
	indices []T
}

// transpose lists, for every node v, the nodes whose row holds v
// (ascending, with repeats for repeated entries), and every row's length.
type transpose struct {
	indptr []uint64 // n+1
	src    []uint32
	recip  []uint64 // bit i: entry i (u in v's list) is reciprocal, u ∈ row(v)
	deg    []uint32 // row length of every node
	// back[i] is how often row(v) holds src[i] when some row repeats an
	// entry; nil when none does (then recip says 0 or 1).
	back []uint32
}

// buildTranspose inverts rows given as blocks in ascending node order
// that together cover nodes [0, n).
func buildTranspose[T uint32 | uint64](ctx context.Context, n int, blocks []heatRows[T]) (*transpose, error) {
	t := &transpose{indptr: make([]uint64, n+1), deg: make([]uint32, n)}
	var edges uint64
	for _, b := range blocks {
		rows := len(b.indptr) - 1
		if int(b.start)+rows > n {
			return nil, fmt.Errorf("partition: heat: rows [%d, %d) beyond %d nodes", b.start, int(b.start)+rows, n)
		}
		for i := range rows {
			d := b.indptr[i+1] - b.indptr[i]
			if d > math.MaxUint32 {
				return nil, fmt.Errorf("partition: heat: node %d has %d neighbours", int(b.start)+i, d)
			}
			t.deg[int(b.start)+i] = uint32(d)
		}
		for e, v := range b.indices[:b.indptr[rows]] {
			if e%cancelEvery == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			if uint64(v) >= uint64(n) {
				return nil, fmt.Errorf("partition: heat: neighbour %d beyond %d nodes", v, n)
			}
			t.indptr[v+1]++
		}
		edges += b.indptr[rows]
	}
	for v := range n {
		t.indptr[v+1] += t.indptr[v]
	}
	t.src = make([]uint32, edges)
	fill := slices.Clone(t.indptr[:n])
	repeats := false // some row holds an entry twice (it is sorted)
	for _, b := range blocks {
		for i := range len(b.indptr) - 1 {
			u := b.start + uint32(i)
			for j, v := range b.indices[b.indptr[i]:b.indptr[i+1]] {
				t.src[fill[v]] = u
				fill[v]++
				repeats = repeats || j > 0 && v == b.indices[b.indptr[i]+uint64(j)-1]
			}
			if i%(1<<16) == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
		}
	}
	// Reciprocity: rows are sorted, so u ∈ row(v) is a binary search,
	// and its copies follow the first.
	t.recip = make([]uint64, (edges+63)/64)
	if repeats {
		t.back = make([]uint32, edges)
	}
	bi := 0
	for v := range n {
		for bi+1 < len(blocks) && uint32(v) >= blocks[bi+1].start {
			bi++
		}
		b := blocks[bi]
		i := v - int(b.start)
		row := b.indices[b.indptr[i]:b.indptr[i+1]]
		for e := t.indptr[v]; e < t.indptr[v+1]; e++ {
			u := T(t.src[e])
			j, ok := slices.BinarySearch(row, u)
			if !ok {
				continue
			}
			t.recip[e/64] |= 1 << (e % 64)
			if t.back != nil {
				c := 1
				for j+c < len(row) && row[j+c] == u {
					c++
				}
				t.back[e] = uint32(c)
			}
		}
		if v%(1<<16) == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

// heat runs the estimate for every partition's seeds at once.
func (t *transpose) heat(ctx context.Context, seeds [][]uint32, opts HeatOptions) (*Heat, error) {
	if err := ValidFanouts(opts.Fanouts); err != nil {
		return nil, err
	}
	if opts.BatchSize < 0 {
		return nil, fmt.Errorf("partition: heat: batch size %d: want ≥ 0", opts.BatchSize)
	}
	n, P := len(t.deg), len(seeds)
	if P < 1 {
		return nil, fmt.Errorf("partition: heat: no partitions")
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// The estimate runs on columns, one per partition (its batches of
	// the batch size, or its one batch), and then again on one more for
	// each partition whose epoch ends with a shorter batch (see
	// batchColumns). Without a batch size visits are summed instead (see
	// the top).
	batched := opts.BatchSize > 0
	first, rest := batchColumns(seeds, opts.BatchSize)
	for p, s := range seeds {
		for _, v := range s {
			if int(v) >= n {
				return nil, fmt.Errorf("partition: heat: seed %d of part %d beyond %d nodes", v, p, n)
			}
		}
	}
	var sc heatScratch
	heat, err := t.propagate(ctx, seeds, first, batched, opts.Fanouts, workers, &sc)
	if err != nil {
		return nil, err
	}
	if !batched {
		return &Heat{Parts: P, Val: heat}, nil
	}
	// heat(v) for partition p: each of its columns' h_K(v) times the
	// batches it stands for.
	for i, h := range heat {
		heat[i] = float32(first[i%P].batches * float64(h))
	}
	if len(rest) > 0 {
		last, err := t.propagate(ctx, seeds, rest, batched, opts.Fanouts, workers, &sc)
		if err != nil {
			return nil, err
		}
		R := len(rest)
		for v := range n {
			for j, c := range rest {
				heat[v*P+c.part] += float32(c.batches * float64(last[v*R+j]))
			}
		}
	}
	return &Heat{Parts: P, Val: heat}, nil
}

// heatScratch is propagate's working arrays, which a second pass takes
// over from the first (no more columns than it), so that the estimate
// holds five arrays of nodes × parts at most, not eight until the
// collector frees the first pass's.
type heatScratch struct{ cur, prev, next []float32 }

// get returns the scratch's arrays at length m, zeroed, taking them from
// the last pass where they are large enough.
func (sc *heatScratch) get(m int) (cur, prev, next []float32) {
	for _, a := range []*[]float32{&sc.cur, &sc.prev, &sc.next} {
		if cap(*a) < m {
			*a = make([]float32, m)
		} else {
			*a = (*a)[:m]
			clear(*a)
		}
	}
	return sc.cur, sc.prev, sc.next
}

// propagate runs the hops of the estimate for columns cols of seeds'
// partitions and returns h_K (batched) or the summed visits of every node
// and column, node-major. Its working arrays come from sc.
func (t *transpose) propagate(ctx context.Context, seeds [][]uint32, cols []heatColumn, batched bool, fanouts []int, workers int, sc *heatScratch) ([]float32, error) {
	n, Q := len(t.deg), len(cols)
	// heat holds h_k(v) = 1 − Π_k (1 − ρ_k(v)) when batched (the
	// complement, so that a small chance keeps float32's precision),
	// Σ_k x_k(v) when not; cur, prev and next hold π or x: cur π_{k-1}
	// (x_{k-1}), then w_k; prev w_{k-1}; next π_k (x_k).
	heat := make([]float32, n*Q)
	cur, prev, next := sc.get(n * Q)
	for q, c := range cols {
		for _, v := range seeds[c.part] {
			cur[int(v)*Q+q]++
		}
	}
	for i, x := range cur {
		if batched {
			if x > 0 {
				cur[i] = float32(min(1, float64(x)*cols[i%Q].chance))
			}
			heat[i] = cur[i]
		} else {
			heat[i] = x
		}
	}
	byNode := splitRange(n, workers, nil)
	byEdge := splitRange(n, workers, t.indptr)
	for k, f := range fanouts {
		ratio := func(u int) float32 { return entryChance(t.deg[u], f) }
		fb := 0 // hop k−1's fanout, for backtracking over repeated entries
		if k > 0 {
			fb = fanouts[k-1]
		}
		// cur becomes w_k: what each expanded node passes to one entry.
		err := parallelRanges(ctx, byNode, func(lo, hi int) {
			for u := lo; u < hi; u++ {
				r := ratio(u)
				for q := range Q {
					cur[u*Q+q] *= r
				}
			}
		})
		if err != nil {
			return nil, err
		}
		err = parallelRanges(ctx, byEdge, func(lo, hi int) {
			// acc: Π (1 − a) when batched (a product that underflows to
			// 0 says "certain", as it should), Σ a when not. 1 − a is
			// taken in float64: in float32 a chance under 3·10⁻⁸ was 0,
			// and a hub reached along many such branches read nothing.
			acc := make([]float64, Q)
			for v := lo; v < hi; v++ {
				back := prev[v*Q : (v+1)*Q]
				for p := range acc {
					acc[p] = 0
					if batched {
						acc[p] = 1
					}
				}
				for e, end := t.indptr[v], t.indptr[v+1]; e < end; {
					// The run of u's copies of v: one pull.
					u, first := int(t.src[e]), e
					for e++; e < end && int(t.src[e]) == u; e++ {
					}
					if u == v {
						// A self loop: v, new at hop k−1, picking itself
						// at hop k finds itself in n_id.
						continue
					}
					w := cur[u*Q : (u+1)*Q]
					recip := t.recip[first/64]&(1<<(first%64)) != 0
					var mb uint64 // copies of u in row(v)
					if recip {
						mb = 1
						if t.back != nil {
							mb = uint64(t.back[first])
						}
					}
					if e-first > 1 || mb > 1 {
						run := repeatRun{copies: e - first, r: ratio(u), pick: pickChance(t.deg[u], f, e-first), backCopies: mb}
						if recip {
							run.backR = entryChance(t.deg[v], fb)
							run.backPick = pickChance(t.deg[v], fb, mb)
						}
						run.pull(acc, w, back, batched)
						continue
					}
					var r float32 // backtracking's, on reciprocal edges only
					if recip {
						r = ratio(u)
					}
					switch {
					case batched && recip:
						for p := range acc {
							acc[p] *= 1 - float64(max(0, w[p]-r*back[p]))
						}
					case batched:
						for p := range acc {
							acc[p] *= 1 - float64(w[p])
						}
					case recip:
						for p := range acc {
							acc[p] += float64(max(0, w[p]-r*back[p]))
						}
					default:
						for p := range acc {
							acc[p] += float64(w[p])
						}
					}
				}
				for p, a := range acc {
					i := v*Q + p
					if batched {
						// ρ_k(v) = 1 − a; q = h_{k−1}(v).
						rk, q := 1-a, float64(heat[i])
						next[i] = float32(rk * (1 - q)) // π_k(v)
						heat[i] = float32(q + rk - q*rk)
					} else {
						next[i] = float32(a)
						heat[i] += float32(a)
					}
				}
			}
		})
		if err != nil {
			return nil, err
		}
		prev, cur, next = cur, next, prev
	}
	return heat, nil
}

// heatColumn is one column of the estimate: a partition's batches of one
// size. chance is a training seed's chance to be in one such batch (its
// size over the partition's seeds), batches how many of them an epoch
// has.
type heatColumn struct {
	part    int
	chance  float64
	batches float64
}

// batchColumns are the columns of partitions' seeds in batches of size b
// (0: visits): first, one per partition in order, for its batches of b
// (or its one batch, or none); rest, one for each partition whose epoch
// ends with a batch of |S| mod b seeds. The reads of a batch grow less
// than its seeds (its trees overlap), so a short batch reads more than
// that share of a full one's.
func batchColumns(seeds [][]uint32, b int) (first, rest []heatColumn) {
	first = make([]heatColumn, len(seeds))
	for p, s := range seeds {
		first[p] = heatColumn{part: p, chance: 1, batches: float64(min(len(s), 1))}
		if b <= 0 {
			continue
		}
		full, short := len(s)/b, len(s)%b
		if full > 0 {
			first[p].chance, first[p].batches = float64(b)/float64(len(s)), float64(full)
			if short > 0 {
				rest = append(rest, heatColumn{part: p, chance: float64(short) / float64(len(s)), batches: 1})
			}
		}
	}
	return first, rest
}

// splitRange cuts [0, n) into at most workers ranges of about equal work:
// nodes, or with offsets, nodes plus their entries. The bounds depend on
// workers only for speed: every caller computes per-node results.
func splitRange(n, workers int, offsets []uint64) []int {
	work := func(v int) uint64 {
		if offsets == nil {
			return uint64(v)
		}
		return offsets[v] + uint64(v)
	}
	total := work(n)
	workers = max(1, min(workers, int(total/(1<<14))))
	bounds := []int{0}
	v := 0
	for i := 1; i < workers; i++ {
		target := total * uint64(i) / uint64(workers)
		for v < n && work(v) < target {
			v++
		}
		if v > bounds[len(bounds)-1] && v < n {
			bounds = append(bounds, v)
		}
	}
	return append(bounds, n)
}

// parallelRanges runs fn on every range of bounds, one goroutine each,
// and then reports the context's error, if any.
func parallelRanges(ctx context.Context, bounds []int, fn func(lo, hi int)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for i := 0; i+1 < len(bounds); i++ {
		wg.Go(func() { fn(bounds[i], bounds[i+1]) })
	}
	wg.Wait()
	return ctx.Err()
}
