package partition

import (
	"context"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// oneWaySample bounds the edges OneWay checks. Each is a binary search
// in another row, a few cache misses: every edge of a one-way R-MAT
// graph of 16M took 2 s on two cores. In node partition of a one-way
// R-MAT graph of 30.6M edges (node gen rmat --nodes 2000000 --edges
// 32000000, each pair turned u < v; 3 s with --method random), a sample
// of 2^20 took 0.25 s, one of 2^16 7 ms. A graph stored both ways shows
// a pair at the first edge checked; one with a share r of its edges
// reciprocal goes unseen with odds (1-r)^oneWaySample, e^-6.6 at
// r = 1e-4.
const oneWaySample = 1 << 16

// OneWay reports whether a stores some edge between two distinct nodes
// and none whose reverse it stores as well, of the edges it checks: all
// of them up to oneWaySample, else oneWaySample spread evenly over the
// stored order (checked: how many a one-way answer rests on). That is
// the layout of an undirected graph listed once per pair (OGB's
// ogbn-products and ogbn-proteins, whose loader adds the reverses) read
// without CleanOptions.Undirected, or of a graph directed through and
// through (a DAG). Relations are not compared: u -r-> v and v -s-> u
// make a pair. The rows must be sorted, as BuildAdj leaves them.
func (a *Adj) OneWay(ctx context.Context) (oneWay bool, checked uint64, err error) {
	return a.oneWay(ctx, oneWaySample)
}

// oneWay is OneWay checking up to sample edges.
func (a *Adj) oneWay(ctx context.Context, sample uint64) (oneWay bool, checked uint64, err error) {
	n, total := a.NumNodes(), a.NumEdges()
	if n <= 0 || total == 0 {
		return false, 0, nil
	}
	k := min(total, sample)
	// at is the position in Indices of the i-th edge checked: i·total/k,
	// which fits in 64 bits as i < k.
	at := func(i uint64) uint64 {
		hi, lo := bits.Mul64(i, total)
		p, _ := bits.Div64(hi, lo, k)
		return p
	}
	workers := rowWorkers(int(k))
	var found atomic.Bool
	pairs := make([]bool, workers) // some edge checked joins two distinct nodes
	errs := make([]error, workers)
	var done sync.WaitGroup
	for w := range workers {
		i0, i1 := k*uint64(w)/uint64(workers), k*uint64(w+1)/uint64(workers)
		done.Go(func() {
			p := at(i0)
			// The row holding position p: the last whose start is ≤ p.
			v := sort.Search(n, func(v int) bool { return a.Indptr[v+1] > p })
			pair := false
			for i := i0; i < i1; i++ {
				if (i-i0)%4096 == 0 {
					if found.Load() {
						return
					}
					if err := ctx.Err(); err != nil {
						errs[w] = err
						return
					}
				}
				p = at(i)
				for a.Indptr[v+1] <= p {
					v++
				}
				u := a.Indices[p]
				if u == uint32(v) {
					continue
				}
				pair = true
				// Edge u -> v (row v of In) or v -> u (of Out): its
				// reverse is v in row u either way.
				if a.has(u, uint32(v)) {
					found.Store(true)
					return
				}
			}
			pairs[w] = pair
		})
	}
	done.Wait()
	for _, err := range errs {
		if err != nil {
			return false, 0, err
		}
	}
	return !found.Load() && slices.Contains(pairs, true), k, nil
}

// has reports whether row u lists v.
func (a *Adj) has(u, v uint32) bool {
	_, ok := slices.BinarySearch(a.Row(u), v)
	return ok
}
