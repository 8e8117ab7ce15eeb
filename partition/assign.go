package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"graphnode/partition/multilevel"
)

// Partitioning methods accepted by Assign.
const (
	MethodRandom = "random" // balanced random: exact node balance ±1
	MethodMetis  = "metis"  // multilevel edge-cut minimisation
	MethodFreq   = "freq"   // access-frequency driven (GLT style)
)

// assignStream is the second PCG word of assignment draws.
const assignStream = 0x6173736967 // "assig"

// Balance constraints, the values of AssignOptions.Balance.
const (
	BalanceNodes = "nodes" // owned nodes per part
	BalanceEdges = "edges" // stored edges per part (the row lengths)
	BalanceTrain = "train" // training nodes per part
)

// DefaultImbalance is the default bound on max/mean of every balanced
// quantity (METIS's default ufactor 30).
const DefaultImbalance = 1.03

// DefaultFanouts are the fanouts the frequency estimate assumes when none
// are given: GraphSAGE's 3-layer setting on ogbn-products.
func DefaultFanouts() []int { return []int{15, 10, 5} }

// DefaultBatchSize is the trainers' batch size the estimate assumes
// when none is given (DGL's and GLT's GraphSAGE examples use 1024).
const DefaultBatchSize = 1024

// AssignOptions choose how nodes are given to partitions.
type AssignOptions struct {
	Method string // MethodRandom, MethodMetis or MethodFreq
	Parts  int    // number of partitions, 1..NumNodes
	Seed   uint64 // makes every method reproducible
	// Balance names the quantities to balance (ParseBalance): nodes are
	// always balanced; metis also balances "edges" and "train" when named,
	// freq balances training nodes by construction and "edges" when named,
	// random balances nodes only. A method given a quantity it cannot
	// balance is an error.
	Balance []string
	// Imbalance bounds max/mean of every balanced quantity for metis and
	// freq; 0 means DefaultImbalance. The random method is always exact.
	Imbalance float64
	// Fanouts and BatchSize describe the sampling the freq method
	// estimates heat for (HeatOptions); nil Fanouts mean DefaultFanouts,
	// BatchSize 0 estimates without the per-batch deduplication.
	Fanouts   []int
	BatchSize int
	// Workers is the number of goroutines of the parallel steps; 0 means
	// GOMAXPROCS. Results do not depend on it.
	Workers int
	// Progress, when set, hears how far a long method is.
	Progress Progress
}

// ParseBalance parses a --balance value ("nodes,edges,train" in any
// order and subset) into the constraint list Assign takes: nodes first,
// then the others in the order given, each once. An empty entry ("",
// "nodes,,edges") is refused: it was dropped, and a list cut short by a
// script's empty variable balanced less than asked, without a word.
func ParseBalance(s string) ([]string, error) {
	out := []string{BalanceNodes}
	for i, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		switch k {
		case "":
			return nil, fmt.Errorf("partition: balance %q: entry %d is empty: want a list of nodes, edges and train", s, i+1)
		case BalanceNodes:
		case BalanceEdges, BalanceTrain:
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		default:
			return nil, fmt.Errorf("partition: balance %q: want a list of nodes, edges and train", k)
		}
	}
	return out, nil
}

// Balances lists the quantities method can balance (see ParseBalance),
// nil for an unknown method.
func Balances(method string) []string {
	switch method {
	case MethodRandom:
		return []string{BalanceNodes}
	case MethodMetis:
		return []string{BalanceNodes, BalanceEdges, BalanceTrain}
	case MethodFreq:
		return []string{BalanceNodes, BalanceEdges, BalanceTrain}
	}
	return nil
}

// Validate checks what of o does not depend on the graph: the part
// count, the method, the quantities it can balance and the imbalance.
// It lets a caller refuse bad options before reading an input, which
// can take minutes; Assign checks them again, and the rest against the
// graph.
func (o AssignOptions) Validate() error {
	var errs []error
	if o.Parts < 1 {
		errs = append(errs, fmt.Errorf("partition: %d parts: want at least 1", o.Parts))
	}
	if o.Imbalance != 0 && (o.Imbalance < 1 || math.IsNaN(o.Imbalance) || math.IsInf(o.Imbalance, 0)) {
		errs = append(errs, fmt.Errorf("partition: imbalance %g: want a number ≥ 1", o.Imbalance))
	}
	balanced := Balances(o.Method)
	if balanced == nil {
		// What an unknown method balances is unknown: the balance is
		// checked once the method is fixed.
		errs = append(errs, fmt.Errorf("partition: method %q: want %s, %s or %s", o.Method, MethodRandom, MethodMetis, MethodFreq))
	}
	for _, k := range o.Balance {
		if balanced != nil && !slices.Contains(balanced, k) {
			errs = append(errs, fmt.Errorf("partition: method %s cannot balance %q: it balances %s", o.Method, k, strings.Join(balanced, ", ")))
		}
	}
	return errors.Join(errs...)
}

