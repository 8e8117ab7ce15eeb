package sample

import (
	"fmt"
	"slices"
)

// NeighborRequest asks one partition to expand some of its nodes for one
// hop of one batch. It is what travels to a peer (node/ encodes it).
type NeighborRequest struct {
	Key      uint64 // BatchKey.Stream() of the batch
	Hop      int    // 0-based hop
	Fanout   int    // neighbours per node; -1 = all
	Weighted bool   // weighted sampling when the graph has weights
	Nodes    []uint64
	// Exclude leaves some nodes' edges out before their draw (a link
	// batch's seed edges, at hop 0); empty otherwise.
	Exclude Exclusion
}

// NeighborResponse is the answer: Counts[i] neighbours of Nodes[i], their
// global ids concatenated in request order in Neighbors, each node's run
// ascending. A response is reused across requests (Reset keeps capacity),
// and carries the scratch space of its Chooser.
type NeighborResponse struct {
	Counts    []uint32
	Neighbors []uint64

	chooser Chooser
	idx     []uint32
	drop    []uint32              // sampleOneExcluding's left-out positions
	weights []float32             // sampleOneExcluding's weights, left-out ones zero
	lo, hi  [prefetchChunk]uint64 // list bounds of the chunk being sampled
	cnt     [prefetchChunk]int32  // chosen per node of the chunk; -1 = all
	sink    uint64                // keeps the prefetching loads alive
}

// Reset empties the response, keeping its buffers.
func (r *NeighborResponse) Reset() {
	r.Counts = r.Counts[:0]
	r.Neighbors = r.Neighbors[:0]
}

// SampleNeighbors expands req.Nodes, all owned by g, appending to resp.
// It is the one function that expands nodes: a Sampler calls it for its
// own partition and a peer's server calls it for requests it receives, so
// a node's sample is the same wherever it is drawn. The choice for node v
// is Chooser.Uniform (or .Weighted) over v's neighbour list, less the
// edges req.Exclude leaves out, with stream NodeStream(req.Key, req.Hop,
// v). Safe for concurrent use with distinct responses.
func SampleNeighbors(g Local, req *NeighborRequest, resp *NeighborResponse) error {
	if req.Fanout < -1 {
		return fmt.Errorf("sample: hop %d: fanout %d: want -1 or ≥ 0: %w", req.Hop, req.Fanout, ErrInvalid)
	}
	if !req.Exclude.Empty() {
		return resp.sampleExcluding(g, req)
	}
	start, n := g.Start(), g.End()-g.Start()
	if f, ok := g.(flatCSR); ok {
		return resp.sampleFlat(f, start, n, req)
	}
	h := hopStream(req.Key, req.Hop)
	for _, v := range req.Nodes {
		nb, w, err := localRow(g, req.Weighted, v, start, n)
		if err != nil {
			return err
		}
		if err := resp.sampleOne(req, h, v, nb, w); err != nil {
			return err
		}
	}
	return nil
}

// flatCSR is a Local whose CSR arrays are at hand (Mem, CSR), so that
// SampleNeighbors can fetch a chunk's lists before it samples them.
type flatCSR interface {
	flat() (indptr, indices []uint64, weights []float32)
}

// prefetchChunk is how many nodes' lists are fetched ahead: enough
// independent cache misses to keep the memory system busy.
const prefetchChunk = 64

// sampleFlat is SampleNeighbors over CSR arrays. Per chunk of nodes it
// loads every indptr pair, draws every node's choice (which needs only
// the degree), touches every cache line of the lists that the choices
// read, and only then copies the chosen neighbours: each pass is a loop
// whose loads do not depend on each other, so cache misses overlap
// instead of being paid one at a time.
func (r *NeighborResponse) sampleFlat(f flatCSR, start, n uint64, req *NeighborRequest) error {
	indptr, indices, weights := f.flat()
	if !req.Weighted {
		weights = nil
	}
	h := hopStream(req.Key, req.Hop)
	for nodes := req.Nodes; len(nodes) > 0; {
		c := nodes[:min(len(nodes), prefetchChunk)]
		nodes = nodes[len(c):]
		lo, hi, cnt := r.lo[:len(c)], r.hi[:len(c)], r.cnt[:len(c)]
		for i, v := range c {
			l := v - start
			if l >= n {
				return notOwned(v, start, n)
			}
			lo[i], hi[i] = indptr[l], indptr[l+1]
		}
		idx := r.idx[:0]
		total := 0
		for i, v := range c {
			deg := int(hi[i] - lo[i])
			if weights == nil && (req.Fanout < 0 || deg <= req.Fanout) {
				cnt[i] = -1
				total += deg
				continue
			}
			var w []float32
			if weights != nil {
				w = weights[lo[i]:hi[i]]
			}
			k := len(idx)
			var all bool
			idx, all = r.choose(req, h, v, deg, w, idx)
			cnt[i] = int32(len(idx) - k)
			if all {
				cnt[i] = -1
				total += deg
			} else {
				total += len(idx) - k
			}
		}
		r.touch(indices, lo, hi, cnt, idx)
		k := len(r.Neighbors)
		r.Neighbors = slices.Grow(r.Neighbors, total)[:k+total]
		out := r.Neighbors[k:]
		o, x := 0, 0
		for i := range c {
			nb := indices[lo[i]:hi[i]]
			if cnt[i] < 0 {
				r.Counts = append(r.Counts, uint32(len(nb)))
				o += copy(out[o:], nb)
				continue
			}
			r.Counts = append(r.Counts, uint32(cnt[i]))
			for _, j := range idx[x : x+int(cnt[i])] {
				out[o] = nb[j]
				o++
			}
			x += int(cnt[i])
		}
		r.idx = idx[:0]
	}
	return nil
}

