package partition

import (
	"math"
	"testing"
)

// TestF16Exhaustive checks F32ToF16 on every half value, on every midpoint
// between neighbours (ties go to the even one) and one float32 step to
// either side of it.
func TestF16Exhaustive(t *testing.T) {
	for h := range 0x10000 {
		h := uint16(h)
		f := F16ToF32(h)
		if math.IsNaN(float64(f)) {
			if got := F32ToF16(f); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#04x -> %#04x, not a NaN", h, got)
			}
			continue
		}
		if got := F32ToF16(f); got != h {
			t.Fatalf("round trip %#04x -> %v -> %#04x", h, f, got)
		}
	}
	for h := uint16(0); h < 0x7c00; h++ {
		lo, hi := F16ToF32(h), F16ToF32(h+1) // h+1 = 0x7c00 is +Inf
		var mid float32
		if h+1 == 0x7c00 {
			mid = 65520 // where the next half value would be midway
		} else {
			mid = float32((float64(lo) + float64(hi)) / 2) // exact: 12 significant bits
		}
		even := h
		if h&1 == 1 {
			even = h + 1
		}
		for _, c := range []struct {
			in   float32
			want uint16
		}{
			{mid, even},
			{math.Nextafter32(mid, 0), h},
			{math.Nextafter32(mid, float32(math.Inf(1))), h + 1},
		} {
			if got := F32ToF16(c.in); got != c.want {
				t.Fatalf("F32ToF16(%g) = %#04x, want %#04x (between %#04x and %#04x)", c.in, got, c.want, h, h+1)
			}
			if got := F32ToF16(-c.in); got != c.want|0x8000 {
				t.Fatalf("F32ToF16(%g) = %#04x, want %#04x", -c.in, got, c.want|0x8000)
			}
		}
	}
	for _, c := range []struct {
		in   float32
		want uint16
	}{
		{1e9, 0x7c00}, {-1e9, 0xfc00}, {float32(math.Inf(1)), 0x7c00},
		{1e-10, 0}, {-1e-10, 0x8000}, {math.SmallestNonzeroFloat32, 0},
		{1, 0x3c00}, {65504, 0x7bff}, {5.9604645e-08, 0x0001}, {6.1035156e-05, 0x0400},
	} {
		if got := F32ToF16(c.in); got != c.want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

func BenchmarkF32ToF16(b *testing.B) {
	in := make([]float32, 4096)
	for i := range in {
		in[i] = float32(i) * 0.37
	}
	b.ReportAllocs()
	b.SetBytes(int64(4 * len(in)))
	var sink uint16
	for b.Loop() {
		for _, f := range in {
			sink ^= F32ToF16(f)
		}
	}
	_ = sink
}
