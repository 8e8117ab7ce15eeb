package multilevel

// mlScratch is the working memory of one goroutine of Partition, kept
// from level to level and from bisection to bisection: matching,
// contraction marks, FM state and the projected assignments are needed
// for one level at a time, so each is allocated once at the size of the
// largest graph the goroutine sees (the first) and reused. Before it, one
// recursive bisection of Cora (2708 vertices) allocated about 1 MB, 20
// times its input, and on small graphs the collections and fresh pages
// this garbage cost were a large share of the time.
//
// Buffers come back with stale contents: every user initialises what it
// reads, so results never depend on what ran before.
type mlScratch struct {
	match, perm, sorted []uint32 // matching: partners, visiting order
	cols, stamp         []uint32 // 2-hop matching
	start, fill         []int64  // 2-hop matching
	twins               []mlTwin // 2-hop twin matching
	slot                []int32  // contraction, one range
	rowLen              []int64  // contraction: coarse row lengths
	lead                []uint32 // contraction: smaller member of each coarse vertex
	local               []uint32 // mlSubgraph: ids in the subgraph
	where               [2][]uint32
	best                []uint32    // bisectBest: the best try so far
	grown               [2][]uint32 // bisect: grown bisections of the coarsest graph
	queue               []uint32    // grow: the breadth-first queue
	fm                  mlFM        // the one FM state in use (see newFM)
	fmPW                []int64     // fm's part weights, 2 × ncon
	fmW                 []float64   // fm's targets and bounds, 4 × ncon

	// FM state of the level being refined, or k-way refinement state
	// (id, ed, pos, locked, dense): one of them is in use at a time.
	dense    []int32
	id, ed   []int64
	pos      []int32
	locked   []bool
	heapIDs  [][]uint32 // FM queue of side s and constraint c at s*nc+c
	heapKeys [][]int64
	qnum     []uint16 // FM under several constraints: each vertex's queue
	moved    []uint32

	// pool recycles level arrays. It stays when r keeps no per-vertex
	// buffers (see keepScratchFor and pool).
	pool mlPool
}

// mlBuf returns (*buf)[:n], reallocating when the capacity is short.
// The contents are not cleared.
func mlBuf[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
	}
	return (*buf)[:n]
}

// reserve sizes the per-vertex buffers for graphs of up to n vertices,
// so that they are allocated once instead of growing with the levels of
// the first bisection (which start from the coarsest).
//
// Buffers of the same type whose users never overlap in time on a
// goroutine share their memory: coarsening (matching, 2-hop matching,
// contraction) ends before the coarsest graph is partitioned, and the
// arrays of refinement (FM and k-way state, the projected assignments)
// are dead, but for the bisection's result, when the subgraphs of
// recursive bisection are cut out, and that result is in where[0] or
// best, which alias nothing used there. Sharing takes 130 KB off each
// goroutine's scratch for Cora (2708 vertices), a third of it.
func (ws *mlScratch) reserve(n int) {
	ws.heaps(2)
	for _, p := range [...][2]*[]uint32{
		{&ws.match, &ws.where[0]},
		{&ws.perm, &ws.where[1]},
		{&ws.sorted, &ws.heapIDs[0]},
		{&ws.stamp, &ws.heapIDs[1]},
		{&ws.lead, &ws.local},
	} {
		mlAlias(p[0], p[1], n)
	}
	for _, p := range [...][2]*[]int64{
		{&ws.start, &ws.id},
		{&ws.fill, &ws.ed},
		{&ws.rowLen, &ws.heapKeys[0]},
	} {
		mlAlias(p[0], p[1], n+1) // start has n+1 entries
	}
	mlBuf(&ws.heapKeys[1], n)
	mlAlias(&ws.slot, &ws.pos, n)
	mlBuf(&ws.locked, n)
}

// mlAlias makes *a and *b views of one array of at least n entries (a
// new one when *a is shorter).
func mlAlias[T any](a, b *[]T, n int) {
	mlBuf(a, n)
	*b = (*a)[:0]
}

// heaps makes room for the arrays of q FM queues.
func (ws *mlScratch) heaps(q int) {
	for len(ws.heapIDs) < q {
		ws.heapIDs = append(ws.heapIDs, nil)
		ws.heapKeys = append(ws.heapKeys, nil)
	}
}

// mlScratchMaxVertices: a goroutine working on a graph of more vertices
// keeps no scratch; each use gets fresh buffers that die with it. Kept
// buffers stay resident for the whole bisection, about 100 bytes per
// vertex when this was measured (about 55 since the phases share them):
// on the 1 M vertex R-MAT graph that raised the peak, which the first
// bisection sets, by a tenth, while there the allocations cost little
// next to the work per level.
const mlScratchMaxVertices = 1 << 18

// keepScratchFor decides, as r starts on a graph of n vertices, whether
// r keeps a scratch (reserved for n vertices) or uses fresh buffers (see
// mlScratchMaxVertices).
func (r *mlRun) keepScratchFor(n int) {
	if r.noScratch = n > mlScratchMaxVertices; !r.noScratch {
		r.scratch().reserve(n)
	}
}

// pool is the array pool of r's goroutine. It lives in r's scratch,
// which r keeps for it even while it keeps no per-vertex buffers.
func (r *mlRun) pool() *mlPool {
	if r.ws == nil {
		r.ws = &mlScratch{}
	}
	return &r.ws.pool
}

// scratch is r's working memory, allocated on first use, or a fresh one
// when r works on a graph too large to keep one (see keepScratchFor).
func (r *mlRun) scratch() *mlScratch {
	if r.noScratch {
		return &mlScratch{}
	}
	if r.ws == nil {
		r.ws = &mlScratch{}
	}
	return r.ws
}
