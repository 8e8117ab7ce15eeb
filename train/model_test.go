package train

import (
	"fmt"
	"math"
	"testing"
	"time"

	"graphnode/sample"
)

// gradCase is a tiny model and batch for exact checks in float64.
type gradCase struct {
	layers, hops int
	order        int
	store        int
	dropout      float64
	normalize    bool
}

func (c gradCase) String() string {
	return fmt.Sprintf("layers=%d/hops=%d/order=%d/store=%d/dropout=%g/normalize=%v", c.layers, c.hops, c.order, c.store, c.dropout, c.normalize)
}

var gradCases = []gradCase{
	{layers: 2, hops: 2, order: orderAggregateFirst},
	{layers: 2, hops: 2, order: orderProjectFirst},
	{layers: 2, hops: 3, order: orderAuto, dropout: 0.3},
	{layers: 3, hops: 3, order: orderAggregateFirst, dropout: 0.3, normalize: true},
	{layers: 3, hops: 3, order: orderProjectFirst, dropout: 0.3},
	{layers: 2, hops: 2, store: storeSparse, dropout: 0.3, normalize: true},
	{layers: 3, hops: 3, store: storeSparse, dropout: 0.3},
}

// tinyNet is a float64 net over a random graph's batch for c.
func tinyNet(t *testing.T, c gradCase) (*net[float64], sample.View, []drop, []uint64) {
	t.Helper()
	g := randGraph(3, 40, 160, 5, 3)
	for i := range g.feat { // non-negative rows, as normalisation expects
		g.feat[i] = float32(math.Abs(float64(g.feat[i])))
	}
	fan := []int{3, 2, 2}[:c.hops]
	v := oneBatch(t, g.mem(t, sample.F32), []uint64{1, 5, 9, 12, 30}, fan)
	dims := []int{5, 4, 3}
	if c.layers == 3 {
		dims = []int{5, 4, 4, 3}
	}
	n := newNet[float64](dims, 11, 2, time.Now)
	n.order, n.store = c.order, c.store
	drops := make([]drop, c.layers)
	streams := make([]uint64, c.layers)
	for l := range drops {
		drops[l] = newDrop(c.dropout)
		streams[l] = dropStream(1, 0, 0, 0, l)
	}
	return n, v, drops, streams
}

// loss is the summed loss of n on v, leaving the gradient in n.grads.
func (c gradCase) loss(t *testing.T, n *net[float64], v *sample.View, drops []drop, streams []uint64) float64 {
	t.Helper()
	logits, err := n.forward(v, c.normalize, drops, streams)
	if err != nil {
		t.Fatal(err)
	}
	l, _, count := n.lossGrad(logits, n.b.labels)
	if count == 0 {
		t.Fatal("batch has no labelled seed")
	}
	clear(n.grads)
	n.backward()
	return l
}

// TestGradientCheck compares every parameter's analytic gradient with a
// central finite difference, in float64.
func TestGradientCheck(t *testing.T) {
	for _, c := range gradCases {
		t.Run(c.String(), func(t *testing.T) {
			n, v, drops, streams := tinyNet(t, c)
			c.loss(t, n, &v, drops, streams)
			analytic := append([]float64(nil), n.grads...)
			const h = 1e-6
			worst := 0.0
			nonzero := 0
			for i := range n.params {
				p := n.params[i]
				n.params[i] = p + h
				up := c.loss(t, n, &v, drops, streams)
				n.params[i] = p - h
				down := c.loss(t, n, &v, drops, streams)
				n.params[i] = p
				numeric := (up - down) / (2 * h)
				err := math.Abs(numeric-analytic[i]) / max(1, math.Abs(numeric), math.Abs(analytic[i]))
				worst = max(worst, err)
				if err > 1e-6 {
					t.Errorf("param %d: analytic %.9g, numeric %.9g", i, analytic[i], numeric)
				}
				if analytic[i] != 0 {
					nonzero++
				}
			}
			if nonzero < len(n.params)/2 {
				t.Errorf("only %d of %d gradients non-zero: the check proves little", nonzero, len(n.params))
			}
			t.Logf("%d params, worst relative error %.2g", len(n.params), worst)
		})
	}
}

// TestOrdersAgree: aggregate-first and project-first compute the same
// logits and gradients.
func TestOrdersAgree(t *testing.T) {
	for _, layers := range []int{2, 3} {
		c := gradCase{layers: layers, hops: layers, dropout: 0.2}
		c.order = orderAggregateFirst
		a, v, drops, streams := tinyNet(t, c)
		la := c.loss(t, a, &v, drops, streams)
		c.order = orderProjectFirst
		p, _, _, _ := tinyNet(t, c)
		lp := c.loss(t, p, &v, drops, streams)
		if math.Abs(la-lp) > 1e-12 {
			t.Errorf("layers %d: loss %v aggregate-first, %v project-first", layers, la, lp)
		}
		for i := range a.grads {
			if math.Abs(a.grads[i]-p.grads[i]) > 1e-12 {
				t.Fatalf("layers %d: grad %d: %v vs %v", layers, i, a.grads[i], p.grads[i])
			}
		}
	}
}

