package multilevel

import "math"

// mlFM is the Fiduccia–Mattheyses refinement state of a bisection: side
// 0 should hold frac of every constraint, side 1 the rest, each within ub
// times its target.
//
// Under several constraints each side has a queue per constraint, as in
// METIS (FM_Mc2WayCutRefine): a vertex waits in the queue of the
// constraint of which it holds the largest share, so that a side over
// its bound in one constraint gives away vertices that carry it.
//
// INVARIANT: id/ed as in mlKway; every unlocked boundary vertex (ed > 0)
// of a pass is in heaps[where[v]][qnum[v]] (qnum nil: [0]) under a key
// of at least its gain ed-id (see mlHeap), and pos[v] is its index there
// (-1 when in no heap).
type mlFM struct {
	r      *mlRun
	g      *Graph
	nc     int
	where  []uint32
	id, ed []int64
	pw     [2][]int64
	tgt    [2][]float64
	maxw   [2][]float64
	tot    []int64
	cut    int64
	heaps  [2][]mlHeap  // per side, a queue per constraint
	one    [2][1]mlHeap // heaps' room under one constraint: no allocation
	qnum   []uint16     // each vertex's queue; nil under one constraint
	pos    []int32
	locked []bool
}

// newFM computes the state of bisection where. The state and its arrays
// are r's scratch: one mlFM or mlKway of r is in use at a time, and
// newFM's result is valid until the next.
func newFM(r *mlRun, g *Graph, where []uint32, frac, ub float64) *mlFM {
	n := g.NumVertices()
	ws := r.scratch()
	nc := g.ncon()
	f := &ws.fm
	*f = mlFM{r: r, g: g, nc: nc, where: where, id: mlBuf(&ws.id, n), ed: mlBuf(&ws.ed, n),
		tot: g.totals(), pos: mlBuf(&ws.pos, n), locked: mlBuf(&ws.locked, n)}
	clear(f.id)
	clear(f.ed)
	clear(f.locked)
	pw, w := mlBuf(&ws.fmPW, 2*nc), mlBuf(&ws.fmW, 4*nc)
	clear(pw)
	for s, fs := range [2]float64{frac, 1 - frac} {
		f.pw[s] = pw[s*nc : s*nc+nc]
		f.tgt[s] = w[s*nc : s*nc+nc]
		f.maxw[s] = w[(2+s)*nc : (2+s)*nc+nc]
		for c, t := range f.tot {
			f.tgt[s][c] = fs * float64(t)
			f.maxw[s][c] = ub * fs * float64(t)
		}
	}
	for v := 0; v < n; v++ {
		f.pos[v] = -1
		wv := where[v]
		for c := 0; c < f.nc; c++ {
			f.pw[wv][c] += g.vwgt(v, c)
		}
	}
	mlParallel(r.workers, n, g.Xadj, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			in, all := g.inside(v, where)
			f.id[v], f.ed[v] = in, all-in
		}
	})
	for _, x := range f.ed {
		f.cut += x
	}
	f.cut /= 2
	// A kept scratch was reserved for the largest level; refine hands
	// grown heaps back.
	ws.heaps(2 * f.nc)
	for s := range f.heaps {
		if f.nc == 1 {
			f.heaps[s] = f.one[s][:]
		} else {
			f.heaps[s] = make([]mlHeap, f.nc)
		}
		for c := range f.heaps[s] {
			i := s*f.nc + c
			f.heaps[s][c] = mlHeap{ids: ws.heapIDs[i][:0], keys: ws.heapKeys[i][:0], pos: f.pos}
		}
	}
	if f.nc > 1 {
		f.qnum = mlBuf(&ws.qnum, n)
		inv := make([]float64, f.nc)
		for c, t := range f.tot {
			if t > 0 {
				inv[c] = 1 / float64(t)
			}
		}
		for v := 0; v < n; v++ {
			q, share := 0, -1.0
			for c := 0; c < f.nc; c++ {
				if x := float64(g.vwgt(v, c)) * inv[c]; x > share {
					q, share = c, x
				}
			}
			f.qnum[v] = uint16(q)
		}
	}
	return f
}

// queue is the queue of v on side s.
func (f *mlFM) queue(v, s uint32) *mlHeap {
	if f.qnum == nil {
		return &f.heaps[s][0]
	}
	return &f.heaps[s][f.qnum[v]]
}

// over is how far side s passes its bound in constraint c, relative to
// its target: negative while within it.
func (f *mlFM) over(s, c int) float64 {
	if f.tgt[s][c] <= 0 {
		return math.Inf(-1)
	}
	return (float64(f.pw[s][c]) - f.maxw[s][c]) / f.tgt[s][c]
}

