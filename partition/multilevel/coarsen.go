package multilevel

import (
	"cmp"
	"math"
	"slices"
)

// Coarsening tunables (METIS 5 uses the same values, see its defs.h).
const (
	// mlCoarsenFraction stops coarsening once a level keeps more than
	// this fraction of its finer level's vertices: matching has stalled.
	mlCoarsenFraction = 0.90
	// mlUnmatchedFor2Hop: when more than this fraction of vertices found
	// no neighbour to match, 2-hop matching pairs vertices that share a
	// neighbour (the leaves of a hub) or their whole neighbourhood
	// (twins). Power-law graphs stall without it.
	mlUnmatchedFor2Hop = 0.10
	// mlMaxVwgtFactor bounds a coarse vertex's weight at this multiple
	// of total/coarsenTo in every constraint, so that no coarse vertex is
	// too heavy to balance.
	mlMaxVwgtFactor = 1.5
	// mlTwinMaxDegree is the largest degree 2-hop twin matching hashes.
	mlTwinMaxDegree = 64
)

// mlUnmatched marks a vertex without a partner during matching.
const mlUnmatched = math.MaxUint32

// mlLevel is one graph of the hierarchy and the map from its vertices to
// those of the next coarser graph.
type mlLevel struct {
	g    *Graph
	cmap []uint32 // nil on the coarsest level
	// packed holds g's adjacency while coarser levels are built (g then
	// has Xadj and Vwgt only); unpack before use.
	packed *mlPacked
}

// drop frees level l of a hierarchy (never levels[0], the caller's
// graph) once the finer level has been unpacked: its arrays, the
// adjacency and weights unless packed, go to r's pool.
func (r *mlRun) drop(l *mlLevel) {
	if l.g != nil {
		if l.packed == nil {
			r.pool().put(l.g.Adjncy, l.g.Adjwgt)
		}
		r.pool().putLevel(l.cmap, l.g.Xadj, l.g.Vwgt)
	}
	*l = mlLevel{}
}

// coarsen contracts g by repeated matching until it has at most
// coarsenTo vertices or matching stalls. levels[0] is g itself.
func (r *mlRun) coarsen(g *Graph, coarsenTo int) ([]mlLevel, error) {
	tot := g.totals()
	maxv := make([]int64, len(tot))
	for c, t := range tot {
		maxv[c] = max(1, int64(math.Ceil(mlMaxVwgtFactor*float64(t)/float64(coarsenTo))))
	}
	levels := []mlLevel{{g: g}}
	// Packing a level reads only that level, which the next matching does
	// not: with more than one worker it runs beside it. settle waits for
	// it, installs the packed level and gives its arrays to the pool
	// before the next contraction takes its room from there, so that, as
	// when packing in turn, no more than two unpacked levels are alive at
	// once.
	var settle func()
	wait := func() {
		if settle != nil {
			settle()
			settle = nil
		}
	}
	defer wait() // an error return: the goroutine may still be packing
	// While all edges weigh the same, heavy-edge matching has nothing to
	// prefer: match at random, in random order (METIS does the same).
	random := mlEqualWeights(g)
	for {
		cur := levels[len(levels)-1].g
		n := cur.NumVertices()
		if n <= coarsenTo || cur.Xadj[n] < int64(n)/2 {
			break
		}
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		match := r.match(cur, maxv, random)
		random = false
		cmap, cn := mlCmap(r.pool(), match)
		wait()
		if cn == n {
			break
		}
		cg := r.contract(cur, match, cmap, cn)
		levels[len(levels)-1].cmap = cmap
		levels = append(levels, mlLevel{g: cg})
		if i := len(levels) - 2; i > 0 {
			// levels[0] is the caller's graph; the levels between it
			// and the newest wait for uncoarsening. Weights widen
			// slowly from level to level: the finer level's width is
			// the first to try.
			wgtW := 1
			if p := levels[i-1].packed; p != nil {
				wgtW = p.wgtW
			}
			if r.workers == 1 {
				r.pool().put(levels[i].pack(wgtW))
			} else {
				l := levels[i]
				var adj []uint32
				var wgt []int32
				done := make(chan struct{})
				go func() {
					adj, wgt = l.pack(wgtW)
					close(done)
				}()
				settle = func() {
					<-done
					levels[i] = l
					r.pool().put(adj, wgt)
				}
			}
		}
		if float64(cn) > mlCoarsenFraction*float64(n) {
			break
		}
	}
	wait()
	return levels, nil
}

