package partition

import (
	"math"
	"math/rand/v2"
	"sync"
)

// Initial partitioning tunables.
const (
	// mlBisectCoarsenTo: multilevel bisection coarsens to about this
	// many vertices before it grows the first bisection.
	mlBisectCoarsenTo = 100
	// mlGrowTries is how many grown bisections of the coarsest graph are
	// refined; the best is kept.
	mlGrowTries = 8
	// mlFMPasses is the most FM passes per level of a bisection.
	mlFMPasses = 10
	// mlInitTries is how many recursive bisections of the coarsest graph
	// are computed (the one with the least cut is kept) when the graph
	// has at most mlInitTriesMaxAdj adjacency entries; larger coarsest
	// graphs (dense power-law ones: a try costs seconds there and gains
	// little) get one.
	mlInitTries       = 4
	mlInitTriesMaxAdj = 1 << 20
)

// initial partitions g (the coarsest graph of the k-way scheme, or the
// input itself up to mlRBMaxParts parts) into k parts by recursive
// multilevel bisection (as METIS's kway method does for its coarsest
// graph and its rb method for the input). Each bisection may
// be off its target by ub^(1/levels) so that the product over the
// recursion stays within ub.
func (r *mlRun) initial(g *WGraph, k int, ub float64) ([]uint32, error) {
	// METIS's allowance per bisection: ub^(1/ln k), looser than the
	// ub^(1/log2 k) that would compound to ub; k-way refinement
	// restores the bound.
	ubBis := math.Pow(ub, 1/math.Log(float64(k)))
	ids := make([]uint32, g.NumVertices())
	for i := range ids {
		ids[i] = uint32(i)
	}
	// The tries run concurrently, each with its own generator seeded
	// from the run's, so the winner does not depend on the worker count.
	tries := mlInitTries
	if len(g.Adjncy) > mlInitTriesMaxAdj {
		tries = 1
	}
	wheres := make([][]uint32, tries)
	cuts := make([]int64, tries)
	errs := make([]error, tries)
	seeds := make([]uint64, tries)
	for i := range seeds {
		seeds[i] = r.rng.Uint64()
	}
	sem := make(chan struct{}, max(1, min(r.workers, tries)))
	var wg sync.WaitGroup
	for try := range tries {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// A lone try gets every worker for its contractions; the
			// coarse graphs do not depend on the worker count.
			tr := &mlRun{ctx: r.ctx, rng: rand.New(rand.NewPCG(seeds[try], mlStream)), workers: 1}
			if tries == 1 {
				tr.workers = r.workers
			}
			wheres[try] = make([]uint32, g.NumVertices())
			if errs[try] = tr.recurse(g, ids, k, 0, ubBis, wheres[try]); errs[try] == nil {
				cuts[try] = mlCut(g, wheres[try])
			}
		})
	}
	wg.Wait()
	best := 0
	for try := range tries {
		if errs[try] != nil {
			return nil, errs[try]
		}
		if cuts[try] < cuts[best] {
			best = try
		}
	}
	return wheres[best], nil
}

