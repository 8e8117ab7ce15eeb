package sample

import (
	"math"
	"math/rand/v2"
	"testing"
)

// posMap agrees with a Go map over many generations, growth included,
// and forgets everything on reset.
func TestPosMap(t *testing.T) {
	var m posMap
	r := rand.New(rand.NewPCG(1, 2))
	for gen := range 40 {
		m.reset(10)
		ref := map[uint64]int32{}
		n := 1 + r.IntN(5000)
		for range n {
			k := r.Uint64N(uint64(3 * n)) // repeats
			if gen%3 == 0 {
				k <<= 20 // keys sharing low bits
			}
			got, added := m.insert(k, int32(len(ref)))
			want, had := ref[k]
			if !had {
				want = int32(len(ref))
				ref[k] = want
			}
			if got != want || added == had {
				t.Fatalf("gen %d: insert(%d) = %d, %v; want %d, %v", gen, k, got, added, want, !had)
			}
		}
		if m.n != len(ref) {
			t.Fatalf("gen %d: %d entries, want %d", gen, m.n, len(ref))
		}
		for k, want := range ref {
			if got := m.lookup(k); got != want {
				t.Fatalf("gen %d: lookup(%d) = %d, want %d", gen, k, got, want)
			}
		}
	}
	m.reset(0)
	if got := m.lookup(0); got != -1 {
		t.Errorf("after reset: lookup(0) = %d, want -1", got)
	}
}

// The generation stamp wraps after 2^32 resets: stale slots must not
// come back to life.
func TestPosMapGenerationWrap(t *testing.T) {
	var m posMap
	m.reset(4)
	m.gen = math.MaxUint32
	m.insert(77, 5)
	m.reset(4) // gen wraps to 0: slots cleared, gen 1
	if m.gen != 1 {
		t.Fatalf("gen = %d after wrap, want 1", m.gen)
	}
	if got := m.lookup(77); got != -1 {
		t.Errorf("lookup(77) = %d after wrap, want -1", got)
	}
	if got, added := m.insert(77, 9); got != 9 || !added {
		t.Errorf("insert(77) = %d, %v after wrap; want 9, true", got, added)
	}
}
