package multilevel

import "math/bits"

// mlPackMinAdj is the smallest adjacency a level must have to be packed
// while it waits for uncoarsening: below it the saving is not worth a
// pass.
const mlPackMinAdj = 1 << 16

// mlPacked is a level's adjacency and edge weights in fewer bytes, kept
// while the coarser levels are built and refined. On power-law graphs
// every level holds nearly as many entries as the input, and coarse
// vertex ids and edge weights are small numbers.
//
// Each array is kept in the fewest whole bytes that hold its largest
// value (ids of a level of n vertices: ceil(log2(n)/8) bytes; weights
// mostly 1 byte), little-endian, so packing and unpacking are plain
// loops without branches. On the 1 M vertex R-MAT graph that is the size
// uvarints had (3 bytes per id, 1 per weight), at a fraction of their
// time: encoding and decoding uvarints took a quarter of its CPU time
// into 8 parts.
type mlPacked struct {
	m          int64 // adjacency entries
	adj, wgt   []byte
	adjW, wgtW int // bytes per id and per weight
}

// pack replaces l's adjacency and weights by their packed form and
// returns the arrays it no longer holds (nil when it did not pack), for
// a pool. Xadj, Vwgt and cmap stay as they are; unpack restores the same
// contents. wgtW is the width to try first for the weights (the finer
// level's, see mlPackBytes); ids are tried at the width of the level's
// largest vertex id.
func (l *mlLevel) pack(wgtW int) (adj []uint32, wgt []int32) {
	g := l.g
	if l.packed != nil || len(g.Adjncy) < mlPackMinAdj || g.Adjwgt == nil {
		return nil, nil
	}
	p := &mlPacked{m: int64(len(g.Adjncy))}
	p.adj, p.adjW = mlPackBytes(g.Adjncy, mlWidth(uint32(max(g.NumVertices()-1, 0))))
	p.wgt, p.wgtW = mlPackBytes(g.Adjwgt, wgtW)
	l.packed = p
	l.g = &Graph{Xadj: g.Xadj, Vwgt: g.Vwgt, Ncon: g.Ncon}
	return g.Adjncy, g.Adjwgt
}

// unpack restores l's adjacency and weights if they are packed, into
// arrays from pool.
func (l *mlLevel) unpack(pool *mlPool) {
	p := l.packed
	if p == nil {
		return
	}
	adj := pool.getAdj(p.m)
	wgt := pool.getWgt(p.m)
	mlUnpackBytes(adj, p.adj, p.adjW)
	mlUnpackBytes(wgt, p.wgt, p.wgtW)
	l.g.Adjncy, l.g.Adjwgt = adj, wgt
	l.packed = nil
}

// mlPackBytes stores xs (none negative) in w bytes each, w the fewest
// that hold the largest. One pass writes xs at width hint while it finds
// their largest value; a second, at the width that value needs, runs
// only when the hint was wrong. The hints of coarsening are right on the
// graphs of perf/metis (ids fill their level's range; weights keep the
// finer level's width). Finding the width first and then writing read
// every level twice: packing took 11.5% of the CPU time of
// BenchmarkMultilevel that way, 7.2% in one pass.
func mlPackBytes[T uint32 | int32](xs []T, hint int) ([]byte, int) {
	out, or := mlPackWidth(xs, hint)
	if w := mlWidth(or); w != hint {
		out, _ = mlPackWidth(xs, w)
		return out, w
	}
	return out, hint
}

// mlWidth is the fewest whole bytes, at least 1, that hold x.
func mlWidth(x uint32) int { return max(1, (bits.Len32(x)+7)/8) }

// mlPackWidth stores the low w bytes (1 to 4) of each of xs,
// little-endian, and returns them with the OR of xs.
func mlPackWidth[T uint32 | int32](xs []T, w int) (out []byte, or uint32) {
	out = make([]byte, len(xs)*w)
	switch w {
	case 1:
		for i, x := range xs {
			or |= uint32(x)
			out[i] = byte(x)
		}
	case 2:
		for i, x := range xs {
			or |= uint32(x)
			b := out[2*i : 2*i+2 : 2*i+2]
			b[0], b[1] = byte(x), byte(x>>8)
		}
	case 3:
		for i, x := range xs {
			or |= uint32(x)
			b := out[3*i : 3*i+3 : 3*i+3]
			b[0], b[1], b[2] = byte(x), byte(x>>8), byte(x>>16)
		}
	default:
		for i, x := range xs {
			or |= uint32(x)
			b := out[4*i : 4*i+4 : 4*i+4]
			b[0], b[1], b[2], b[3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
		}
	}
	return out, or
}

// mlUnpackBytes fills dst from b, w bytes per value.
func mlUnpackBytes[T uint32 | int32](dst []T, b []byte, w int) {
	switch w {
	case 1:
		for i := range dst {
			dst[i] = T(b[i])
		}
	case 2:
		for i := range dst {
			c := b[2*i : 2*i+2 : 2*i+2]
			dst[i] = T(uint32(c[0]) | uint32(c[1])<<8)
		}
	case 3:
		for i := range dst {
			c := b[3*i : 3*i+3 : 3*i+3]
			dst[i] = T(uint32(c[0]) | uint32(c[1])<<8 | uint32(c[2])<<16)
		}
	default:
		for i := range dst {
			c := b[4*i : 4*i+4 : 4*i+4]
			dst[i] = T(uint32(c[0]) | uint32(c[1])<<8 | uint32(c[2])<<16 | uint32(c[3])<<24)
		}
	}
}
