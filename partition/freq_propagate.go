package partition

// How the estimate is computed: the transpose of the sampled rows, and the
// hop-by-hop propagation of each batch's chances over it, on every core.

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

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
