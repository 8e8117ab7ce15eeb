package train

import (
	"errors"
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// kgeRef is the score of one triple straight from the formula of the
// model in float64, and how far the triple is from the score's kink (the
// smallest |h_k + r_k − t_k| for transe_l1, the norm for transe_l2, the
// smallest modulus for rotate, the distance to the clamp's bounds for
// simple; +Inf where there is none).
func kgeRef(name string, h, r, t []float64, hidden int, gamma float64) (score, kink float64) {
	kink = math.Inf(1)
	switch name {
	case "transe_l1", "transe_l2":
		var l1, l2 float64
		for k := range hidden {
			u := h[k] + r[k] - t[k]
			l1 += math.Abs(u)
			l2 += u * u
			kink = min(kink, math.Abs(u))
		}
		if name == "transe_l1" {
			return gamma - l1, kink
		}
		return gamma - math.Sqrt(l2), math.Sqrt(l2)
	case "distmult":
		for k := range hidden {
			score += h[k] * r[k] * t[k]
		}
	case "complex":
		d := hidden
		for k := range d {
			hr, hi, rr, ri, tr, ti := h[k], h[d+k], r[k], r[d+k], t[k], t[d+k]
			score += hr*rr*tr + hi*rr*ti + hr*ri*ti - hi*ri*tr
		}
	case "rotate":
		d := hidden
		embInit := (gamma + 2) / float64(d)
		for k := range d {
			rot := cmplx.Rect(1, r[k]*math.Pi/embInit)
			m := cmplx.Abs(complex(h[k], h[d+k])*rot - complex(t[k], t[d+k]))
			score -= m
			kink = min(kink, m)
		}
		score += gamma
	case "rescal":
		d := hidden
		for j := range d {
			for k := range d {
				score += h[j] * r[j*d+k] * t[k]
			}
		}
	case "simple":
		d := hidden
		for k := range d {
			score += 0.5 * (h[k]*r[k]*t[d+k] + t[k]*r[d+k]*h[d+k])
		}
		kink = min(math.Abs(score-20), math.Abs(score+20))
		score = max(-20, min(20, score))
	case "transr":
		// r = [r | M], M[j][k] at hidden + j·hidden + k: DGL-KE's
		// einsum('ab,abc->ac', h, M) of h and t, then TransE's L1.
		d := hidden
		var l1 float64
		for k := range d {
			u := r[k]
			for j := range d {
				u += (h[j] - t[j]) * r[d+j*d+k]
			}
			l1 += math.Abs(u)
			kink = min(kink, math.Abs(u))
		}
		return gamma - l1, kink
	}
	return score, kink
}

// kgeRows is n rows of width d, uniform in ±0.5.
func kgeRows(rng *rand.Rand, n, d int) []float32 {
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.Float64() - 0.5)
	}
	return x
}

func kgeF64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// kgeCase is a random chunk: c triples and n entities.
type kgeCase struct {
	m          kgeModel
	c, n       int
	h, r, t, e []float32
}

func newKGECase(t *testing.T, name string, seed uint64, hidden, c, n int, gamma float32) kgeCase {
	t.Helper()
	m, err := newKGEModel(name, hidden, gamma)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	ed, rd := m.EntDim(), m.RelDim()
	return kgeCase{m: m, c: c, n: n, h: kgeRows(rng, c, ed), r: kgeRows(rng, c, rd),
		t: kgeRows(rng, c, ed), e: kgeRows(rng, n, ed)}
}

// kgeRow is row i of rows of width d.
func kgeRow[T any](x []T, i, d int) []T { return x[i*d : (i+1)*d] }

// triple is (h_i, r_i, t_i) with the replaced side (the head when head,
// else the tail) swapped for e_j; j < 0 keeps the triple.
func (k kgeCase) triple(h, r, t, e []float64, i, j int, head bool) (hh, rr, tt []float64) {
	ed, rd := k.m.EntDim(), k.m.RelDim()
	hh, rr, tt = kgeRow(h, i, ed), kgeRow(r, i, rd), kgeRow(t, i, ed)
	switch {
	case j < 0:
	case head:
		hh = kgeRow(e, j, ed)
	default:
		tt = kgeRow(e, j, ed)
	}
	return hh, rr, tt
}