// match computes a heavy-edge matching: match[u] is u's partner, or u.
// Vertices are visited in random order sorted by degree (capped at 0.7 ×
// the average), so that low-degree vertices pick first, as METIS's SHEM
// does; each takes the unmatched neighbour joined by the heaviest edge
// whose combined weight stays within maxv.
func (r *mlRun) match(g *Graph, maxv []int64, random bool) []uint32 {
	n := g.NumVertices()
	ws := r.scratch()
	perm := r.degreePerm(g, random)
	match := mlBuf(&ws.match, n)
	for i := range match {
		match[i] = mlUnmatched
	}
	nunmatched := 0
	next := 0 // scan position in perm for partners of isolated vertices
	for pi, u := range perm {
		if match[u] != mlUnmatched {
			continue
		}
		best := u
		if g.Xadj[u] == g.Xadj[u+1] {
			// An isolated vertex pairs with any later unmatched vertex.
			for next = max(next, pi+1); next < n; next++ {
				v := perm[next]
				if match[v] == mlUnmatched && mlFits(g, maxv, int(u), int(v)) {
					best = v
					break
				}
			}
		} else {
			var bw int64 = -1
			for e := g.Xadj[u]; e < g.Xadj[u+1]; e++ {
				v := g.Adjncy[e]
				if match[v] == mlUnmatched && g.ewgt(e) > bw && mlFits(g, maxv, int(u), int(v)) {
					best, bw = v, g.ewgt(e)
					if random {
						break
					}
				}
			}
		}
		if best != u {
			match[u], match[best] = best, u
		} else {
			nunmatched++
		}
	}
	if float64(nunmatched) > mlUnmatchedFor2Hop*float64(n) {
		nunmatched = mlMatch2HopAny(ws, g, perm, match, maxv, 2, nunmatched)
		nunmatched = mlMatch2HopTwins(ws, g, match, maxv, nunmatched)
		if float64(nunmatched) > 1.5*mlUnmatchedFor2Hop*float64(n) {
			nunmatched = mlMatch2HopAny(ws, g, perm, match, maxv, 3, nunmatched)
		}
		if float64(nunmatched) > 2*mlUnmatchedFor2Hop*float64(n) {
			mlMatch2HopAny(ws, g, perm, match, maxv, n, nunmatched)
		}
	}
	for u, m := range match {
		if m == mlUnmatched {
			match[u] = uint32(u)
		}
	}
	return match
}

