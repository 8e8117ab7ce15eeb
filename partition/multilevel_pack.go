package partition

import (
	"encoding/binary"
	"math/bits"
)

// mlPackMinAdj is the smallest adjacency a level must have to be packed
// while it waits for uncoarsening: below it the saving is not worth a
// pass.
const mlPackMinAdj = 1 << 16

// mlPacked is a level's adjacency and edge weights as uvarints, kept while
// the coarser levels are built and refined. On power-law graphs every
// level holds nearly as many entries as the input, and coarse vertex ids
// and edge weights are small numbers: 3 to 5 bytes per entry instead of 8.
type mlPacked struct {
	m        int64  // adjacency entries
	adj, wgt []byte // uvarints of Adjncy and Adjwgt
}

// pack replaces l's adjacency and weights by their packed form. Xadj,
// Vwgt and cmap stay as they are; unpack restores the same arrays.
func (l *mlLevel) pack() {
	g := l.g
	if l.packed != nil || len(g.Adjncy) < mlPackMinAdj || g.Adjwgt == nil {
		return
	}
	p := &mlPacked{m: int64(len(g.Adjncy))}
	p.adj = mlAppendUvarints(g.Adjncy, func(x uint32) uint64 { return uint64(x) })
	p.wgt = mlAppendUvarints(g.Adjwgt, func(x int32) uint64 { return uint64(uint32(x)) })
	l.packed = p
	l.g = &WGraph{Xadj: g.Xadj, Vwgt: g.Vwgt, Ncon: g.Ncon}
}

// unpack restores l's adjacency and weights if they are packed.
func (l *mlLevel) unpack() {
	p := l.packed
	if p == nil {
		return
	}
	adj := make([]uint32, p.m)
	wgt := make([]int32, p.m)
	for i, b := 0, p.adj; i < len(adj); i++ {
		x, n := binary.Uvarint(b)
		adj[i], b = uint32(x), b[n:]
	}
	for i, b := 0, p.wgt; i < len(wgt); i++ {
		x, n := binary.Uvarint(b)
		wgt[i], b = int32(uint32(x)), b[n:]
	}
	l.g.Adjncy, l.g.Adjwgt = adj, wgt
	l.packed = nil
}

// mlAppendUvarints encodes xs as uvarints into a buffer of exactly the
// needed size, so that packing never holds a grown copy.
func mlAppendUvarints[T uint32 | int32](xs []T, u func(T) uint64) []byte {
	size := 0
	for _, x := range xs {
		size += (bits.Len64(u(x)|1) + 6) / 7
	}
	buf := make([]byte, 0, size)
	for _, x := range xs {
		buf = binary.AppendUvarint(buf, u(x))
	}
	return buf
}