func TestKGENegMatchesPos(t *testing.T) {
	for _, name := range kgeModelNames() {
		for _, hidden := range []int{13, 16} {
			for _, head := range []bool{false, true} {
				t.Run(fmt.Sprintf("model=%s/hidden=%d/head=%v", name, hidden, head), func(t *testing.T) {
					k := newKGECase(t, name, 1, hidden, 5, 7, 6)
					ed, rd, c, n := k.m.EntDim(), k.m.RelDim(), k.c, k.n
					// Every (i, j) as a triple of its own, scored by Pos.
					var H, R, T []float32
					for i := range c {
						for j := range n {
							hh, tt := kgeRow(k.h, i, ed), kgeRow(k.t, i, ed)
							if head {
								hh = kgeRow(k.e, j, ed)
							} else {
								tt = kgeRow(k.e, j, ed)
							}
							H, R, T = append(H, hh...), append(R, kgeRow(k.r, i, rd)...), append(T, tt...)
						}
					}
					want := make([]float32, c*n)
					k.m.Pos(H, R, T, c*n, want)
					h, tl := k.h, k.t
					if head {
						h = nil
					} else {
						tl = nil
					}
					got := make([]float32, c*n)
					k.m.Neg(h, k.r, tl, k.e, c, n, head, got)
					for i := range got {
						if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*max(1, math.Abs(float64(want[i]))) {
							t.Errorf("s[%d] = %g, Pos of the same triple %g", i, got[i], want[i])
						}
					}
				})
			}
		}
	}
}

// kgeGradCase draws a case whose triples, positive and negative, are all
// at least 0.02 from a kink, so that central differences see a smooth
// function.
func kgeGradCase(t *testing.T, name string) kgeCase { return kgeGradCaseOf(t, name, 3, 4, nil) }

// kgeGradCaseOf is kgeGradCase of c triples and n entities, whose
// relation rows tie (when not nil) sets before the kinks are looked for.
func kgeGradCaseOf(t *testing.T, name string, c, n int, tie func(r []float32)) kgeCase {
	for seed := uint64(1); ; seed++ {
		k := newKGECase(t, name, seed, 5, c, n, 6)
		if tie != nil {
			tie(k.r)
		}
		h, r, tl, e := kgeF64(k.h), kgeF64(k.r), kgeF64(k.t), kgeF64(k.e)
		near := false
		for i := range k.c {
			for j := -1; j < k.n; j++ {
				for _, head := range []bool{false, true} {
					hh, rr, tt := k.triple(h, r, tl, e, i, j, head)
					if _, kink := kgeRef(name, hh, rr, tt, 5, 6); kink < 0.02 {
						near = true
					}
				}
			}
		}
		if !near {
			return k
		}
	}
}

// kgeCheckGrad compares got − before (what a gradient call added) with
// central differences of f in x[i].
func kgeCheckGrad(t *testing.T, what string, f func() float64, x []float64, got, before []float32) {
	t.Helper()
	const step = 1e-6
	for i := range x {
		v := x[i]
		x[i] = v + step
		fp := f()
		x[i] = v - step
		fm := f()
		x[i] = v
		fd := (fp - fm) / (2 * step)
		an := float64(got[i] - before[i])
		if math.Abs(an-fd) > 1e-3*max(1, math.Abs(fd)) {
			t.Errorf("%s[%d]: analytic %.6g, central difference %.6g", what, i, an, fd)
		}
	}
}

// kgeGrads are gradient buffers prefilled with noise, so the check also
// sees that gradients are added.
func kgeGrads(rng *rand.Rand, sizes ...int) (bufs, before [][]float32) {
	for _, n := range sizes {
		b := kgeRows(rng, 1, n)
		bufs, before = append(bufs, b), append(before, append([]float32(nil), b...))
	}
	return bufs, before
}

