package train

import (
	"math"
	"testing"
)

func TestDropout(t *testing.T) {
	for _, p := range []float64{0, 0.1, 0.5, 0.8} {
		d := newDrop(p)
		x := make([]float32, 100000)
		for i := range x {
			x[i] = 1
		}
		nnz := dropApply(d, 42, x)
		kept := float64(nnz) / float64(len(x))
		if math.Abs(kept-(1-p)) > 0.01 {
			t.Errorf("p %g: kept %.4f", p, kept)
		}
		for i, v := range x {
			if v != 0 && math.Abs(float64(v)-1/(1-p)) > 1e-3 {
				t.Fatalf("p %g: kept value %d is %v, want %v", p, i, v, 1/(1-p))
			}
		}
		// The same stream gives the same mask; another stream another.
		y := make([]float32, len(x))
		for i := range y {
			y[i] = 1
		}
		dropApply(d, 42, y)
		z := make([]float32, len(x))
		for i := range z {
			z[i] = 1
		}
		dropApply(d, 43, z)
		same, other := true, true
		for i := range x {
			same = same && x[i] == y[i]
			other = other && x[i] == z[i]
		}
		if !same || (p > 0 && other) {
			t.Errorf("p %g: same stream equal %v, other stream equal %v", p, same, other)
		}
	}
	if dropStream(1, 0, 0, 0, 0) == dropStream(1, 1, 0, 0, 0) || dropStream(1, 0, 0, 0, 0) == dropStream(1, 0, 0, 0, 1) {
		t.Error("dropout streams of different ranks or layers coincide")
	}
}
