package train

import (
	"encoding/binary"
	"sync"

	"graphnode/sample"
)

// Bag-of-words features (Cora, CiteSeer: 1–2 % non-zero) arrive as dense
// rows. The first layer then keeps its input in compressed sparse rows:
// normalisation, dropout and both products cost O(non-zeros) instead of
// O(rows × feat dim). Only the first layer's input is ever sparse, and it
// needs no gradient, so the layer always projects first (P = X·W_l).

// sparseProbe is how many leading rows of a batch decide whether its
// features are stored sparse, and sparseMax the density below which they
// are.
const (
	sparseProbe = 64
	sparseMax   = 1.0 / 8
)

// Storage of the first layer's input, forced by tests.
const (
	storeAuto = iota
	storeDense
	storeSparse
)

// sparse is a CSR matrix: row i's non-zeros are val[ptr[i]:ptr[i+1]] in
// columns idx[ptr[i]:ptr[i+1]], ascending.
type sparse[T float] struct {
	rows, cols int
	ptr, idx   []int32
	val        []T
}

// top is the first n rows of s.
func (s sparse[T]) top(n int) sparse[T] {
	return sparse[T]{rows: n, cols: s.cols, ptr: s.ptr[:n+1], idx: s.idx, val: s.val}
}

// nnz is the number of stored values.
func (s sparse[T]) nnz() int { return int(s.ptr[s.rows]) }

// sparseInput reports whether the first probe rows of v's features are
// sparse enough to store the batch's input sparse.
func sparseInput(v *sample.View, rows, d int) bool {
	rows = min(rows, sparseProbe)
	w := v.Header.XType.Size()
	nz := len(appendNonZero(nil, v.X[:rows*d*w], w))
	return float64(nz) < sparseMax*float64(rows*d)
}

// appendNonZero appends to dst the index of every element of x (elements
// of w bytes, 2 or 4) whose bytes are not all zero (so −0 counts as
// non-zero; it is stored and contributes nothing). It reads 8 bytes at a
// time and looks into a word only when it is not zero.
func appendNonZero(dst []int32, x []byte, w int) []int32 {
	per := 8 / w
	mask := uint64(1)<<(8*w) - 1
	off := 0
	for ; off+8 <= len(x); off += 8 {
		word := binary.LittleEndian.Uint64(x[off:])
		if word == 0 {
			continue
		}
		for k := range per {
			if word>>(8*w*k)&mask != 0 {
				dst = append(dst, int32(off/w+k))
			}
		}
	}
	for ; off+w <= len(x); off += w {
		for k := range w {
			if x[off+k] != 0 {
				dst = append(dst, int32(off/w))
				break
			}
		}
	}
	return dst
}

// load fills s with the first rows feature rows of v (d columns), divided
// by their row sums when normalize is set, then dropped out with dr and
// stream exactly as the dense path does (element (i, j) is element i·d+j
// of the mask), and returns the non-zeros kept.
func (s *sparse[T]) load(v *sample.View, rows, d int, normalize bool, dr drop, stream uint64) int {
	s.rows, s.cols = rows, d
	s.ptr = grow(s.ptr, rows+1)
	s.idx, s.val = s.idx[:0], s.val[:0]
	f32, f16 := v.XF32(), v.XF16()
	w := v.Header.XType.Size()
	rowBytes := d * w
	s.ptr[0] = 0
	for i := range rows {
		start := len(s.idx)
		s.idx = appendNonZero(s.idx, v.X[i*rowBytes:(i+1)*rowBytes], w)
		for _, j := range s.idx[start:] {
			if f32 != nil {
				s.val = append(s.val, T(f32[i*d+int(j)]))
			} else {
				s.val = append(s.val, T(half(f16[i*d+int(j)])))
			}
		}
		vals := s.val[start:]
		if normalize {
			var sum T
			for _, x := range vals {
				sum += x
			}
			if sum != 0 {
				inv := 1 / sum
				for k := range vals {
					vals[k] *= inv
				}
			}
		}
		if dr.on() {
			keep := start
			sc := T(dr.scale)
			for k := start; k < len(s.idx); k++ {
				e := uint64(i*d) + uint64(s.idx[k])
				if (mix64(stream+(e>>2)*golden)>>(16*(e&3)))&0xffff < dr.thresh {
					continue
				}
				s.idx[keep], s.val[keep] = s.idx[k], s.val[k]*sc
				keep++
			}
			s.idx, s.val = s.idx[:keep], s.val[:keep]
		}
		s.ptr[i+1] = int32(len(s.idx))
	}
	return len(s.idx)
}

// spmm sets c = s·w + beta·c (beta 0 or 1), rows split over threads.
func spmm[T float](s sparse[T], w mat[T], beta T, c mat[T], threads int) {
	split(threads, s.rows, s.nnz()*w.cols, func(r0, r1 int) {
		for i := r0; i < r1; i++ {
			ci := c.row(i)
			if beta == 0 {
				clear(ci)
			}
			for p := s.ptr[i]; p < s.ptr[i+1]; p++ {
				axpy(s.val[p], w.row(int(s.idx[p])), ci)
			}
		}
	})
}

// spmmT adds sᵀ·g to c (s.cols × g.cols), c's columns split over threads
// so that no two goroutines write one element.
func spmmT[T float](s sparse[T], g mat[T], c mat[T], threads int) {
	n := g.cols
	split(threads, n, s.nnz()*n, func(c0, c1 int) {
		for i := range s.rows {
			gi := g.data[i*n+c0 : i*n+c1]
			for p := s.ptr[i]; p < s.ptr[i+1]; p++ {
				k := int(s.idx[p]) * n
				axpy(s.val[p], gi, c.data[k+c0:k+c1])
			}
		}
	})
}

// split runs f over [0, n) cut into at most threads contiguous ranges of
// at least 8, one goroutine each, when the work is worth it. Callers
// split so that goroutines write disjoint elements and every element is
// computed in the same order whatever the thread count.
func split(threads, n, work int, f func(lo, hi int)) {
	t := min(threads, n/8)
	if t <= 1 || work < parallelMin {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := range t {
		lo, hi := n*i/t, n*(i+1)/t
		wg.Go(func() { f(lo, hi) })
	}
	wg.Wait()
}