// recurse splits g (whose vertex i is ids[i] of the top graph) into k
// parts numbered from base.
func (r *mlRun) recurse(g *WGraph, ids []uint32, k int, base uint32, ub float64, where []uint32) error {
	if k == 1 || g.NumVertices() == 0 {
		for _, v := range ids {
			where[v] = base
		}
		return nil
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	k0 := k / 2
	side, err := r.bisect(g, float64(k0)/float64(k), ub)
	if err != nil {
		return err
	}
	for s, ks := range [2]int{k0, k - k0} {
		sub, subIDs := mlSubgraph(g, side, uint32(s))
		for i, v := range subIDs {
			subIDs[i] = ids[v]
		}
		b := base
		if s == 1 {
			b += uint32(k0)
		}
		if err := r.recurse(sub, subIDs, ks, b, ub, where); err != nil {
			return err
		}
	}
	return nil
}

// bisect splits g into side 0 holding frac of every constraint and side
// 1 holding the rest: it coarsens g, grows mlGrowTries bisections of the
// coarsest graph and keeps the best after FM, then projects it back with
// FM at every level.
func (r *mlRun) bisect(g *WGraph, frac, ub float64) ([]uint32, error) {
	levels, err := r.coarsen(g, mlBisectCoarsenTo, "multilevel initial")
	if err != nil {
		return nil, err
	}
	top := levels[len(levels)-1].g
	var best []uint32
	var bestExc float64
	var bestCut int64
	for try := 0; try < mlGrowTries; try++ {
		where := r.grow(top, frac)
		fm := newFM(r, top, where, frac, ub)
		fm.refine(mlFMPasses)
		exc := fm.excess()
		if best == nil || exc < bestExc || (exc == bestExc && fm.cut < bestCut) {
			best, bestExc, bestCut = where, exc, fm.cut
		}
	}
	where := best
	for l := len(levels) - 2; l >= 0; l-- {
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		levels[l+1] = mlLevel{} // the coarser graph is no longer needed
		levels[l].unpack()
		where = r.project(levels[l], where)
		newFM(r, levels[l].g, where, frac, ub).refine(mlFMPasses)
	}
	return where, nil
}

// grow grows side 0 breadth-first from a random vertex until it holds
// frac of the graph's weight (averaged over constraints); a new random
// vertex seeds the search when a component is exhausted.
func (r *mlRun) grow(g *WGraph, frac float64) []uint32 {
	n := g.NumVertices()
	nc := g.ncon()
	tot := g.totals()
	where := make([]uint32, n)
	for i := range where {
		where[i] = 1
	}
	var fill float64 // mean over constraints of side 0's share of the target
	queue := make([]uint32, 0, n)
	perm := r.rng.Perm(n)
	next := 0
	for fill < 1 {
		if len(queue) == 0 {
			for next < n && where[perm[next]] == 0 {
				next++
			}
			if next == n {
				break
			}
			v := uint32(perm[next])
			where[v] = 0
			fill += mlShare(g, int(v), tot, frac, nc)
			queue = append(queue, v)
			continue
		}
		v := queue[0]
		queue = queue[1:]
		for e := g.Xadj[v]; e < g.Xadj[v+1] && fill < 1; e++ {
			u := g.Adjncy[e]
			if where[u] == 0 {
				continue
			}
			where[u] = 0
			fill += mlShare(g, int(u), tot, frac, nc)
			queue = append(queue, u)
		}
	}
	return where
}

// mlShare is v's weight as a share of side 0's target, averaged over
// constraints.
func mlShare(g *WGraph, v int, tot []int64, frac float64, nc int) float64 {
	var s float64
	for c := 0; c < nc; c++ {
		if tot[c] > 0 {
			s += float64(g.vwgt(v, c)) / (frac * float64(tot[c]))
		}
	}
	return s / float64(nc)
}

// mlSubgraph is the subgraph induced by the vertices with where == side,
// and the map from its vertices to g's.
func mlSubgraph(g *WGraph, where []uint32, side uint32) (*WGraph, []uint32) {
	n := g.NumVertices()
	nc := g.ncon()
	local := make([]uint32, n)
	var ids []uint32
	for v := 0; v < n; v++ {
		if where[v] == side {
			local[v] = uint32(len(ids))
			ids = append(ids, uint32(v))
		}
	}
	// Unit weights stay implicit (nil), as in g: the subgraphs of an
	// unweighted input cost 4 bytes per adjacency entry, not 8.
	sub := &WGraph{Xadj: make([]int64, 1, len(ids)+1), Ncon: g.Ncon}
	var m int64
	for _, v := range ids {
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			if where[g.Adjncy[e]] == side {
				m++
			}
		}
	}
	sub.Adjncy = make([]uint32, 0, m)
	if g.Adjwgt != nil {
		sub.Adjwgt = make([]int32, 0, m)
	}
	if g.Vwgt != nil {
		sub.Vwgt = make([]int64, 0, len(ids)*nc)
	}
	for _, v := range ids {
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			if u := g.Adjncy[e]; where[u] == side {
				sub.Adjncy = append(sub.Adjncy, local[u])
				if g.Adjwgt != nil {
					sub.Adjwgt = append(sub.Adjwgt, g.Adjwgt[e])
				}
			}
		}
		sub.Xadj = append(sub.Xadj, int64(len(sub.Adjncy)))
		if g.Vwgt != nil {
			sub.Vwgt = append(sub.Vwgt, g.Vwgt[int(v)*nc:int(v)*nc+nc]...)
		}
	}
	return sub, ids
}

// mlCut is the total weight of g's edges between parts.
func mlCut(g *WGraph, where []uint32) int64 {
	var cut int64
	for v := 0; v < g.NumVertices(); v++ {
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			if where[g.Adjncy[e]] != where[v] {
				cut += g.ewgt(e)
			}
		}
	}
	return cut / 2
}
