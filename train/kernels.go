package train

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// float is the element type of the model: float32 for training, float64
// for the gradient check.
type float interface{ float32 | float64 }

// mat is a row-major matrix view: element (i, j) is data[i*cols+j].
type mat[T float] struct {
	rows, cols int
	data       []T
}

// view is the matrix of rows × cols over buf (which must be long enough).
func view[T float](buf []T, rows, cols int) mat[T] {
	return mat[T]{rows: rows, cols: cols, data: buf[:rows*cols]}
}

// top is the first n rows of m.
func (m mat[T]) top(n int) mat[T] { return mat[T]{rows: n, cols: m.cols, data: m.data[:n*m.cols]} }

func (m mat[T]) row(i int) []T { return m.data[i*m.cols : (i+1)*m.cols] }

func (m mat[T]) zero() { clear(m.data) }

// Transposition flags of gemm.
const (
	nn = iota // c = a·b
	tn        // c = aᵀ·b
	nt        // c = a·bᵀ
)

// gemm sets c = op(a)·op(b) + beta·c with gonum's BLAS, which splits large
// products over GOMAXPROCS goroutines and skips zero elements of the left
// operand in the nn and tn forms (so sparse bag-of-words inputs and ReLU
// outputs cost less). beta is 0 or 1.
func gemm[T float](form int, a, b mat[T], beta T, c mat[T]) {
	m, n := c.rows, c.cols
	k := a.cols
	tA, tB := blas.NoTrans, blas.NoTrans
	switch form {
	case tn:
		k, tA = a.rows, blas.Trans
	case nt:
		tB = blas.Trans
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		if beta == 0 {
			c.zero()
		}
		return
	}
	switch cd := any(c.data).(type) {
	case []float32:
		gonum.Implementation{}.Sgemm(tA, tB, m, n, k, 1, any(a.data).([]float32), a.cols,
			any(b.data).([]float32), b.cols, float32(beta), cd, c.cols)
	case []float64:
		gonum.Implementation{}.Dgemm(tA, tB, m, n, k, 1, any(a.data).([]float64), a.cols,
			any(b.data).([]float64), b.cols, float64(beta), cd, c.cols)
	}
}

// axpy sets y += alpha·x (len(x) == len(y)), through BLAS for long rows.
func axpy[T float](alpha T, x, y []T) {
	if len(x) >= 32 {
		switch yd := any(y).(type) {
		case []float32:
			gonum.Implementation{}.Saxpy(len(x), float32(alpha), any(x).([]float32), 1, yd, 1)
			return
		case []float64:
			gonum.Implementation{}.Daxpy(len(x), float64(alpha), any(x).([]float64), 1, yd, 1)
			return
		}
	}
	y = y[:len(x)]
	for i, v := range x {
		y[i] += alpha * v
	}
}

// parallelMin is the work (multiply-adds) below which a kernel runs on
// the calling goroutine. Aggregation splits by feature columns so that
// goroutines never write the same element and every element sums its
// edges in edge order: results do not depend on the thread count.
const parallelMin = 1 << 15

// gatherMean sets dst[t] = invDeg[t] · Σ_{e: col[e]=t} src[row[e]] for
// every row t of dst: the mean aggregation of SAGEConv (zero for a node
// without sampled neighbours).
func gatherMean[T float](dst, src mat[T], row, col []int32, invDeg []T, threads int) {
	d := dst.cols
	split(threads, d, len(row)*d, func(c0, c1 int) {
		for t := range dst.rows {
			clear(dst.data[t*d+c0 : t*d+c1])
		}
		for e, r := range row {
			c := int(col[e])
			axpy(1, src.data[int(r)*d+c0:int(r)*d+c1], dst.data[c*d+c0:c*d+c1])
		}
		for t := range dst.rows {
			out := dst.data[t*d+c0 : t*d+c1]
			s := invDeg[t]
			for j := range out {
				out[j] *= s
			}
		}
	})
}

// scatterMean is gatherMean's adjoint: dsrc[row[e]] += invDeg[col[e]] ·
// ddst[col[e]] for every edge.
func scatterMean[T float](dsrc, ddst mat[T], row, col []int32, invDeg []T, threads int) {
	d := ddst.cols
	split(threads, d, len(row)*d, func(c0, c1 int) {
		for e, r := range row {
			c := int(col[e])
			axpy(invDeg[c], ddst.data[c*d+c0:c*d+c1], dsrc.data[int(r)*d+c0:int(r)*d+c1])
		}
	})
}

// invDegrees fills inv[t] = 1/deg(t) over the edges' targets (0 where a
// target has no edge), for targets < len(inv).
func invDegrees[T float](inv []T, col []int32) {
	clear(inv)
	for _, c := range col {
		inv[c]++
	}
	for i, n := range inv {
		if n != 0 {
			inv[i] = 1 / n
		}
	}
}

// addBias adds b to every row of m.
func addBias[T float](m mat[T], b []T) {
	for i := range m.rows {
		r := m.row(i)
		for j := range r {
			r[j] += b[j]
		}
	}
}

// colSums adds the column sums of m to dst.
func colSums[T float](dst []T, m mat[T]) {
	for i := range m.rows {
		r := m.row(i)
		for j := range r {
			dst[j] += r[j]
		}
	}
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// firstNonFinite is the index of g's first NaN or infinite value, or -1:
// a gradient must be finite before it leaves the trainer (every
// trainer's parameters, or the shared tables, would turn NaN).
func firstNonFinite(g []float32) int {
	for i, x := range g {
		if !finite(float64(x)) {
			return i
		}
	}
	return -1
}
