package multilevel

import (
	"math"
	"runtime"
	"strconv"
	"sync"
)

// Graph is the weighted undirected graph the multilevel partitioner
// works on, in the layout METIS uses: row v of Adjncy lists v's
// neighbours, and every edge {u, v} is stored twice, in row u and in row
// v, with the same weight. Indices are 32-bit so that the 2.4 M node /
// 62 M edge graph takes 4 bytes per adjacency entry; Xadj is 64-bit
// because 2 × edges may pass 2^32 on the graphs this project targets.
type Graph struct {
	Xadj   []int64  // NumVertices+1 offsets into Adjncy
	Adjncy []uint32 // neighbours; no self loops, no duplicates
	// Adjwgt holds one positive weight per Adjncy entry, or is nil when
	// every edge weighs 1 (the input graph: nothing is allocated for it).
	Adjwgt []int32
	// Vwgt holds Ncon weights per vertex, row-major (Vwgt[v*Ncon+c]), or
	// is nil when every vertex weighs 1 in a single constraint. Weights
	// are 64-bit because contracted vertices sum them and a degree
	// constraint on a billion-edge graph passes 2^31.
	Vwgt []int64
	Ncon int // balance constraints; 0 is read as 1
}

// NumVertices is the number of vertices.
func (g *Graph) NumVertices() int { return len(g.Xadj) - 1 }

// NumEdges is the number of undirected edges (half the adjacency
// entries).
func (g *Graph) NumEdges() int64 { return g.Xadj[len(g.Xadj)-1] / 2 }

// ncon is the number of constraints, at least 1.
func (g *Graph) ncon() int { return max(g.Ncon, 1) }

// ewgt is the weight of adjacency entry e.
func (g *Graph) ewgt(e int64) int64 {
	if g.Adjwgt == nil {
		return 1
	}
	return int64(g.Adjwgt[e])
}

// inside is the weight of v's edges to vertices of its own part
// (where) and of all its edges. Unit weights are counted, not looked up:
// this loop runs over every edge of every level for each bisection.
func (g *Graph) inside(v int, where []uint32) (in, all int64) {
	wv := where[v]
	lo, hi := g.Xadj[v], g.Xadj[v+1]
	if g.Adjwgt == nil {
		for _, u := range g.Adjncy[lo:hi] {
			if where[u] == wv {
				in++
			}
		}
		return in, hi - lo
	}
	for i, u := range g.Adjncy[lo:hi] {
		w := int64(g.Adjwgt[lo+int64(i)])
		all += w
		if where[u] == wv {
			in += w
		}
	}
	return in, all
}

// vwgt is the weight of vertex v in constraint c.
func (g *Graph) vwgt(v, c int) int64 {
	if g.Vwgt == nil {
		return 1
	}
	return g.Vwgt[v*g.ncon()+c]
}

// totals is the total vertex weight of every constraint.
func (g *Graph) totals() []int64 {
	nc := g.ncon()
	t := make([]int64, nc)
	if g.Vwgt == nil {
		t[0] = int64(g.NumVertices())
		return t
	}
	for i, w := range g.Vwgt {
		t[i%nc] += w
	}
	return t
}

