package partition

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLightest: the sum of the k smallest, against sorting, while values
// are removed.
func TestLightest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 7, 100} {
		rows := make([]uint64, n)
		for i := range rows {
			rows[i] = uint64(rng.IntN(9))
		}
		l := newLightest(rows)
		left := slices.Clone(rows)
		for {
			sorted := slices.Sorted(slices.Values(left))
			for k := -1; k <= len(sorted)+2; k++ {
				var want uint64
				for _, r := range sorted[:max(0, min(k, len(sorted)))] {
					want += r
				}
				if got := l.sum(k); got != want {
					t.Fatalf("n %d, %d left %v: sum(%d) = %d, want %d", n, len(left), sorted, k, got, want)
				}
			}
			if len(left) == 0 {
				break
			}
			i := rng.IntN(len(left))
			l.remove(left[i])
			left = slices.Delete(left, i, i+1)
		}
	}
}
