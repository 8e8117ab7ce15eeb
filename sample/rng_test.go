package sample

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestUniformShape(t *testing.T) {
	var c Chooser
	for _, tc := range []struct{ deg, fanout, want int }{
		{0, 5, 0}, {3, 5, 3}, {5, 5, 5}, {6, 5, 5}, {100, 10, 10},
		{100, 0, 0}, {7, -1, 7}, {1000, 32, 32}, {1000, 33, 33}, {70, 69, 69}, {1 << 16, 500, 500},
	} {
		t.Run(fmt.Sprintf("deg=%d/fanout=%d", tc.deg, tc.fanout), func(t *testing.T) {
			for s := range uint64(50) {
				got := c.Uniform(s, tc.deg, tc.fanout, []uint32{9999})
				if got[0] != 9999 {
					t.Fatal("Uniform overwrote dst's prefix")
				}
				got = got[1:]
				if len(got) != tc.want {
					t.Fatalf("stream %d: %d indices, want %d", s, len(got), tc.want)
				}
				for i, x := range got {
					if int(x) >= tc.deg || (i > 0 && got[i-1] >= x) {
						t.Fatalf("stream %d: %v not strictly ascending in [0, %d)", s, got, tc.deg)
					}
				}
				if again := c.Uniform(s, tc.deg, tc.fanout, nil); !slices.Equal(again, got) {
					t.Fatalf("stream %d: %v then %v", s, got, again)
				}
			}
			for _, w := range c.bits {
				if w != 0 {
					t.Fatal("membership bitset left dirty")
				}
			}
		})
	}
}

// Every index is chosen with probability fanout/deg.
func TestUniformDistribution(t *testing.T) {
	var c Chooser
	for _, tc := range []struct{ deg, fanout int }{{10, 3}, {100, 40}, {7, 6}} {
		t.Run(fmt.Sprintf("deg=%d/fanout=%d", tc.deg, tc.fanout), func(t *testing.T) {
			const trials = 20000
			count := make([]int, tc.deg)
			var buf []uint32
			for s := range uint64(trials) {
				buf = c.Uniform(NodeStream(42, 0, s), tc.deg, tc.fanout, buf[:0])
				for _, i := range buf {
					count[i]++
				}
			}
			p := float64(tc.fanout) / float64(tc.deg)
			sd := math.Sqrt(trials * p * (1 - p))
			for i, n := range count {
				if math.Abs(float64(n)-trials*p) > 5*sd {
					t.Errorf("index %d chosen %d times, want %.0f ± %.0f", i, n, trials*p, 5*sd)
				}
			}
		})
	}
}

func TestWeighted(t *testing.T) {
	var c Chooser
	w := []float32{1, 2, 3, 0, 4, float32(math.NaN()), -1}
	for _, tc := range []struct {
		fanout int
		want   []uint32 // when deterministic
	}{
		{-1, []uint32{0, 1, 2, 4}}, {7, []uint32{0, 1, 2, 4}}, {4, nil}, {2, nil}, {0, []uint32{}},
	} {
		got := c.Weighted(7, w, tc.fanout, nil)
		if tc.want != nil && !slices.Equal(got, tc.want) {
			t.Errorf("fanout %d: %v, want %v", tc.fanout, got, tc.want)
		}
		if n := min(tc.fanout, 4); tc.fanout >= 0 && len(got) != n {
			t.Errorf("fanout %d: %v, want %d indices", tc.fanout, got, n)
		}
		for i, x := range got {
			if !(w[x] > 0) || (i > 0 && got[i-1] >= x) {
				t.Errorf("fanout %d: %v: not ascending or a non-positive weight chosen", tc.fanout, got)
			}
		}
	}
	if got := c.Weighted(1, []float32{0, 0}, 1, nil); len(got) != 0 {
		t.Errorf("all-zero weights: chose %v", got)
	}
}

