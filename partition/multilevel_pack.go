package partition

import (
	"encoding/binary"
	"math/bits"
)

// mlPackMinAdj is the smallest adjacency a level must have to be packed
// while it waits for uncoarsening: below it the saving is not worth a
// pass.
const mlPackMinAdj = 1 << 16

// mlPack16MaxAdj is the largest level packed as uint16s: on larger ones
// the byte per entry more than uvarints adds up (on the 1 M vertex R-MAT
// graph, whose coarse levels of fewer than 2^16 vertices keep millions
// of entries, 50 MiB of peak RSS).
const mlPack16MaxAdj = 1 << 21

// mlPacked is a level's adjacency and edge weights in fewer bytes, kept
// while the coarser levels are built and refined. On power-law graphs
// every level holds nearly as many entries as the input, and coarse
// vertex ids and edge weights are small numbers: as uvarints, 3 to 5
// bytes per entry instead of 8.
//
// When every id and weight fits 16 bits (levels of fewer than 2^16
// vertices: all of BlogCatalog's) and the level has at most
// mlPack16MaxAdj entries, they are kept as uint16 instead, 4
// bytes per entry: a plain narrowing copy each way, where encoding and
// decoding uvarints took a quarter of BlogCatalog's partitioning time
// for 1 byte per entry less.
type mlPacked struct {
	m            int64    // adjacency entries
	adj, wgt     []byte   // uvarints of Adjncy and Adjwgt, or nil
	adj16, wgt16 []uint16 // Adjncy and Adjwgt, or nil
}

// pack replaces l's adjacency and weights by their packed form. Xadj,
// Vwgt and cmap stay as they are; unpack restores the same arrays.
func (l *mlLevel) pack() {
	g := l.g
	if l.packed != nil || len(g.Adjncy) < mlPackMinAdj || g.Adjwgt == nil {
		return
	}
	p := &mlPacked{m: int64(len(g.Adjncy))}
	if len(g.Adjncy) <= mlPack16MaxAdj && mlFits16(g.Adjncy) && mlFits16(g.Adjwgt) {
		p.adj16 = mlNarrow16(g.Adjncy)
		p.wgt16 = mlNarrow16(g.Adjwgt)
	} else {
		p.adj = mlAppendUvarints(g.Adjncy, func(x uint32) uint64 { return uint64(x) })
		p.wgt = mlAppendUvarints(g.Adjwgt, func(x int32) uint64 { return uint64(uint32(x)) })
	}
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
	if p.adj16 != nil {
		for i, x := range p.adj16 {
			adj[i] = uint32(x)
		}
		for i, x := range p.wgt16 {
			wgt[i] = int32(x)
		}
		l.g.Adjncy, l.g.Adjwgt = adj, wgt
		l.packed = nil
		return
	}
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

// mlFits16 reports whether every x fits in a uint16.
func mlFits16[T uint32 | int32](xs []T) bool {
	var or T
	for _, x := range xs {
		or |= x
	}
	return or >= 0 && or <= 0xffff
}

// mlNarrow16 copies xs, each below 2^16, into uint16s.
func mlNarrow16[T uint32 | int32](xs []T) []uint16 {
	out := make([]uint16, len(xs))
	for i, x := range xs {
		out[i] = uint16(x)
	}
	return out
}
