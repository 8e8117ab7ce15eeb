package multilevel

import (
	"math/rand/v2"
	"testing"
)

// popMax must return a vertex of the greatest gain while gains change
// under the heap as FM and k-way refinement change them: rises through
// raise, falls unannounced, vertices pushed and removed. A brute-force
// maximum over the vertices in the heap is the reference.
func TestMLHeapPopMax(t *testing.T) {
	const n = 200
	rng := rand.New(rand.NewPCG(1, 2))
	gain := make([]int64, n)
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = -1
	}
	h := mlHeap{pos: pos}
	get := func(v uint32) int64 { return gain[v] }
	for step := 0; step < 20000; step++ {
		v := uint32(rng.IntN(n))
		switch op := rng.IntN(6); {
		case op == 0 && pos[v] < 0:
			gain[v] = rng.Int64N(41) - 20
			h.push(v, gain[v])
		case op == 1 && pos[v] >= 0:
			h.remove(v)
		case op == 2: // a fall, which the heap is not told of
			gain[v] -= rng.Int64N(5)
		case op == 3:
			gain[v] += rng.Int64N(5)
			if pos[v] >= 0 {
				h.raise(v, gain[v])
			}
		case op == 4 && h.len() > 0:
			best := int64(-1 << 62)
			for u := range uint32(n) {
				if pos[u] >= 0 {
					best = max(best, gain[u])
				}
			}
			if got := h.popMax(get); gain[got] != best || pos[got] != -1 {
				t.Fatalf("step %d: popMax gave vertex %d of gain %d (pos %d), the greatest is %d", step, got, gain[got], pos[got], best)
			}
		case op == 5:
			// Every vertex in the heap is where pos says, under a key at
			// least its gain.
			for i, u := range h.ids {
				if pos[u] != int32(i) || h.keys[i] < gain[u] {
					t.Fatalf("step %d: entry %d: vertex %d, pos %d, key %d, gain %d", step, i, u, pos[u], h.keys[i], gain[u])
				}
			}
		}
	}
}