// next is the queue the next move comes from, nil when a pass has no
// more. Under one constraint it is the heavier side's. Under several it
// is METIS's choice (SelectQueue): when a side is at or past its bound
// in some constraint, that side's queue of the constraint it passes
// most (if empty, its non-empty queue of the constraint it passes
// most); when both sides are within their bounds, the queue whose first
// vertex gains the most.
func (f *mlFM) next() *mlHeap {
	if f.nc == 1 {
		if h := &f.heaps[f.heavier()][0]; h.len() > 0 {
			return h
		}
		return nil
	}
	from, cnum, worst := -1, 0, 0.0
	for s := 0; s < 2; s++ {
		for c := 0; c < f.nc; c++ {
			if x := f.over(s, c); x >= worst {
				from, cnum, worst = s, c, x
			}
		}
	}
	if from >= 0 {
		hs := f.heaps[from]
		if hs[cnum].len() > 0 {
			return &hs[cnum]
		}
		best := -1
		for c := range hs {
			if hs[c].len() > 0 && (best < 0 || f.over(from, c) > f.over(from, best)) {
				best = c
			}
		}
		if best < 0 {
			return nil
		}
		return &hs[best]
	}
	var best *mlHeap
	var bestGain int64
	for s := range f.heaps {
		for c := range f.heaps[s] {
			h := &f.heaps[s][c]
			if h.len() == 0 {
				continue
			}
			if g := h.top(f.gain); best == nil || g > bestGain {
				best, bestGain = h, g
			}
		}
	}
	return best
}

// excess is how far the worse side passes its bound, as a share of the
// constraint's total; 0 when balanced.
func (f *mlFM) excess() float64 {
	var x float64
	for s := 0; s < 2; s++ {
		for c, t := range f.tot {
			if t > 0 {
				x = max(x, (float64(f.pw[s][c])-f.maxw[s][c])/float64(t))
			}
		}
	}
	return x
}

// heavier is the side further above its target.
func (f *mlFM) heavier() int {
	var l [2]float64
	for s := 0; s < 2; s++ {
		for c := 0; c < f.nc; c++ {
			if f.tgt[s][c] > 0 {
				l[s] = max(l[s], float64(f.pw[s][c])/f.tgt[s][c])
			}
		}
	}
	if l[1] > l[0] {
		return 1
	}
	return 0
}

// refine runs up to passes FM passes. A pass moves vertices one at a time
// from the heavier side, best gain first, even when the cut grows, locks
// each moved vertex, and finally rolls back to the best state it saw:
// least excess over the balance bound, then least cut. A pass ends after
// a run of moves that found nothing better; refinement ends after a pass
// that kept no move.
func (f *mlFM) refine(passes int) {
	g := f.g
	n := g.NumVertices()
	limit := min(max(n/100, 15), 100)
	ws := f.r.scratch()
	moved := ws.moved[:0]
	defer func() {
		ws.moved = moved[:0]
		ws.heaps(2 * f.nc)
		for s := range f.heaps {
			for c, h := range f.heaps[s] {
				ws.heapIDs[s*f.nc+c], ws.heapKeys[s*f.nc+c] = h.ids[:0], h.keys[:0]
			}
		}
	}()
	for pass := 0; pass < passes; pass++ {
		// The boundary enters the queues at once, which are then
		// ordered in linear time: pushing each vertex cost five times
		// what the moves of a pass cost the queues (Cora).
		for v := 0; v < n; v++ {
			if f.ed[v] > 0 {
				f.queue(uint32(v), f.where[v]).add(uint32(v), f.ed[v]-f.id[v])
			}
		}
		for s := range f.heaps {
			for c := range f.heaps[s] {
				f.heaps[s][c].order()
			}
		}
		moved = moved[:0]
		best, bestCut, bestExc := 0, f.cut, f.excess()
		for {
			h := f.next()
			if h == nil {
				break
			}
			v := h.popMax(f.gain)
			f.cut -= f.ed[v] - f.id[v]
			f.locked[v] = true
			f.move(v, true)
			moved = append(moved, v)
			exc := f.excess()
			if exc < bestExc || (exc == bestExc && f.cut < bestCut) {
				best, bestCut, bestExc = len(moved), f.cut, exc
			} else if len(moved)-best > limit {
				break
			}
		}
		for s := range f.heaps {
			for c := range f.heaps[s] {
				f.heaps[s][c].clear()
			}
		}
		for i := len(moved) - 1; i >= best; i-- {
			f.move(moved[i], false)
		}
		for _, v := range moved {
			f.locked[v] = false
		}
		f.cut = bestCut
		if best == 0 {
			break
		}
	}
}

// move puts v on the other side and updates weights, id and ed. With
// queue (a pass, not its rollback), in the same sweep over v's edges
// each neighbour that is not locked takes its new key in its side's
// heap, enters it when it reaches the boundary, or leaves it.
func (f *mlFM) move(v uint32, queue bool) {
	g := f.g
	from := f.where[v]
	to := 1 - from
	for c := 0; c < f.nc; c++ {
		w := g.vwgt(int(v), c)
		f.pw[from][c] -= w
		f.pw[to][c] += w
	}
	where, id, ed, pos := f.where, f.id, f.ed, f.pos
	where[v] = to
	id[v], ed[v] = ed[v], id[v]
	lo, hi := g.Xadj[v], g.Xadj[v+1]
	adj := g.Adjncy[lo:hi]
	var wgt []int32 // nil: unit weights
	if g.Adjwgt != nil {
		wgt = g.Adjwgt[lo:hi]
	}
	for i, u := range adj {
		w := int64(1)
		if wgt != nil {
			w = int64(wgt[i])
		}
		su := where[u]
		if su == from {
			w = -w
		}
		iu, eu := id[u]+w, ed[u]-w
		id[u], ed[u] = iu, eu
		if !queue || f.locked[u] {
			continue
		}
		h := f.queue(u, su)
		switch {
		case eu > 0 && pos[u] >= 0:
			h.raise(u, eu-iu)
		case eu > 0:
			h.push(u, eu-iu)
		case pos[u] >= 0:
			h.remove(u)
		}
	}
}

