package train

import "math"

// kgeTransR is DGL-KE's TransR (score_fun.py, TransRScore): TransE's
// translation in a space of each relation's own, into which its matrix
// M_r projects the head and the tail,
//
//	score = γ − ‖hᵀM_r + r − tᵀM_r‖₁,  (aᵀM_r)_k = Σ_j a_j M_r[j][k],
//
// in the L1 norm, as DGL-KE's TransRScore takes it (th.norm(p=1), in
// edge_func and in create_neg alike), whichever norm TransE has there.
// Negatives score the same formula. DGL-KE's do for a replaced head, but
// its create_neg for a replaced tail reads heads − relations, scoring
// γ − ‖hᵀM_r − r − eᵀM_r‖₁ against positives scored with + r (and so
// ranks tails in its evaluation too): a slip not copied here.
// Entity rows are hidden wide. A relation row as the model reads it is
// [r (hidden) | M_r (hidden², M_r[j][k] at hidden + j·hidden + k)]: the
// trainer keeps M_r in the projection table (ProjDim), as DGL-KE keeps
// it in projection_emb, whose rows reshaped (entity_dim, relation_dim)
// are M_r row by row ('ab,abc->ac' with the entity). DGL-KE's TransR has
// one hidden_dim for entities and relations, so M_r is square here too.
//
// It is not one of kgeScore's pairwise scores: a candidate e enters as
// eᵀM_r, which depends on the triple's relation, so the score of kept
// row x_i = a_iᵀM_r ± r_i against e is no function of x_i and e alone.
// Neg projects the candidates once per distinct M_r among the call's
// triples (compared bit for bit: the trainer gathers a relation's row
// into every triple of it), then scores each triple of the group
// against its group's projections with transe_l1's loop. Evaluation
// against every entity hands it its triples in relation order, so that
// a block projects the entity table about once, not once per triple: n
// × hidden² multiply-adds a projection, where the scores are n × hidden
// a triple. NegGrad shares the projections and the candidates' gradient
// (D·M_rᵀ, D summed over the group) the same way, but adds each
// triple's gradient of M_r through the candidates (Eᵀ·S_i, n × hidden²
// a triple, as DGL-KE's per-triple product) on its own: every row's
// gradient is its own, exact also where two rows are equal.
type kgeTransR struct {
	hidden int
	gamma  float32
	x, dx  []float32 // kept rows x_i and their gradients, c × hidden
	first  []int32   // first[i]: the first triple whose M is triple i's
	reps   []int32   // the triples i with first[i] = i, in order
	p      []float32 // one group's projected candidates E·M, n × hidden
	sg     []float32 // one triple's S_i = g_ij·sign(x_i − p_j), n × hidden
	sum    []float32 // the group's S_i summed, n × hidden
	u      []float32 // Pos and PosGrad: one triple's (h − t)ᵀM + r and h − t
}

func (m *kgeTransR) Name() string { return "transr" }
func (m *kgeTransR) EntDim() int  { return m.hidden }
func (m *kgeTransR) RelDim() int  { return m.hidden + m.hidden*m.hidden }
func (m *kgeTransR) ProjDim() int { return m.hidden * m.hidden }

// proj is M of row i of r, relation rows (or their gradients).
func (m *kgeTransR) proj(r []float32, i int) []float32 {
	rd := m.RelDim()
	return r[i*rd+m.hidden : (i+1)*rd]
}

// diff sets m.u to [(h_i − t_i)ᵀM_i + r_i | h_i − t_i] and returns the
// two halves: the score is γ − ‖u‖₁.
func (m *kgeTransR) diff(h, r, t []float32, i int) (u, w []float32) {
	d, rd := m.hidden, m.RelDim()
	m.u = grow(m.u, 2*d)
	u, w = m.u[:d], m.u[d:]
	hi, ti := h[i*d:(i+1)*d], t[i*d:(i+1)*d]
	for k, v := range hi {
		w[k] = v - ti[k]
	}
	kgeMatVec(u, w, m.proj(r, i), false)
	axpy(1, r[i*rd:i*rd+d], u)
	return u, w
}

