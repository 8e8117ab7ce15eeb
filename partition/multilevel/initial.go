package multilevel

import (
	"math"
	"runtime"
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
	// mlGrowFMPasses is the most FM passes of each grown bisection of
	// the coarsest graph; the one kept gets mlFMPasses more (METIS's
	// GrowBisection refines each with 4).
	mlGrowFMPasses = 4
)

// bisectBest is bisect with r.tries tries, each from its own generator
// (all drawn from r's before any starts), and keeps the try with the
// least excess over the balance bound, then the least cut, then the
// lowest number: the winner does not depend on which try ran where or
// when. A try runs on another goroutine, with a scratch from r's list,
// while a worker is spare, and otherwise in turn on r's own scratch. The
// result lives in r's scratch (best) until r's next bisectBest. The
// winner then meets one more candidate, core against periphery (see
// degreeSplit).
//
// Tries per bisection find smaller cuts than as many tries of the whole
// recursion for the same work, because each bisection keeps its best
// before the next starts from it. Cora, seeds 1–120, one worker: into 4
// parts the best of 2 per bisection cut 319 edges on average, the best
// of 2 whole recursions 322; into 8 parts 514 against 519, and with 4
// tries 311 against 316 (4 parts) and 504 against 513 (8 parts).
func (r *mlRun) bisectBest(g *Graph, frac, ub float64) ([]uint32, error) {
	if r.tries <= 1 {
		side, exc, cut, err := r.bisect(g, frac, ub)
		if err != nil {
			return nil, err
		}
		r.degreeSplit(g, frac, ub, side, exc, cut)
		return side, nil
	}
	seeds := make([]uint64, r.tries)
	for i := range seeds {
		seeds[i] = r.rng.Uint64()
	}
	n := g.NumVertices()
	best := mlBuf(&r.scratch().best, n)
	var (
		mu       sync.Mutex
		bestTry  = -1
		bestExc  float64
		bestCut  int64
		firstErr error
	)
	// keep copies a try's bisection, still in the try's scratch, into
	// best when it wins so far.
	keep := func(try int, side []uint32, exc float64, cut int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			if firstErr == nil {
				firstErr = err
			}
		case bestTry < 0 || exc < bestExc || (exc == bestExc && (cut < bestCut || (cut == bestCut && try < bestTry))):
			copy(best, side)
			bestTry, bestExc, bestCut = try, exc, cut
		}
	}
	run := func(try int, ws *mlScratch) *mlScratch {
		tr := r.derive(seeds[try], 1, ws)
		tr.shared = nil // a try's own work is serial
		tr.share = r.share / float64(len(seeds))
		tr.keepScratchFor(n)
		side, exc, cut, err := tr.bisect(g, frac, ub)
		keep(try, side, exc, cut, err)
		return tr.ws
	}
	// Tries 1.. go to spare workers first; try 0 and those no worker
	// took run here.
	var wg sync.WaitGroup
	here := []int{0}
	for try := 1; try < len(seeds); try++ {
		if !r.shared.spawn(&wg, func(ws *mlScratch) *mlScratch { return run(try, ws) }) {
			here = append(here, try)
		}
	}
	for _, try := range here {
		r.ws = run(try, r.ws)
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	r.degreeSplit(g, frac, ub, best, bestExc, bestCut)
	return best, nil
}

// derive is a run for one try or one half of a recursion: its own
// generator, r's context, tries and shared workers, and the scratch ws
// (nil for a fresh one) of the goroutine it runs on.
func (r *mlRun) derive(seed uint64, workers int, ws *mlScratch) *mlRun {
	d := newMLRun(r.ctx, seed, workers)
	d.ws, d.tries, d.shared = ws, r.tries, r.shared
	d.progress, d.share = r.progress, r.share
	return d
}

