package train

import (
	"fmt"
	"math"
	"runtime"
	"strings"
)

// kgeModel is one of DGL-KE's knowledge-graph embedding score functions
// (dglke/models/pytorch/score_fun.py), with hand-written gradients, for a
// trainer that gathers entity and relation rows from the parameter
// server, scores positive triples and sampled negatives, and pushes the
// gradients back. Higher scores are more plausible:
//
//	transe_l2  γ − ‖h + r − t‖₂
//	transe_l1  γ − ‖h + r − t‖₁
//	distmult   Σ_k h_k r_k t_k
//	complex    Σ_k Re(h_k r_k conj(t_k))
//	rotate     γ − Σ_k |h_k e^{iθ_k} − t_k|,  θ_k = r_k π / ((γ + 2)/hidden)
//
// Rows are float32, row-major, one row per triple or entity. transe_l1,
// transe_l2 and distmult rows are hidden wide. complex entity and
// relation rows and rotate entity rows are 2·hidden wide, laid out as
// [re (hidden) | im (hidden)]; a rotate relation row holds hidden phases.
// Inputs are only read; gradients are added to what the caller's slices
// hold.
//
// A model keeps scratch buffers that grow on demand and are reused, so
// calls do not allocate once warm (gonum's BLAS still starts goroutines
// for large products), and a model belongs to one goroutine. A call may
// spread its work over GOMAXPROCS goroutines; results do not depend on
// how many.
type kgeModel interface {
	Name() string
	EntDim() int // width of an entity row
	RelDim() int // width of a relation row
	// Pos sets s[i] = score(h_i, r_i, t_i) for i < c; h and t hold c rows
	// of EntDim, r c rows of RelDim.
	Pos(h, r, t []float32, c int, s []float32)
	// PosGrad adds g[i]·∂s_i/∂h_i to dh (laid out as h), g[i]·∂s_i/∂r_i to
	// dr and g[i]·∂s_i/∂t_i to dt.
	PosGrad(h, r, t []float32, c int, g []float32, dh, dr, dt []float32)
	// Neg sets s[i*n+j] = score of triple i with its tail (its head when
	// head is true) replaced by entity e_j; e holds n rows of EntDim. The
	// replaced side's rows are not read and may be nil.
	Neg(h, r, t, e []float32, c, n int, head bool, s []float32)
	// NegGrad adds Σ_j g[i*n+j]·∂s_ij/∂x_i to dx for the kept sides x (h
	// and r when !head, r and t when head; the replaced side's gradient is
	// not touched and may be nil) and Σ_i g[i*n+j]·∂s_ij/∂e_j to de.
	NegGrad(h, r, t, e []float32, c, n int, head bool, g []float32, dh, dr, dt, de []float32)
}

// kgeModelNames lists the names newKGEModel accepts, in that order.
func kgeModelNames() []string {
	return []string{"transe_l1", "transe_l2", "distmult", "complex", "rotate"}
}

// Kinds of kgeScore, in the order of kgeModelNames.
const (
	kgeTransEL1 = iota
	kgeTransEL2
	kgeDistMult
	kgeComplEx
	kgeRotatE
)

// newKGEModel returns the model named name for hidden size hidden and
// margin gamma (unused by distmult and complex).
func newKGEModel(name string, hidden int, gamma float32) (kgeModel, error) {
	names := kgeModelNames()
	kind := -1
	for k, n := range names {
		if n == name {
			kind = k
		}
	}
	if kind < 0 {
		return nil, fmt.Errorf("train: kge model %q: unknown, want one of %s: %w",
			name, strings.Join(names, ", "), ErrInvalid)
	}
	if hidden < 1 {
		return nil, fmt.Errorf("train: kge model %s: hidden %d: want ≥ 1: %w", name, hidden, ErrInvalid)
	}
	m := &kgeScore{name: name, kind: kind, hidden: hidden, gamma: gamma, ent: hidden, rel: hidden}
	switch kind {
	case kgeComplEx:
		m.ent, m.rel = 2*hidden, 2*hidden
	case kgeRotatE:
		m.ent = 2 * hidden
		m.phase = math.Pi / ((gamma + 2) / float32(hidden))
	}
	return m, nil
}

