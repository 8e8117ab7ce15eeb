package shm

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// sizeUnits are the units ParseSize accepts, matched case-insensitively.
// Decimal units are powers of 1000 (as disks and the design's "1GB" mean
// them), binary units powers of 1024; FormatSize prefers the larger unit
// that is exact, binary first.
// It is a function, not a variable, so no package state can change.
func sizeUnits() [9]sizeUnit {
	return [...]sizeUnit{
		{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3},
		{"B", 1},
	}
}

type sizeUnit struct {
	name string
	mult int64
}

// ParseSize parses a byte size: a non-negative number, optionally with a
// fraction, then an optional unit: B, KB/MB/GB/TB (10^3, 10^6, 10^9,
// 10^12) or KiB/MiB/GiB/TiB (2^10, 2^20, 2^30, 2^40), any case, with or
// without a space. "1GB" is 1000000000 bytes, "64KiB" is 65536, "1.5GiB"
// is 1610612736, "1048576" is 1048576. A bare K, M, G or T is refused as
// ambiguous; the result must be a whole number of bytes that fits int64.
func ParseSize(s string) (int64, error) {
	text := strings.TrimSpace(s)
	i := 0
	for i < len(text) && (text[i] >= '0' && text[i] <= '9' || text[i] == '.') {
		i++
	}
	num, unit := text[:i], strings.TrimSpace(text[i:])
	if num == "" || num == "." || strings.Count(num, ".") > 1 {
		return 0, fmt.Errorf("shm: size %q: want a number then an optional unit, like 512MB, 1GB or 64KiB: %w", s, ErrInvalid)
	}
	mult := int64(-1)
	for _, u := range sizeUnits() {
		if strings.EqualFold(unit, u.name) {
			mult = u.mult
			break
		}
	}
	switch {
	case unit == "":
		mult = 1
	case mult < 0 && len(unit) == 1 && strings.ContainsAny(unit, "kKmMgGtT"):
		return 0, fmt.Errorf("shm: size %q: unit %q is ambiguous, write %sB (powers of 1000) or %siB (powers of 1024): %w",
			s, unit, strings.ToUpper(unit), strings.ToUpper(unit), ErrInvalid)
	case mult < 0:
		return 0, fmt.Errorf("shm: size %q: unknown unit %q, want B, KB, MB, GB, TB, KiB, MiB, GiB or TiB: %w", s, unit, ErrInvalid)
	}
	v, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("shm: size %q: bad number %q: %w", s, num, ErrInvalid)
	}
	v.Mul(v, new(big.Rat).SetInt64(mult))
	if !v.IsInt() {
		return 0, fmt.Errorf("shm: size %q: %s bytes is not a whole number of bytes: %w", s, v.FloatString(3), ErrInvalid)
	}
	n := v.Num()
	if !n.IsInt64() {
		return 0, fmt.Errorf("shm: size %q: more than %d bytes: %w", s, int64(math.MaxInt64), ErrInvalid)
	}
	return n.Int64(), nil
}

// FormatSize writes n with the largest unit that divides it exactly
// (binary before decimal), so that ParseSize(FormatSize(n)) == n:
// 1073741824 is "1GiB", 1000000000 is "1GB", 1000001 is "1000001".
func FormatSize(n int64) string {
	if n > 0 {
		for _, u := range sizeUnits() {
			if u.mult > 1 && n%u.mult == 0 {
				return strconv.FormatInt(n/u.mult, 10) + u.name
			}
		}
	}
	return strconv.FormatInt(n, 10)
}

// ApproxSize is n in the largest binary unit that holds it, exact when
// FormatSize is (256KiB), else to one decimal (63.9MiB).
func ApproxSize(n int64) string {
	units := sizeUnits()
	for _, u := range units[:4] {
		if n >= u.mult {
			if n%u.mult == 0 {
				return FormatSize(n)
			}
			return fmt.Sprintf("%.1f%s", float64(n)/float64(u.mult), u.name)
		}
	}
	return FormatSize(n)
}