// recursive splits g into k parts by recursive multilevel bisection (as
// METIS's rb method does). Under one constraint each bisection may be
// off its target by ub^(1/ln k): METIS's allowance, looser than the
// ub^(1/log2 k) that would compound to ub; k-way refinement restores the
// bound. Under several, whose balance that refinement cannot always
// restore, each gets ub^(1/⌈log2 k⌉): no part passes ub × its target.
// On the R-MAT graph of 2^14 vertices under nodes and edges, into 4
// parts, the looser allowance left a part 3.1% over the average; the
// tighter one cuts 0.7% fewer edges.
func (r *mlRun) recursive(g *Graph, k int, ub float64) ([]uint32, error) {
	ubBis := math.Pow(ub, 1/math.Log(float64(k)))
	if g.ncon() > 1 {
		ubBis = math.Pow(ub, 1/math.Ceil(math.Log2(float64(k))))
	}
	ids := make([]uint32, g.NumVertices())
	for i := range ids {
		ids[i] = uint32(i)
	}
	where := make([]uint32, g.NumVertices())
	if err := r.recurse(g, ids, k, 0, ubBis, where); err != nil {
		return nil, err
	}
	return where, nil
}

// mlParallelHalvesMaxAdj: the halves of a bisection of a graph with more
// adjacency entries run one after the other. Concurrent halves hold two
// hierarchies at once besides both subgraphs: on the 1 M vertex R-MAT
// graph into 4 parts that raised the peak RSS from 981 to 1185 MiB,
// while on BlogCatalog (668 k entries) it halves the time of the second
// round of bisections.
const mlParallelHalvesMaxAdj = 1 << 22