// kgeScore implements every model through one pairwise score: triple i
// against entity e on the replaced side scores pair(x_i, e), where x_i
// depends only on the kept sides:
//
//	          tail replaced   head replaced   pair(x, e)
//	transe    x = h + r       x = t − r       γ − ‖x − e‖ (L1 or L2)
//	rotate    x = h∘ρ         x = t∘conj(ρ)   γ − Σ_k |x_k − e_k|
//	distmult  x = h∘r         x = t∘r         x·e
//	complex   x = h∘r         x = t∘conj(r)   x·e over [re | im]
//
// with ρ_k = e^{iθ_k} and ∘ the elementwise (complex) product; the head
// forms hold as |ρ_k| = 1 and Re(h r conj(t)) = Re(h conj(conj(r) t)).
// pair is symmetric in x and e. Pos is pair(x_i, t_i), so every score goes
// through the same code. Neg is the product X·Eᵀ for distmult and
// complex, and for transe_l2 goes through ‖x − e‖² = ‖x‖² + ‖e‖² − 2x·e;
// transe_l1 and rotate loop over the pairs.
type kgeScore struct {
	name       string
	kind       int
	hidden     int
	ent, rel   int
	gamma      float32
	phase      float32 // rotate: θ = r·phase
	x, dx      []float32
	cos, sin   []float32 // rotate: e^{iθ} of every relation element
	w          []float32 // transe_l2: c × n weights of NegGrad
	rows, cols []float32 // transe_l2: ‖x_i‖², ‖e_j‖² in Neg; weight sums in NegGrad
}

// kgeEps keeps the division by a modulus finite: u/(|u| + ε) is 0 at
// u = 0, the subgradient 0 at the kink, and is |u|/(|u| + ε) ≤ 1 in
// length elsewhere even when |u|² underflows.
const kgeEps = 1e-12

// kgeTile is about 128 KiB of entity rows, swept by every triple before
// the next rows are loaded, so evaluation against every entity of a graph
// streams the entity table from memory once per block, not once per triple.
const kgeTile = 1 << 15

func (m *kgeScore) Name() string { return m.name }
func (m *kgeScore) EntDim() int  { return m.ent }
func (m *kgeScore) RelDim() int  { return m.rel }

func (m *kgeScore) Pos(h, r, t []float32, c int, s []float32) {
	x := m.kept(h, r, nil, c, false)
	for i := range c {
		s[i] = m.pair(x.row(i), t[i*m.ent:(i+1)*m.ent])
	}
}

func (m *kgeScore) PosGrad(h, r, t []float32, c int, g []float32, dh, dr, dt []float32) {
	x := m.kept(h, r, nil, c, false)
	m.dx = grow(m.dx, c*m.ent)
	dx := view(m.dx, c, m.ent)
	dx.zero()
	for i := range c {
		m.pairGrad(g[i], x.row(i), t[i*m.ent:(i+1)*m.ent], dx.row(i), dt[i*m.ent:(i+1)*m.ent])
	}
	m.keptGrad(h, r, nil, dx, false, dh, dr, nil)
}

func (m *kgeScore) Neg(h, r, t, e []float32, c, n int, head bool, s []float32) {
	x := m.kept(h, r, t, c, head)
	E, S := view(e, n, m.ent), view(s, c, n)
	switch m.kind {
	case kgeDistMult, kgeComplEx:
		gemm(nt, x, E, 0, S)
	case kgeTransEL2:
		m.sqNorms(x, E)
		gemm(nt, x, E, 0, S)
		for i := range c {
			si, xi := S.row(i), m.rows[i]
			for j, ej := range m.cols[:n] {
				si[j] = m.gamma - kgeSqrt(max(0, xi+ej-2*si[j]))
			}
		}
	default:
		if work := c * n * m.ent; kgeThreads(work) > 1 {
			split(kgeThreads(work), c, work, func(lo, hi int) { m.negRows(x, E, S, lo, hi) })
			break
		}
		m.negRows(x, E, S, 0, c)
	}
}

func (m *kgeScore) NegGrad(h, r, t, e []float32, c, n int, head bool, g []float32, dh, dr, dt, de []float32) {
	x := m.kept(h, r, t, c, head)
	m.dx = grow(m.dx, c*m.ent)
	dx := view(m.dx, c, m.ent)
	E, G, dE := view(e, n, m.ent), view(g, c, n), view(de, n, m.ent)
	switch m.kind {
	case kgeDistMult, kgeComplEx:
		gemm(tn, G, x, 1, dE)
		gemm(nn, G, E, 0, dx)
	case kgeTransEL2:
		m.l2NegGrad(x, E, G, dx, dE)
	default:
		dx.zero()
		if work := c * n * m.ent; kgeThreads(work) >= kgeTwoPassThreads {
			// Two passes, each writing one side: up to twice the
			// arithmetic of one pass, but spread over every core.
			split(kgeThreads(work), c, work, func(lo, hi int) { m.gradRows(x, E, G, dx, mat[float32]{}, lo, hi) })
			split(kgeThreads(work), n, work, func(lo, hi int) { m.gradCols(x, E, G, dE, lo, hi) })
			break
		}
		m.gradRows(x, E, G, dx, dE, 0, c)
	}
	m.keptGrad(h, r, t, dx, head, dh, dr, dt)
}

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

