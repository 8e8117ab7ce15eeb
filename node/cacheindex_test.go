package node

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// cacheIndex agrees with a binary search over the ids for every id in
// and around their span, for sparse and dense sets.
func TestCacheIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ n, span int }{{0, 0}, {1, 1}, {3, 200}, {1000, 5000}, {4000, 4000}, {64, 64}, {65, 1 << 20}} {
		set := map[uint64]bool{}
		base := uint64(rng.IntN(1000))
		for len(set) < tc.n {
			set[base+uint64(rng.IntN(tc.span))] = true
		}
		ids := make([]uint64, 0, len(set))
		for id := range set {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		c, err := newCacheIndex(ids)
		if err != nil {
			t.Fatal(err)
		}
		for id := uint64(0); id < base+uint64(tc.span)+130; id++ {
			want, wok := slices.BinarySearch(ids, id)
			got, ok := c.lookup(id)
			if ok != wok || (ok && got != want) {
				t.Fatalf("n=%d span=%d: lookup(%d) = %d, %v; want %d, %v", tc.n, tc.span, id, got, ok, want, wok)
			}
		}
		if _, ok := c.lookup(^uint64(0)); ok {
			t.Fatalf("n=%d: the largest id is cached", tc.n)
		}
	}
	for _, bad := range [][]uint64{{5, 5}, {7, 3}} {
		if _, err := newCacheIndex(bad); err == nil || !strings.Contains(err.Error(), "not strictly ascending") {
			t.Fatalf("%v: %v", bad, err)
		}
	}
}
