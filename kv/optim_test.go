package kv

import (
	"math"
	"slices"
	"testing"
)

// TestOptimisersExact pushes gradients whose updates are exact in float32
// and compares with values worked out by hand.
func TestOptimisersExact(t *testing.T) {
	cases := []struct {
		name   string
		opt    Optimizer
		pushes [][]float32 // gradients for row 1 of a 3×4 zero table
		want   []float32   // row 1 afterwards
	}{
		{"sgd", SGD(0.5), [][]float32{{1, 2, -4, 0}, {1, 0, 0, 8}}, f32(-1, -1, 2, -4)},
		// state 0 → 4 (mean of 2²) → std 2: w -= 0.5·2/2 = 0.5 each;
		// state 4 → 16 (mean of 4²,4²,4²,0²=12) → std 4: w -= 0.5·4/4.
		{"adagrad", Adagrad(0.5, 1e-10), [][]float32{{2, 2, 2, 2}, {4, 4, 4, 0}}, f32(-1, -1, -1, -0.5)},
		// Adagrad with eps 1: std = sqrt(4)+1 = 3 after a push of 2s.
		{"adagrad-eps", Adagrad(3, 1), [][]float32{{2, 2, -2, 2}}, f32(-2, -2, 2, -2)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t, 0, spec("e", 3, 4, c.opt, Async, 1))
			for _, g := range c.pushes {
				if err := s.Push("e", []uint64{1}, g); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Pull("e", []uint64{0, 1, 2}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := append(append(make([]float32, 4), c.want...), make([]float32, 4)...)
			if !slices.Equal(got, want) {
				t.Fatalf("rows %v, want %v", got, want)
			}
			if v, _ := s.Version("e"); v != uint64(len(c.pushes)) {
				t.Fatalf("version %d, want %d", v, len(c.pushes))
			}
		})
	}
}

// TestAdagradMatchesDGLKE recomputes DGL-KE's formula step by step for
// arbitrary values: the same float32 operations in the same order.
func TestAdagradMatchesDGLKE(t *testing.T) {
	const lr, eps = float32(0.1), float32(1e-10)
	init := Init{Kind: InitUniform, Scale: 0.5, Seed: 7}
	sp := spec("e", 4, 3, Adagrad(lr, eps), Async, 1)
	sp.Init = init
	s := newStore(t, 0, sp)
	w, _ := s.Pull("e", []uint64{2}, nil)
	var state float32
	for _, g := range [][]float32{{0.3, -1.7, 2.25}, {-0.01, 0.5, 4}, {1e-3, 0, -3}} {
		if err := s.Push("e", []uint64{2}, g); err != nil {
			t.Fatal(err)
		}
		sq := float32(0)
		for _, x := range g {
			sq = sq + float32(x*x)
		}
		state = state + sq/3
		std := float32(math.Sqrt(float64(state))) + eps
		for j := range w {
			w[j] = w[j] + float32(-lr*g[j])/std
		}
	}
	got, _ := s.Pull("e", []uint64{2}, nil)
	if !slices.Equal(got, w) {
		t.Fatalf("row %v, want %v", got, w)
	}
}

// TestAdamMatchesPyTorch recomputes torch.optim.Adam's update, and checks
// its known first step: w moves by lr against the gradient's sign.
func TestAdamMatchesPyTorch(t *testing.T) {
	o := Adam(0.01, 0.9, 0.999, 1e-8)
	s := newStore(t, 0, spec("d", 2, 3, o, Async, 1))
	grads := [][]float32{{0.5, -2, 1e-3}, {0.25, 1, -1}, {-4, 0.125, 3}}
	w := make([]float32, 3)
	m, v := make([]float32, 3), make([]float32, 3)
	for step, g := range grads {
		if err := s.Push("d", []uint64{1}, g); err != nil {
			t.Fatal(err)
		}
		n := float64(step + 1)
		bc1 := 1 - math.Pow(float64(o.Beta1), n)
		bc2 := 1 - math.Pow(float64(o.Beta2), n)
		stepSize := float32(-(float64(o.LR) / bc1))
		for j := range w {
			m[j] = float32(o.Beta1*m[j]) + float32((1-o.Beta1)*g[j])
			v[j] = float32(o.Beta2*v[j]) + float32((1-o.Beta2)*float32(g[j]*g[j]))
			denom := float32(math.Sqrt(float64(v[j])))/float32(math.Sqrt(bc2)) + o.Eps
			w[j] = w[j] + float32(stepSize*(m[j]/denom))
		}
		if step == 0 {
			got, _ := s.Pull("d", []uint64{1}, nil)
			for j, x := range got {
				want := -0.01 * float32(math.Copysign(1, float64(g[j])))
				if math.Abs(float64(x-want)) > 1e-4 {
					t.Fatalf("first step w[%d] = %v, want about %v", j, x, want)
				}
			}
		}
	}
	got, _ := s.Pull("d", []uint64{0, 1}, nil)
	want := append(make([]float32, 3), w...)
	if !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}

// TestInitIndependentOfSharding checks that a row starts with the same
// values whatever shard holds it, and that the values follow the spec.
func TestInitIndependentOfSharding(t *testing.T) {
	for _, in := range []Init{
		{Kind: InitUniform, Scale: KGEInitScale(12, 8), Seed: 3},
		{Kind: InitNormal, Scale: 0.5, Seed: 3},
	} {
		one := spec("e", 1000, 8, SGD(1), Async, 1)
		one.Init = in
		four := spec("e", 1000, 8, SGD(1), Async, 4)
		four.Init = in
		whole, _ := newStore(t, 0, one).Pull("e", allIDs(1000), nil)
		var parts []float32
		for p, s := range newCluster(t, 4, four) {
			lo, hi := four.Range(p)
			parts, _ = s.Pull("e", idRange(lo, hi), parts)
		}
		if !slices.Equal(whole, parts) {
			t.Fatalf("init %+v: sharded rows differ from unsharded", in)
		}
		var sum, sq float64
		for _, x := range whole {
			if in.Kind == InitUniform && (x < -in.Scale || x > in.Scale) {
				t.Fatalf("uniform value %v outside ±%v", x, in.Scale)
			}
			sum += float64(x)
			sq += float64(x) * float64(x)
		}
		n := float64(len(whole))
		mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
		wantStd := float64(in.Scale)
		if in.Kind == InitUniform {
			wantStd /= math.Sqrt(3)
		}
		if math.Abs(mean) > 0.05*float64(in.Scale) || math.Abs(std-wantStd) > 0.05*wantStd {
			t.Fatalf("init %+v: mean %v std %v, want 0 and %v", in, mean, std, wantStd)
		}
	}
}

func idRange(lo, hi uint64) []uint64 {
	ids := make([]uint64, 0, hi-lo)
	for i := lo; i < hi; i++ {
		ids = append(ids, i)
	}
	return ids
}

func allIDs(n uint64) []uint64 { return idRange(0, n) }
