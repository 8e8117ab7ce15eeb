package train

import "math"

// adam is PyTorch's Adam (not AdamW): weight decay adds wd·θ to the
// gradient before the moments. Moments are kept in float32, arithmetic is
// float64, so every trainer that applies the same gradient to the same
// parameters gets bit-identical results.
type adam struct {
	lr, wd, b1, b2, eps float64
	m, v                []float32
	t                   int
}

func newAdam(c *Config, n int) adam {
	return adam{
		lr: c.LR, wd: c.WeightDecay, b1: c.Beta1, b2: c.Beta2, eps: c.Eps,
		m: make([]float32, n), v: make([]float32, n),
	}
}

// step applies one update with gradient g to params.
func (a *adam) step(params, g []float32) {
	a.t++
	bc1 := 1 - math.Pow(a.b1, float64(a.t))
	sqrtBC2 := math.Sqrt(1 - math.Pow(a.b2, float64(a.t)))
	stepSize := a.lr / bc1
	for i, gi := range g {
		p := float64(params[i])
		grad := float64(gi) + a.wd*p
		m := a.b1*float64(a.m[i]) + (1-a.b1)*grad
		v := a.b2*float64(a.v[i]) + (1-a.b2)*grad*grad
		a.m[i], a.v[i] = float32(m), float32(v)
		params[i] = float32(p - stepSize*m/(math.Sqrt(v)/sqrtBC2+a.eps))
	}
}
