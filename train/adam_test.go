package train

import (
	"math"
	"testing"
)

// TestAdam checks three steps against the PyTorch update written out in
// float64: Adam with L2 weight decay, and AdamW.
func TestAdam(t *testing.T) {
	const lr, wd, b1, b2, eps = 0.1, 0.01, 0.9, 0.999, 1e-8
	for _, decoupled := range []bool{false, true} {
		c := validConfig()
		c.LR, c.WeightDecay, c.Beta1, c.Beta2, c.Eps, c.AdamW = lr, wd, b1, b2, eps, decoupled
		a := newAdam(&c, 2)
		params := []float32{1, -2}
		p := []float64{1, -2}
		m, v := make([]float64, 2), make([]float64, 2)
		grads := [][]float32{{0.5, -0.25}, {0.1, 0.3}, {-1, 0}}
		for step, g := range grads {
			a.step(params, g, 1)
			tt := float64(step + 1)
			for i := range p {
				gi := float64(g[i])
				if decoupled {
					p[i] *= 1 - lr*wd
				} else {
					gi += wd * p[i]
				}
				m[i] = b1*m[i] + (1-b1)*gi
				v[i] = b2*v[i] + (1-b2)*gi*gi
				mh, vh := m[i]/(1-math.Pow(b1, tt)), v[i]/(1-math.Pow(b2, tt))
				p[i] -= lr * mh / (math.Sqrt(vh) + eps)
				if math.Abs(float64(params[i])-p[i]) > 1e-6 {
					t.Errorf("adamw %v step %d param %d: %v, want %v", decoupled, step, i, params[i], p[i])
				}
			}
		}
		// The first step moves by lr whatever the gradient's scale.
		if d := 1 - float64(params[0]); d < 0.1 {
			t.Errorf("adamw %v: param 0 moved %v in 3 steps", decoupled, d)
		}
	}
}
