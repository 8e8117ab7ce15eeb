package sample

import (
	"fmt"
	"slices"
)

// Exclusion lists, for some nodes of a NeighborRequest, neighbours whose
// edges are left out of the graph before the draw: node Nodes[At[j]] is
// sampled as if its edges from the Counts[j] ids of run j of IDs (runs in
// order, each ascending without repeats) did not exist, every copy of a
// repeated edge included. A link batch excludes its seed edges this way
// (DGL's as_edge_prediction_sampler(exclude=...)), at hop 0, the only hop
// that expands seeds. The zero value excludes nothing, and an ordinary
// request carries it: nothing is allocated or sent for it.
type Exclusion struct {
	At     []uint32 // indices into the request's Nodes, strictly ascending
	Counts []uint32 // ids per listed node, each at least 1
	IDs    []uint64 // the runs, concatenated
}

// Empty reports whether x excludes nothing.
func (x *Exclusion) Empty() bool { return len(x.At) == 0 }

func (x *Exclusion) reset() {
	x.At, x.Counts, x.IDs = x.At[:0], x.Counts[:0], x.IDs[:0]
}

// add lists node position at (above every position listed so far) with
// its run ids (ascending, distinct, not empty).
func (x *Exclusion) add(at uint32, ids []uint64) {
	x.At = append(x.At, at)
	x.Counts = append(x.Counts, uint32(len(ids)))
	x.IDs = append(x.IDs, ids...)
}

// Check reports the first way x does not fit a request of nodes nodes:
// lengths, order and bounds of At, empty counts, counts that do not add
// up to len(IDs), runs not strictly ascending.
func (x *Exclusion) Check(nodes int) error {
	if len(x.Counts) != len(x.At) {
		return fmt.Errorf("exclusion: %d counts for %d nodes", len(x.Counts), len(x.At))
	}
	o := 0
	for j, at := range x.At {
		switch {
		case int64(at) >= int64(nodes):
			return fmt.Errorf("exclusion %d: node index %d, request of %d nodes", j, at, nodes)
		case j > 0 && at <= x.At[j-1]:
			return fmt.Errorf("exclusion %d: node index %d after %d, want ascending", j, at, x.At[j-1])
		case x.Counts[j] == 0:
			return fmt.Errorf("exclusion %d: no ids", j)
		case uint64(x.Counts[j]) > uint64(len(x.IDs)-o):
			return fmt.Errorf("exclusion %d: %d ids, %d left", j, x.Counts[j], len(x.IDs)-o)
		}
		run := x.IDs[o : o+int(x.Counts[j])]
		for i := 1; i < len(run); i++ {
			if run[i] <= run[i-1] {
				return fmt.Errorf("exclusion %d: id %d after %d, want strictly ascending", j, run[i], run[i-1])
			}
		}
		o += len(run)
	}
	if o != len(x.IDs) {
		return fmt.Errorf("exclusion: counts add up to %d, %d ids given", o, len(x.IDs))
	}
	return nil
}

// sampleExcluding is SampleNeighbors for a request with exclusions: the
// runs of nodes without any are sampled as always (sampleFlat's
// prefetching included), the others one by one by sampleOneExcluding.
func (r *NeighborResponse) sampleExcluding(g Local, req *NeighborRequest) error {
	if err := req.Exclude.Check(len(req.Nodes)); err != nil {
		return fmt.Errorf("sample: hop %d: %w: %w", req.Hop, err, ErrInvalid)
	}
	start, n := g.Start(), g.End()-g.Start()
	h := hopStream(req.Key, req.Hop)
	x := &req.Exclude
	rest := *req
	rest.Exclude = Exclusion{}
	next, o := 0, 0 // the first node not sampled yet, offset of the run
	for j, at := range x.At {
		if rest.Nodes = req.Nodes[next:at]; len(rest.Nodes) > 0 {
			if err := SampleNeighbors(g, &rest, r); err != nil {
				return err
			}
		}
		v := req.Nodes[at]
		nb, w, err := localRow(g, req.Weighted, v, start, n)
		if err != nil {
			return err
		}
		c := int(x.Counts[j])
		if err := r.sampleOneExcluding(req, h, v, nb, w, x.IDs[o:o+c]); err != nil {
			return err
		}
		next, o = int(at)+1, o+c
	}
	if rest.Nodes = req.Nodes[next:]; len(rest.Nodes) > 0 {
		return SampleNeighbors(g, &rest, r)
	}
	return nil
}

