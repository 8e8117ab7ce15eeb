package partition

import (
	"cmp"
	"slices"
)

// repairEdges brings the parts that placeByHeat left over eb's bound
// under it, where moving the nodes it placed can. placeByHeat keeps a
// part within the bound while some part can take a node; when none can,
// the node goes to the part storing the fewest edges, and a hub placed
// so passes the bound by up to its row (R-MAT, 20 k nodes, into 4 and 8
// parts: 1.034–1.048 × the mean of stored edges against 1.03).
//
// placed lists the nodes placeByHeat gave a part: only they move (the
// seed chunks stay with their trainers). While a part A is over the
// bound, one step takes the lightest of A's nodes whose row alone
// brings A under it, or, when none fits anywhere, the heaviest that
// fits, and
//   - moves it to the part that reads it most among those that take it
//     within the edge bound and below hi nodes, when A holds more than lo;
//   - or else swaps it with the lightest placed node of such a part (any
//     node count), when that lowers A's edges.
//
// Every step lowers A's edges and leaves the other part within the
// bound and every part within [lo, hi], so the parts within the bound
// stay within it and the loop ends. A part whose seeds alone pass the
// bound, or that no step can lower, stays over it; the report says so.
func repairEdges(placed []uint32, score func(v uint32, p int) float32, lo, hi int, size []int, eb *edgeBound, out []uint32) {
	P := len(size)
	// Each part's placed nodes, by row ascending (then id).
	byPart := make([][]uint32, P)
	for _, v := range placed {
		byPart[out[v]] = append(byPart[out[v]], v)
	}
	byRow := func(a, b uint32) int { return cmp.Or(cmp.Compare(eb.row(a), eb.row(b)), cmp.Compare(a, b)) }
	for _, vs := range byPart {
		slices.SortFunc(vs, byRow)
	}
	insert := func(p int, v uint32) {
		i, _ := slices.BinarySearchFunc(byPart[p], v, byRow)
		byPart[p] = slices.Insert(byPart[p], i, v)
	}
	remove := func(p int, v uint32) {
		i, _ := slices.BinarySearchFunc(byPart[p], v, byRow)
		byPart[p] = slices.Delete(byPart[p], i, i+1)
	}
	// pick returns the index in vs (by row ascending) of the lightest
	// node whose row, less off, is at least need and is at most room, or
	// else of the heaviest whose row is at most room and more than off;
	// -1 when there is none.
	pick := func(vs []uint32, need, room, off uint64) int {
		fits := func(i int) bool { return eb.row(vs[i]) <= room }
		i, _ := slices.BinarySearchFunc(vs, need+off, func(v uint32, r uint64) int { return cmp.Compare(eb.row(v), r) })
		if i < len(vs) && fits(i) {
			return i
		}
		// The heaviest at most room: the last index below the first row
		// past it.
		j, _ := slices.BinarySearchFunc(vs, room+1, func(v uint32, r uint64) int { return cmp.Compare(eb.row(v), r) })
		if j--; j >= 0 && eb.row(vs[j]) > off {
			return j
		}
		return -1
	}
	stuck := make([]bool, P)
	for {
		a := -1
		for p := range P {
			if !stuck[p] && eb.stored[p] > eb.max && (a < 0 || eb.stored[p] > eb.stored[a]) {
				a = p
			}
		}
		if a < 0 {
			return
		}
		need := eb.stored[a] - eb.max
		moved := false
		if size[a] > lo {
			// Move: the room is the most any part below hi can take.
			var room uint64
			for b := range P {
				if b != a && size[b] < hi && eb.stored[b] < eb.max {
					room = max(room, eb.max-eb.stored[b])
				}
			}
			if i := pick(byPart[a], need, room, 0); i >= 0 {
				v := byPart[a][i]
				to := -1
				for b := range P {
					if b == a || size[b] >= hi || eb.stored[b]+eb.row(v) > eb.max {
						continue
					}
					if to < 0 || score(v, b) > score(v, to) || score(v, b) == score(v, to) && eb.stored[b] < eb.stored[to] {
						to = b
					}
				}
				remove(a, v)
				insert(to, v)
				eb.stored[a] -= eb.row(v)
				eb.stored[to] += eb.row(v)
				size[a]--
				size[to]++
				out[v] = uint32(to)
				moved = true
			}
		}
		if !moved {
			// Swap with the lightest placed node of another part: the
			// pair lowering A the most toward its need.
			bestB, bestI := -1, -1
			var bestGain uint64
			for b := range P {
				if b == a || len(byPart[b]) == 0 || eb.stored[b] > eb.max {
					continue
				}
				w := eb.row(byPart[b][0])
				i := pick(byPart[a], need, eb.max-eb.stored[b]+w, w)
				if i < 0 {
					continue
				}
				if gain := min(eb.row(byPart[a][i])-w, need); gain > bestGain {
					bestB, bestI, bestGain = b, i, gain
				}
			}
			if bestB < 0 {
				stuck[a] = true
				continue
			}
			v, w := byPart[a][bestI], byPart[bestB][0]
			remove(a, v)
			remove(bestB, w)
			insert(bestB, v)
			insert(a, w)
			d := eb.row(v) - eb.row(w)
			eb.stored[a] -= d
			eb.stored[bestB] += d
			out[v], out[w] = uint32(bestB), uint32(a)
		}
	}
}
