package train

import "math"

// adam is PyTorch's Adam: weight decay adds wd·θ to the gradient before
// the moments; with decoupled set it is AdamW instead (θ shrinks by
// lr·wd·θ, outside the moments). Moments are kept in float32, arithmetic is
// float64, so every trainer that applies the same gradient to the same
// parameters gets bit-identical results.
type adam struct {
	lr, wd, b1, b2, eps float64
	decoupled           bool
	m, v                []float32
	t                   int
}

func newAdam(c *Config, n int) adam {
	return adam{
		lr: c.LR, wd: c.WeightDecay, b1: c.Beta1, b2: c.Beta2, eps: c.Eps, decoupled: c.AdamW,
		m: make([]float32, n), v: make([]float32, n),
	}
}

// step applies one update with gradient scale·g to params.
func (a *adam) step(params, g []float32, scale float64) {
	a.t++
	bc1 := 1 - math.Pow(a.b1, float64(a.t))
	sqrtBC2 := math.Sqrt(1 - math.Pow(a.b2, float64(a.t)))
	stepSize := a.lr / bc1
	l2, shrink := a.wd, 1.0
	if a.decoupled {
		l2, shrink = 0, 1-a.lr*a.wd
	}
	for i, gi := range g {
		p := float64(params[i])
		grad := scale*float64(gi) + l2*p
		p *= shrink
		m := a.b1*float64(a.m[i]) + (1-a.b1)*grad
		v := a.b2*float64(a.v[i]) + (1-a.b2)*grad*grad
		a.m[i], a.v[i] = float32(m), float32(v)
		params[i] = float32(p - stepSize*m/(math.Sqrt(v)/sqrtBC2+a.eps))
	}
}
