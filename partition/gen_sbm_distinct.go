package partition

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
)

// sbmModel draws a node's partners in the stochastic block model.
type sbmModel struct {
	labels    []int32
	members   []uint32 // members[start[b]:start[b+1]] are block b's nodes
	start     []int
	homophily float64
}

// partner draws one partner of u: in u's block with probability
// homophily, else uniformly in another block; never u itself.
func (s *sbmModel) partner(r *rand.Rand, u int) uint32 {
	nb := len(s.start) - 1
	b := int(s.labels[u])
	ob := b
	if nb > 1 && r.Float64() >= s.homophily {
		ob = r.IntN(nb - 1)
		if ob >= b {
			ob++
		}
	}
	blk := s.members[s.start[ob]:s.start[ob+1]]
	v := blk[r.IntN(len(blk))]
	for v == uint32(u) {
		v = blk[r.IntN(len(blk))]
	}
	return v
}

// sbmTries is how many draws a repeated pair gets from the model, then
// from all nodes, before the free pairs are listed.
const sbmTries = 32

// sbmDistinct redraws the pairs of g (pair p: edges 2p and 2p+1) that
// repeat an earlier pair, so that g holds each pair once. The draws were
// made with replacement, in parallel, and repeated about one pair in
// 5,000 at the default size (413 of 2M) but more than half the pairs of
// a dense graph (100 nodes of degree 99: 2204 distinct pairs of 4950),
// which node partition then dropped. A repeat keeps its drawing node and draws its partner
// again from the model; where the model has no free partner left for it
// (a full block), from all nodes; where those are full too (a graph near
// complete), the pairs left are taken at random from the free pairs,
// listed. One RNG stream, in pair order, keeps the graph a function of
// the seed alone. O(pairs) but for the sorts of each node's few pairs.
func sbmDistinct(ctx context.Context, g *Graph, model *sbmModel, seed uint64, workers int) error {
	pairs, n := len(g.Src)/2, g.NumNodes
	// The pairs' larger ends bucketed by their smaller end and sorted
	// per bucket: a counting sort, linear, where sorting the pairs whole
	// took longer than drawing them.
	start := make([]int, n+1)
	for p := range pairs {
		start[min(g.Src[2*p], g.Dst[2*p])+1]++
	}
	for u := range n {
		start[u+1] += start[u]
	}
	hi := make([]uint32, pairs)
	fill := slices.Clone(start[:n])
	for p := range pairs {
		a, b := g.Src[2*p], g.Dst[2*p]
		lo := min(a, b)
		hi[fill[lo]] = max(a, b)
		fill[lo]++
	}
	fill = nil
	// The rows are sorted in chunks of sbmChunk nodes, a multiple of
	// 64, so that no two goroutines write one word of repeats.
	chunks := (n + sbmChunk - 1) / sbmChunk
	found := make([][]uint64, chunks)    // per chunk, the repeated pairs
	repeats := make([]uint64, (n+63)/64) // the smaller ends of repeated pairs
	err := genParallel(ctx, workers, chunks, func(c int) error {
		for u := c * sbmChunk; u < min((c+1)*sbmChunk, n); u++ {
			row := hi[start[u]:start[u+1]]
			slices.Sort(row)
			for i := 1; i < len(row); i++ {
				if row[i] == row[i-1] {
					found[c] = append(found[c], pairKey(uint32(u), row[i]))
					repeats[u>>6] |= 1 << (u & 63)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	firstSeen := map[uint64]bool{} // the repeated pairs: whether the scan met its first
	for _, keys := range found {
		for _, k := range keys {
			firstSeen[k] = false
		}
	}
	if len(firstSeen) == 0 {
		return nil
	}
	var redo []int // the pairs that repeat one before them
	for p := range pairs {
		if lo := min(g.Src[2*p], g.Dst[2*p]); repeats[lo>>6]&(1<<(lo&63)) == 0 {
			continue
		}
		k := pairKey(g.Src[2*p], g.Dst[2*p])
		if seen, ok := firstSeen[k]; ok {
			if seen {
				redo = append(redo, p)
			}
			firstSeen[k] = true
		}
	}
	added := make(map[uint64]bool, len(redo))
	has := func(k uint64) bool {
		lo := k >> 32
		_, found := slices.BinarySearch(hi[start[lo]:start[lo+1]], uint32(k))
		return found || added[k]
	}
	set := func(p int, u, v uint32) {
		g.Src[2*p], g.Dst[2*p] = u, v
		g.Src[2*p+1], g.Dst[2*p+1] = v, u
		added[pairKey(u, v)] = true
	}
	r := genRand(seed, streamRedraw, 0)
	for i, p := range redo {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		u := g.Src[2*p]
		placed := false
		for try := range 2 * sbmTries {
			var v uint32
			if try < sbmTries {
				v = model.partner(r, int(u))
			} else if v = uint32(r.IntN(n - 1)); v >= u {
				v++
			}
			if !has(pairKey(u, v)) {
				set(p, u, v)
				placed = true
				break
			}
		}
		if !placed {
			return sbmFillFree(ctx, g, redo[i:], has, set, r)
		}
	}
	return nil
}

// sbmMaxFree bounds the free pairs sbmFillFree lists. A graph gets there
// only when a node's every partner is taken, at most about 2 pairs per
// node short of complete: far fewer.
const sbmMaxFree = 1 << 26

// sbmFillFree gives the pairs rest the free pairs of g (has says which
// are taken), chosen at random: it lists them, so it is for a graph near
// complete, where drawing finds none.
func sbmFillFree(ctx context.Context, g *Graph, rest []int, has func(uint64) bool, set func(p int, u, v uint32), r *rand.Rand) error {
	n := g.NumNodes
	total := int64(n) * int64(n-1) / 2
	if total-int64(len(g.Src)/2)+int64(len(rest)) > sbmMaxFree {
		return fmt.Errorf("partition: sbm: node %d has no free partner left among %d nodes in a graph far from complete", g.Src[2*rest[0]], n)
	}
	var free []uint64
	for u := range n {
		if u%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		for v := u + 1; v < n; v++ {
			if k := pairKey(uint32(u), uint32(v)); !has(k) {
				free = append(free, k)
			}
		}
	}
	if len(free) < len(rest) {
		// Validate keeps AvgDegree below Nodes, so that the complete
		// graph holds every pair.
		return fmt.Errorf("partition: sbm: %d pairs to place, %d free", len(rest), len(free))
	}
	for i, p := range rest {
		j := i + r.IntN(len(free)-i)
		free[i], free[j] = free[j], free[i]
		set(p, uint32(free[i]>>32), uint32(free[i]))
	}
	return nil
}

// pairKey is the undirected pair {u, v} as one number.
func pairKey(u, v uint32) uint64 {
	if u > v {
		u, v = v, u
	}
	return uint64(u)<<32 | uint64(v)
}
