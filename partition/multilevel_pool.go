package partition

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
type mlPool struct {
	adj [][]uint32
	wgt [][]int32
}

// mlPoolMax is how many arrays of each kind a pool keeps: the two
// levels whose arrays alternate during coarsening.
const mlPoolMax = 2

// getAdj returns an adjacency array of length n, recycled when one of
// the pool's is large enough.
func (p *mlPool) getAdj(n int64) []uint32 { return mlPoolGet(&p.adj, n) }

// getWgt returns an edge-weight array of length n, recycled when one of
// the pool's is large enough.
func (p *mlPool) getWgt(n int64) []int32 { return mlPoolGet(&p.wgt, n) }

// put gives a level's arrays back (nil ones are skipped). The caller
// must hold no other reference to them.
func (p *mlPool) put(adj []uint32, wgt []int32) {
	mlPoolPut(&p.adj, adj)
	mlPoolPut(&p.wgt, wgt)
}

// mlPoolCollectBytes: recurse collects garbage after emptying a pool
// that held at least this much.
const mlPoolCollectBytes = 1 << 22

// clear drops every array the pool holds and returns their bytes.
func (p *mlPool) clear() int64 {
	var b int64
	for _, a := range p.adj {
		b += 4 * int64(cap(a))
	}
	for _, a := range p.wgt {
		b += 4 * int64(cap(a))
	}
	clear(p.adj)
	clear(p.wgt)
	p.adj, p.wgt = p.adj[:0], p.wgt[:0]
	return b
}

// mlPoolGet takes the smallest array of list that holds n, or allocates.
func mlPoolGet[T uint32 | int32](list *[][]T, n int64) []T {
	best := -1
	for i, a := range *list {
		if int64(cap(a)) >= n && (best < 0 || cap(a) < cap((*list)[best])) {
			best = i
		}
	}
	if best < 0 {
		return make([]T, n)
	}
	a := (*list)[best]
	last := len(*list) - 1
	(*list)[best] = (*list)[last]
	(*list)[last] = nil
	*list = (*list)[:last]
	return a[:n]
}

// mlPoolPut adds a to list, dropping the smallest array when the list
// is full.
func mlPoolPut[T uint32 | int32](list *[][]T, a []T) {
	if cap(a) == 0 {
		return
	}
	*list = append(*list, a[:0])
	if len(*list) > mlPoolMax {
		small := 0
		for i, b := range *list {
			if cap(b) < cap((*list)[small]) {
				small = i
			}
		}
		last := len(*list) - 1
		(*list)[small] = (*list)[last]
		(*list)[last] = nil
		*list = (*list)[:last]
	}
}
