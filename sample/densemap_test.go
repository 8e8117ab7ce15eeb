package sample

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// denseMap agrees with a Go map over many batches, forgets everything on
// reset (also words written long ago), and leaves no dirty word behind.
func TestDenseMap(t *testing.T) {
	for _, n := range []uint64{1, 63, 64, 65, 4096 + 3, 100_000} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			var m denseMap
			m.init(1000, 1000+n)
			r := rand.New(rand.NewPCG(n, 3))
			var prev map[uint64]int32
			for batch := range 30 {
				m.reset()
				for l := range prev {
					if got := m.lookup(l); got != -1 {
						t.Fatalf("batch %d: lookup(%d) = %d after reset, want -1", batch, l, got)
					}
				}
				ref := map[uint64]int32{}
				inserts := 1 + r.IntN(int(min(n, 3000)))
				for range inserts {
					l := r.Uint64N(n)
					if batch%4 == 0 {
						l = r.Uint64N(min(n, 70)) // dense repeats in few words
					}
					got, added := m.insert(l, int32(len(ref)))
					want, had := ref[l]
					if !had {
						want = int32(len(ref))
						ref[l] = want
					}
					if got != want || added == had {
						t.Fatalf("batch %d: insert(%d) = %d, %v; want %d, %v", batch, l, got, added, want, !had)
					}
				}
				for l := range n {
					want, ok := ref[l]
					if !ok {
						want = -1
					}
					if got := m.lookup(l); got != want {
						t.Fatalf("batch %d: lookup(%d) = %d, want %d", batch, l, got, want)
					}
				}
				prev = ref
			}
			m.reset()
			for w, x := range m.seen {
				if x != 0 {
					t.Fatalf("seen[%d] = %#x after reset", w, x)
				}
			}
			for w, x := range m.dirty {
				if x != 0 {
					t.Fatalf("dirty[%d] = %#x after reset", w, x)
				}
			}
			if len(m.pos) != int(n) || len(m.seen) != int((n+63)/64) {
				t.Fatalf("%d positions and %d seen words for %d ids", len(m.pos), len(m.seen), n)
			}
		})
	}
}

// The arrays are allocated by the first reset, not by init.
func TestDenseMapLazy(t *testing.T) {
	var m denseMap
	m.init(5, 5+1<<20)
	if m.pos != nil || m.seen != nil {
		t.Fatal("init allocated")
	}
	m.reset()
	if len(m.pos) != 1<<20 {
		t.Fatalf("%d positions after reset, want %d", len(m.pos), 1<<20)
	}
}

// A Sampler deduplicating through the hash alone (a range above
// denseMaxIDs) makes the same records as one using the dense map, with
// and without remote peers.
func TestDenseAndHashAgree(t *testing.T) {
	g := randGraph(41, 3000, 60_000, false, Schema{FeatDim: 2, LabelDim: 1})
	whole := g.whole(t)
	u, parts := g.split(t, []uint64{0, 1000, 2000, 3000})
	remote := &fakeRemote{parts: parts}
	mk := func(local Local, hashOnly bool) *Sampler {
		ls := NewLocalSource(u)
		cfg := Config{Fanouts: []int{15, 10, 5}, Local: local, Schema: g.schema, Features: ls, Labels: ls}
		if local != Local(whole) {
			cfg.Remote, cfg.Book = remote, u.Book()
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if s.dense.n == 0 {
			t.Fatal("dense map not in use for a small range")
		}
		if hashOnly {
			s.dense = denseMap{}
		}
		return s
	}
	for _, local := range []Local{whole, parts[1]} {
		dense, hash := mk(local, false), mk(local, true)
		for i, seeds := range randomSeeds(3000, 6, 40) {
			key := BatchKey{Seed: 2, Batch: uint64(i)}
			if !bytes.Equal(record(t, dense, key, seeds), record(t, hash, key, seeds)) {
				t.Fatalf("local [%d, %d) batch %d: dense and hash records differ", local.Start(), local.End(), i)
			}
		}
	}
}