// touch loads every cache line of indices that the copy of a chunk's
// choices will read (cnt[i] < 0: all of [lo[i], hi[i]); else the next
// cnt[i] offsets of idx). Of a list taken whole it loads the first
// touchLines lines only: the copy streams the rest, and the hardware
// prefetcher follows a stream. It changes nothing.
func (r *NeighborResponse) touch(indices []uint64, lo, hi []uint64, cnt []int32, idx []uint32) {
	const perLine = 8 // uint64 ids per 64-byte cache line
	const touchLines = 4
	var sink uint64
	x := 0
	for i := range cnt {
		if cnt[i] < 0 {
			if lo[i] < hi[i] {
				end := min(hi[i], lo[i]+touchLines*perLine)
				for e := lo[i]; e < end; e += perLine {
					sink += indices[e]
				}
				sink += indices[end-1]
			}
			continue
		}
		nb := indices[lo[i]:hi[i]]
		for _, j := range idx[x : x+int(cnt[i])] {
			sink += nb[j]
		}
		x += int(cnt[i])
	}
	r.sink += sink
}

// sampleOne appends the sample of node v with neighbour list nb and
// weights w (nil: uniform); h is the hop's hopStream.
func (r *NeighborResponse) sampleOne(req *NeighborRequest, h, v uint64, nb []uint64, w []float32) error {
	if w != nil && len(w) != len(nb) {
		return fmt.Errorf("sample: node %d: %d weights for %d neighbours: %w", v, len(w), len(nb), ErrInvalid)
	}
	idx, all := r.choose(req, h, v, len(nb), w, r.idx[:0])
	if all {
		r.Counts = append(r.Counts, uint32(len(nb)))
		r.Neighbors = append(r.Neighbors, nb...)
		return nil
	}
	r.Counts = append(r.Counts, uint32(len(idx)))
	for _, i := range idx {
		r.Neighbors = append(r.Neighbors, nb[i])
	}
	r.idx = idx[:0]
	return nil
}

// choose is the one decision behind every sample: it appends to idx the
// chosen indices of node v's deg neighbours (weights w, nil: uniform), or
// reports all when every neighbour is taken without a draw. h is the hop's
// hopStream, so v's stream is NodeStream(req.Key, req.Hop, v).
func (r *NeighborResponse) choose(req *NeighborRequest, h, v uint64, deg int, w []float32, idx []uint32) ([]uint32, bool) {
	if w == nil && (req.Fanout < 0 || deg <= req.Fanout) {
		return idx, true
	}
	stream := nodeStream(h, v)
	if w != nil {
		return r.chooser.Weighted(stream, w, req.Fanout, idx), false
	}
	return r.chooser.Uniform(stream, deg, req.Fanout, idx), false
}

// localRow is node v's neighbour list in g (which holds [start,
// start+n)) and, when weighted, its weights.
func localRow(g Local, weighted bool, v, start, n uint64) ([]uint64, []float32, error) {
	l := v - start
	if l >= n {
		return nil, nil, notOwned(v, start, n)
	}
	var w []float32
	if weighted {
		w = g.Weights(uint32(l))
	}
	return g.Neighbors(uint32(l)), w, nil
}

func notOwned(v, start, n uint64) error {
	return fmt.Errorf("sample: node %d not in partition range [%d, %d): %w", v, start, start+n, ErrNotOwned)
}

// check verifies that resp fits req: one count per node, no count above
// the fanout, exactly as many neighbours as the counts add up to, and
// every neighbour a node of the graph of numNodes nodes (an id outside it
// would reach the batch's n_id at the last hop, or fail the next hop
// without naming the peer that sent it), none of them one whose edge the
// request left out.
func (r *NeighborResponse) check(req *NeighborRequest, numNodes uint64) error {
	if len(r.Counts) != len(req.Nodes) {
		return fmt.Errorf("%d counts for %d nodes: %w", len(r.Counts), len(req.Nodes), ErrBadResponse)
	}
	total := 0
	for i, c := range r.Counts {
		if req.Fanout >= 0 && int(c) > req.Fanout {
			return fmt.Errorf("node %d: %d neighbours, fanout %d: %w", req.Nodes[i], c, req.Fanout, ErrBadResponse)
		}
		total += int(c)
	}
	if total != len(r.Neighbors) {
		return fmt.Errorf("counts add up to %d, %d neighbours given: %w", total, len(r.Neighbors), ErrBadResponse)
	}
	o := 0
	for i, c := range r.Counts {
		for _, u := range r.Neighbors[o : o+int(c)] {
			if u >= numNodes {
				return fmt.Errorf("node %d: neighbour %d outside the graph of %d nodes: %w", req.Nodes[i], u, numNodes, ErrBadResponse)
			}
		}
		o += int(c)
	}
	if !req.Exclude.Empty() {
		return r.checkExcluded(req)
	}
	return nil
}