// sampleOneExcluding appends the sample of node v with neighbour list nb
// (ascending) and weights w (nil: uniform) once the edges from the ids of
// ex (ascending) are left out: the draw is the one choose makes over the
// remaining neighbours, keyed by v's stream as any other, so it is a
// pure function of the batch and the graph wherever it runs. A weighted
// draw keeps every index and weighs the left-out ones zero, which
// Chooser.Weighted never picks.
func (r *NeighborResponse) sampleOneExcluding(req *NeighborRequest, h, v uint64, nb []uint64, w []float32, ex []uint64) error {
	if w != nil && len(w) != len(nb) {
		return fmt.Errorf("sample: node %d: %d weights for %d neighbours: %w", v, len(w), len(nb), ErrInvalid)
	}
	// The left-out positions, ascending: nb is sorted, so each id is one
	// run of it, found by binary search.
	drop := r.drop[:0]
	for _, u := range ex {
		i, found := slices.BinarySearch(nb, u)
		for ; found && i < len(nb) && nb[i] == u; i++ {
			drop = append(drop, uint32(i))
		}
	}
	r.drop = drop
	if len(drop) == 0 {
		return r.sampleOne(req, h, v, nb, w)
	}
	if w != nil {
		kept := append(r.weights[:0], w...)
		for _, i := range drop {
			kept[i] = 0
		}
		r.weights = kept
		idx, _ := r.choose(req, h, v, len(nb), kept, r.idx[:0])
		r.Counts = append(r.Counts, uint32(len(idx)))
		for _, i := range idx {
			r.Neighbors = append(r.Neighbors, nb[i])
		}
		r.idx = idx[:0]
		return nil
	}
	deg := len(nb) - len(drop)
	idx, all := r.choose(req, h, v, deg, nil, r.idx[:0])
	if all {
		r.Counts = append(r.Counts, uint32(deg))
		at := 0
		for _, i := range drop {
			r.Neighbors = append(r.Neighbors, nb[at:i]...)
			at = int(i) + 1
		}
		r.Neighbors = append(r.Neighbors, nb[at:]...)
		return nil
	}
	// idx counts among the remaining neighbours, ascending: index t is
	// the position of nb past t that skips every left-out one up to it.
	r.Counts = append(r.Counts, uint32(len(idx)))
	d := 0
	for _, t := range idx {
		p := int(t) + d
		for d < len(drop) && int(drop[d]) <= p {
			d++
			p++
		}
		r.Neighbors = append(r.Neighbors, nb[p])
	}
	r.idx = idx[:0]
	return nil
}

// checkExcluded reports a neighbour in resp that req excluded: a peer
// that drew it did not leave the edge out.
func (r *NeighborResponse) checkExcluded(req *NeighborRequest) error {
	x := &req.Exclude
	node, nbr, o := 0, 0, 0
	for j, at := range x.At {
		for ; node < int(at); node++ {
			nbr += int(r.Counts[node])
		}
		ex := x.IDs[o : o+int(x.Counts[j])]
		o += len(ex)
		for _, u := range r.Neighbors[nbr : nbr+int(r.Counts[node])] {
			if _, found := slices.BinarySearch(ex, u); found {
				return fmt.Errorf("node %d: neighbour %d, whose edge the request left out: %w", req.Nodes[at], u, ErrBadResponse)
			}
		}
	}
	return nil
}
