package partition

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

// contract builds the coarse graph of a matching in two parallel passes
// over ranges of fine vertices: the first counts each coarse row's
// distinct neighbours and sums the vertex weights, the second writes the
// rows at their final offsets. Each coarse row is written by the range
// holding its smaller member and depends only on its members, so the
// graph is the same for any worker count.
//
// Counting first costs a second sweep of the fine adjacency but
// allocates the coarse arrays at their exact size: on power-law graphs,
// where the coarse levels are what the partitioner's memory holds, an
// array sized by the fine level's adjacency would leave up to half of
// itself unused or need a shrinking copy.
func (r *mlRun) contract(g *WGraph, match, cmap []uint32, cn int) *WGraph {
	n := g.NumVertices()
	nc := g.ncon()
	cg := &WGraph{Xadj: make([]int64, cn+1), Vwgt: make([]int64, cn*nc), Ncon: g.Ncon}
	// A single range (every small graph) takes its marks from r's
	// scratch; parallel ranges need their own.
	ws := r.scratch()
	single := len(mlSplit(r.workers, n, g.Xadj)) == 2
	mlParallel(r.workers, n, g.Xadj, func(lo, hi int) {
		var mark []uint32 // mark[k] == c+1: k already counted in row c
		if single {
			mark = mlBuf(&ws.mark, cn)
			clear(mark)
		} else {
			mark = make([]uint32, cn)
		}
		for u := lo; u < hi; u++ {
			m := int(match[u])
			if m < u {
				continue
			}
			c := cmap[u]
			var deg int64
			for _, v := range [2]int{u, m} {
				deg += mlCountRow(g.Adjncy[g.Xadj[v]:g.Xadj[v+1]], cmap, mark, c)
				for j := 0; j < nc; j++ {
					cg.Vwgt[int(c)*nc+j] += g.vwgt(v, j)
				}
				if m == u {
					break
				}
			}
			cg.Xadj[c+1] = deg // row lengths now, prefix sums below
		}
	})
	for c := 0; c < cn; c++ {
		cg.Xadj[c+1] += cg.Xadj[c]
	}
	cg.Adjncy = make([]uint32, cg.Xadj[cn])
	cg.Adjwgt = make([]int32, cg.Xadj[cn])
	mlParallel(r.workers, n, g.Xadj, func(lo, hi int) {
		var slot []int32 // slot[k]: offset of coarse neighbour k in this row, or -1
		if single {
			slot = mlBuf(&ws.slot, cn)
		} else {
			slot = make([]int32, cn)
		}
		for i := range slot {
			slot[i] = -1
		}
		for u := lo; u < hi; u++ {
			m := int(match[u])
			if m < u {
				continue
			}
			c := cmap[u]
			row := cg.Xadj[c]
			adj, wgt := cg.Adjncy[row:cg.Xadj[c+1]], cg.Adjwgt[row:cg.Xadj[c+1]]
			w := int32(0)
			for _, v := range [2]int{u, m} {
				var vw []int32
				if g.Adjwgt != nil {
					vw = g.Adjwgt[g.Xadj[v]:g.Xadj[v+1]]
				}
				w = mlWriteRow(g.Adjncy[g.Xadj[v]:g.Xadj[v+1]], vw, cmap, slot, c, adj, wgt, w)
				if m == u {
					break
				}
			}
			for _, k := range adj {
				slot[k] = -1
			}
		}
	})
	return cg
}

// mlCountRow counts the coarse neighbours (through cmap) of the fine
// adjacency adj that are not c and not yet marked for row c, and marks
// them.
func mlCountRow(adj, cmap, mark []uint32, c uint32) (deg int64) {
	for _, a := range adj {
		if k := cmap[a]; k != c && mark[k] != c+1 {
			mark[k] = c + 1
			deg++
		}
	}
	return deg
}

// mlWriteRow merges the fine adjacency adj (weights wgt, nil for all 1)
// into coarse row c, whose first w entries radj/rwgt hold: a coarse
// neighbour already in the row (slot[k] >= 0) gains the weight, a new
// one is appended. It returns the row's new length.
func mlWriteRow(adj []uint32, wgt []int32, cmap []uint32, slot []int32, c uint32, radj []uint32, rwgt []int32, w int32) int32 {
	if wgt == nil {
		for _, a := range adj {
			k := cmap[a]
			if k == c {
				continue
			}
			if s := slot[k]; s >= 0 {
				rwgt[s]++
			} else {
				slot[k] = w
				radj[w] = k
				rwgt[w] = 1
				w++
			}
		}
		return w
	}
	wgt = wgt[:len(adj)]
	for i, a := range adj {
		k := cmap[a]
		if k == c {
			continue
		}
		if s := slot[k]; s >= 0 {
			rwgt[s] += wgt[i]
		} else {
			slot[k] = w
			radj[w] = k
			rwgt[w] = wgt[i]
			w++
		}
	}
	return w
}