// Validate checks sizes, offsets, neighbour ranges, weights (each
// constraint's total must fit in an int64) and the absence of self loops. It does not check symmetry (an O(E log E) pass);
// a non-symmetric graph partitions, but cuts are then counted per stored
// entry.
func (g *Graph) Validate() error {
	bad := func(parts ...string) error {
		return errorOf(ErrBadGraph, append([]string{"graph: "}, parts...)...)
	}
	if len(g.Xadj) < 1 || g.Xadj[0] != 0 {
		return bad("xadj must start with 0")
	}
	n := g.NumVertices()
	if uint64(n) > math.MaxUint32 {
		return bad(itoa(n), " vertices: at most ", itoa(int64(math.MaxUint32)))
	}
	if g.Xadj[n] != int64(len(g.Adjncy)) {
		return bad("xadj ends at ", itoa(g.Xadj[n]), ", adjncy has ", itoa(len(g.Adjncy)), " entries")
	}
	if g.Adjwgt != nil && len(g.Adjwgt) != len(g.Adjncy) {
		return bad("adjwgt has ", itoa(len(g.Adjwgt)), " entries, adjncy ", itoa(len(g.Adjncy)))
	}
	if g.Ncon < 0 {
		return bad("ncon = ", itoa(g.Ncon))
	}
	if g.Vwgt != nil && len(g.Vwgt) != n*g.ncon() {
		return bad("vwgt has ", itoa(len(g.Vwgt)), " entries, want ", itoa(n), " vertices × ", itoa(g.ncon()), " constraints")
	}
	if g.Vwgt == nil && g.ncon() != 1 {
		return bad("ncon = ", itoa(g.Ncon), " without vwgt")
	}
	for v := 0; v < n; v++ {
		if g.Xadj[v+1] < g.Xadj[v] {
			return bad("xadj decreases at vertex ", itoa(v))
		}
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			u := g.Adjncy[e]
			if int(u) >= n {
				return bad("vertex ", itoa(v), ": neighbour ", itoa(u), " out of range")
			}
			if int(u) == v {
				return bad("vertex ", itoa(v), ": self loop")
			}
			if g.Adjwgt != nil && g.Adjwgt[e] <= 0 {
				return bad("vertex ", itoa(v), ": edge weight ", itoa(g.Adjwgt[e]), ", want > 0")
			}
		}
	}
	// Part weights, coarse vertices and bounds are sums of vertex
	// weights in int64: a constraint whose total does not fit would
	// wrap, and Measure would call any assignment balanced.
	tot := make([]int64, g.ncon())
	for i, w := range g.Vwgt {
		if w < 0 {
			return bad("vertex ", itoa(i/g.ncon()), ": weight ", itoa(w), " in constraint ", itoa(i%g.ncon()), ", want >= 0")
		}
		c := i % g.ncon()
		if w > math.MaxInt64-tot[c] {
			return bad("vertex weights of constraint ", itoa(c), " sum past ", itoa(int64(math.MaxInt64)))
		}
		tot[c] += w
	}
	return nil
}

// Symmetrize builds the undirected graph of a directed CSR (row u of
// indices lists the targets of u's edges; an In-direction Adj works the
// same, the edges are merely reversed). u→v and v→u become one edge of
// weight 1, duplicates merge, self loops are dropped.
//
// Weight 1 for every edge, rather than 2 where both directions exist, is
// what METIS sees for the same input: its file format holds an unweighted
// symmetric graph, so a graph written for gpmetis and this one are the
// same graph and their edge cuts compare directly. It also leaves Adjwgt
// nil, which saves 4 bytes per adjacency entry on the largest level.
//
// Memory: one uint32 per directed edge twice over (each edge is written
// into both rows before duplicates are removed in place), plus Xadj.
func Symmetrize(n int, indptr []uint64, indices []uint32) (*Graph, error) {
	if n < 0 || uint64(n) > math.MaxUint32 || len(indptr) != n+1 {
		return nil, errorOf(ErrBadGraph, "symmetrize: ", itoa(n), " nodes with ", itoa(len(indptr)), " offsets")
	}
	if indptr[0] != 0 || indptr[n] != uint64(len(indices)) {
		return nil, errorOf(ErrBadGraph, "symmetrize: offsets span [", itoa(int64(indptr[0])), ", ", itoa(int64(indptr[n])), "), indices has ", itoa(len(indices)))
	}
	xadj := make([]int64, n+1)
	for u := 0; u < n; u++ {
		if indptr[u+1] < indptr[u] {
			return nil, errorOf(ErrBadGraph, "symmetrize: offsets decrease at node ", itoa(u))
		}
		for _, v := range indices[indptr[u]:indptr[u+1]] {
			if int(v) >= n {
				return nil, errorOf(ErrBadGraph, "symmetrize: node ", itoa(u), ": neighbour ", itoa(v), " out of range")
			}
			if int(v) != u {
				xadj[u+1]++
				xadj[v+1]++
			}
		}
	}
	for u := 0; u < n; u++ {
		xadj[u+1] += xadj[u]
	}
	adj := make([]uint32, xadj[n])
	fill := make([]int64, n) // next free slot of each row
	copy(fill, xadj[:n])
	for u := 0; u < n; u++ {
		for _, v := range indices[indptr[u]:indptr[u+1]] {
			if int(v) != u {
				adj[fill[u]] = v
				fill[u]++
				adj[fill[v]] = uint32(u)
				fill[v]++
			}
		}
	}
	// Remove duplicates row by row in parallel, then close the gaps.
	deg := fill // reused: deduplicated length of each row
	mlParallel(runtime.GOMAXPROCS(0), n, xadj, func(lo, hi int) {
		stamp := make([]uint32, n) // stamp[v] == u+1: v already kept in row u
		for u := lo; u < hi; u++ {
			row := adj[xadj[u]:xadj[u+1]]
			k := 0
			for _, v := range row {
				if stamp[v] != uint32(u)+1 {
					stamp[v] = uint32(u) + 1
					row[k] = v
					k++
				}
			}
			deg[u] = int64(k)
		}
	})
	var w int64
	for u := 0; u < n; u++ {
		start := xadj[u]
		xadj[u] = w
		copy(adj[w:], adj[start:start+deg[u]])
		w += deg[u]
	}
	xadj[n] = w
	return &Graph{Xadj: xadj, Adjncy: adj[:w:w], Ncon: 1}, nil
}

