package kv

import "math"

// The optimisers below work in float32 in a fixed order, so a test can
// recompute every bit. Every product that is added to something else is
// wrapped in an explicit float32 conversion: the Go spec lets a compiler
// fuse x*y+z into one FMA (arm64 does), and an explicit conversion forbids
// that, so results are the same on every architecture.

// sgdRow is w[j] -= lr·g[j].
func sgdRow(w, g []float32, lr float32) {
	g = g[:len(w)]
	for j := range w {
		w[j] -= float32(lr * g[j])
	}
}

// adagradRow is DGL-KE's sparse Adagrad for one row (KGEServer._push_handler
// in dglke/kvserver.py and ExternalEmbedding.update in
// dglke/models/pytorch/tensor_models.py):
//
//	grad_sum = (g*g).mean(1)          one value per row
//	state_sum.index_add_(0, ID, grad_sum)
//	std = sqrt(state_sum[ID]) + eps   DGL-KE: eps = 1e-10
//	w.index_add_(0, ID, -lr * g / std)
//
// The mean is a left-to-right float32 sum of g[j]·g[j] divided by dim
// (PyTorch may sum in another order, so the last bit can differ from it).
// state is the row's accumulator.
func adagradRow(w, g []float32, state *float32, lr, eps float32) {
	g = g[:len(w)]
	var sum float32
	for _, x := range g {
		sum += float32(x * x)
	}
	*state += sum / float32(len(g))
	// sqrt in float64 then rounded to float32 is the correctly rounded
	// float32 square root (53 >= 2·24+2 bits), the same as sqrtf.
	std := float32(math.Sqrt(float64(*state))) + eps
	for j := range w {
		w[j] += float32(-lr*g[j]) / std
	}
}

// adamRow is PyTorch's torch.optim.Adam (single-tensor, non-amsgrad,
// weight_decay 0) for one row, with the step count t kept per row as DGL's
// SparseAdam does, so rows a push does not touch do not advance:
//
//	t += 1
//	m = β1·m + (1-β1)·g
//	v = β2·v + (1-β2)·g·g
//	step = lr / (1 - β1^t)                     float64, like Python floats
//	denom = sqrt(v) / sqrt(1 - β2^t) + eps
//	w += -step · (m / denom)
func adamRow(w, g, m, v []float32, t *uint32, o Optimizer) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	*t++
	b1, b2 := o.Beta1, o.Beta2
	bc1 := 1 - math.Pow(float64(b1), float64(*t))
	bc2 := 1 - math.Pow(float64(b2), float64(*t))
	step := float32(-(float64(o.LR) / bc1))
	bc2s := float32(math.Sqrt(bc2))
	c1, c2 := 1-b1, 1-b2
	for j := range w {
		m[j] = float32(b1*m[j]) + float32(c1*g[j])
		v[j] = float32(b2*v[j]) + float32(c2*float32(g[j]*g[j]))
		denom := float32(math.Sqrt(float64(v[j])))/bc2s + o.Eps
		w[j] += float32(step * (m[j] / denom))
	}
}

// initRow fills row (global id row) from the table's initialiser.
func initRow(w []float32, in Init, row uint64) {
	switch in.Kind {
	case InitZeros:
		clear(w)
	case InitUniform:
		a := float64(in.Scale)
		for j := range w {
			u := unit(in.Seed, row, uint64(j))
			w[j] = float32(-a + 2*a*u)
		}
	case InitNormal:
		s := float64(in.Scale)
		for j := range w {
			// Box–Muller over two independent counters; 1-u is in (0, 1].
			u1 := 1 - unit(in.Seed, row, uint64(2*j)|1<<62)
			u2 := unit(in.Seed, row, uint64(2*j+1)|1<<62)
			w[j] = float32(s * math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2))
		}
	}
}

// unit is a uniform float64 in [0, 1) keyed by (seed, row, col): a
// counter-based generator, so the value of an element does not depend on
// which shard computes it or in what order.
func unit(seed, row, col uint64) float64 {
	h := mix64(seed ^ 0x6a09e667f3bcc909)
	h = mix64(h ^ row)
	h = mix64(h ^ col)
	return float64(h>>11) * (1.0 / (1 << 53))
}

// mix64 is SplitMix64's finaliser.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
