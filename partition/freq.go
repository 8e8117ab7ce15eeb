package partition

// The access-frequency estimate behind the frequency partitioner, the
// hot-node cache and the expected feature-read shares of `node inspect`.
//
// Definition. For partition p with training seeds S_p, fanouts f_1..f_K
// and batch size B (an epoch of ⌊|S_p|/B⌋ batches of B seeds and, when B
// does not divide |S_p|, one of the rest), the heat of node v is the
// expected number of times its feature row is read in one epoch of
// mini-batches covering S_p once. It is computed for one batch of each
// size b, whose seeds are a random b of S_p, as the chance h_K(v) that
// the batch reads v, and summed over the epoch's batches:
//
//	π_0(v) = h_0(v) = b/|S_p| if v ∈ S_p, else 0
//	w_k(u) = π_{k-1}(u) · r_k(u),  r_k(u) = min(1, f_k/deg(u))  (f_k = -1: 1)
//	a_k(u, v) = max(0, w_k(u) − [u ∈ row(v)] · r_k(u) · w_{k-1}(v))
//	ρ_k(v) = 1 − Π_{u ≠ v : v ∈ row(u)} (1 − a_k(u, v))
//	π_k(v) = ρ_k(v) · (1 − h_{k-1}(v))
//	h_k(v) = h_{k-1}(v) + π_k(v)
//	heat(v) = Σ over the epoch's batches of h_K(v)
//
// ρ_k(v) is the chance that hop k reaches v, π_k(v) that v is new at hop
// k (reached, and not read before: only then does hop k+1 expand it), and
// h_k(v) that v is read by hop k. row(u) is u's stored neighbour list
// (what the sampler draws from: in-neighbours for direction in) and
// deg(u) its length; r_k(u) is the chance that uniform sampling without
// replacement picks a given entry, and w_k(u) the chance that u, new at
// hop k−1 of the batch, picks it.
//
// A row may list v m > 1 times (--duplicates keep; a knowledge graph's
// relations): the sampler draws entries, so those copies are one branch
// whose r_k(u) is q(deg(u), f_k, m) = 1 − C(deg(u)−m, f_k)/C(deg(u), f_k),
// the chance the draw takes at least one, and likewise for the copies of
// u in row(v) in the backtracking term (freq_repeat.go). The sampler's
// deduplication within a batch (DESIGN.md §5: a node is read and
// expanded once per batch) is modelled thrice:
//
//   - Self loops: v, expanded, picking itself finds itself in n_id, so
//     u = v is no branch of ρ_k(v). Counted as one, a self loop on every
//     node of a random graph made the estimate ×1.2 the reads.
//   - Backtracking: u, reached from v, picking v again finds it in n_id.
//     The subtracted term is the part of u's picks of v that is such a
//     return (only where the edge is reciprocal).
//   - Repeats: a node reached along several branches, or at several
//     hops, of one batch is read once, and expanded once: at the hop
//     after the first that reached it. Each branch and hop is taken as
//     independent of the others, so the chance of none is the product
//     of theirs, and of ρ_k(v) the part 1 − h_{k−1}(v) is new. A seed,
//     or a node every neighbour of a seed is sure to reach, is read in
//     its batch for certain (chance 1, read once). The estimate before
//     summed visits and spread them over the nb = ⌈|S_p|/B⌉ batches at
//     random, reading a node in nb·(1 − e^{−x/nb}) of them: a seed,
//     visited once, counted 1 − 1/e in an epoch of one batch, and Cora's
//     140 training seeds with --fanouts 0 were 88 reads. Then it
//     expanded a node at every hop that reached it (π_k = ρ_k): a hub
//     reached at hops 1 and 2 was expanded at hops 2 and 3, and
//     BlogCatalog's reads came out ×1.09 at batch 64 (then ×1.02, now,
//     with its last batch of 7 at its own size, ×1.00).
//
// Without a batch size (B = 0) visits are summed instead (w_k from the
// visits x_{k−1}, x_k(v) = Σ a_k(u, v), heat the sum over hops, a run of
// m copies m visits): the heat counts visits, GLT's estimate less
// backtracking and self loops.
//
// What is left, measured against the real sampler by freq_test.go,
// freq_repeat_test.go and freq_real_test.go. Their tolerance, from
// batches of 64 seeds up: total reads within 15% on generated graphs
// (measured: within 1%) and within 7% on Cora and BlogCatalog (within
// 3%), Pearson r ≥ 0.95 per node; where an epoch ends with a small
// batch, Cora's 140 seeds in batches of 128 and 12, within 12%
// (measured ×1.07). Below that, on clustered graphs, the first item
// below is the error, and it is larger:
//
//   - Chances are per node, not per seed. Two paths to v from one seed
//     are not independent: both are there when that seed is in the
//     batch. The products above take them for paths from two seeds, so
//     a node that one seed's tree reaches along m paths (cycles near the
//     seed) counts for up to m reads. Where a batch holds many seeds
//     their trees overlap and the products saturate; where it holds few
//     (a small batch, or a small last one) each tree is read on its own
//     and the estimate counts its paths more than its nodes. Worst on
//     clustered graphs whose fanouts take whole rows: Cora's 140 training
//     seeds (Planetoid, fanouts 15,10,5) read ×1.67 at batch 1, ×1.29 at
//     16, ×1.03 at 70, ×1.00 at 140, and ×1.07 in batches of 128 (and
//     12); BlogCatalog ×1.00 at 64. Removing it needs each seed's (or
//     batch's) own tree: a cost of the sum of the seeds' K-hop
//     neighbourhoods, which the estimate avoids.
//   - Two neighbours of one seed are not independent draws (without
//     replacement), and what is new at hop k is judged from the chances
//     of the earlier hops, not from which seeds gave them.
//
// The last batch of an epoch is estimated at its own size. Estimating
// every batch at |S_p|/⌈|S_p|/B⌉ seeds read a small last batch as half
// of a large one: BlogCatalog's 1031 training seeds in batches of 1024
// and 7 came out ×1.38 (now ×1.00), Cora's 140 in batches of 128 and 12
// ×1.31 (now ×1.07). Batches of two sizes cost a second pass, on the
// partitions whose last batch is shorter, on the first pass's working
// arrays: BenchmarkEstimateHeat (4 partitions, each with one) 60 → 84
// ms and 16 → 18 MB allocated; `node partition --method freq
// --cache-ratio 0.2` of an R-MAT graph of 1 M nodes and 10 M edges into
// 4 parts 2.8–2.9 → 3.2–3.5 s, peak RSS the same (292–296 MiB).
//
// Computation. Each hop is a pull over the transpose: for every target v,
// the sum over the nodes u whose row holds v, in ascending u, accumulated
// in float64 and stored as float32. Targets are split among workers, and
// each target's sum is computed by one worker in a fixed order, so the
// result does not depend on the number of workers or on scheduling.
//
// Memory: the transpose (4 bytes and 1 bit per edge, 4 more where some
// row repeats an entry, 12 bytes per node) plus four float32 arrays of
// nodes × parts, and, where some partition's last batch is shorter, one
// more for the second pass's result (nodes × those partitions), whose
// working arrays are the first pass's.