func (m *kgeTransR) Pos(h, r, t []float32, c int, s []float32) {
	for i := range c {
		u, _ := m.diff(h, r, t, i)
		var l1 float32
		for _, v := range u {
			l1 += kgeAbs(v)
		}
		s[i] = m.gamma - l1
	}
}

// PosGrad: with δ = ∂s/∂u = −g·sign(u), dr += δ, dM += (h − t)⊗δ, dh +=
// M·δ and dt −= M·δ.
func (m *kgeTransR) PosGrad(h, r, t []float32, c int, g []float32, dh, dr, dt []float32) {
	d, rd := m.hidden, m.RelDim()
	for i := range c {
		u, w := m.diff(h, r, t, i)
		for k, v := range u {
			u[k] = kgeSign(v, -g[i]) // u becomes δ
		}
		M, dM := m.proj(r, i), m.proj(dr, i)
		axpy(1, u, dr[i*rd:i*rd+d])
		dhi, dti := dh[i*d:(i+1)*d], dt[i*d:(i+1)*d]
		for j, a := range w {
			axpy(a, u, dM[j*d:(j+1)*d])
			md := kgeDot(M[j*d:(j+1)*d], u)
			dhi[j] += md
			dti[j] -= md
		}
	}
}

// kept fills m.x with x_i = a_iᵀM_i + r_i, a = h (tail replaced), or
// x_i = a_iᵀM_i − r_i, a = t (head replaced): the score against
// candidate e is γ − ‖x_i − eᵀM_i‖₁ either way.
func (m *kgeTransR) kept(h, r, t []float32, c int, head bool) mat[float32] {
	d, rd := m.hidden, m.RelDim()
	a, sg := h, float32(1)
	if head {
		a, sg = t, -1
	}
	m.x = grow(m.x, c*d)
	x := view(m.x, c, d)
	for i := range c {
		xi := x.row(i)
		kgeMatVec(xi, a[i*d:(i+1)*d], m.proj(r, i), false)
		axpy(sg, r[i*rd:i*rd+d], xi)
	}
	return x
}

// keptGrad adds the gradient dx of the rows kept made to the kept side
// (dh or dt: M·dx), to r (±dx) and to M (a⊗dx).
func (m *kgeTransR) keptGrad(h, r, t []float32, dx mat[float32], head bool, dh, dr, dt []float32) {
	d, rd := m.hidden, m.RelDim()
	a, da, sg := h, dh, float32(1)
	if head {
		a, da, sg = t, dt, -1
	}
	for i := range dx.rows {
		gi, ai, dai := dx.row(i), a[i*d:(i+1)*d], da[i*d:(i+1)*d]
		M, dM := m.proj(r, i), m.proj(dr, i)
		axpy(sg, gi, dr[i*rd:i*rd+d])
		for j, v := range ai {
			dai[j] += kgeDot(M[j*d:(j+1)*d], gi)
			axpy(v, gi, dM[j*d:(j+1)*d])
		}
	}
}

// groups sets m.first and returns m.reps: the c triples grouped by their
// matrices, equal bit for bit. A matrix that differs, differs almost
// always in its first values, where the comparison stops.
func (m *kgeTransR) groups(r []float32, c int) []int32 {
	m.first, m.reps = grow(m.first, c), m.reps[:0]
	for i := range c {
		m.first[i] = int32(i)
		for _, g := range m.reps {
			if kgeSameBits(m.proj(r, i), m.proj(r, int(g))) {
				m.first[i] = g
				break
			}
		}
		if m.first[i] == int32(i) {
			m.reps = append(m.reps, int32(i))
		}
	}
	return m.reps
}

// kgeSameBits reports whether a and b hold the same bits.
func kgeSameBits(a, b []float32) bool {
	b = b[:len(a)]
	for k, v := range a {
		if math.Float32bits(v) != math.Float32bits(b[k]) {
			return false
		}
	}
	return true
}