// degreePerm is a random permutation of g's vertices, unless random is
// set stably bucket sorted by degree capped at 0.7 × the average degree.
// It lives in r's scratch until the next call.
func (r *mlRun) degreePerm(g *Graph, random bool) []uint32 {
	n := g.NumVertices()
	ws := r.scratch()
	perm := mlBuf(&ws.perm, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	r.shuffle(perm)
	limit := int(0.7 * float64(g.Xadj[n]) / float64(max(n, 1)))
	if random || limit < 1 {
		return perm
	}
	key := func(u uint32) int { return int(min(g.Xadj[u+1]-g.Xadj[u], int64(limit))) }
	start := make([]int, limit+2)
	for _, u := range perm {
		start[key(u)+1]++
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	sorted := mlBuf(&ws.sorted, n)
	for _, u := range perm {
		k := key(u)
		sorted[start[k]] = u
		start[k]++
	}
	return sorted
}

// mlEqualWeights reports whether all of g's edges weigh the same.
func mlEqualWeights(g *Graph) bool {
	for _, w := range g.Adjwgt {
		if w != g.Adjwgt[0] {
			return false
		}
	}
	return true
}

// mlFits reports whether u and v may share a coarse vertex.
func mlFits(g *Graph, maxv []int64, u, v int) bool {
	if g.Vwgt == nil {
		return 2 <= maxv[0]
	}
	nc := g.ncon()
	for c := 0; c < nc; c++ {
		if g.Vwgt[u*nc+c]+g.Vwgt[v*nc+c] > maxv[c] {
			return false
		}
	}
	return true
}

// mlMatch2HopAny pairs unmatched vertices of degree below maxdeg that
// share a neighbour: the leaves around a hub, which heavy-edge matching
// leaves alone once the hub is taken. It returns the unmatched count.
func mlMatch2HopAny(ws *mlScratch, g *Graph, perm, match []uint32, maxv []int64, maxdeg, nunmatched int) int {
	n := g.NumVertices()
	// cols[start[k]:start[k+1]] lists the candidates adjacent to k.
	start := mlBuf(&ws.start, n+1)
	clear(start)
	cand := func(u int) bool {
		d := g.Xadj[u+1] - g.Xadj[u]
		return match[u] == mlUnmatched && d > 0 && d < int64(maxdeg)
	}
	for u := 0; u < n; u++ {
		if cand(u) {
			for _, k := range g.Adjncy[g.Xadj[u]:g.Xadj[u+1]] {
				start[k+1]++
			}
		}
	}
	for k := 0; k < n; k++ {
		start[k+1] += start[k]
	}
	cols := mlBuf(&ws.cols, int(start[n]))
	fill := mlBuf(&ws.fill, n)
	copy(fill, start[:n])
	for u := 0; u < n; u++ {
		if cand(u) {
			for _, k := range g.Adjncy[g.Xadj[u]:g.Xadj[u+1]] {
				cols[fill[k]] = uint32(u)
				fill[k]++
			}
		}
	}
	for _, k := range perm {
		pending := int64(-1)
		for _, u := range cols[start[k]:start[k+1]] {
			if match[u] != mlUnmatched {
				continue
			}
			if pending < 0 || !mlFits(g, maxv, int(pending), int(u)) {
				pending = int64(u)
				continue
			}
			match[u], match[pending] = uint32(pending), u
			pending = -1
			nunmatched -= 2
		}
	}
	return nunmatched
}

// mlMatch2HopTwins pairs unmatched vertices with identical neighbour
// sets (degree 2..mlTwinMaxDegree): they are found by sorting on a hash of
// the set and compared exactly. It returns the unmatched count.
func mlMatch2HopTwins(ws *mlScratch, g *Graph, match []uint32, maxv []int64, nunmatched int) int {
	cands := ws.twins[:0]
	defer func() { ws.twins = cands[:0] }()
	for u := range match {
		d := g.Xadj[u+1] - g.Xadj[u]
		if match[u] != mlUnmatched || d < 2 || d >= mlTwinMaxDegree {
			continue
		}
		var h uint64
		for _, k := range g.Adjncy[g.Xadj[u]:g.Xadj[u+1]] {
			h += mlMix(uint64(k)) // order-free sum of mixed ids
		}
		cands = append(cands, mlTwin{d, h, uint32(u)})
	}
	// Compared field by field: cmp.Or of three cmp.Compare calls
	// evaluates all three every time, and this sort was half the
	// matching time of BlogCatalog's first level.
	slices.SortFunc(cands, func(a, b mlTwin) int {
		switch {
		case a.deg != b.deg:
			return cmp.Compare(a.deg, b.deg)
		case a.hash != b.hash:
			return cmp.Compare(a.hash, b.hash)
		}
		return cmp.Compare(a.u, b.u)
	})
	stamp := mlBuf(&ws.stamp, g.NumVertices()) // stamp[k] == i+1: k is a neighbour of cands[i]
	clear(stamp)
	for i := 0; i < len(cands); i++ {
		u := cands[i].u
		if match[u] != mlUnmatched {
			continue
		}
		for _, k := range g.Adjncy[g.Xadj[u]:g.Xadj[u+1]] {
			stamp[k] = uint32(i) + 1
		}
		for j := i + 1; j < len(cands) && j < i+mlTwinMaxDegree; j++ {
			c := cands[j]
			if c.deg != cands[i].deg || c.hash != cands[i].hash {
				break
			}
			if match[c.u] != mlUnmatched || !mlFits(g, maxv, int(u), int(c.u)) {
				continue
			}
			same := true
			for _, k := range g.Adjncy[g.Xadj[c.u]:g.Xadj[c.u+1]] {
				if stamp[k] != uint32(i)+1 {
					same = false
					break
				}
			}
			if same {
				match[u], match[c.u] = c.u, u
				nunmatched -= 2
				break
			}
		}
	}
	return nunmatched
}

// mlTwin is a candidate of twin matching: its degree and the hash of its
// neighbour set, the sort key that brings twins together.
type mlTwin struct {
	deg  int64
	hash uint64
	u    uint32
}

// mlMix is SplitMix64's finaliser: a bijective scramble of x.
func mlMix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
