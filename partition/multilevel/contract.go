package multilevel

import "math"

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
// adjacency). Coarse vertices are split into ranges of about equal room,
// which is the work of writing them, and the ranges are written in
// parallel, each from the fine vertices that lead its coarse vertices
// (their smaller members), packed from the start of the range's room;
// a sequential pass then moves each range down to close the gaps. Each
// coarse row depends only on its members, so the graph is the same for
// any worker count. (Ranges of fine vertices balanced by fine adjacency,
// as before, gave the first range about three quarters of the work: a
// pair is written by the range of its smaller member.)
//
// The room comes from r's pool (see mlPool): from the third level on,
// the arrays of the level two above, which are at least that large, and
// the coarse level keeps them, gaps closed, until it is packed and gives
// them back. Before the pool, a first pass counted every row so that the
// arrays could be allocated at their exact size, which cost as much as
// the pass that writes them.
func (r *mlRun) contract(g *Graph, match, cmap []uint32, cn int) *Graph {
	n := g.NumVertices()
	nc := g.ncon()
	pool := r.pool()
	ws := r.scratch()
	cg := &Graph{Xadj: pool.getI64(int64(cn) + 1), Vwgt: pool.getI64(int64(cn * nc)), Ncon: g.Ncon}
	cg.Xadj[0] = 0 // the loop below sets every other offset
	clear(cg.Vwgt)
	lead := mlBuf(&ws.lead, cn)
	for u, m := range match {
		if int(m) >= u {
			d := g.Xadj[u+1] - g.Xadj[u]
			if int(m) != u {
				d += g.Xadj[m+1] - g.Xadj[m]
			}
			c := cmap[u]
			cg.Xadj[c+1] = d
			lead[c] = uint32(u)
		}
	}
	for c := 0; c < cn; c++ {
		cg.Xadj[c+1] += cg.Xadj[c]
	}
	room := cg.Xadj[cn]
	adj, wgt := pool.getAdj(room), pool.getWgt(room)
	rowLen := mlBuf(&ws.rowLen, cn)
	bounds := mlSplit(r.workers, cn, cg.Xadj)
	used := make([]int64, len(bounds)-1) // entries written by each range
	mlRanges(bounds, func(i, clo, chi int) {
		// A single range (every small graph) takes its slots from r's
		// scratch; parallel ranges need their own.
		var slot []int32 // slot[k]: offset of coarse neighbour k in this row, or -1
		if len(bounds) == 2 {
			slot = mlBuf(&ws.slot, cn)
		} else {
			slot = make([]int32, cn)
		}
		for i := range slot {
			slot[i] = -1
		}
		lo, hi := int(lead[clo]), n
		if chi < cn {
			hi = int(lead[chi])
		}
		start := cg.Xadj[clo]
		at := start // where the next row starts; at most its room's start
		for u := lo; u < hi; u++ {
			m := int(match[u])
			if m < u {
				continue
			}
			c := cmap[u]
			end := at + cg.Xadj[c+1] - cg.Xadj[c]
			radj, rwgt := adj[at:end], wgt[at:end]
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
			at += int64(w)
		}
		used[i] = at - start
	})
	var m int64
	for i := 0; i+1 < len(bounds); i++ {
		clo, chi := bounds[i], bounds[i+1]
		if start := cg.Xadj[clo]; start != m {
			copy(adj[m:m+used[i]], adj[start:start+used[i]])
			copy(wgt[m:m+used[i]], wgt[start:start+used[i]])
		}
		for c := clo; c < chi; c++ {
			cg.Xadj[c] = m
			m += rowLen[c]
		}
	}
	cg.Xadj[cn] = m
	cg.Adjncy, cg.Adjwgt = adj[:m], wgt[:m]
	return cg
}

// mlWriteRow merges the fine adjacency adj (weights wgt, nil for all 1)
// into coarse row c, whose first w entries radj/rwgt hold: a coarse
// neighbour already in the row (slot[k] >= 0) gains the weight, up to
// MaxInt32, a new one is appended. It returns the row's new length.
// Unit weights cannot pass MaxInt32: a pair's row gains at most 4 per
// coarse neighbour (no duplicate edges).
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
			// Both weights are positive, so a sum past MaxInt32 wraps
			// negative: it saturates instead. Without this, edge weights
			// that ReadMETIS accepts (up to MaxInt32) wrapped on merging
			// and heavy coarse edges looked light or were skipped.
			if x := rwgt[s] + wgt[i]; x > 0 {
				rwgt[s] = x
			} else {
				rwgt[s] = math.MaxInt32
			}
		} else {
			slot[k] = w
			radj[w] = k
			rwgt[w] = wgt[i]
			w++
		}
	}
	return w
}