// TestSparseMatchesDense: the sparse first layer computes the dense one's
// loss and gradients, dropout and normalisation included.
func TestSparseMatchesDense(t *testing.T) {
	for _, layers := range []int{2, 3} {
		c := gradCase{layers: layers, hops: layers, dropout: 0.4, normalize: true, order: orderProjectFirst}
		c.store = storeDense
		a, v, drops, streams := tinyNet(t, c)
		la := c.loss(t, a, &v, drops, streams)
		c.store = storeSparse
		p, _, _, _ := tinyNet(t, c)
		lp := c.loss(t, p, &v, drops, streams)
		if math.Abs(la-lp) > 1e-12 {
			t.Errorf("layers %d: loss %v dense, %v sparse", layers, la, lp)
		}
		for i := range a.grads {
			if math.Abs(a.grads[i]-p.grads[i]) > 1e-12 {
				t.Fatalf("layers %d: grad %d: %v dense, %v sparse", layers, i, a.grads[i], p.grads[i])
			}
		}
		if nz := p.sp.nnz(); nz == 0 || nz >= p.sp.rows*p.sp.cols {
			t.Errorf("layers %d: sparse input holds %d of %d values", layers, nz, p.sp.rows*p.sp.cols)
		}
	}
}

// TestTrimMatchesFullGraph: the trimmed forward gives the seeds the
// logits that SAGE layers computed on every node of the batch, with every
// edge, give them (what PyG computes without trim_to_layer).
func TestTrimMatchesFullGraph(t *testing.T) {
	for _, c := range []struct{ layers, hops int }{{2, 2}, {2, 3}, {3, 3}} {
		g := randGraph(5, 60, 300, 4, 3)
		v := oneBatch(t, g.mem(t, sample.F32), []uint64{0, 7, 8, 20}, []int{4, 3, 2}[:c.hops])
		dims := []int{4, 6, 3}
		if c.layers == 3 {
			dims = []int{4, 6, 5, 3}
		}
		n := newNet[float64](dims, 3, 1, time.Now)
		logits, err := n.forward(&v, false, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := fullForward(n, &v)
		for i := range logits.rows {
			for j, z := range logits.row(i) {
				if math.Abs(z-want[i][j]) > 1e-12 {
					t.Errorf("layers %d hops %d: seed %d class %d: trimmed %v, full %v", c.layers, c.hops, i, j, z, want[i][j])
				}
			}
		}
	}
}

// fullForward is the reference: every layer on every node of v, with all
// of v's edges, written out with maps and loops.
func fullForward(n *net[float64], v *sample.View) [][]float64 {
	N := int(v.Header.NumNodes)
	x := v.XF32()
	d := n.dims[0]
	h := make([][]float64, N)
	for i := range h {
		h[i] = make([]float64, d)
		for j := range d {
			h[i][j] = float64(x[i*d+j])
		}
	}
	nbrs := map[int][]int{}
	for e, r := range v.Row() {
		c := int(v.Col()[e])
		nbrs[c] = append(nbrs[c], int(r))
	}
	for l, ly := range n.layers {
		out := make([][]float64, N)
		for i := range N {
			mean := make([]float64, ly.din)
			for _, j := range nbrs[i] {
				for k := range mean {
					mean[k] += h[j][k] / float64(len(nbrs[i]))
				}
			}
			out[i] = make([]float64, ly.dout)
			for o := range ly.dout {
				s := n.params[ly.bia+o]
				for k := range ly.din {
					s += mean[k]*n.params[ly.wl+k*ly.dout+o] + h[i][k]*n.params[ly.wr+k*ly.dout+o]
				}
				if l < len(n.layers)-1 {
					s = max(s, 0)
				}
				out[i][o] = s
			}
		}
		h = out
	}
	return h[:v.Header.BatchSize]
}

// TestHalfFeatures: a batch with f16 features gives the logits of the same
// values in f32.
func TestHalfFeatures(t *testing.T) {
	g := randGraph(9, 30, 100, 4, 3)
	for i := range g.feat { // values exact in binary16
		g.feat[i] = float32(math.Round(float64(g.feat[i])*64) / 64)
	}
	seeds := []uint64{2, 4, 6}
	v32 := oneBatch(t, g.mem(t, sample.F32), seeds, []int{3, 3})
	v16 := oneBatch(t, g.mem(t, sample.F16), seeds, []int{3, 3})
	n := newNet[float64]([]int{4, 5, 3}, 1, 1, time.Now)
	a, err := n.forward(&v32, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]float64(nil), a.data...)
	b, err := n.forward(&v16, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if b.data[i] != want[i] {
			t.Fatalf("logit %d: f16 %v, f32 %v", i, b.data[i], want[i])
		}
	}
}

func TestHalf(t *testing.T) {
	for _, c := range []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x3555, 0.333251953125},
		{0x7bff, 65504}, {0x0001, 5.960464477539063e-08}, {0x8400, -6.103515625e-05},
		{0x7c00, float32(math.Inf(1))},
	} {
		if got := half(c.h); got != c.want {
			t.Errorf("half(%#04x) = %v, want %v", c.h, got, c.want)
		}
	}
	if got := half(0x7e00); got == got {
		t.Errorf("half(0x7e00) = %v, want NaN", got)
	}
}