func TestKGEGradients(t *testing.T) {
	const hidden, gamma = 5, 6
	dims := map[string][2]int{ // EntDim, RelDim
		"transe_l1": {5, 5}, "transe_l2": {5, 5}, "distmult": {5, 5}, "complex": {10, 10}, "rotate": {10, 5},
		"rescal": {5, 25}, "simple": {10, 10}, "transr": {5, 30},
	}
	for _, name := range kgeModelNames() {
		t.Run("model="+name, func(t *testing.T) {
			k := kgeGradCase(t, name)
			m, c := k.m, k.c
			if m.Name() != name || m.EntDim() != dims[name][0] || m.RelDim() != dims[name][1] {
				t.Fatalf("Name, EntDim, RelDim = %s, %d, %d, want %s, %v", m.Name(), m.EntDim(), m.RelDim(), name, dims[name])
			}
			ed, rd := m.EntDim(), m.RelDim()
			rng := rand.New(rand.NewPCG(3, 3))
			h, r, tl, e := kgeF64(k.h), kgeF64(k.r), kgeF64(k.t), kgeF64(k.e)

			t.Run("pos", func(t *testing.T) {
				g := kgeRows(rng, 1, c)
				s := make([]float32, c)
				m.Pos(k.h, k.r, k.t, c, s)
				f := func() float64 {
					var sum float64
					for i := range c {
						hh, rr, tt := k.triple(h, r, tl, e, i, -1, false)
						v, _ := kgeRef(name, hh, rr, tt, hidden, gamma)
						sum += float64(g[i]) * v
					}
					return sum
				}
				for i := range c {
					hh, rr, tt := k.triple(h, r, tl, e, i, -1, false)
					if want, _ := kgeRef(name, hh, rr, tt, hidden, gamma); math.Abs(float64(s[i])-want) > 1e-5*max(1, math.Abs(want)) {
						t.Errorf("s[%d] = %g, want %g", i, s[i], want)
					}
				}
				d, before := kgeGrads(rng, c*ed, c*rd, c*ed)
				m.PosGrad(k.h, k.r, k.t, c, g, d[0], d[1], d[2])
				kgeCheckGrad(t, "dh", f, h, d[0], before[0])
				kgeCheckGrad(t, "dr", f, r, d[1], before[1])
				kgeCheckGrad(t, "dt", f, tl, d[2], before[2])
			})

			for _, head := range []bool{false, true} {
				t.Run(fmt.Sprintf("neg/head=%v", head), func(t *testing.T) { kgeCheckNeg(t, k, name, head, rng) })
			}
		})
	}
}

// kgeCheckNeg checks Neg's scores of case k (of hidden 5, gamma 6)
// against kgeRef and NegGrad's gradients, weighted by random g, against
// central differences.
func kgeCheckNeg(t *testing.T, k kgeCase, name string, head bool, rng *rand.Rand) {
	t.Helper()
	const hidden, gamma = 5, 6
	m, c, n := k.m, k.c, k.n
	ed, rd := m.EntDim(), m.RelDim()
	h, r, tl, e := kgeF64(k.h), kgeF64(k.r), kgeF64(k.t), kgeF64(k.e)
	g := kgeRows(rng, c, n)
	f := func() float64 {
		var sum float64
		for i := range c {
			for j := range n {
				hh, rr, tt := k.triple(h, r, tl, e, i, j, head)
				v, _ := kgeRef(name, hh, rr, tt, hidden, gamma)
				sum += float64(g[i*n+j]) * v
			}
		}
		return sum
	}
	// The replaced side is nil: reading or writing it panics.
	hs, ts := k.h, k.t
	d, before := kgeGrads(rng, c*ed, c*rd, c*ed, n*ed)
	dh, dt := d[0], d[2]
	if head {
		hs, dh = nil, nil
	} else {
		ts, dt = nil, nil
	}
	s := make([]float32, c*n)
	m.Neg(hs, k.r, ts, k.e, c, n, head, s)
	for i := range c {
		for j := range n {
			hh, rr, tt := k.triple(h, r, tl, e, i, j, head)
			if want, _ := kgeRef(name, hh, rr, tt, hidden, gamma); math.Abs(float64(s[i*n+j])-want) > 1e-5*max(1, math.Abs(want)) {
				t.Errorf("s[%d,%d] = %g, want %g", i, j, s[i*n+j], want)
			}
		}
	}
	m.NegGrad(hs, k.r, ts, k.e, c, n, head, s, g, dh, d[1], dt, d[3])
	if head {
		kgeCheckGrad(t, "dt", f, tl, d[2], before[2])
	} else {
		kgeCheckGrad(t, "dh", f, h, d[0], before[0])
	}
	kgeCheckGrad(t, "dr", f, r, d[1], before[1])
	kgeCheckGrad(t, "de", f, e, d[3], before[3])
}

