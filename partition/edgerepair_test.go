package partition

import (
	"slices"
	"testing"
)

// edgeBoundOf is an edgeBound over nodes of the given rows, placed as
// out, under max.
func edgeBoundOf(rows []uint64, out []uint32, parts int, bound uint64) *edgeBound {
	b := &edgeBound{indptr: make([]uint64, len(rows)+1), stored: make([]uint64, parts), max: bound}
	for v, r := range rows {
		b.indptr[v+1] = b.indptr[v] + r
		b.stored[out[v]] += r
	}
	return b
}

func TestRepairEdgesSwapsUnderExactNodeBalance(t *testing.T) {
	// Node 0 is a seed of part 0; 1–5 were placed. Parts hold 3 nodes
	// each and must keep them (lo = hi = 3): part 0 stores 5+4+1 = 10
	// edges against a bound of 7, so only a swap can help: node 1 (4)
	// for the lightest of part 1 (node 3, 1) leaves 7 and 7.
	rows := []uint64{5, 4, 1, 1, 1, 2}
	out := []uint32{0, 0, 0, 1, 1, 1}
	size := []int{3, 3}
	eb := edgeBoundOf(rows, out, 2, 7)
	repairEdges([]uint32{1, 2, 3, 4, 5}, func(uint32, int) float32 { return 0 }, 3, 3, size, eb, out)
	if want := []uint32{0, 1, 0, 0, 1, 1}; !slices.Equal(out, want) {
		t.Fatalf("parts %v, want %v", out, want)
	}
	if !slices.Equal(eb.stored, []uint64{7, 7}) || !slices.Equal(size, []int{3, 3}) {
		t.Fatalf("stored %v sizes %v, want [7 7] and [3 3]", eb.stored, size)
	}
}

func TestRepairEdgesMovesToTheReader(t *testing.T) {
	// Part 0 is over by 3 and may lose a node (lo 1); node 2 (row 3)
	// is the lightest that brings it under. Parts 1 and 2 both have
	// room: it goes to part 2, whose trainer reads it more.
	rows := []uint64{4, 1, 3, 2, 2}
	out := []uint32{0, 0, 0, 1, 2}
	size := []int{3, 1, 1}
	eb := edgeBoundOf(rows, out, 3, 5)
	heat := func(v uint32, p int) float32 {
		if v == 2 && p == 2 {
			return 1
		}
		return 0
	}
	repairEdges([]uint32{1, 2, 3, 4}, heat, 1, 3, size, eb, out)
	if want := []uint32{0, 0, 2, 1, 2}; !slices.Equal(out, want) {
		t.Fatalf("parts %v, want %v", out, want)
	}
	if !slices.Equal(eb.stored, []uint64{5, 2, 5}) || !slices.Equal(size, []int{2, 1, 2}) {
		t.Fatalf("stored %v sizes %v, want [5 2 5] and [2 1 2]", eb.stored, size)
	}
}

func TestRepairEdgesLeavesSeedsOverTheBound(t *testing.T) {
	// Part 0's seed (node 0) alone stores 9 edges against a bound of 6:
	// its placed node goes, the seed stays, and the loop ends.
	rows := []uint64{9, 2, 1, 1}
	out := []uint32{0, 0, 1, 1}
	size := []int{2, 2}
	eb := edgeBoundOf(rows, out, 2, 6)
	repairEdges([]uint32{1, 2, 3}, func(uint32, int) float32 { return 0 }, 1, 3, size, eb, out)
	if want := []uint32{0, 1, 1, 1}; !slices.Equal(out, want) {
		t.Fatalf("parts %v, want %v", out, want)
	}
	if !slices.Equal(eb.stored, []uint64{9, 4}) || !slices.Equal(size, []int{1, 3}) {
		t.Fatalf("stored %v sizes %v, want [9 4] and [1 3]", eb.stored, size)
	}
}
