package partition

import "slices"

// mlCmap numbers the coarse vertices in order of their smaller member,
// which makes the coarse ids of any range of fine vertices contiguous.
func mlCmap(match []uint32) (cmap []uint32, cn int) {
	cmap = make([]uint32, len(match))
	for u, m := range match {
		if int(m) >= u {
			cmap[u] = uint32(cn)
			cmap[m] = uint32(cn)
			cn++
		}
	}
	return cmap, cn
}

// contract builds the coarse graph of a matching. Ranges of fine
// vertices are contracted in parallel; each coarse vertex's row depends
// only on its members, so the graph is the same for any worker count.
//
// A coarse row holds at most its members' entries, and every fine vertex
// is a member of one coarse vertex, so the coarse rows fit in an array as
// long as the fine adjacency: each range of workers writes at the sum of
// its members' degrees so far, and a sequential pass closes the gaps. No
// per-worker buffers to copy.
func (r *mlRun) contract(g *WGraph, match, cmap []uint32, cn int) *WGraph {
	n := g.NumVertices()
	nc := g.ncon()
	cg := &WGraph{Xadj: make([]int64, cn+1), Vwgt: make([]int64, cn*nc), Ncon: g.Ncon}
	adj := make([]uint32, g.Xadj[n])
	wgt := make([]int32, g.Xadj[n])
	bounds := mlSplit(r.workers, n, g.Xadj)
	used := make([]int64, len(bounds)-1)  // entries written by each range
	start := make([]int64, len(bounds)-1) // where each range writes
	for i := 1; i < len(start); i++ {
		start[i] = start[i-1]
		for u := bounds[i-1]; u < bounds[i]; u++ {
			if m := int(match[u]); m > u {
				start[i] += g.Xadj[u+1] - g.Xadj[u] + g.Xadj[m+1] - g.Xadj[m]
			} else if m == u {
				start[i] += g.Xadj[u+1] - g.Xadj[u]
			}
		}
	}
	mlParallel(r.workers, n, g.Xadj, func(lo, hi int) {
		slot := make([]int32, cn) // slot[c]: offset of coarse neighbour c in this row, or -1
		for i := range slot {
			slot[i] = -1
		}
		ri := slices.Index(bounds, lo)
		base := start[ri]
		w := base
		for u := lo; u < hi; u++ {
			m := int(match[u])
			if m < u {
				continue
			}
			c := cmap[u]
			rowStart := w
			for _, v := range [2]int{u, m} {
				for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
					k := cmap[g.Adjncy[e]]
					if k == c {
						continue
					}
					if s := slot[k]; s >= 0 {
						wgt[rowStart+int64(s)] += int32(g.ewgt(e))
					} else {
						slot[k] = int32(w - rowStart)
						adj[w] = k
						wgt[w] = int32(g.ewgt(e))
						w++
					}
				}
				for j := 0; j < nc; j++ {
					cg.Vwgt[int(c)*nc+j] += g.vwgt(v, j)
				}
				if m == u {
					break
				}
			}
			for _, k := range adj[rowStart:w] {
				slot[k] = -1
			}
			// Row lengths now, prefix sums after the join.
			cg.Xadj[c+1] = w - rowStart
		}
		used[ri] = w - base
	})
	for c := 0; c < cn; c++ {
		cg.Xadj[c+1] += cg.Xadj[c]
	}
	var off int64
	for i, u := range used {
		from := start[i]
		copy(adj[off:off+u], adj[from:from+u])
		copy(wgt[off:off+u], wgt[from:from+u])
		off += u
	}
	if off < g.Xadj[n]*3/4 {
		// Much smaller than its bound: give the tail back.
		adj, wgt = slices.Clone(adj[:off]), slices.Clone(wgt[:off])
	}
	cg.Adjncy, cg.Adjwgt = adj[:off], wgt[:off]
	return cg
}