func TestKGEScoreValues(t *testing.T) {
	sqrt2 := math.Sqrt2
	for _, tc := range []struct {
		name    string
		hidden  int
		gamma   float32
		h, r, t []float32
		want    float64
	}{
		{"transe_l2", 2, 3, []float32{1, 0}, []float32{0, 1}, []float32{0, 0}, 3 - sqrt2},
		{"transe_l1", 2, 3, []float32{1, 0}, []float32{0, 1}, []float32{0, 0}, 1},
		{"transe_l1", 2, 3, []float32{1, -2}, []float32{0.5, 1}, []float32{2, 0}, 3 - 0.5 - 1},
		{"distmult", 2, 0, []float32{1, 2}, []float32{3, 4}, []float32{5, 6}, 1*3*5 + 2*4*6},
		// Re((1+2i)(3+4i)conj(5+6i)) = Re((−5+10i)(5−6i)) = −25 + 60.
		{"complex", 1, 0, []float32{1, 2}, []float32{3, 4}, []float32{5, 6}, 35},
		// embInit = (6+2)/2 = 4, so r = (2, 0) turns h_0 = 1 by π/2 to i
		// and leaves h_1 = 3+4i: 6 − |i − 1| − |3+4i − 0|.
		{"rotate", 2, 6, []float32{1, 3, 0, 4}, []float32{2, 0}, []float32{1, 0, 0, 0}, 6 - sqrt2 - 5},
		// hᵀM = (1·1 + 2·3, 1·2 + 2·4) = (7, 10), then · (5, 6).
		{"rescal", 2, 0, []float32{1, 2}, []float32{1, 2, 3, 4}, []float32{5, 6}, 7*5 + 10*6},
		// ½(Σ h r t' + Σ t r' h') = ½((0 + 2·6·1) + (1·7·3 + 0)).
		{"simple", 2, 0, []float32{1, 2, 3, 4}, []float32{5, 6, 7, 8}, []float32{1, 0, 0, 1}, 16.5},
		{"simple", 2, 0, []float32{20, 20, 20, 20}, []float32{1, 1, 1, 1}, []float32{1, 1, 1, 1}, 20},
		{"simple", 2, 0, []float32{-20, -20, -20, -20}, []float32{1, 1, 1, 1}, []float32{1, 1, 1, 1}, -20},
		// hᵀM = (1·1 + 2·3, 1·2 + 2·4) = (7, 10), tᵀM = (3, 4):
		// 12 − |7 + 0.5 − 3| − |10 − 1 − 4|.
		{"transr", 2, 12, []float32{1, 2}, []float32{0.5, -1, 1, 2, 3, 4}, []float32{0, 1}, 12 - 4.5 - 5},
	} {
		t.Run("model="+tc.name, func(t *testing.T) {
			m, err := newKGEModel(tc.name, tc.hidden, tc.gamma)
			if err != nil {
				t.Fatal(err)
			}
			s := make([]float32, 1)
			m.Pos(tc.h, tc.r, tc.t, 1, s)
			if math.Abs(float64(s[0])-tc.want) > 1e-5 {
				t.Errorf("Pos = %g, want %g", s[0], tc.want)
			}
			// The same triple as a tail negative and as a head negative.
			m.Neg(tc.h, tc.r, nil, tc.t, 1, 1, false, s)
			if math.Abs(float64(s[0])-tc.want) > 1e-5 {
				t.Errorf("Neg (tail) = %g, want %g", s[0], tc.want)
			}
			m.Neg(nil, tc.r, tc.t, tc.h, 1, 1, true, s)
			if math.Abs(float64(s[0])-tc.want) > 1e-5 {
				t.Errorf("Neg (head) = %g, want %g", s[0], tc.want)
			}
		})
	}
}

