package multilevel

import (
	"cmp"
	"slices"
)

// mlDegreeSplitGate: the degree split (see degreeSplit) is refined only
// when, as filled, it cuts at most this multiple of the multilevel
// bisection's cut, or that bisection passes its balance bound. Where the
// split won (BlogCatalog, R-MAT), it cut 0.18–0.99 × the multilevel
// bisection before refinement, and refinement took off 1–3% more; where
// it lost, it cut 1.15–83 × before and still 1.08–20 × after (Cora: 2 ×
// at the least), so the gate spares those bisections a pass of FM over a
// boundary of half the graph.
const mlDegreeSplitGate = 1.25

// degreeSplit offers g's bisection a second candidate besides side, the
// multilevel bisection whose excess over the bound is exc and whose cut
// is cut: side 0 takes g's vertices in order of decreasing weighted
// degree (ties by id) until it holds frac of the weight, as grow fills
// it, and FM refines that on g itself. The candidate replaces side when
// its excess is smaller, or as small with a smaller cut, so the
// bisection never gets worse.
//
// Power-law graphs have a core: their high-degree vertices are joined
// to one another far more than to the rest, and the periphery hangs on
// the core. Split by vertex count, core against periphery cuts fewer
// edges than any cut the hierarchy offers: coarsening pairs core and
// periphery vertices, so no coarse level can draw that split, and the
// multilevel bisection only finds it when FM on the finest levels climbs
// there. On BlogCatalog its coarsest graph is cut in 136 k edges, FM on
// the finest two levels brings that to 57 k in most seeds and to 97 k in
// some; core against periphery is 44.6 k before refinement. Into 2 / 4 /
// 8 parts, one worker, the mean cut went 53.4 / 130.7 / 190.6 k → 41.3
// / 118.9 / 186.8 k on BlogCatalog (seeds 1–4) and 173 / 522 / 896 k →
// 28 / 191 / 475 k on the R-MAT graph of 2^17 vertices (seeds 1–2); on
// Cora it never wins. It uses no random numbers, so wherever it does not
// win the partition is the one it was.
//
// It runs once per bisection, after its tries, on r's goroutine: it
// takes the order and the candidate from r's scratch (lead and perm,
// free once coarsening is done; perm's memory is where[1], which no
// result of bisect occupies) and the FM state like any level.
func (r *mlRun) degreeSplit(g *Graph, frac, ub float64, side []uint32, exc float64, cut int64) {
	n := g.NumVertices()
	ws := r.scratch()
	order := mlDegreeOrder(ws, g)
	cand := mlBuf(&ws.perm, n)
	for i := range cand {
		cand[i] = 1
	}
	tot := g.totals()
	nc := g.ncon()
	var fill float64
	for _, v := range order {
		if fill >= 1 {
			break
		}
		cand[v] = 0
		fill += mlShare(g, int(v), tot, frac, nc)
	}
	fm := newFM(r, g, cand, frac, ub) // its cut is the split's, as filled
	if exc == 0 && float64(fm.cut) > mlDegreeSplitGate*float64(cut) {
		return
	}
	fm.refine(mlFMPasses)
	if e := fm.excess(); e < exc || (e == exc && fm.cut < cut) {
		copy(side, cand)
	}
}

// mlDegreeOrder is g's vertices by decreasing weighted degree, ties by
// increasing id, in ws's lead buffer. Unit weights are counted into
// buckets of equal degree (ws.cols holds the counts); weighted degrees,
// which need not fit a bucket array, are sorted (ws.start holds them,
// free here as in coarsening).
func mlDegreeOrder(ws *mlScratch, g *Graph) []uint32 {
	n := g.NumVertices()
	order := mlBuf(&ws.lead, n)
	if g.Adjwgt != nil {
		deg := mlBuf(&ws.start, n)
		for v := range n {
			var d int64
			for _, w := range g.Adjwgt[g.Xadj[v]:g.Xadj[v+1]] {
				d += int64(w)
			}
			deg[v] = d
			order[v] = uint32(v)
		}
		slices.SortFunc(order, func(a, b uint32) int {
			if deg[a] != deg[b] {
				return cmp.Compare(deg[b], deg[a])
			}
			return cmp.Compare(a, b)
		})
		return order
	}
	var maxDeg int64
	for v := range n {
		maxDeg = max(maxDeg, g.Xadj[v+1]-g.Xadj[v])
	}
	// at[d]: where the vertices of degree d start, highest degree first.
	at := mlBuf(&ws.cols, int(maxDeg)+1)
	clear(at)
	for v := range n {
		at[g.Xadj[v+1]-g.Xadj[v]]++
	}
	var next uint32
	for d := maxDeg; d >= 0; d-- {
		c := at[d]
		at[d] = next
		next += c
	}
	for v := range n {
		d := g.Xadj[v+1] - g.Xadj[v]
		order[at[d]] = uint32(v)
		at[d]++
	}
	return order
}