// With fanout 1, Efraimidis–Spirakis picks index i with probability
// w_i / Σw; with fanout 2, the heaviest is picked most often.
func TestWeightedDistribution(t *testing.T) {
	var c Chooser
	w := []float32{1, 2, 3, 0, 4}
	const trials = 40000
	count := make([]int, len(w))
	var buf []uint32
	for s := range uint64(trials) {
		buf = c.Weighted(NodeStream(9, 1, s), w, 1, buf[:0])
		count[buf[0]]++
	}
	for i, n := range count {
		p := float64(w[i]) / 10
		sd := math.Sqrt(trials * p * (1 - p))
		if math.Abs(float64(n)-trials*p) > 5*sd+0.5 {
			t.Errorf("index %d (weight %g) chosen %d times, want %.0f ± %.0f", i, w[i], n, trials*p, 5*sd)
		}
	}
	// Fanout 2: P(pair {a,b}) = p_a·p_b/(1−p_a) + p_b·p_a/(1−p_b).
	pairs := map[[2]uint32]int{}
	for s := range uint64(trials) {
		buf = c.Weighted(NodeStream(9, 2, s), w, 2, buf[:0])
		pairs[[2]uint32{buf[0], buf[1]}]++
	}
	for pair, n := range pairs {
		pa, pb := float64(w[pair[0]])/10, float64(w[pair[1]])/10
		p := pa*pb/(1-pa) + pb*pa/(1-pb)
		sd := math.Sqrt(trials * p * (1 - p))
		if math.Abs(float64(n)-trials*p) > 5*sd {
			t.Errorf("pair %v chosen %d times, want %.0f ± %.0f", pair, n, trials*p, 5*sd)
		}
	}
}

// Every component of the key changes the stream.
func TestStreams(t *testing.T) {
	base := BatchKey{Seed: 1, Epoch: 2, Rank: 3, Batch: 4}
	seen := map[uint64]string{base.Stream(): "base"}
	for name, k := range map[string]BatchKey{
		"seed": {0, 2, 3, 4}, "epoch": {1, 0, 3, 4}, "rank": {1, 2, 0, 4}, "batch": {1, 2, 3, 0},
		"zero": {}, "swap": {2, 1, 3, 4},
	} {
		s := k.Stream()
		if other, dup := seen[s]; dup {
			t.Errorf("key %s has the stream of %s", name, other)
		}
		seen[s] = name
	}
	s := base.Stream()
	if NodeStream(s, 0, 5) == NodeStream(s, 1, 5) || NodeStream(s, 0, 5) == NodeStream(s, 0, 6) {
		t.Error("hop or node does not change the node stream")
	}
	if shuffleStream(1, 2, 3) == base.Stream() {
		t.Error("shuffle and sample streams coincide")
	}
	// Pin the generator: a change here changes every batch ever sampled.
	if got, want := s, uint64(0xcad9eb5adc686e90); got != want {
		t.Errorf("BatchKey{1,2,3,4}.Stream() = %#x, want %#x", got, want)
	}
}

func TestBounded(t *testing.T) {
	r := rng{state: 3}
	const n, trials = 7, 70000
	var count [n]int
	for range trials {
		count[r.bounded(n)]++
	}
	for i, c := range count {
		if c < trials/n-600 || c > trials/n+600 {
			t.Errorf("bounded(%d) gave %d %d times of %d", n, i, c, trials)
		}
	}
}

// floydRef is Floyd's algorithm as DESIGN.md states it, kept plain: a
// linear membership scan, then a sort. Uniform keeps the taken set in
// three faster ways; each must give exactly these indices.
func floydRef(stream uint64, deg, fanout int) []uint32 {
	if fanout < 0 || fanout >= deg {
		out := make([]uint32, deg)
		for i := range out {
			out[i] = uint32(i)
		}
		return out
	}
	var out []uint32
	r := rng{state: stream}
	for j := deg - fanout; j < deg; j++ {
		t := uint32(r.bounded(uint64(j) + 1))
		if slices.Contains(out, t) {
			t = uint32(j)
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

func TestUniformMatchesFloyd(t *testing.T) {
	var c Chooser
	degs := []int{1, 2, 5, 16, 17, 63, 64, 65, 200, maskDeg - 1, maskDeg, maskDeg + 1, 5000, 1 << 17}
	fanouts := []int{0, 1, 5, 10, 15, linearLimit - 1, linearLimit, linearLimit + 1, 100, 900}
	for _, deg := range degs {
		for _, f := range fanouts {
			for s := range uint64(12) {
				stream := NodeStream(s, 1, uint64(deg*1000+f))
				want := floydRef(stream, deg, f)
				got := c.Uniform(stream, deg, f, []uint32{7})
				if got[0] != 7 || !slices.Equal(got[1:], want) {
					t.Fatalf("deg %d fanout %d stream %d: %v, want [7] + %v", deg, f, s, got, want)
				}
			}
		}
	}
}
