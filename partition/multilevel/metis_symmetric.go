package multilevel

// Whether a graph is symmetric, as METIS requires: every entry (v, u, w)
// has its twin (u, v, w).

import (
	"slices"
)

// CheckSymmetric refuses a graph some of whose edges are listed at one
// end only, or with two weights: such a file is not a METIS graph, and
// gpmetis partitions it without a word (3 vertices, 1 listing 2 and 3,
// 2 listing 3, 3 listing 1: every vertex in one part, balance 2.0).
// It costs a pass that hashes every entry (3 ms on BlogCatalog's 668 k):
// node partition pays it on every METIS input, while ReadMETIS, which
// reads files WriteMETIS checked, does not, as gpmetis does not.
func CheckSymmetric(g *Graph) error {
	if v, u, ok := metisAsymmetry(g); ok {
		return &SyntaxError{"vertex " + itoa(v+1) + " lists " + itoa(u+1) + ", but vertex " + itoa(u+1) + " does not list " + itoa(v+1) +
			" with the same weight: a METIS graph lists every edge at both ends"}
	}
	return nil
}

// metisAsymmetry finds an entry (v, u, w) of g without its twin (u, v,
// w). The sum over entries of hash(v, u, w) - hash(u, v, w) is zero for a
// symmetric graph, and for an asymmetric one zero only with probability
// about 2^-64: it costs one pass and no memory. Only a graph that fails
// it is transposed (4 bytes an entry, 8 with weights) to name an entry.
func metisAsymmetry(g *Graph) (v, u int, found bool) {
	if metisAsymSum(g) == 0 {
		return 0, 0, false
	}
	n := g.NumVertices()
	// Row u of the transpose: the vertices that list u, and the weights.
	txadj := make([]int64, n+1)
	for _, x := range g.Adjncy {
		txadj[x+1]++
	}
	for i := range n {
		txadj[i+1] += txadj[i]
	}
	tadj := make([]uint32, len(g.Adjncy))
	var tw []int32
	if g.Adjwgt != nil {
		tw = make([]int32, len(g.Adjncy))
	}
	fill := slices.Clone(txadj[:n])
	for x := range n {
		for e := g.Xadj[x]; e < g.Xadj[x+1]; e++ {
			y := g.Adjncy[e]
			tadj[fill[y]] = uint32(x)
			if tw != nil {
				tw[fill[y]] = g.Adjwgt[e]
			}
			fill[y]++
		}
	}
	tweight := func(i int64) int64 {
		if tw == nil {
			return 1
		}
		return int64(tw[i])
	}
	// Row u of g and of the transpose hold the same (vertex, weight)
	// pairs when u's entries all have twins.
	stamp := make([]int64, n) // stamp[x] = u+1: x is in the row marked for u
	weight := make([]int64, n)
	for x := range n {
		for e := g.Xadj[x]; e < g.Xadj[x+1]; e++ {
			y := g.Adjncy[e]
			stamp[y], weight[y] = int64(x)+1, g.ewgt(e)
		}
		for i := txadj[x]; i < txadj[x+1]; i++ {
			if y := tadj[i]; stamp[y] != int64(x)+1 || weight[y] != tweight(i) {
				return int(y), x, true // y lists x; x does not list y so
			}
		}
		for i := txadj[x]; i < txadj[x+1]; i++ {
			stamp[tadj[i]], weight[tadj[i]] = -int64(x)-1, tweight(i)
		}
		for e := g.Xadj[x]; e < g.Xadj[x+1]; e++ {
			if y := g.Adjncy[e]; stamp[y] != -int64(x)-1 || weight[y] != g.ewgt(e) {
				return x, int(y), true // x lists y; y does not list x so
			}
		}
	}
	return 0, 0, false
}

// metisAsymSum is the sum over g's entries (v, u, w) of ±hash({v, u},
// w), + when v < u and - when v > u: zero when every entry has its twin
// (see metisAsymmetry). One hash of the unordered pair per entry, the
// sign without a branch: two hashes per entry, or a branch the random
// order of neighbours mispredicts half the time, made reading
// BlogCatalog (668 k entries) 7 ms slower.
func metisAsymSum(g *Graph) uint64 {
	var asym uint64
	for v := range g.NumVertices() {
		v64 := uint64(v)
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			u := uint64(g.Adjncy[e])
			h := metisEntryHash(min(v64, u), max(v64, u), uint64(g.ewgt(e)))
			neg := uint64(int64(u-v64) >> 63) // all ones when u < v
			asym += (h ^ neg) - neg
		}
	}
	return asym
}

// metisEntryHash mixes one adjacency entry: splitmix64's finalizer over
// the packed pair xor the weight times the golden ratio (a bijection of
// the weight). One mix, small enough to inline: mixing the weight
// apart, two calls per entry, took 10 ns an entry.
func metisEntryHash(v, u, w uint64) uint64 {
	return mlMix((v<<32 | u) ^ w*0x9e3779b97f4a7c15)
}