// recurse splits g (whose vertex i is ids[i] of the top graph) into k
// parts numbered from base. The two halves of a bisection are
// independent: each gets its own generator, drawn from r's before either
// starts, and the second runs on another goroutine when r has a spare
// worker, so the result is the same either way.
func (r *mlRun) recurse(g *Graph, ids []uint32, k int, base uint32, ub float64, where []uint32) error {
	if k == 1 || g.NumVertices() == 0 {
		for _, v := range ids {
			where[v] = base
		}
		return nil
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	r.keepScratchFor(g.NumVertices())
	k0 := k / 2
	side, err := r.bisectBest(g, float64(k0)/float64(k), ub)
	if err != nil {
		return err
	}
	// The pool holds arrays of g's size, more than the halves need. When
	// they are large, they are dropped and a collection right away lets
	// the halves allocate from that memory instead of the heap first
	// growing by GOGC; the heap of a partitioning run is a few large
	// arrays without pointers, so it costs little, but a fixed cost all
	// the same. Small graphs (Cora: 14 bisections, 2 tries of each of
	// the 7, into 8 parts) keep their arrays for the next try and the
	// halves.
	if pool := r.pool(); pool.bytes() >= mlPoolCollectBytes {
		pool.clear()
		runtime.GC()
	}
	ks := [2]int{k0, k - k0}
	bases := [2]uint32{base, base + uint32(k0)}
	seeds := [2]uint64{r.rng.Uint64(), r.rng.Uint64()}
	// A half that is one part is labelled here; only halves that are
	// split further are cut out as subgraphs.
	if ks[0] == 1 || ks[1] == 1 {
		for i, s := range side {
			if ks[s] == 1 {
				where[ids[i]] = bases[s]
			}
		}
	}
	var subs [2]*Graph
	var subIDs [2][]uint32
	cut := func(s int) {
		if ks[s] == 1 {
			return
		}
		subs[s], subIDs[s] = mlSubgraph(r.scratch(), r.workers, g, side, uint32(s))
		for i, v := range subIDs[s] {
			subIDs[s][i] = ids[v]
		}
	}
	// side lives in r's scratch, which the halves reuse: there both
	// subgraphs are cut out before either half starts. Without a
	// scratch (large graphs) side stays intact, and each subgraph is cut
	// out when its turn comes, so that only one is alive at a time.
	if !r.noScratch {
		cut(0)
		cut(1)
	}
	// half recurses into half s on the scratch ws and returns the
	// scratch its run ended with (a fresh one when ws was nil).
	half := func(s int, ws *mlScratch) (*mlScratch, error) {
		if ks[s] == 1 {
			return ws, nil
		}
		if subs[s] == nil {
			cut(s)
		}
		hr := r.derive(seeds[s], r.workers, ws)
		err := hr.recurse(subs[s], subIDs[s], ks[s], bases[s], ub, where)
		return hr.ws, err
	}
	// done forgets a half's subgraph once its recursion has returned;
	// with a scratch, its arrays came from r's pool and go back there,
	// for the next bisections of r's goroutine.
	done := func(s int) {
		if subs[s] != nil && !r.noScratch {
			mlPutSubgraph(r.pool(), subs[s], subIDs[s])
		}
		subs[s], subIDs[s] = nil, nil
	}
	if ks[0] > 1 && ks[1] > 1 && len(g.Adjncy) <= mlParallelHalvesMaxAdj {
		var wg sync.WaitGroup
		var err1 error
		if r.shared.spawn(&wg, func(ws *mlScratch) *mlScratch {
			ws, err1 = half(1, ws)
			return ws
		}) {
			_, err0 := half(0, r.ws)
			done(0)
			wg.Wait()
			if err0 == nil {
				err0 = err1
			}
			done(1)
			return err0
		}
	}
	for s := range subs {
		_, err := half(s, r.ws)
		done(s)
		if err != nil {
			return err
		}
	}
	return nil
}

// bisect splits g into side 0 holding frac of every constraint and side
// 1 holding the rest: it coarsens g, grows mlGrowTries bisections of the
// coarsest graph and keeps the best after FM, then projects it back with
// FM at every level. The result lives in r's scratch until the next
// bisect of r; exc and cut are the last FM's: how far the worse side
// passes its bound (0 when balanced) and the cut.
func (r *mlRun) bisect(g *Graph, frac, ub float64) (where []uint32, exc float64, cut int64, err error) {
	levels, err := r.coarsen(g, mlBisectCoarsenTo)
	if err != nil {
		return nil, 0, 0, err
	}
	// Progress: half of g's units once coarsened, the other half level
	// by level as each is refined, in proportion to its vertices.
	half := r.share * float64(g.NumVertices()) / 2
	r.progress.add(half)
	var refined int
	for _, l := range levels {
		refined += l.g.NumVertices()
	}
	credit := func(l *Graph) { r.progress.add(half * float64(l.NumVertices()) / float64(refined)) }
	top := levels[len(levels)-1].g
	ws := r.scratch()
	tn := top.NumVertices()
	// Each grown bisection is made in cur; the best so far is kept in
	// best, and the two swap when cur wins.
	cur, best := mlBuf(&ws.grown[0], tn), mlBuf(&ws.grown[1], tn)
	var bestExc float64
	var bestCut int64
	for try := 0; try < mlGrowTries; try++ {
		r.grow(top, frac, cur)
		fm := newFM(r, top, cur, frac, ub)
		fm.refine(mlGrowFMPasses)
		exc := fm.excess()
		if try == 0 || exc < bestExc || (exc == bestExc && fm.cut < bestCut) {
			cur, best = best, cur
			bestExc, bestCut = exc, fm.cut
		}
	}
	where = best
	fm := newFM(r, top, where, frac, ub)
	fm.refine(mlFMPasses)
	credit(top)
	for l := len(levels) - 2; l >= 0; l-- {
		if err := r.ctx.Err(); err != nil {
			return nil, 0, 0, err
		}
		r.drop(&levels[l+1]) // the coarser graph is no longer needed
		levels[l].unpack(r.pool())
		// Levels alternate between two buffers: the coarser assignment
		// is read while the finer one is written.
		where = r.project(levels[l], where, mlBuf(&ws.where[l&1], levels[l].g.NumVertices()))
		fm = newFM(r, levels[l].g, where, frac, ub)
		fm.refine(mlFMPasses)
		credit(levels[l].g)
	}
	r.pool().putLevel(levels[0].cmap, nil, nil)
	return where, fm.excess(), fm.cut, nil
}

// grow grows side 0 breadth-first from a random vertex until it holds
// frac of the graph's weight (averaged over constraints); a new random
// vertex seeds the search when a component is exhausted.
func (r *mlRun) grow(g *Graph, frac float64, where []uint32) {
	n := g.NumVertices()
	nc := g.ncon()
	tot := g.totals()
	for i := range where {
		where[i] = 1
	}
	var fill float64 // mean over constraints of side 0's share of the target
	ws := r.scratch()
	queue := mlBuf(&ws.queue, n)[:0]
	perm := mlBuf(&ws.perm, n) // free: grow runs after coarsening
	for i := range perm {
		perm[i] = uint32(i)
	}
	r.shuffle(perm)
	next := 0
	for fill < 1 {
		if len(queue) == 0 {
			for next < n && where[perm[next]] == 0 {
				next++
			}
			if next == n {
				break
			}
			v := perm[next]
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
}

// mlShare is v's weight as a share of side 0's target, averaged over
// constraints.
func mlShare(g *Graph, v int, tot []int64, frac float64, nc int) float64 {
	var s float64
	for c := 0; c < nc; c++ {
		if tot[c] > 0 {
			s += float64(g.vwgt(v, c)) / (frac * float64(tot[c]))
		}
	}
	return s / float64(nc)
}

// mlSubgraph is the subgraph induced by the vertices with where == side,
// and the map from its vertices to g's. Rows are counted and then
// copied by up to workers goroutines, each over a range of the
// subgraph's vertices. Its arrays come from ws's pool; mlPutSubgraph
// gives them back.
func mlSubgraph(ws *mlScratch, workers int, g *Graph, where []uint32, side uint32) (*Graph, []uint32) {
	n := g.NumVertices()
	nc := g.ncon()
	local := mlBuf(&ws.local, n) // written for every vertex of side before it is read
	sn := 0
	for v := 0; v < n; v++ {
		if where[v] == side {
			local[v] = uint32(sn)
			sn++
		}
	}
	ids := ws.pool.getAdj(int64(sn))
	for v := 0; v < n; v++ {
		if where[v] == side {
			ids[local[v]] = uint32(v)
		}
	}
	// Unit weights stay implicit (nil), as in g: the subgraphs of an
	// unweighted input cost 4 bytes per adjacency entry, not 8.
	sub := &Graph{Xadj: ws.pool.getI64(int64(sn) + 1), Ncon: g.Ncon}
	sub.Xadj[0] = 0 // the count below sets the others
	// g's adjacency before each vertex, to split the count
	work := mlBuf(&ws.fill, sn+1)
	work[0] = 0
	for i, v := range ids {
		work[i+1] = work[i] + g.Xadj[v+1] - g.Xadj[v]
	}
	mlParallel(workers, sn, work, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := ids[i]
			var d int64
			for _, u := range g.Adjncy[g.Xadj[v]:g.Xadj[v+1]] {
				if where[u] == side {
					d++
				}
			}
			sub.Xadj[i+1] = d
		}
	})
	for i := 0; i < sn; i++ {
		sub.Xadj[i+1] += sub.Xadj[i]
	}
	sub.Adjncy = ws.pool.getAdj(sub.Xadj[sn])
	if g.Adjwgt != nil {
		sub.Adjwgt = ws.pool.getWgt(sub.Xadj[sn])
	}
	mlParallel(workers, sn, sub.Xadj, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := ids[i]
			o := sub.Xadj[i]
			for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
				if u := g.Adjncy[e]; where[u] == side {
					sub.Adjncy[o] = local[u]
					if g.Adjwgt != nil {
						sub.Adjwgt[o] = g.Adjwgt[e]
					}
					o++
				}
			}
		}
	})
	if g.Vwgt != nil {
		sub.Vwgt = ws.pool.getI64(int64(sn * nc))[:0]
		for _, v := range ids {
			sub.Vwgt = append(sub.Vwgt, g.Vwgt[int(v)*nc:int(v)*nc+nc]...)
		}
	}
	return sub, ids
}

// mlPutSubgraph gives the arrays of a subgraph from mlSubgraph, and its
// ids, back to pool once its recursion is done.
func mlPutSubgraph(pool *mlPool, sub *Graph, ids []uint32) {
	pool.put(sub.Adjncy, sub.Adjwgt)
	pool.putLevel(ids, sub.Xadj, sub.Vwgt)
}

// mlCut is the total weight of g's edges between parts.
func mlCut(g *Graph, where []uint32) int64 {
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