// Assign returns, for every node index of g, the partition that owns it.
// adj is g's adjacency from BuildAdj (the edges g held are gone by then).
func Assign(ctx context.Context, g *Graph, adj *Adj, opts AssignOptions) ([]uint32, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if g.NumNodes == 0 {
		// An empty input file, or one whose every edge the dangling
		// policy dropped: a partitioning of it would serve nothing.
		return nil, fmt.Errorf("partition: graph %q has no nodes (%d edges read, %d dropped as dangling): nothing to partition: %w",
			g.Name, g.Stats.EdgesRead, g.Stats.DanglingDrop, ErrFormat)
	}
	if opts.Parts > g.NumNodes {
		return nil, fmt.Errorf("partition: %d parts for %d nodes: a partition would own no node", opts.Parts, g.NumNodes)
	}
	if adj != nil && adj.NumNodes() != g.NumNodes {
		return nil, fmt.Errorf("partition: adjacency has %d rows for %d nodes", adj.NumNodes(), g.NumNodes)
	}
	if opts.Imbalance == 0 {
		opts.Imbalance = DefaultImbalance
	}
	if opts.Fanouts == nil {
		opts.Fanouts = DefaultFanouts()
	}
	if slices.Contains(opts.Balance, BalanceTrain) && len(g.Train) == 0 {
		return nil, fmt.Errorf("partition: balance train: graph %q has no training split (give --split)", g.Name)
	}
	if opts.Method != MethodRandom && adj == nil {
		return nil, fmt.Errorf("partition: method %s needs the adjacency", opts.Method)
	}
	// Methods plug in here: each takes the same inputs and returns one
	// partition per node index.
	switch opts.Method {
	case MethodMetis:
		return assignMetis(ctx, g, adj, opts)
	case MethodFreq:
		return assignFreq(ctx, g, adj, opts)
	}
	return assignRandom(ctx, g.NumNodes, opts)
}

// assignMetis partitions the symmetrised adjacency with the multilevel
// partitioner. Vertex weights are one column per constraint: nodes 1,
// edges the row length (the edges the owner stores, as DGL's
// balance_edges weighs by in-degree), train 1 for training nodes. Zero
// weights are legal there and need no +1: nodes are always a constraint,
// so weightless vertices cannot pile up in one part.
func assignMetis(ctx context.Context, g *Graph, adj *Adj, opts AssignOptions) ([]uint32, error) {
	wg, err := multilevel.Symmetrize(g.NumNodes, adj.Indptr, adj.Indices)
	if err != nil {
		return nil, err
	}
	kinds := opts.Balance
	if len(kinds) == 0 {
		kinds = []string{BalanceNodes}
	}
	if len(kinds) > 1 {
		wg.Vwgt, wg.Ncon, err = multilevel.Weights(kinds, adj.Indptr, g.Train)
		if err != nil {
			return nil, err
		}
	}
	return multilevel.Partition(ctx, wg, multilevel.Options{
		Parts: opts.Parts, Imbalance: opts.Imbalance, Seed: opts.Seed, Workers: opts.Workers, Progress: multilevel.Progress(opts.Progress),
	})
}

// freqStream is the second PCG word of the frequency partitioner's draws.
const freqStream = 0x66726571 // "freq"

// SeedChunks splits the training nodes into parts chunks of sizes that
// differ by at most one, after a shuffle seeded by seed, each sorted. It
// is the frequency partitioner's split of the seeds among the trainers,
// as GLT splits train_idx: every trainer's seeds are a fair sample of the
// training set. (A split along the graph's structure would make the heat
// more telling; refining this one by rounds of heat-based label
// propagation was tried and gained under 2 points of local reads on a
// community graph, so the simple split stays.)
func SeedChunks(train []uint32, parts int, seed uint64) [][]uint32 {
	perm := slices.Clone(train)
	rng := rand.New(rand.NewPCG(seed, freqStream))
	rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	// The shares of TrainerSeeds (the larger first), so that chunk p, which
	// part p owns, is what rank p of P reads of split train: boundaries
	// t·p/P put the larger shares last, and with an odd count of 3695
	// training nodes in 2 parts one of rank 0's seeds was part 1's.
	out := TrainerSeeds(perm, parts)
	for _, c := range out {
		slices.Sort(c)
	}
	return out
}