import (
	"context"
	"fmt"
	"math"
)

// Heat is the expected number of feature reads of every node by one epoch
// of each partition's training seeds: Val[v*Parts+p] is node v's heat for
// partition p. Nodes are whatever index space the estimate was built in
// (old node indices in the pipeline, new global ids in Inspect).
type Heat struct {
	Parts int
	Val   []float32
}

// NumNodes is the number of nodes the heat covers.
func (h *Heat) NumNodes() int { return len(h.Val) / max(h.Parts, 1) }

// At is node v's heat for partition p.
func (h *Heat) At(v uint32, p int) float32 { return h.Val[int(v)*h.Parts+p] }

// Total is partition p's expected number of feature reads, over all nodes.
func (h *Heat) Total(p int) float64 {
	var s float64
	for i := p; i < len(h.Val); i += h.Parts {
		s += float64(h.Val[i])
	}
	return s
}

// ValidFanouts checks a fanout list: 1 to 32 hops, each -1 (all) or a
// count from 0 to 2^31 − 1, the most a loader's request carries (a
// larger one, recorded here, was refused only when a trainer opened its
// loader).
func ValidFanouts(fanouts []int) error {
	if len(fanouts) == 0 || len(fanouts) > 32 {
		return fmt.Errorf("partition: fanouts %v: want 1 to 32 hops", fanouts)
	}
	for k, f := range fanouts {
		if f < -1 || f > math.MaxInt32 {
			return fmt.Errorf("partition: fanouts %v: hop %d is %d, want -1 (all) or a count from 0 to %d", fanouts, k+1, f, math.MaxInt32)
		}
	}
	return nil
}

// TrainerSeeds splits the training nodes, given in ascending global id
// order, among parts trainers as a loader over split "train" with rank p
// of world size parts takes them (sample.NewPlan without drop_last):
// contiguous shares whose sizes differ by at most one, the first ones
// larger. Each part's node serves the rank of the same index (one
// trainer beside every node, README), so S_p is rank p's share, which
// holds training nodes of other parts wherever the parts' training
// counts differ. (partition cannot import sample; freq_test.go holds
// the two to the same shares.)
func TrainerSeeds[T any](train []T, parts int) [][]T {
	out := make([][]T, parts)
	q, rem := len(train)/parts, len(train)%parts
	for p := range out {
		lo := p*q + min(p, rem)
		hi := lo + q
		if p < rem {
			hi++
		}
		out[p] = train[lo:hi:hi]
	}
	return out
}

// HeatOptions describe the sampling whose reads EstimateHeat estimates.
type HeatOptions struct {
	Fanouts []int // per hop; -1 takes all neighbours
	// BatchSize is the trainers' batch size, which the deduplication model
	// needs; 0 estimates plain visits without it.
	BatchSize int
	Workers   int // goroutines; 0 = GOMAXPROCS. The result does not depend on it.
}

// EstimateHeat estimates, for every partition p, the heat of every node of
// adj when sampling seeds[p] (see the definition above).
func EstimateHeat(ctx context.Context, adj *Adj, seeds [][]uint32, opts HeatOptions) (*Heat, error) {
	t, err := buildTranspose(ctx, adj.NumNodes(), []heatRows[uint32]{{indptr: adj.Indptr, indices: adj.Indices}})
	if err != nil {
		return nil, err
	}
	return t.heat(ctx, seeds, opts)
}
