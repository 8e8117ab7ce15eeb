package train

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAggregationAdjoint: scatterMean is the adjoint of gatherMean
// (<scatter(g), x> = <g, gather(x)>), and both give bit-identical results
// on 1 and 4 threads (work split by columns, edges summed in order).
func TestAggregationAdjoint(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const nIn, nOut, d, e = 300, 120, 64, 2000
	row, col := make([]int32, e), make([]int32, e)
	for i := range e {
		row[i], col[i] = int32(r.IntN(nIn)), int32(r.IntN(nOut-5)) // the last 5 targets have no edge
	}
	x := view(make([]float64, nIn*d), nIn, d)
	g := view(make([]float64, nOut*d), nOut, d)
	for i := range x.data {
		x.data[i] = r.NormFloat64()
	}
	for i := range g.data {
		g.data[i] = r.NormFloat64()
	}
	inv := make([]float64, nOut)
	invDegrees(inv, col)
	var outs, backs [][]float64
	for _, threads := range []int{1, 4} {
		y := view(make([]float64, nOut*d), nOut, d)
		gatherMean(y, x, row, col, inv, threads)
		dx := view(make([]float64, nIn*d), nIn, d)
		scatterMean(dx, g, row, col, inv, threads)
		outs, backs = append(outs, y.data), append(backs, dx.data)
		var lhs, rhs float64
		for i := range dx.data {
			lhs += dx.data[i] * x.data[i]
		}
		for i := range y.data {
			rhs += g.data[i] * y.data[i]
		}
		if math.Abs(lhs-rhs) > 1e-9*math.Abs(lhs) {
			t.Errorf("threads %d: <scatter(g), x> = %v, <g, gather(x)> = %v", threads, lhs, rhs)
		}
		for _, v := range y.row(nOut - 1) {
			if v != 0 {
				t.Fatalf("threads %d: a target without edges aggregates %v", threads, v)
			}
		}
	}
	if !slices.Equal(outs[0], outs[1]) || !slices.Equal(backs[0], backs[1]) {
		t.Error("results depend on the thread count")
	}
}

// TestSparseProducts: spmm and spmmT agree with gemm on the dense matrix,
// on 1 and 4 threads.
func TestSparseProducts(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const rows, cols, out = 200, 300, 48
	dense := view(make([]float64, rows*cols), rows, cols)
	var s sparse[float64]
	s.rows, s.cols = rows, cols
	s.ptr = append(s.ptr, 0)
	for i := range rows {
		for j := range cols {
			if r.IntN(20) == 0 {
				v := r.NormFloat64()
				dense.data[i*cols+j] = v
				s.idx, s.val = append(s.idx, int32(j)), append(s.val, v)
			}
		}
		s.ptr = append(s.ptr, int32(len(s.idx)))
	}
	w := view(make([]float64, cols*out), cols, out)
	g := view(make([]float64, rows*out), rows, out)
	for i := range w.data {
		w.data[i] = r.NormFloat64()
	}
	for i := range g.data {
		g.data[i] = r.NormFloat64()
	}
	want := view(make([]float64, rows*out), rows, out)
	gemm(nn, dense, w, 0, want)
	wantT := view(make([]float64, cols*out), cols, out)
	gemm(tn, dense, g, 0, wantT)
	for _, threads := range []int{1, 4} {
		got := view(make([]float64, rows*out), rows, out)
		spmm(s, w, 0, got, threads)
		gotT := view(make([]float64, cols*out), cols, out)
		spmmT(s, g, gotT, threads)
		for i := range want.data {
			if math.Abs(got.data[i]-want.data[i]) > 1e-12 {
				t.Fatalf("threads %d: spmm element %d: %v, want %v", threads, i, got.data[i], want.data[i])
			}
		}
		for i := range wantT.data {
			if math.Abs(gotT.data[i]-wantT.data[i]) > 1e-12 {
				t.Fatalf("threads %d: spmmT element %d: %v, want %v", threads, i, gotT.data[i], wantT.data[i])
			}
		}
	}
}

func TestAppendNonZero(t *testing.T) {
	x := make([]byte, 4*100)
	for _, i := range []int{0, 15, 16, 17, 63, 99} {
		x[4*i+3] = 0x3f // 0.5 as f32
	}
	x[4*40] = 1 // a denormal: non-zero too
	want := []int32{0, 15, 16, 17, 40, 63, 99}
	if got := appendNonZero(nil, x, 4); !slices.Equal(got, want) {
		t.Errorf("f32: %v, want %v", got, want)
	}
	h := make([]byte, 2*70)
	h[2*69+1] = 0x3c // 1.0 as f16
	h[2*33] = 1
	if got := appendNonZero(nil, h, 2); !slices.Equal(got, []int32{33, 69}) {
		t.Errorf("f16: %v, want [33 69]", got)
	}
}
