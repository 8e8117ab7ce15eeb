package partition

import "slices"

// lightest is a multiset of edge counts (the rows of the nodes the freq
// partitioner has not placed yet) that answers the sum of its k smallest
// in O(log D), D the distinct counts: two Fenwick trees over the
// distinct values, ascending, of how many there are and their sum.
type lightest struct {
	vals []uint64 // distinct values, ascending
	cnt  []uint64 // Fenwick, 1-based
	sums []uint64 // Fenwick, 1-based
	top  int      // highest power of two <= len(vals)
}

func newLightest(rows []uint64) *lightest {
	vals := slices.Clone(rows)
	slices.Sort(vals)
	vals = slices.Compact(vals)
	l := &lightest{vals: vals, cnt: make([]uint64, len(vals)+1), sums: make([]uint64, len(vals)+1)}
	for l.top = 1; l.top*2 <= len(vals); l.top *= 2 {
	}
	for _, r := range rows {
		l.add(r, 1)
	}
	return l
}

// add adds n copies of r (n = ^0 removes one: unsigned wrap-around),
// r one of the values the set was made with.
func (l *lightest) add(r, n uint64) {
	i, _ := slices.BinarySearch(l.vals, r)
	for i++; i < len(l.cnt); i += i & -i {
		l.cnt[i] += n
		l.sums[i] += n * r
	}
}

// remove takes one r out of the set.
func (l *lightest) remove(r uint64) { l.add(r, ^uint64(0)) }

// sum is the sum of the k smallest values in the set (of all of them
// when it holds fewer).
func (l *lightest) sum(k int) uint64 {
	if k <= 0 || len(l.vals) == 0 {
		return 0
	}
	// Descend to the largest prefix of values holding fewer than k.
	pos, c, s := 0, uint64(0), uint64(0)
	for step := l.top; step > 0; step /= 2 {
		if n := pos + step; n < len(l.cnt) && c+l.cnt[n] < uint64(k) {
			pos, c, s = n, c+l.cnt[n], s+l.sums[n]
		}
	}
	if pos == len(l.vals) { // fewer than k in all
		return s
	}
	return s + (uint64(k)-c)*l.vals[pos]
}