// kept fills m.x with the rows x_i that stand for the kept sides of the
// c triples (see kgeScore) and returns them; the replaced side is not
// read. For rotate it also keeps e^{iθ} for keptGrad.
func (m *kgeScore) kept(h, r, t []float32, c int, head bool) mat[float32] {
	d, hd := m.ent, m.hidden
	m.x = grow(m.x, c*d)
	x := view(m.x, c, d)
	a, sg := h, float32(1) // sg is the sign of r's imaginary part (or of r, for transe)
	if head {
		a, sg = t, -1
	}
	if m.kind == kgeRotatE {
		m.cos, m.sin = grow(m.cos, c*hd), grow(m.sin, c*hd)
	}
	for i := range c {
		xi, ai, ri := x.row(i), a[i*d:(i+1)*d], r[i*m.rel:(i+1)*m.rel]
		switch m.kind {
		case kgeTransEL1, kgeTransEL2:
			for k, v := range ai {
				xi[k] = v + sg*ri[k]
			}
		case kgeDistMult:
			for k, v := range ai {
				xi[k] = v * ri[k]
			}
		case kgeComplEx:
			kgeRotate(xi, ai, ri[:hd], ri[hd:], sg)
		case kgeRotatE:
			cs, sn := m.cos[i*hd:(i+1)*hd], m.sin[i*hd:(i+1)*hd]
			for k, p := range ri {
				s, c := math.Sincos(float64(p * m.phase))
				cs[k], sn[k] = float32(c), float32(s)
			}
			kgeRotate(xi, ai, cs, sn, sg)
		}
	}
	return x
}

// kgeRotate sets x = a·(re + i·sg·im) elementwise, complex rows as
// [re | im].
func kgeRotate(x, a, re, im []float32, sg float32) {
	hd := len(re)
	ar, ai, xr, xi, im := a[:hd], a[hd:2*hd], x[:hd], x[hd:2*hd], im[:hd]
	for k, c := range re {
		s := sg * im[k]
		xr[k] = ar[k]*c - ai[k]*s
		xi[k] = ai[k]*c + ar[k]*s
	}
}

// keptGrad adds the gradient dx of the rows m.x (as kept made them for
// the same arguments) to the kept sides: da to dh (tail replaced) or dt
// (head replaced), and dr.
func (m *kgeScore) keptGrad(h, r, t []float32, dx mat[float32], head bool, dh, dr, dt []float32) {
	d, hd := m.ent, m.hidden
	a, da, sg := h, dh, float32(1)
	if head {
		a, da, sg = t, dt, -1
	}
	for i := range dx.rows {
		gi, ai, dai := dx.row(i), a[i*d:(i+1)*d], da[i*d:(i+1)*d]
		ri, dri := r[i*m.rel:(i+1)*m.rel], dr[i*m.rel:(i+1)*m.rel]
		switch m.kind {
		case kgeTransEL1, kgeTransEL2:
			axpy(1, gi, dai)
			axpy(sg, gi, dri)
		case kgeDistMult:
			for k, g := range gi {
				dai[k] += g * ri[k]
				dri[k] += g * ai[k]
			}
		case kgeComplEx:
			// x = a·r̃: da = dx·conj(r̃), dr̃ = dx·conj(a), and dr = dr̃ but
			// for the imaginary part's sign.
			gr, gim := gi[:hd], gi[hd:]
			ar, aim := ai[:hd], ai[hd:]
			rr, rim := ri[:hd], ri[hd:]
			dar, daim := dai[:hd], dai[hd:]
			drr, drim := dri[:hd], dri[hd:]
			for k, g := range gr {
				gk, s := gim[k], sg*rim[k]
				dar[k] += g*rr[k] + gk*s
				daim[k] += gk*rr[k] - g*s
				drr[k] += g*ar[k] + gk*aim[k]
				drim[k] += sg * (gk*ar[k] - g*aim[k])
			}
		case kgeRotatE:
			// x = a·ρ̃: da = dx·conj(ρ̃); ∂x/∂θ = sg·i·x, so dθ = sg·Im(conj(x)·dx).
			cs, sn := m.cos[i*hd:(i+1)*hd], m.sin[i*hd:(i+1)*hd]
			xi := m.x[i*d : (i+1)*d]
			gr, gim, xr, xim := gi[:hd], gi[hd:], xi[:hd], xi[hd:]
			dar, daim := dai[:hd], dai[hd:]
			for k, g := range gr {
				gk, c, s := gim[k], cs[k], sg*sn[k]
				dar[k] += g*c + gk*s
				daim[k] += gk*c - g*s
				dri[k] += sg * (gk*xr[k] - g*xim[k]) * m.phase
			}
		}
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
