package multilevel

// mlPool recycles the adjacency and edge-weight arrays of one
// goroutine's hierarchies. Coarsening builds level i+1 while level i is
// alive and then packs level i, so the arrays of level i-1 are free just
// when level i+1 needs room, and they are large enough: every level
// holds at most the entries of the one before it. Uncoarsening frees a
// level as it unpacks the next finer one. Taking arrays from the pool
// instead of the heap spares the fresh pages (each first touched through
// a page fault and cleared by the kernel), the clearing by the
// allocator, and the garbage that the collector would otherwise let grow
// by GOGC before reusing it.
//
// Arrays come back with stale contents: every user writes all of what
// it reads.
//
// It also recycles the other arrays of a coarse level, row offsets and
// vertex weights (i64) and the map to the next coarser level (adj's
// list, which holds uint32 arrays), and, for graphs small enough to
// keep a scratch (mlScratchMaxVertices), the subgraphs of recursive
// bisection; see mlPoolMax for how many it keeps.
type mlPool struct {
	adj [][]uint32
	wgt [][]int32
	i64 [][]int64
}

// mlPoolMax is how many arrays of each kind a pool keeps once they
// hold more than mlPoolKeepBytes: the two levels whose arrays alternate
// during coarsening. Below that it keeps every array it is given, so
// that on small graphs the arrays of a whole hierarchy serve the next
// bisection and the next try: Cora into 2 parts (then 6 tries of the
// whole recursion, each about 7 levels) allocated 1.5 MB of level arrays
// with at most two kept.
const (
	mlPoolMax       = 2
	mlPoolKeepBytes = 1 << 20
)

// getAdj returns an adjacency array of length n, recycled when one of
// the pool's is large enough.
func (p *mlPool) getAdj(n int64) []uint32 { return mlPoolGet(&p.adj, n) }

// getWgt returns an edge-weight array of length n, recycled when one of
// the pool's is large enough.
func (p *mlPool) getWgt(n int64) []int32 { return mlPoolGet(&p.wgt, n) }

// getI64 returns an int64 array of length n (row offsets, vertex
// weights), recycled when one of the pool's is large enough.
func (p *mlPool) getI64(n int64) []int64 { return mlPoolGet(&p.i64, n) }

// put gives a level's arrays back (nil ones are skipped). The caller
// must hold no other reference to them.
func (p *mlPool) put(adj []uint32, wgt []int32) {
	mlPoolPut(&p.adj, adj)
	mlPoolPut(&p.wgt, wgt)
}

// putLevel gives back the arrays of a coarse level that the pool keeps
// besides adjacency and weights: its map to the coarser level, row
// offsets and vertex weights.
func (p *mlPool) putLevel(cmap []uint32, xadj, vwgt []int64) {
	mlPoolPut(&p.adj, cmap)
	mlPoolPut(&p.i64, xadj)
	mlPoolPut(&p.i64, vwgt)
}

// mlPoolCollectBytes: recurse collects garbage after emptying a pool
// that held at least this much. At 4 MiB, BlogCatalog into 8 parts under
// nodes and edges (whose top bisection leaves two halves of about 170 k
// entries, not one of 545 k and one of 7 k as under nodes alone) skipped
// the collection after the second round and peaked at 30 MiB instead of
// 25; at 1 MiB the same partitions take the same time (rmat1m into 64
// parts: 17.2–17.5 s, 1015 MiB, both ways).
const mlPoolCollectBytes = 1 << 20

// bytes is what the pool's arrays hold.
func (p *mlPool) bytes() int64 {
	return mlPoolBytes(p.adj) + mlPoolBytes(p.wgt) + mlPoolBytes(p.i64)
}

// clear drops every array the pool holds.
func (p *mlPool) clear() {
	clear(p.adj)
	clear(p.wgt)
	clear(p.i64)
	p.adj, p.wgt, p.i64 = p.adj[:0], p.wgt[:0], p.i64[:0]
}

// mlPoolBytes is what the arrays of list hold.
func mlPoolBytes[T uint32 | int32 | int64](list [][]T) int64 {
	var n int64
	for _, a := range list {
		n += int64(cap(a))
	}
	var x T
	if _, wide := any(x).(int64); wide {
		return 8 * n
	}
	return 4 * n
}

// mlPoolGet takes the smallest array of list that holds n, or allocates.
func mlPoolGet[T uint32 | int32 | int64](list *[][]T, n int64) []T {
	best := -1
	for i, a := range *list {
		if int64(cap(a)) >= n && (best < 0 || cap(a) < cap((*list)[best])) {
			best = i
		}
	}
	if best < 0 {
		return make([]T, n)
	}
	return mlPoolTake(list, best)[:n]
}

// mlPoolPut adds a to list, then drops the smallest arrays while the
// list is full (see mlPoolMax).
func mlPoolPut[T uint32 | int32 | int64](list *[][]T, a []T) {
	if cap(a) == 0 {
		return
	}
	*list = append(*list, a[:0])
	for len(*list) > mlPoolMax && mlPoolBytes(*list) > mlPoolKeepBytes {
		small := 0
		for i, b := range *list {
			if cap(b) < cap((*list)[small]) {
				small = i
			}
		}
		mlPoolTake(list, small)
	}
}

// mlPoolTake removes array i from list (the last takes its place) and
// returns it.
func mlPoolTake[T uint32 | int32 | int64](list *[][]T, i int) []T {
	a := (*list)[i]
	last := len(*list) - 1
	(*list)[i] = (*list)[last]
	(*list)[last] = nil
	*list = (*list)[:last]
	return a
}
