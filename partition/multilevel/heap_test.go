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

// A queue filled with add and ordered once (as an FM pass fills it with
// its boundary) pops the same vertices, greatest key first, as one
// filled by push, and every entry sits where pos says.
func TestMLHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 3, 17, 500} {
		pos := make([]int32, n)
		h := mlHeap{pos: pos}
		keys := make([]int64, n)
		for v := range n {
			keys[v] = rng.Int64N(61) - 30
			h.add(uint32(v), keys[v])
		}
		h.order()
		for i, u := range h.ids {
			if pos[u] != int32(i) {
				t.Fatalf("n=%d: vertex %d at %d, pos says %d", n, u, i, pos[u])
			}
			if c := 2*i + 1; c < len(h.ids) && h.keys[c] > h.keys[i] || c+1 < len(h.ids) && h.keys[c+1] > h.keys[i] {
				t.Fatalf("n=%d: entry %d (key %d) is below a child", n, i, h.keys[i])
			}
		}
		get := func(v uint32) int64 { return keys[v] }
		last := int64(1 << 62)
		for range n {
			v := h.popMax(get)
			if keys[v] > last {
				t.Fatalf("n=%d: popped key %d after %d", n, keys[v], last)
			}
			last = keys[v]
		}
		if h.len() != 0 {
			t.Fatalf("n=%d: %d left", n, h.len())
		}
	}
}