// At a kink the gradient is the subgradient 0, never NaN or Inf.
func TestKGEKinks(t *testing.T) {
	for _, name := range kgeModelNames() {
		m, err := newKGEModel(name, 3, 6)
		if err != nil {
			t.Fatal(err)
		}
		ed, rd := m.EntDim(), m.RelDim()
		h, r := make([]float32, ed), make([]float32, rd) // h + r = h·e^{i0} = 0 = t
		dh, dr, dt, de := make([]float32, ed), make([]float32, rd), make([]float32, ed), make([]float32, ed)
		m.PosGrad(h, r, h, 1, []float32{1}, dh, dr, dt)
		s := make([]float32, 1)
		m.Neg(h, r, nil, h, 1, 1, false, s)
		m.NegGrad(h, r, nil, h, 1, 1, false, s, []float32{1}, dh, dr, nil, de)
		for _, d := range [][]float32{dh, dr, dt, de} {
			for _, v := range d {
				if v != 0 {
					t.Errorf("%s: gradient %v at the kink, want 0", name, d)
					break
				}
			}
		}
	}
}

func TestNewKGEModelErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hidden int
		want   []string
	}{
		{"transe", 4, append([]string{`"transe"`}, kgeModelNames()...)},
		{"", 4, kgeModelNames()},
		{"rotate", 0, []string{"rotate", "hidden 0"}},
		{"distmult", -3, []string{"distmult", "hidden -3"}},
		{"rescal", 2049, []string{"rescal", "hidden 2049", "relation rows", "4198401", "≤ 2048"}},
		{"transr", 2049, []string{"transr", "hidden 2049", "projection rows", "4198401", "≤ 2048"}},
	} {
		m, err := newKGEModel(tc.name, tc.hidden, 12)
		if m != nil || err == nil || !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "train: ") {
			t.Errorf("newKGEModel(%q, %d) = %v, %v; want an ErrInvalid starting with \"train: \"", tc.name, tc.hidden, m, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("newKGEModel(%q, %d): %q does not name %s", tc.name, tc.hidden, err, w)
			}
		}
	}
	if got := strings.Join(kgeModelNames(), ","); got != "transe_l1,transe_l2,distmult,complex,rotate,rescal,simple,transr" {
		t.Errorf("kgeModelNames() = %s", got)
	}
}

