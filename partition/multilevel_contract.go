package partition

// mlCmap numbers the coarse vertices in order of their smaller member,
// which makes the coarse ids of any range of fine vertices contiguous.
// cmap comes from pool.
func mlCmap(pool *mlPool, match []uint32) (cmap []uint32, cn int) {
	cmap = pool.getAdj(int64(len(match)))
	for u, m := range match {
		if int(m) >= u {
			cmap[u] = uint32(cn)
			cmap[m] = uint32(cn)
			cn++
		}
	}
	return cmap, cn
}

// contract builds the coarse graph of a matching. Row c can hold at
// most the entries of its members, so each row is given that much room
// (prefix sums of the members' degrees, which add up to the fine
// adjacency) and written in place by one parallel pass over ranges of
// fine vertices; a sequential pass then closes the gaps. Each coarse row
// is written by the range holding its smaller member and depends only on
// its members, so the graph is the same for any worker count.
//
// The room comes from r's pool (see mlPool): from the third level on,
// the arrays of the level two above, which are at least that large, and
// the coarse level keeps them, gaps closed, until it is packed and gives
// them back. Before the pool, a first pass counted every row so that the
// arrays could be allocated at their exact size, which cost as much as
// the pass that writes them.
func (r *mlRun) contract(g *WGraph, match, cmap []uint32, cn int) *WGraph {
	n := g.NumVertices()
	nc := g.ncon()
	pool := r.pool()
	cg := &WGraph{Xadj: pool.getI64(int64(cn) + 1), Vwgt: pool.getI64(int64(cn * nc)), Ncon: g.Ncon}
	cg.Xadj[0] = 0 // the loop below sets every other offset
	clear(cg.Vwgt)
	for u, m := range match {
		if int(m) >= u {
			d := g.Xadj[u+1] - g.Xadj[u]
			if int(m) != u {
				d += g.Xadj[m+1] - g.Xadj[m]
			}
			cg.Xadj[cmap[u]+1] = d
		}
	}
	for c := 0; c < cn; c++ {
		cg.Xadj[c+1] += cg.Xadj[c]
	}
	room := cg.Xadj[cn]
	adj, wgt := pool.getAdj(room), pool.getWgt(room)
	// A single range (every small graph) takes its slots from r's
	// scratch; parallel ranges need their own.
	ws := r.scratch()
	rowLen := mlBuf(&ws.rowLen, cn)
	single := len(mlSplit(r.workers, n, g.Xadj)) == 2
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
			radj, rwgt := adj[row:cg.Xadj[c+1]], wgt[row:cg.Xadj[c+1]]
			w := int32(0)
			for _, v := range [2]int{u, m} {
				var vw []int32
				if g.Adjwgt != nil {
					vw = g.Adjwgt[g.Xadj[v]:g.Xadj[v+1]]
				}
				w = mlWriteRow(g.Adjncy[g.Xadj[v]:g.Xadj[v+1]], vw, cmap, slot, c, radj, rwgt, w)
				for j := 0; j < nc; j++ {
					cg.Vwgt[int(c)*nc+j] += g.vwgt(v, j)
				}
				if m == u {
					break
				}
			}
			for _, k := range radj[:w] {
				slot[k] = -1
			}
			rowLen[c] = int64(w)
		}
	})
	var m int64
	for c := 0; c < cn; c++ {
		start, l := cg.Xadj[c], rowLen[c]
		cg.Xadj[c] = m
		copy(adj[m:m+l], adj[start:start+l])
		copy(wgt[m:m+l], wgt[start:start+l])
		m += l
	}
	cg.Xadj[cn] = m
	cg.Adjncy, cg.Adjwgt = adj[:m], wgt[:m]
	return cg
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
