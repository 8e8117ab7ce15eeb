package train

import (
	"fmt"
	"math"
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
//	rescal     hᵀ M_r t,  M_r the relation row as a hidden × hidden matrix
//	simple     clamp(½ Σ_k (h_k r_k t'_k + t_k r'_k h'_k), −20, 20)
//	transr     γ − ‖hᵀM_r + r − tᵀM_r‖₁,  M_r a hidden × hidden matrix
//
// Rows are float32, row-major, one row per triple or entity. transe_l1,
// transe_l2, distmult and rescal entity rows are hidden wide. complex
// entity and relation rows and rotate entity rows are 2·hidden wide, laid
// out as [re (hidden) | im (hidden)]; a rotate relation row holds hidden
// phases. A rescal relation row is M_r row by row (M_r[j][k] at j·hidden
// + k), hidden² wide. simple entity rows are [h (hidden) | h' (hidden)],
// its relation rows [r (hidden) | r' (the inverse relation's, hidden)],
// and its score is clamped as DGL-KE's is (a clamped score has gradient
// 0). A transr relation row is [r (hidden) | M_r (hidden², as rescal's)],
// of which the trainer keeps M_r in a table of its own (ProjDim; see
// kgeTransR).
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
	// ProjDim is how many of a relation row's last values the trainer
	// keeps in the projection table rather than the relation table
	// (transr's M_r); 0 for the models without one.
	ProjDim() int
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
	// not touched and may be nil) and Σ_i g[i*n+j]·∂s_ij/∂e_j to de. s
	// holds the scores Neg set for the same arguments (entries whose g is
	// 0 may have been changed): simple reads them to know which pairs
	// its clamp cut, instead of scoring every pair again.
	NegGrad(h, r, t, e []float32, c, n int, head bool, s, g []float32, dh, dr, dt, de []float32)
}

// kgeModelNames lists the names newKGEModel accepts, in that order.
func kgeModelNames() []string {
	return []string{"transe_l1", "transe_l2", "distmult", "complex", "rotate", "rescal", "simple", "transr"}
}

// Kinds of model, in the order of kgeModelNames: kgeScore's, then
// transr's.
const (
	kgeTransEL1 = iota
	kgeTransEL2
	kgeDistMult
	kgeComplEx
	kgeRotatE
	kgeRESCAL
	kgeSimplE
	kgeTransRKind // built as a kgeTransR, not a kgeScore
)

// kgeMatrixMaxHidden bounds the hidden size of the models that hold a
// hidden × hidden matrix per relation (rescal's relation rows, transr's
// projection rows): a row of hidden² values must fit a kv message with
// room to spare (16 MiB at 2048; DGL-KE's examples use 500).
const kgeMatrixMaxHidden = 2048

// kgeSimplEClamp is the bound of simple's scores (DGL-KE's, after the
// reference implementation, "to avoid NaN output").
const kgeSimplEClamp = 20

// newKGEModel returns the model named name for hidden size hidden and
// margin gamma (used by transe, rotate and transr only).
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
	if (kind == kgeRESCAL || kind == kgeTransRKind) && hidden > kgeMatrixMaxHidden {
		rows := "relation rows"
		if kind == kgeTransRKind {
			rows = "projection rows"
		}
		// hidden² in float64: an int wraps past 2^32 (2^40 read "0 values").
		return nil, fmt.Errorf("train: kge model %s: hidden %d: %s are hidden² = %.0f values, want hidden ≤ %d: %w",
			name, hidden, rows, float64(hidden)*float64(hidden), kgeMatrixMaxHidden, ErrInvalid)
	}
	if kind == kgeTransRKind {
		return &kgeTransR{hidden: hidden, gamma: gamma}, nil
	}
	m := &kgeScore{name: name, kind: kind, hidden: hidden, gamma: gamma, ent: hidden, rel: hidden}
	switch kind {
	case kgeComplEx:
		m.ent, m.rel = 2*hidden, 2*hidden
	case kgeRotatE:
		m.ent = 2 * hidden
		m.phase = math.Pi / ((gamma + 2) / float32(hidden))
	case kgeRESCAL:
		m.rel = hidden * hidden
	case kgeSimplE:
		m.ent, m.rel = 2*hidden, 2*hidden
	}
	return m, nil
}

// kgeScore implements every model but transr (kgeTransR, whose
// candidates enter through the relation's matrix) through one pairwise
// score: triple i against entity e on the replaced side scores pair(x_i,
// e), where x_i depends only on the kept sides:
//
//	          tail replaced   head replaced   pair(x, e)
//	transe    x = h + r       x = t − r       γ − ‖x − e‖ (L1 or L2)
//	rotate    x = h∘ρ         x = t∘conj(ρ)   γ − Σ_k |x_k − e_k|
//	distmult  x = h∘r         x = t∘r         x·e
//	complex   x = h∘r         x = t∘conj(r)   x·e over [re | im]
//	rescal    x = hᵀM_r       x = M_r t       x·e
//	simple    x = ½[r'∘h' | r∘h]  x = ½[r∘t' | r'∘t]  x·e
//
// with ρ_k = e^{iθ_k} and ∘ the elementwise (complex) product; the head
// forms hold as |ρ_k| = 1 and Re(h r conj(t)) = Re(h conj(conj(r) t)).
// pair is symmetric in x and e. Pos is pair(x_i, t_i), so every score goes
// through the same code (simple's then clamped). Neg is the product X·Eᵀ
// for distmult, complex, rescal and simple, and for transe_l2 goes
// through ‖x − e‖² = ‖x‖² + ‖e‖² − 2x·e; transe_l1 and rotate loop over
// the pairs.
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
func (m *kgeScore) ProjDim() int { return 0 }

