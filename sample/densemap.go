package sample

import "math/bits"

// denseMap maps the ids of one contiguous range [start, start+n) to their
// position in a batch's n_id by direct indexing instead of hashing: a bit
// per id says whether it is in the batch, and only then is its position
// read. The bitset is 1/32 of the positions' size, so it mostly stays in
// cache: a node new to the batch (about half of the sampled neighbours)
// costs a bit test and three stores, with no load that can miss; only
// repeats read their position, and those are often hubs, in cache. It
// serves the Sampler's local partition, where nearly every sampled node
// lies; posMap serves the rest.
//
// Emptying it for the next batch clears only the words of seen that were
// written, found through the bitset dirty (one bit per word of seen), so a
// small batch on a large partition does not pay for the whole range.
//
// INVARIANT: every non-zero word seen[w] has dirty bit w set, and pos[l]
// is meaningful only while seen bit l is set.
//
// Memory: about 4.13 bytes per id of the range (pos 4, seen 1/8, dirty
// 1/512), allocated by the first reset; a Sampler uses a denseMap only
// when its range has at most denseMaxIDs ids.
type denseMap struct {
	start, n uint64   // the range [start, start+n); n = 0: not in use
	seen     []uint64 // bit l: id start+l is in the batch
	dirty    []uint64 // bit w: seen[w] may be non-zero
	pos      []int32  // position of id start+l, valid iff its seen bit is set
}

// denseMaxIDs bounds the range a denseMap covers: 2^24 ids, 69 MB per
// Sampler. A partition of 2.4 M nodes costs 9.9 MB. Larger ranges use the
// hash alone, whose size follows the batch instead of the partition.
const denseMaxIDs = 1 << 24

// init makes m cover [start, end); the arrays are allocated by the first
// reset, so a Sampler that never samples costs nothing.
func (m *denseMap) init(start, end uint64) {
	*m = denseMap{start: start, n: end - start}
}

// reset empties the map for the next batch.
func (m *denseMap) reset() {
	if uint64(len(m.pos)) != m.n {
		words := (m.n + 63) / 64
		m.seen = make([]uint64, words)
		m.dirty = make([]uint64, (words+63)/64)
		m.pos = make([]int32, m.n)
		return
	}
	for i, d := range m.dirty {
		for d != 0 {
			m.seen[i*64+bits.TrailingZeros64(d)] = 0
			d &= d - 1
		}
		m.dirty[i] = 0
	}
}

// insert maps local index l (id start+l) to pos unless it is present. It
// returns the position l has after the call and whether it was inserted.
func (m *denseMap) insert(l uint64, pos int32) (int32, bool) {
	w, b := l/64, uint64(1)<<(l%64)
	if m.seen[w]&b != 0 {
		return m.pos[l], false
	}
	m.seen[w] |= b
	m.dirty[w/64] |= 1 << (w % 64)
	m.pos[l] = pos
	return pos, true
}

// lookup is the position of local index l, or -1.
func (m *denseMap) lookup(l uint64) int32 {
	if m.seen[l/64]&(1<<(l%64)) == 0 {
		return -1
	}
	return m.pos[l]
}
