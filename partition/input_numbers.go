package partition

// Numbers of text inputs, parsed from bytes without allocating: unsigned and
// signed integers, and float32s rounded as strconv.ParseFloat rounds them.

import (
	"math"
	"strconv"
)

// parseUint parses a decimal unsigned integer without allocating.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		d := c - '0'
		if d > 9 {
			return 0, false
		}
		if len(b) == 20 && v > (math.MaxUint64-uint64(d))/10 {
			return 0, false
		}
		v = v*10 + uint64(d)
	}
	return v, true
}

// parseInt parses a decimal int64 with an optional sign.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	u, ok := parseUint(b)
	if !ok || u > math.MaxInt64 {
		return 0, false
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

// exactPow10 are the powers of ten that float64 holds exactly.
var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat32 parses b as strconv.ParseFloat(string(b), 32) does, with
// the same result bit for bit, but without allocating for plain decimals.
//
// Fast path (Clinger): a mantissa of at most 19 digits below 2^53 and a
// decimal exponent within ±22 give a correctly rounded float64 with one
// multiplication or division by an exact power of ten. Rounding that
// float64 to float32 equals rounding the exact value to float32 unless
// the float64 lies exactly on a float32 rounding midpoint (every midpoint
// is a float64, and rounding to float64 is monotone, so an exact value
// and its float64 lie on the same side of every midpoint); that case,
// float32 subnormals and overflow go to strconv.
func parseFloat32(b []byte) (float32, bool) {
	i, neg := 0, false
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	var mant uint64
	nd, exp, digits := 0, 0, false
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		digits = true
		if mant == 0 && d == 0 {
			continue
		}
		if nd == 19 {
			return parseFloat32Slow(b)
		}
		mant = mant*10 + uint64(d)
		nd++
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b); i++ {
			d := b[i] - '0'
			if d > 9 {
				break
			}
			digits = true
			if mant == 0 && d == 0 {
				exp--
				continue
			}
			if nd == 19 {
				return parseFloat32Slow(b)
			}
			mant = mant*10 + uint64(d)
			nd++
			exp--
		}
	}
	if !digits {
		return parseFloat32Slow(b)
	}
	if i < len(b) && b[i]|0x20 == 'e' {
		e, ok := parseInt(b[i+1:])
		if !ok || e < -400 || e > 400 {
			return parseFloat32Slow(b)
		}
		exp += int(e)
		i = len(b)
	}
	if i != len(b) {
		return parseFloat32Slow(b)
	}
	if mant == 0 {
		if neg {
			return float32(math.Copysign(0, -1)), true
		}
		return 0, true
	}
	if mant > 1<<53 || exp < -22 || exp > 22 {
		return parseFloat32Slow(b)
	}
	f := float64(mant)
	if exp < 0 {
		f /= exactPow10[-exp]
	} else {
		f *= exactPow10[exp]
	}
	if f < 0x1p-126 || f > math.MaxFloat32 || math.Float64bits(f)&(1<<29-1) == 1<<28 {
		return parseFloat32Slow(b)
	}
	if neg {
		f = -f
	}
	return float32(f), true
}

// finite32 reports whether v is neither NaN nor infinite: what a feature
// or an edge weight must be (parseFloat32 reads "nan" and "inf", which a
// label may spell for missing).
func finite32(v float32) bool { return v == v && !math.IsInf(float64(v), 0) }

func parseFloat32Slow(b []byte) (float32, bool) {
	v, err := strconv.ParseFloat(string(b), 32)
	if err != nil {
		return 0, false
	}
	return float32(v), true
}