// mlParallel splits vertices [0, n) into at most workers ranges of about
// equal adjacency size (by xadj; by count when xadj is nil) and runs fn on
// each in its own goroutine. Results must not depend on the split: every
// caller writes per-vertex output only.
func mlParallel(workers, n int, xadj []int64, fn func(lo, hi int)) {
	mlRanges(mlSplit(workers, n, xadj), func(_, lo, hi int) { fn(lo, hi) })
}

// mlRanges runs fn on every range [bounds[i], bounds[i+1]), each in its
// own goroutine unless there is only one.
func mlRanges(bounds []int, fn func(i, lo, hi int)) {
	if len(bounds) == 2 {
		fn(0, bounds[0], bounds[1])
		return
	}
	var wg sync.WaitGroup
	for i := 0; i+1 < len(bounds); i++ {
		wg.Go(func() { fn(i, bounds[i], bounds[i+1]) })
	}
	wg.Wait()
}

// mlSplit returns the range bounds mlParallel uses: ascending, first 0,
// last n. Small inputs get one range, because a goroutine costs more than
// it saves below a few thousand entries.
func mlSplit(workers, n int, xadj []int64) []int {
	const minWork = 1 << 14
	total := int64(n)
	if xadj != nil {
		total = xadj[n] + int64(n)
	}
	workers = max(1, min(workers, int(total/minWork)))
	bounds := make([]int, 0, workers+1)
	bounds = append(bounds, 0)
	v := 0
	for i := 1; i < workers; i++ {
		target := total * int64(i) / int64(workers)
		for v < n && mlWork(xadj, v) < target {
			v++
		}
		if v > bounds[len(bounds)-1] && v < n {
			bounds = append(bounds, v)
		}
	}
	return append(bounds, n)
}

// mlWork is the work before vertex v: adjacency entries plus vertices.
func mlWork(xadj []int64, v int) int64 {
	if xadj == nil {
		return int64(v)
	}
	return xadj[v] + int64(v)
}

// Weights builds the vertex weights of the balance constraints
// named in kinds, in that order, for a graph whose pipeline CSR has the
// row offsets indptr: "nodes" weighs every vertex 1, "edges" weighs it by
// its row length (the edges its partition will store), "train" weighs the
// vertices listed in train 1 and the others 0. Set the result as a
// Graph's Vwgt and Ncon.
func Weights(kinds []string, indptr []uint64, train []uint32) (vwgt []int64, ncon int, err error) {
	if len(kinds) == 0 || len(indptr) == 0 {
		return nil, 0, errorOf(nil, "balance: ", itoa(len(kinds)), " constraints over ", itoa(len(indptr)), " offsets: want at least one of each")
	}
	n := len(indptr) - 1
	nc := len(kinds)
	vwgt = make([]int64, n*nc)
	for c, kind := range kinds {
		switch kind {
		case "nodes":
			for v := 0; v < n; v++ {
				vwgt[v*nc+c] = 1
			}
		case "edges":
			for v := 0; v < n; v++ {
				vwgt[v*nc+c] = int64(indptr[v+1] - indptr[v])
			}
		case "train":
			for _, v := range train {
				if int(v) >= n {
					return nil, 0, errorOf(nil, "balance: train node ", itoa(v), " of ", itoa(n), " nodes")
				}
				vwgt[int(v)*nc+c] = 1
			}
		default:
			return nil, 0, errorOf(nil, "balance ", strconv.Quote(kind), ": want nodes, edges or train")
		}
	}
	return vwgt, nc, nil
}
