package partition

// IEEE half precision, the feature rows' 16-bit encoding.

import (
	"math"
)

// F32ToF16 converts f to IEEE 754 half precision, rounding to nearest
// with ties to even; values beyond the half range become ±Inf, NaN stays
// NaN (quiet).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(mant>>13)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Half subnormal: value = m × 2^-24, m = significand >> (14-e).
		shift := uint32(14 - e)
		if shift > 24 {
			return sign
		}
		mant |= 0x800000
		m := mant >> shift
		rem, half := mant&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || rem == half && m&1 == 1 {
			m++ // may carry into the smallest normal, which is right
		}
		return sign | uint16(m)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, up to Inf, which is right
	}
	return sign | uint16(h)
}

// F16ToF32 converts a half-precision value to float32 exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: normalise.
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}