// gain is what moving v to the other side takes off the cut.
func (f *mlFM) gain(v uint32) int64 { return f.ed[v] - f.id[v] }

// mlHeap is a binary max-heap of vertices under stored keys that bound
// their gains from above: push stores a vertex's gain, raise lets it
// grow, and a gain that falls is left for popMax to find once the
// vertex is on top. Two heaps share one pos array because a vertex is in
// at most one of them.
type mlHeap struct {
	ids  []uint32
	keys []int64
	pos  []int32
}

func (h *mlHeap) len() int { return len(h.ids) }

// add appends v without ordering the heap; order restores it.
func (h *mlHeap) add(v uint32, key int64) {
	h.ids = append(h.ids, v)
	h.keys = append(h.keys, key)
	h.pos[v] = int32(len(h.ids) - 1)
}

// order makes a heap of the entries add appended (Floyd's construction,
// linear in their number).
func (h *mlHeap) order() {
	for i := len(h.ids)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *mlHeap) push(v uint32, key int64) {
	h.ids = append(h.ids, v)
	h.keys = append(h.keys, key)
	h.pos[v] = int32(len(h.ids) - 1)
	h.up(len(h.ids) - 1)
}

// raise stores key, v's new gain, when it is above v's stored key; a
// lower gain is not stored. A move lowers the gain of about half the
// neighbours it updates (those in the part it joins): sifting each of
// them down at once cost more than fixing the few that reach the top in
// popMax (BlogCatalog into 4 parts 7% faster, R-MAT and Cora 3-4%).
func (h *mlHeap) raise(v uint32, key int64) {
	if i := int(h.pos[v]); key > h.keys[i] {
		h.keys[i] = key
		h.up(i)
	}
}

// popMax removes and returns the vertex of the greatest gain from a
// queue whose stored keys are at least the gains (see raise): while the
// vertex on top has a lower gain than its stored key, it takes its gain
// and sinks.
func (h *mlHeap) popMax(gain func(uint32) int64) uint32 {
	h.top(gain)
	v := h.ids[0]
	h.remove(v)
	return v
}

// top settles the vertex of the greatest gain on top of a non-empty
// queue (see popMax) and returns its gain.
func (h *mlHeap) top(gain func(uint32) int64) int64 {
	for {
		g := gain(h.ids[0])
		if g == h.keys[0] {
			return g
		}
		h.keys[0] = g
		h.down(0)
	}
}

func (h *mlHeap) remove(v uint32) {
	i := int(h.pos[v])
	last := len(h.ids) - 1
	h.swap(i, last)
	h.ids = h.ids[:last]
	h.keys = h.keys[:last]
	h.pos[v] = -1
	if i < last {
		h.down(i)
		h.up(i)
	}
}

func (h *mlHeap) clear() {
	for _, v := range h.ids {
		h.pos[v] = -1
	}
	h.ids = h.ids[:0]
	h.keys = h.keys[:0]
}

func (h *mlHeap) swap(i, j int) {
	h.ids[i], h.ids[j] = h.ids[j], h.ids[i]
	h.keys[i], h.keys[j] = h.keys[j], h.keys[i]
	h.pos[h.ids[i]] = int32(i)
	h.pos[h.ids[j]] = int32(j)
}

// up and down move the element at i as far as the heap order needs,
// shifting the others into the hole it leaves and writing it once at
// its place: the same order that swapping it step by step would leave.
func (h *mlHeap) up(i int) {
	v, k := h.ids[i], h.keys[i]
	for i > 0 {
		p := (i - 1) / 2
		if h.keys[p] >= k {
			break
		}
		h.ids[i], h.keys[i] = h.ids[p], h.keys[p]
		h.pos[h.ids[i]] = int32(i)
		i = p
	}
	h.ids[i], h.keys[i] = v, k
	h.pos[v] = int32(i)
}

func (h *mlHeap) down(i int) {
	n := len(h.ids)
	v, k := h.ids[i], h.keys[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.keys[c+1] > h.keys[c] {
			c++
		}
		if k >= h.keys[c] {
			break
		}
		h.ids[i], h.keys[i] = h.ids[c], h.keys[c]
		h.pos[h.ids[i]] = int32(i)
		i = c
	}
	h.ids[i], h.keys[i] = v, k
	h.pos[v] = int32(i)
}
