package train

import (
	"math"
	"runtime"
)

// The kernels of kgeScore: the row and column passes that Neg and NegGrad
// split over goroutines, and the per-pair scores and gradients of the
// models without a matrix product (transe_l1, rotate).

// kgeTwoPassThreads is the fewest goroutines for which NegGrad of
// transe_l1 and rotate runs as two parallel passes (one per side) rather
// than one pass that updates both sides: the second pass repeats the
// signs (transe_l1, 1.5× the time on one core) or square roots and
// divisions (rotate, 2×), which two cores do not win back.
const kgeTwoPassThreads = 4

// kgeThreads is the number of goroutines for a loop of work multiply-adds:
// GOMAXPROCS, as gonum's BLAS uses for the products, or 1 below
// parallelMin. transe_l1 and rotate split their loops so that goroutines
// write disjoint rows and every sum runs in the same order as on one
// goroutine: results do not depend on the thread count.
func kgeThreads(work int) int {
	if work < parallelMin {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

// negRows sets S's rows lo..hi−1 to the pair scores, sweeping E one tile
// at a time.
func (m *kgeScore) negRows(x, E, S mat[float32], lo, hi int) {
	tile := max(1, kgeTile/m.ent)
	for j0 := 0; j0 < E.rows; j0 += tile {
		j1 := min(E.rows, j0+tile)
		for i := lo; i < hi; i++ {
			xi, si := x.row(i), S.row(i)
			for j := j0; j < j1; j++ {
				si[j] = m.pair(xi, E.row(j))
			}
		}
	}
}

// gradRows adds to dx's rows lo..hi−1 their gradient and, when dE has
// rows (only on one goroutine), to dE in the same pass: both sides share
// the difference, sign and modulus of each element.
func (m *kgeScore) gradRows(x, E, G, dx, dE mat[float32], lo, hi int) {
	tile := max(1, kgeTile/m.ent)
	for j0 := 0; j0 < E.rows; j0 += tile {
		j1 := min(E.rows, j0+tile)
		for i := lo; i < hi; i++ {
			xi, dxi, gi := x.row(i), dx.row(i), G.row(i)
			for j := j0; j < j1; j++ {
				switch {
				case gi[j] == 0:
				case dE.rows > 0:
					m.pairGrad(gi[j], xi, E.row(j), dxi, dE.row(j))
				default:
					m.addGrad(gi[j], xi, E.row(j), dxi)
				}
			}
		}
	}
}

// gradCols adds to dE's rows lo..hi−1 their gradient, summed over the
// triples in order, as gradRows does.
func (m *kgeScore) gradCols(x, E, G, dE mat[float32], lo, hi int) {
	for j := lo; j < hi; j++ {
		ej, dej := E.row(j), dE.row(j)
		for i := range G.rows {
			if w := G.data[i*G.cols+j]; w != 0 {
				m.addGrad(w, ej, x.row(i), dej)
			}
		}
	}
}

// l2NegGrad sets dx and adds to dE the gradients of transe_l2's Σ g·s
// through W_ij = g_ij/‖x_i − e_j‖: ∂/∂x_i = Σ_j W_ij (e_j − x_i) = (W·E)_i
// − (Σ_j W_ij) x_i and ∂/∂e_j = (Wᵀ·X)_j − (Σ_i W_ij) e_j. The distances
// are recomputed rather than kept from Neg, so the two calls stay
// independent. A distance of 0 (after clamping the rounding error of the
// expansion) gets the subgradient 0. A tiny positive one only inflates W
// up to about 1/√(rounding of ‖x‖²), so the error it adds stays near
// √ulp·g.
func (m *kgeScore) l2NegGrad(x, E, G, dx, dE mat[float32]) {
	c, n := G.rows, G.cols
	m.sqNorms(x, E)
	m.w = grow(m.w, c*n)
	W := view(m.w, c, n)
	gemm(nt, x, E, 0, W)
	xn, en := m.rows[:c], m.cols[:n] // reused below for the sums of W
	for i := range c {
		wi, gi, xi := W.row(i), G.row(i), xn[i]
		for j, ej := range en {
			d := kgeSqrt(max(0, xi+ej-2*wi[j]))
			wi[j] = 0
			if d > 0 {
				wi[j] = gi[j] / d
			}
		}
	}
	clear(xn)
	clear(en)
	for i := range c {
		wi := W.row(i)
		for j, w := range wi {
			xn[i] += w
			en[j] += w
		}
	}
	gemm(tn, W, x, 1, dE)
	for j, s := range en {
		axpy(-s, E.row(j), dE.row(j))
	}
	gemm(nn, W, E, 0, dx)
	for i, s := range xn {
		axpy(-s, x.row(i), dx.row(i))
	}
}

// sqNorms sets m.rows to the squared norms of x's rows and m.cols to
// those of E's.
func (m *kgeScore) sqNorms(x, E mat[float32]) {
	m.rows, m.cols = grow(m.rows, x.rows), grow(m.cols, E.rows)
	for i := range x.rows {
		m.rows[i] = kgeDot(x.row(i), x.row(i))
	}
	for j := range E.rows {
		m.cols[j] = kgeDot(E.row(j), E.row(j))
	}
}

// pair is the score of kept row x against entity row e.
func (m *kgeScore) pair(x, e []float32) float32 {
	switch m.kind {
	case kgeTransEL1:
		return m.gamma - kgeL1(x, e)
	case kgeTransEL2:
		return m.gamma - kgeSqrt(kgeSqDist(x, e))
	case kgeRotatE:
		return m.gamma - kgeModSum(x, e)
	}
	return kgeDot(x, e)
}

// pairGrad adds w·∂pair/∂x to dx and w·∂pair/∂e to de. transe_l1 and
// rotate share the work of both sides in one loop.
func (m *kgeScore) pairGrad(w float32, x, e, dx, de []float32) {
	e, dx, de = e[:len(x)], dx[:len(x)], de[:len(x)]
	switch m.kind {
	case kgeTransEL1:
		for k, v := range x {
			g := kgeSign(v-e[k], w)
			dx[k] -= g
			de[k] += g
		}
	case kgeRotatE:
		hd := len(x) / 2
		xr, xi, er, ei := x[:hd], x[hd:], e[:hd], e[hd:]
		dxr, dxi, der, dei := dx[:hd], dx[hd:], de[:hd], de[hd:]
		for k, v := range xr {
			ur, ui := v-er[k], xi[k]-ei[k]
			f := w / (kgeSqrt(ur*ur+ui*ui) + kgeEps)
			dxr[k] -= f * ur
			dxi[k] -= f * ui
			der[k] += f * ur
			dei[k] += f * ui
		}
	default:
		m.addGrad(w, x, e, dx)
		m.addGrad(w, e, x, de)
	}
}

// addGrad adds w·∂pair(x, e)/∂x to dx. Every pair is symmetric, so
// addGrad(w, e, x, de) is the gradient of the other side. The kinks
// (|u| at u = 0 for transe_l1, the norm or a modulus at 0) get the
// subgradient 0.
func (m *kgeScore) addGrad(w float32, x, e, dx []float32) {
	e, dx = e[:len(x)], dx[:len(x)]
	switch m.kind {
	case kgeTransEL1:
		for k, v := range x {
			dx[k] += kgeSign(e[k]-v, w)
		}
	case kgeTransEL2:
		f := w / (kgeSqrt(kgeSqDist(x, e)) + kgeEps)
		for k, v := range x {
			dx[k] += f * (e[k] - v)
		}
	case kgeRotatE:
		hd := len(x) / 2
		xr, xi, er, ei, dxr, dxi := x[:hd], x[hd:], e[:hd], e[hd:], dx[:hd], dx[hd:]
		for k, v := range xr {
			ur, ui := er[k]-v, ei[k]-xi[k]
			f := w / (kgeSqrt(ur*ur+ui*ui) + kgeEps)
			dxr[k] += f * ur
			dxi[k] += f * ui
		}
	default:
		axpy(w, e, dx)
	}
}

// kgeSign is w with the sign of u, or 0 where u is 0, without a branch
// on u's sign (which is a coin flip in the inner loop).
func kgeSign(u, w float32) float32 {
	b := math.Float32bits(u)
	var nz uint32
	if u != 0 {
		nz = ^uint32(0)
	}
	return math.Float32frombits((math.Float32bits(w) ^ b&(1<<31)) & nz)
}

// kgeL1 is Σ_k |x_k − e_k|, summed in four lanes so that the additions
// overlap.
func kgeL1(x, e []float32) float32 {
	var s0, s1, s2, s3 float32
	e = e[:len(x)]
	k := 0
	for ; k+4 <= len(x); k += 4 {
		x4, e4 := x[k:k+4:k+4], e[k:k+4:k+4]
		s0 += kgeAbs(x4[0] - e4[0])
		s1 += kgeAbs(x4[1] - e4[1])
		s2 += kgeAbs(x4[2] - e4[2])
		s3 += kgeAbs(x4[3] - e4[3])
	}
	for ; k < len(x); k++ {
		s0 += kgeAbs(x[k] - e[k])
	}
	return (s0 + s1) + (s2 + s3)
}

// kgeModSum is Σ_k |x_k − e_k| over complex rows [re | im]. One lane is
// enough: the square roots, not the additions, set the pace.
func kgeModSum(x, e []float32) float32 {
	hd := len(x) / 2
	xr, xi, er, ei := x[:hd], x[hd:2*hd], e[:hd], e[hd:2*hd]
	var s float32
	for k, v := range xr {
		a, b := v-er[k], xi[k]-ei[k]
		s += kgeSqrt(a*a + b*b)
	}
	return s
}

// kgeDot is x·e.
func kgeDot(x, e []float32) float32 {
	e = e[:len(x)]
	var s float32
	for k, v := range x {
		s += v * e[k]
	}
	return s
}

// kgeSqDist is ‖x − e‖².
func kgeSqDist(x, e []float32) float32 {
	e = e[:len(x)]
	var s float32
	for k, v := range x {
		s += (v - e[k]) * (v - e[k])
	}
	return s
}

func kgeAbs(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// kgeSqrt compiles to a single-precision square root.
func kgeSqrt(v float32) float32 { return float32(math.Sqrt(float64(v))) }
