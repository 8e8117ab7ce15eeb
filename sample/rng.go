package sample

import (
	"math"
	"math/bits"
	"slices"
)

// BatchKey names one batch of one loader. Every random choice made for the
// batch derives from it, so a batch is a pure function of its key, its
// seeds and the graph: whoever samples it, in whatever order.
type BatchKey struct {
	Seed  uint64 // the loader's seed
	Epoch uint64
	Rank  uint64 // the trainer's rank in its world
	Batch uint64 // batch index within the epoch
}

// Domain separators, so that the shuffle of an epoch and the sampling of a
// batch never share a stream even when their numbers coincide.
const (
	domainSample  = 0x73616d706c650001 // "sample" 1
	domainShuffle = 0x73687566666c0001 // "shuffl" 1
	golden        = 0x9E3779B97F4A7C15 // 2^64 / φ, the splitmix64 increment
)

// mix64 is the splitmix64 finaliser (Stafford's mix 13): a bijection on
// uint64 with full avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// combine folds x into the hash h. Two rounds of mix64 keep h=0, x=0 (and
// every other pair) from mapping onto a fixed point.
func combine(h, x uint64) uint64 { return mix64(mix64(h+golden) ^ x) }

// Stream is the batch's 64-bit stream id, the Key of its NeighborRequests.
func (k BatchKey) Stream() uint64 {
	h := combine(domainSample, k.Seed)
	h = combine(h, k.Epoch)
	h = combine(h, k.Rank)
	return combine(h, k.Batch)
}

// shuffleStream keys the permutation of a rank's seeds in one epoch.
func shuffleStream(seed, epoch, rank uint64) uint64 {
	return combine(combine(combine(domainShuffle, seed), epoch), rank)
}

// NodeStream is the stream of node v at hop (0-based) of the batch whose
// Stream is batch: the key (seed, epoch, rank, batch, hop, v) of DESIGN.md §5.
func NodeStream(batch uint64, hop int, v uint64) uint64 {
	return nodeStream(hopStream(batch, hop), v)
}

// hopStream is the part of NodeStream shared by every node of one hop, so
// that a hop's expansion computes it once.
func hopStream(batch uint64, hop int) uint64 { return combine(batch, uint64(hop)) }

// nodeStream is NodeStream(batch, hop, v) from h = hopStream(batch, hop).
func nodeStream(h, v uint64) uint64 { return combine(h, v) }

// rng is splitmix64 seeded with a stream: draw i is mix64(stream + i·φ),
// so draws are a pure function of (stream, i).
type rng struct{ state uint64 }

func (r *rng) next() uint64 {
	r.state += golden
	return mix64(r.state)
}

// bounded is uniform in [0, n), n > 0 (Lemire's multiply-shift with
// rejection, so exactly uniform).
func (r *rng) bounded(n uint64) uint64 {
	hi, lo := bits.Mul64(r.next(), n)
	if lo < n {
		t := -n % n
		for lo < t {
			hi, lo = bits.Mul64(r.next(), n)
		}
	}
	return hi
}

// unitAt is draw i of the stream as a float64 in (0, 1), never 0 or 1.
func unitAt(stream uint64, i int) float64 {
	x := mix64(stream + uint64(i+1)*golden)
	return (float64(x>>11) + 0.5) * (1.0 / (1 << 53))
}

// Floyd's algorithm draws t uniform in [0, j] for j = deg−fanout … deg−1
// and takes t, or j when t is already taken. How the taken set is kept
// decides the cost, not the result:
//
//   - deg ≤ maskDeg: a bitmask on the stack. Membership is a bit test,
//     and reading the bits in order emits the indices ascending, so no
//     sort follows.
//   - fanout ≤ linearLimit: the taken indices kept sorted in dst; the
//     scan for membership finds the insertion point too.
//   - otherwise: a bitset over the degree in the Chooser, then a sort.
const (
	maskDeg     = 1024
	linearLimit = 32
)

// Chooser picks neighbour indices. It holds scratch space reused across
// calls, so steady-state use allocates nothing. The zero value is ready to
// use. A Chooser is not safe for concurrent use.
type Chooser struct {
	bits []uint64 // Floyd membership for large samples; all zero between calls
	heap []weighted
}

type weighted struct {
	key float64
	idx uint32
}