// assignFreq is the frequency partitioner (GLT's FrequencyPartitioner):
//
//  1. The training nodes are split into Parts balanced chunks
//     (SeedChunks), chunk p being the seeds of partition p's trainer; they
//     are placed in p.
//  2. Heat is estimated for every chunk (EstimateHeat).
//  3. The other nodes are placed by placeByHeat: hottest first, each to
//     the partition whose trainer reads it most, within capacity.
//
// Capacity: every part ends with between lo = min(⌊n/P⌋, ⌈n/(P·imb)⌉)
// and hi = max(⌈n/P⌉, ⌊imb·n/P⌋) nodes, so Imbalance 1 gives exact
// balance (sizes ⌊n/P⌋ or ⌈n/P⌉). Training nodes are split exactly.
// With Balance "edges" a node also goes only to a part whose stored
// edges (its nodes' rows) stay within max(⌈E/P⌉, ⌊imb·E/P⌋) with it,
// while one exists; otherwise to the node-eligible part storing the
// fewest, and repairEdges then moves or swaps placed nodes out of the
// parts left over the bound. Without it, nothing keeps the hubs apart:
// on a power-law graph one part can get most of them (R-MAT, 20 k
// nodes, seeds 1–5: 1.06–1.19 × the mean of stored edges into 2 parts,
// 1.10–1.42 into 4, 1.12–1.57 into 8; with it 1.030 on every one, for
// 0–1.7 points of local reads; see TestAssignFreqBalanceEdges). The
// seed chunks are placed first, whatever their edges, and never move,
// so a part whose trainer's seeds alone pass the bound stays over it,
// and the report says so.
func assignFreq(ctx context.Context, g *Graph, adj *Adj, opts AssignOptions) ([]uint32, error) {
	n, P := g.NumNodes, opts.Parts
	if len(g.Train) == 0 {
		return nil, fmt.Errorf("partition: method freq: graph %q has no training split to estimate heat from (give --split)", g.Name)
	}
	const none = math.MaxUint32
	out := make([]uint32, n)
	for v := range out {
		out[v] = none
	}
	chunks := SeedChunks(g.Train, P, opts.Seed)
	size := make([]int, P)
	for p, c := range chunks {
		for _, v := range c {
			if out[v] != none {
				return nil, fmt.Errorf("partition: method freq: training node %s listed twice", nodeName(g, v))
			}
			out[v] = uint32(p)
		}
		size[p] = len(c)
	}
	opts.Progress.report("assign", 0, 2)
	heat, err := EstimateHeat(ctx, adj, chunks, HeatOptions{Fanouts: opts.Fanouts, BatchSize: opts.BatchSize, Workers: opts.Workers})
	if err != nil {
		return nil, err
	}
	opts.Progress.report("assign", 1, 2)
	rest := make([]uint32, 0, n-len(g.Train))
	for v := range n {
		if out[v] == none {
			rest = append(rest, uint32(v))
		}
	}
	avg := float64(n) / float64(P)
	lo := min(n/P, int(math.Ceil(avg/opts.Imbalance)))
	hi := max((n+P-1)/P, int(opts.Imbalance*avg))
	rng := rand.New(rand.NewPCG(opts.Seed, freqStream+1))
	var eb *edgeBound
	if slices.Contains(opts.Balance, BalanceEdges) {
		eb = newEdgeBound(adj, chunks, opts.Imbalance)
	}
	placeByHeat(rest, heat.At, lo, hi, size, eb, out, rng)
	if eb != nil {
		repairEdges(rest, heat.At, lo, hi, size, eb, out)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts.Progress.report("assign", 2, 2)
	return out, nil
}

// edgeBound is the edges constraint of the freq partitioner: the edges
// each part stores (its nodes' rows) and the most it may store.
type edgeBound struct {
	indptr []uint64
	stored []uint64 // per part
	max    uint64
}

// newEdgeBound starts the edge count of every part with its seed chunk,
// under the bound max(⌈E/P⌉, ⌊imb·E/P⌋).
func newEdgeBound(adj *Adj, chunks [][]uint32, imb float64) *edgeBound {
	P := len(chunks)
	b := &edgeBound{indptr: adj.Indptr, stored: make([]uint64, P)}
	for p, c := range chunks {
		for _, v := range c {
			b.stored[p] += b.row(v)
		}
	}
	E := adj.Indptr[len(adj.Indptr)-1]
	avg := float64(E) / float64(P)
	b.max = max(uint64(math.Ceil(avg)), uint64(imb*avg))
	return b
}

// row is the number of edges v's owner stores.
func (b *edgeBound) row(v uint32) uint64 { return b.indptr[v+1] - b.indptr[v] }

// placeByHeat gives each of nodes a part in out, given the parts' current
// sizes (updated): nodes with a positive score somewhere go hottest first
// (by their best score; ties in an order drawn from rng) to the part
// below capacity where their score is highest (ties: the smaller part,
// then the lower index); the others go, in an order drawn from rng, to
// the smallest part. Capacity is hi; once the nodes left are just enough
// to bring every part to lo, only parts below lo take nodes. Every part
// ends within [lo, hi] when the sizes allow it (the caller's bounds
// satisfy P·lo ≤ total ≤ P·hi, and no initial size exceeds hi).
//
// With eb, a part must also keep its stored edges within eb's bound,
// less the room for the lightest nodes it must still take to reach lo;
// when no part within the node capacity does, the node goes to the one
// storing the fewest edges (node balance is kept first: it sizes every
// part's memory and the trainers' shares).
func placeByHeat(nodes []uint32, score func(v uint32, p int) float32, lo, hi int, size []int, eb *edgeBound, out []uint32, rng *rand.Rand) {
	P := len(size)
	type item struct {
		v    uint32
		best float32
		key  uint64
	}
	items := make([]item, len(nodes))
	for i, v := range nodes {
		it := item{v: v, key: rng.Uint64()}
		for p := range P {
			it.best = max(it.best, score(v, p))
		}
		items[i] = it
	}
	// Hot first, hottest first; cold (best 0) after, all by their key.
	slices.SortFunc(items, func(a, b item) int {
		return cmp.Or(cmp.Compare(b.best, a.best), cmp.Compare(a.key, b.key), cmp.Compare(a.v, b.v))
	})
	deficit := 0 // nodes still needed to bring every part to lo
	for _, s := range size {
		deficit += max(0, lo-s)
	}
	remaining := len(items)
	// A part below lo must still take lo-size nodes, of at least the
	// least edges of the nodes not placed yet: that much of its edge
	// bound is kept for them. Else a part that filled its edges early
	// with hot hubs is forced past the bound by the light nodes it must
	// take at the end to reach lo (Cora into 4 parts: 1.085 × the mean
	// edges, 1.03 with the reserve, for 0.1 points of local reads).
	var light *lightest
	if eb != nil {
		rows := make([]uint64, len(items))
		for i, it := range items {
			rows[i] = eb.row(it.v)
		}
		light = newLightest(rows)
	}
	reserve := func(p int) uint64 {
		if light == nil || size[p]+1 >= lo {
			return 0
		}
		return light.sum(lo - size[p] - 1)
	}
	for _, it := range items {
		tight := deficit >= remaining
		best := -1
		fewest := -1 // the node-eligible part storing the fewest edges
		for p := range P {
			if size[p] >= hi || tight && size[p] >= lo {
				continue
			}
			if eb != nil {
				if fewest < 0 || eb.stored[p] < eb.stored[fewest] {
					fewest = p
				}
				if eb.stored[p]+eb.row(it.v)+reserve(p) > eb.max {
					continue
				}
			}
			if best < 0 {
				best = p
				continue
			}
			h, b := score(it.v, p), score(it.v, best)
			if it.best <= 0 {
				h, b = 0, 0 // cold: the smallest part
			}
			if h > b || h == b && size[p] < size[best] {
				best = p
			}
		}
		if best < 0 {
			best = fewest
		}
		if eb != nil {
			eb.stored[best] += eb.row(it.v)
			light.remove(eb.row(it.v))
		}
		out[it.v] = uint32(best)
		if size[best] < lo {
			deficit--
		}
		size[best]++
		remaining--
	}
}

// assignRandom shuffles the nodes with the seed and deals them out in
// equal contiguous shares of the shuffled order, so partition sizes
// differ by at most one.
func assignRandom(ctx context.Context, n int, opts AssignOptions) ([]uint32, error) {
	perm := make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, assignStream))
	rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The node at shuffled position i goes to part i*P/n, which gives
	// each part floor or ceil of n/P nodes.
	p := uint64(opts.Parts)
	out := make([]uint32, n)
	for i, v := range perm {
		out[v] = uint32(uint64(i) * p / uint64(n))
	}
	opts.Progress.report("assign", int64(n), int64(n))
	return out, nil
}