// Once the scratch buffers have grown, no call allocates (the sizes stay
// below where gonum splits a product over goroutines).
func TestKGENoAllocs(t *testing.T) {
	for _, name := range kgeModelNames() {
		k := newKGECase(t, name, 2, 8, 8, 8, 6)
		ed, rd, c, n := k.m.EntDim(), k.m.RelDim(), k.c, k.n
		s, g := make([]float32, c*n), make([]float32, c*n)
		dh, dr, dt, de := make([]float32, c*ed), make([]float32, c*rd), make([]float32, c*ed), make([]float32, n*ed)
		allocs := testing.AllocsPerRun(10, func() {
			for _, head := range []bool{false, true} {
				k.m.Pos(k.h, k.r, k.t, c, s)
				k.m.PosGrad(k.h, k.r, k.t, c, g, dh, dr, dt)
				k.m.Neg(k.h, k.r, k.t, k.e, c, n, head, s)
				k.m.NegGrad(k.h, k.r, k.t, k.e, c, n, head, s, g, dh, dr, dt, de)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %g allocations per call", name, allocs)
		}
	}
}

// transe_l1 and rotate split large loops over goroutines (NegGrad in
// two passes), transr its sign and score loops and its products; the
// results are those of one goroutine, bit for bit. transr splits a loop
// only past parallelMin multiply-adds of one group (its triples × the
// candidates × hidden to score, the candidates × hidden for one triple's
// signs): its case has 1024 candidates and its 32 triples two relations,
// where 64 candidates and a relation per triple split none.
func TestKGEThreadsAgree(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, name := range []string{"transe_l1", "rotate", "transr"} {
		for _, head := range []bool{false, true} {
			n := 64
			if name == "transr" {
				n = 1024
			}
			k := newKGECase(t, name, 4, 32, 32, n, 6)
			if name == "transr" {
				rd := k.m.RelDim()
				for i := 2; i < k.c; i++ {
					copy(k.r[i*rd:(i+1)*rd], k.r[i%2*rd:(i%2+1)*rd])
				}
			}
			ed, rd, c, n := k.m.EntDim(), k.m.RelDim(), k.c, k.n
			g := kgeRows(rand.New(rand.NewPCG(5, 5)), c, n)
			var out [2][]float32
			for p, procs := range []int{1, 4} {
				runtime.GOMAXPROCS(procs)
				s := make([]float32, c*n)
				dh, dr, dt, de := make([]float32, c*ed), make([]float32, c*rd), make([]float32, c*ed), make([]float32, n*ed)
				k.m.Neg(k.h, k.r, k.t, k.e, c, n, head, s)
				k.m.NegGrad(k.h, k.r, k.t, k.e, c, n, head, s, g, dh, dr, dt, de)
				out[p] = slices.Concat(s, dh, dr, dt, de)
			}
			for i, v := range out[0] {
				if out[1][i] != v {
					t.Errorf("%s head=%v: element %d is %g on 4 threads, %g on 1", name, head, i, out[1][i], v)
					break
				}
			}
		}
	}
}

// BenchmarkKGEModel scores and differentiates one training chunk: 256
// triples against 256 shared tail negatives, hidden 200.
func BenchmarkKGEModel(b *testing.B) {
	const c, n, hidden = 256, 256, 200
	for _, name := range kgeModelNames() {
		b.Run("model="+name, func(b *testing.B) {
			m, err := newKGEModel(name, hidden, 12)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 1))
			ed, rd := m.EntDim(), m.RelDim()
			h, r, e, g := kgeRows(rng, c, ed), kgeRows(rng, c, rd), kgeRows(rng, n, ed), kgeRows(rng, c, n)
			s := make([]float32, c*n)
			dh, dr, de := make([]float32, c*ed), make([]float32, c*rd), make([]float32, n*ed)
			b.ReportAllocs()
			for b.Loop() {
				m.Neg(h, r, nil, e, c, n, false, s)
				m.NegGrad(h, r, nil, e, c, n, false, s, g, dh, dr, nil, de)
			}
			b.ReportMetric(float64(c*n)*float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
		})
	}
}

// TestKGESimplEClampedGradient: a simple score past the clamp's bounds
// (DGL-KE's ±20) has gradient 0 for its rows, as torch.clamp's, whether
// it is scored as a positive or as a negative; a triple within the bounds
// beside it keeps its gradient.
func TestKGESimplEClampedGradient(t *testing.T) {
	m, err := newKGEModel("simple", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Triple 0 scores ½(40 + 40) = 40, clamped to 20; triple 1 ½(2 + 2).
	h := []float32{10, 10, 10, 10, 1, 1, 1, 1}
	r := []float32{2, 2, 2, 2, 1, 1, 1, 1}
	tl := []float32{1, 1, 1, 1, 1, 1, 1, 1}
	s := make([]float32, 2)
	m.Pos(h, r, tl, 2, s)
	if s[0] != 20 || s[1] != 2 {
		t.Fatalf("Pos = %v, want [20 2]", s)
	}
	g := []float32{1, 1}
	dh, dr, dt := make([]float32, 8), make([]float32, 8), make([]float32, 8)
	m.PosGrad(h, r, tl, 2, g, dh, dr, dt)
	for _, d := range [][]float32{dh, dr, dt} {
		if !slices.Equal(d[:4], make([]float32, 4)) || slices.Equal(d[4:], make([]float32, 4)) {
			t.Errorf("PosGrad: %v, want 0 for the clamped triple 0 and not for triple 1", d)
		}
	}
	// As negatives: both triples' tails replaced by entity (1, 1 | 1, 1).
	g = []float32{1, 1}
	s = make([]float32, 2)
	m.Neg(h, r, nil, tl[:4], 2, 1, false, s)
	if s[0] != 20 || s[1] != 2 {
		t.Fatalf("Neg = %v, want [20 2]", s)
	}
	dh, dr, de := make([]float32, 8), make([]float32, 8), make([]float32, 4)
	m.NegGrad(h, r, nil, tl[:4], 2, 1, false, s, g, dh, dr, nil, de)
	for _, d := range [][]float32{dh, dr} {
		if !slices.Equal(d[:4], make([]float32, 4)) || slices.Equal(d[4:], make([]float32, 4)) {
			t.Errorf("NegGrad: %v, want 0 for the clamped triple 0 and not for triple 1", d)
		}
	}
	// de holds triple 1's gradient alone: ½(r'∘h' | r∘h) of triple 1.
	if want := []float32{0.5, 0.5, 0.5, 0.5}; !slices.Equal(de, want) {
		t.Errorf("NegGrad de = %v, want %v (triple 1's alone)", de, want)
	}
	if g[0] != 1 || g[1] != 1 {
		t.Errorf("NegGrad changed the caller's g: %v", g)
	}
}