// Uniform appends to dst the indices, ascending, of min(fanout, deg)
// distinct neighbours out of deg, chosen uniformly without replacement by
// Floyd's algorithm driven by stream. fanout < 0, or fanout ≥ deg, takes
// all indices without drawing.
func (c *Chooser) Uniform(stream uint64, deg, fanout int, dst []uint32) []uint32 {
	if fanout < 0 || fanout >= deg {
		for i := range deg {
			dst = append(dst, uint32(i))
		}
		return dst
	}
	r := rng{state: stream}
	switch {
	case deg <= maskDeg:
		return uniformMask(&r, deg, fanout, dst)
	case fanout <= linearLimit:
		return uniformSorted(&r, deg, fanout, dst)
	}
	base := len(dst)
	words := (deg + 63) / 64
	if cap(c.bits) < words {
		c.bits = make([]uint64, words)
	}
	set := c.bits[:words]
	for j := deg - fanout; j < deg; j++ {
		t := uint32(r.bounded(uint64(j) + 1))
		if set[t/64]&(1<<(t%64)) != 0 {
			t = uint32(j)
		}
		set[t/64] |= 1 << (t % 64)
		dst = append(dst, t)
	}
	for _, t := range dst[base:] {
		set[t/64] = 0
	}
	sortSmall(dst[base:])
	return dst
}

// uniformMask is Uniform for 0 ≤ fanout < deg ≤ maskDeg.
func uniformMask(r *rng, deg, fanout int, dst []uint32) []uint32 {
	const words = maskDeg / 64
	var set [words]uint64
	for j := deg - fanout; j < deg; j++ {
		t := uint32(r.bounded(uint64(j) + 1))
		if set[t/64%words]&(1<<(t%64)) != 0 {
			t = uint32(j)
		}
		set[t/64%words] |= 1 << (t % 64)
	}
	for w, x := range set[:(deg+63)/64] {
		for ; x != 0; x &= x - 1 {
			dst = append(dst, uint32(w*64+bits.TrailingZeros64(x)))
		}
	}
	return dst
}

// uniformSorted is Uniform for 0 ≤ fanout ≤ linearLimit, fanout < deg.
// The draws come first, in a loop without data-dependent branches, so
// that the insertion loop's mispredictions do not discard them.
func uniformSorted(r *rng, deg, fanout int, dst []uint32) []uint32 {
	var draw [linearLimit]uint32
	j0 := deg - fanout
	for k := range draw[:fanout] {
		draw[k] = uint32(r.bounded(uint64(j0+k) + 1))
	}
	base := len(dst)
	for k, t := range draw[:fanout] {
		set := dst[base:]
		i := len(set)
		for i > 0 && set[i-1] > t {
			i--
		}
		if i > 0 && set[i-1] == t {
			// Taken: j = j0+k is larger than every index so far.
			dst = append(dst, uint32(j0+k))
			continue
		}
		dst = append(dst, t)
		for m := len(dst) - 1; m > base+i; m-- {
			dst[m] = dst[m-1]
		}
		dst[base+i] = t
	}
	return dst
}

// Weighted appends to dst the indices, ascending, of min(fanout, positive)
// neighbours chosen without replacement with probability proportional to
// weight (Efraimidis–Spirakis: the fanout largest keys u_i^(1/w_i), with
// u_i draw i of stream). Weights that are zero, negative or NaN are never
// chosen. fanout < 0 takes every positively weighted neighbour.
func (c *Chooser) Weighted(stream uint64, w []float32, fanout int, dst []uint32) []uint32 {
	base := len(dst)
	if fanout < 0 || fanout >= len(w) {
		for i, x := range w {
			if x > 0 {
				dst = append(dst, uint32(i))
			}
		}
		return dst
	}
	if fanout == 0 {
		return dst
	}
	h := c.heap[:0]
	for i, x := range w {
		if !(x > 0) {
			continue
		}
		// log(u)/w orders like u^(1/w) and stays finite for tiny w.
		key := math.Log(unitAt(stream, i)) / float64(x)
		if len(h) < fanout {
			h = append(h, weighted{key, uint32(i)})
			heapUp(h, len(h)-1)
		} else if key > h[0].key {
			h[0] = weighted{key, uint32(i)}
			heapDown(h, 0)
		}
	}
	for _, e := range h {
		dst = append(dst, e.idx)
	}
	c.heap = h[:0]
	sortSmall(dst[base:])
	return dst
}

// heapUp and heapDown keep h a min-heap on key: h[0] is the weakest kept.
func heapUp(h []weighted, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].key <= h[i].key {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func heapDown(h []weighted, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].key < h[l].key {
			m = r
		}
		if h[i].key <= h[m].key {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// sortSmall sorts ascending: insertion sort for typical fanouts, pdqsort
// beyond.
func sortSmall(a []uint32) {
	if len(a) > 24 {
		slices.Sort(a)
		return
	}
	for i := 1; i < len(a); i++ {
		x := a[i]
		j := i
		for j > 0 && a[j-1] > x {
			a[j] = a[j-1]
			j--
		}
		a[j] = x
	}
}