func (m *kgeScore) Pos(h, r, t []float32, c int, s []float32) {
	x := m.kept(h, r, nil, c, false)
	for i := range c {
		s[i] = m.clamp(m.pair(x.row(i), t[i*m.ent:(i+1)*m.ent]))
	}
}

// clamp bounds simple's scores to ±kgeSimplEClamp; it returns the others
// as they are.
func (m *kgeScore) clamp(s float32) float32 {
	if m.kind != kgeSimplE {
		return s
	}
	return max(-kgeSimplEClamp, min(kgeSimplEClamp, s))
}

// clamped reports whether clamp changes s: its gradient is then 0 (as
// torch.clamp's outside its bounds).
func (m *kgeScore) clamped(s float32) bool {
	return m.kind == kgeSimplE && (s < -kgeSimplEClamp || s > kgeSimplEClamp)
}

func (m *kgeScore) PosGrad(h, r, t []float32, c int, g []float32, dh, dr, dt []float32) {
	x := m.kept(h, r, nil, c, false)
	m.dx = grow(m.dx, c*m.ent)
	dx := view(m.dx, c, m.ent)
	dx.zero()
	for i := range c {
		ti := t[i*m.ent : (i+1)*m.ent]
		if m.kind == kgeSimplE && m.clamped(m.pair(x.row(i), ti)) {
			continue
		}
		m.pairGrad(g[i], x.row(i), ti, dx.row(i), dt[i*m.ent:(i+1)*m.ent])
	}
	m.keptGrad(h, r, nil, dx, false, dh, dr, nil)
}

func (m *kgeScore) Neg(h, r, t, e []float32, c, n int, head bool, s []float32) {
	x := m.kept(h, r, t, c, head)
	E, S := view(e, n, m.ent), view(s, c, n)
	switch m.kind {
	case kgeDistMult, kgeComplEx, kgeRESCAL:
		gemm(nt, x, E, 0, S)
	case kgeSimplE:
		gemm(nt, x, E, 0, S)
		for k, v := range S.data[:c*n] {
			S.data[k] = m.clamp(v)
		}
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

func (m *kgeScore) NegGrad(h, r, t, e []float32, c, n int, head bool, s, g []float32, dh, dr, dt, de []float32) {
	x := m.kept(h, r, t, c, head)
	m.dx = grow(m.dx, c*m.ent)
	dx := view(m.dx, c, m.ent)
	E, G, dE := view(e, n, m.ent), view(g, c, n), view(de, n, m.ent)
	if m.kind == kgeSimplE {
		G = m.unclamped(s, G)
	}
	switch m.kind {
	case kgeDistMult, kgeComplEx, kgeRESCAL, kgeSimplE:
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

// unclamped is G with 0 where Neg clamped simple's score of the pair
// (s, as Neg set it, is ±kgeSimplEClamp), in m.w: the caller's G is only
// read. A score of exactly ±kgeSimplEClamp before the clamp counts as
// clamped too, where torch.clamp would pass its gradient; a float32
// product lands there about never. Scoring the pairs again here (x·Eᵀ)
// cost a fourth product per chunk: 11% of a default step (go test
// -bench 'KGEStep/model=simple' ./train: 4.3 k → 4.9 k triples/s).
func (m *kgeScore) unclamped(s []float32, G mat[float32]) mat[float32] {
	m.w = grow(m.w, G.rows*G.cols)
	W := view(m.w, G.rows, G.cols)
	for k, v := range s[:G.rows*G.cols] {
		W.data[k] = G.data[k]
		if v <= -kgeSimplEClamp || v >= kgeSimplEClamp {
			W.data[k] = 0
		}
	}
	return W
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
		case kgeRESCAL:
			kgeMatVec(xi, ai, ri, head)
		case kgeSimplE:
			// Tail replaced: x = ½[r'∘h' | r∘h]; head replaced: x = ½[r∘t' | r'∘t].
			f, b := ri[:hd], ri[hd:]
			if head {
				f, b = b, f
			}
			for k := range hd {
				xi[k] = 0.5 * b[k] * ai[hd+k]
				xi[hd+k] = 0.5 * f[k] * ai[k]
			}
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

// kgeMatVec sets x = aᵀM (x_k = Σ_j a_j M[j][k]), or x = M·a (x_j = Σ_k
// M[j][k] a_k) when right is set, for the square matrix M of len(a)² values
// row by row.
func kgeMatVec(x, a, M []float32, right bool) {
	d := len(a)
	if right {
		for j := range d {
			x[j] = kgeDot(M[j*d:(j+1)*d], a)
		}
		return
	}
	clear(x[:d])
	for j, v := range a {
		axpy(v, M[j*d:(j+1)*d], x[:d])
	}
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
		case kgeRESCAL:
			// x = aᵀM: da_j = Σ_k M_jk dx_k, dM_jk = a_j dx_k;
			// x = M·a: da_k = Σ_j M_jk dx_j, dM_jk = dx_j a_k.
			for j := range d {
				Mj, dMj := ri[j*d:(j+1)*d], dri[j*d:(j+1)*d]
				if head {
					axpy(gi[j], Mj, dai)
					axpy(gi[j], ai, dMj)
				} else {
					dai[j] += kgeDot(Mj, gi)
					axpy(ai[j], gi, dMj)
				}
			}
		case kgeSimplE:
			f, b, df, db := ri[:hd], ri[hd:], dri[:hd], dri[hd:]
			if head {
				f, b, df, db = b, f, db, df
			}
			for k := range hd {
				g1, g2 := 0.5*gi[k], 0.5*gi[hd+k]
				dai[hd+k] += g1 * b[k]
				db[k] += g1 * ai[hd+k]
				dai[k] += g2 * f[k]
				df[k] += g2 * ai[k]
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