// members is how many triples group g holds.
func (m *kgeTransR) members(g int32) int {
	n := 0
	for _, f := range m.first[g:] {
		if f == g {
			n++
		}
	}
	return n
}

// project sets m.p to the candidates projected by group g's matrix.
func (m *kgeTransR) project(r []float32, g int32, E mat[float32]) mat[float32] {
	d := m.hidden
	m.p = grow(m.p, E.rows*d)
	P := view(m.p, E.rows, d)
	gemm(nn, E, view(m.proj(r, int(g)), d, d), 0, P)
	return P
}

func (m *kgeTransR) Neg(h, r, t, e []float32, c, n int, head bool, s []float32) {
	d := m.hidden
	x := m.kept(h, r, t, c, head)
	E, S := view(e, n, d), view(s, c, n)
	for _, g := range m.groups(r, c) {
		P := m.project(r, g, E)
		if work := m.members(g) * n * d; kgeThreads(work) > 1 {
			split(kgeThreads(work), n, work, func(lo, hi int) { m.negCols(x, P, S, g, lo, hi) })
			continue
		}
		m.negCols(x, P, S, g, 0, n)
	}
}

// negCols sets the scores of group g's triples against the projected
// candidates lo..hi−1.
func (m *kgeTransR) negCols(x, P, S mat[float32], g int32, lo, hi int) {
	for i := int(g); i < x.rows; i++ {
		if m.first[i] != g {
			continue
		}
		xi, si := x.row(i), S.row(i)
		for j := lo; j < hi; j++ {
			si[j] = m.gamma - kgeL1(xi, P.row(j))
		}
	}
}

func (m *kgeTransR) NegGrad(h, r, t, e []float32, c, n int, head bool, s, g []float32, dh, dr, dt, de []float32) {
	d := m.hidden
	x := m.kept(h, r, t, c, head)
	m.dx = grow(m.dx, c*d)
	dx := view(m.dx, c, d)
	dx.zero()
	E, dE, G := view(e, n, d), view(de, n, d), view(g, c, n)
	m.sg, m.sum = grow(m.sg, n*d), grow(m.sum, n*d)
	Si, D := view(m.sg, n, d), view(m.sum, n, d)
	for _, grp := range m.groups(r, c) {
		P := m.project(r, grp, E)
		D.zero()
		for i := int(grp); i < c; i++ {
			if m.first[i] != grp {
				continue
			}
			xi, gi := x.row(i), G.row(i)
			if work := n * d; kgeThreads(work) > 1 {
				split(kgeThreads(work), n, work, func(lo, hi int) { kgeSignRows(xi, P, gi, Si, lo, hi) })
			} else {
				kgeSignRows(xi, P, gi, Si, 0, n)
			}
			// ∂s_ij/∂x_i = −S_i[j], ∂s_ij/∂p_j = S_i[j], and p = E·M:
			// M's share through the candidates is Eᵀ·S_i.
			dxi := dx.row(i)
			for j := range n {
				axpy(-1, Si.row(j), dxi)
				axpy(1, Si.row(j), D.row(j))
			}
			gemm(tn, E, Si, 1, view(m.proj(dr, i), d, d))
		}
		gemm(nt, D, view(m.proj(r, int(grp)), d, d), 1, dE)
	}
	m.keptGrad(h, r, t, dx, head, dh, dr, dt)
}

// kgeSignRows sets rows lo..hi−1 of S to g_j·sign(x − P_j), 0 where g_j
// is 0 or at a kink (the subgradient, as transe_l1's).
func kgeSignRows(x []float32, P mat[float32], g []float32, S mat[float32], lo, hi int) {
	for j := lo; j < hi; j++ {
		sj, pj := S.row(j), P.row(j)
		if g[j] == 0 {
			clear(sj)
			continue
		}
		for k, v := range x {
			sj[k] = kgeSign(v-pj[k], g[j])
		}
	}
}
