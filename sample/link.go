package sample

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
)

// Link prediction: a batch of seed edges (DGL's
// as_edge_prediction_sampler, PyG's LinkNeighborLoader). Its seed nodes
// are the edges' endpoints and their negatives, each once, in order of
// first appearance: src_0, dst_0, src_1, dst_1, …, then the negatives of
// edge 0, of edge 1, …. Those nodes are sampled as a node batch's seeds,
// and the batch carries the pairs to score (edge_label_index) and their
// labels (edge_label): the seed edges (1), then for each seed edge i its
// NegRatio negatives (src_i, w) (0), w uniform over the graph's nodes,
// drawn from the batch's stream (so a pure function of the batch, as
// every other choice).

// negHop keys the negatives' draws apart from every hop's choices (hops
// are below MaxHops).
const negHop = MaxHops

// LinkOptions shape a link batch.
type LinkOptions struct {
	// NegRatio is the number of negatives per seed edge, 0 to MaxNegRatio.
	NegRatio int
	// NumNodes bounds the negatives' ids: [0, NumNodes).
	NumNodes uint64
	// Exclude leaves the edges between the two ends of a seed edge
	// (either direction, every copy) out of the graph before the
	// neighbours are drawn, so that a model does not see the edges it is
	// asked to predict and a seed still gets min(fanout, its other
	// neighbours) of them, as DGL's as_edge_prediction_sampler(exclude=
	// "reverse_id") on a graph stored in both directions does. Only hop 0
	// can meet such an edge: both its ends are seeds, and seeds are
	// expanded at hop 0 alone.
	Exclude bool
}

// MaxNegRatio bounds LinkOptions.NegRatio.
const MaxNegRatio = 1024

// SampleLink builds the link batch of the seed edges (src[i], dst[i])
// under key. Its n_id starts with the batch's seed nodes (BatchSize of
// them); y holds their labels.
func (s *Sampler) SampleLink(ctx context.Context, key BatchKey, src, dst []uint64, o LinkOptions) (*Batch, error) {
	p := len(src)
	switch {
	case p == 0 || len(dst) != p:
		return nil, fmt.Errorf("sample: link batch %d: %d sources, %d destinations: %w", key.Batch, p, len(dst), ErrInvalid)
	case o.NegRatio < 0 || o.NegRatio > MaxNegRatio:
		return nil, fmt.Errorf("sample: link batch %d: neg ratio %d, want 0 to %d: %w", key.Batch, o.NegRatio, MaxNegRatio, ErrInvalid)
	case o.NegRatio > 0 && o.NumNodes == 0:
		return nil, fmt.Errorf("sample: link batch %d: negatives of a graph without nodes: %w", key.Batch, ErrInvalid)
	case uint64(p)*uint64(1+o.NegRatio) > math.MaxUint32:
		return nil, fmt.Errorf("sample: link batch %d: %d pairs: %w", key.Batch, uint64(p)*uint64(1+o.NegRatio), ErrInvalid)
	}
	l := &s.link
	l.reset()
	for i := range p {
		l.add(src[i])
		l.add(dst[i])
	}
	stream := hopStream(key.Stream(), negHop)
	l.neg = resize(l.neg, p*o.NegRatio)
	for i := range p {
		r := rng{state: nodeStream(stream, uint64(i))}
		for j := range o.NegRatio {
			w := r.bounded(o.NumNodes)
			l.neg[i*o.NegRatio+j] = w
			l.add(w)
		}
	}
	if o.Exclude {
		l.excludeSeedEdges(src, dst)
		s.exclude = &l.exclude
	}
	b, err := s.Sample(ctx, key, l.seeds)
	s.exclude = nil
	if err != nil {
		return nil, err
	}
	n := p * (1 + o.NegRatio)
	b.EdgeLabelIndex = resize(b.EdgeLabelIndex, 2*n)
	b.EdgeLabel = resize(b.EdgeLabel, n)
	rows, cols := b.EdgeLabelIndex[:n], b.EdgeLabelIndex[n:]
	for i := range p {
		rows[i], cols[i] = l.pos[src[i]], l.pos[dst[i]]
		b.EdgeLabel[i] = 1
	}
	for i, w := range l.neg {
		e := p + i
		rows[e], cols[e] = l.pos[src[i/o.NegRatio]], l.pos[w]
		b.EdgeLabel[e] = 0
	}
	return b, nil
}

// linkScratch is a Sampler's reusable state for link batches.
type linkScratch struct {
	seeds   []uint64
	neg     []uint64
	pos     map[uint64]int64 // seed node → its position in seeds
	ends    []seedEnd
	exclude Exclusion // by seed position
}

// seedEnd is a seed edge seen from one end: that end's seed position
// and the other end's id, the neighbour it leaves out.
type seedEnd struct {
	at uint32
	id uint64
}

func (l *linkScratch) reset() {
	l.seeds = l.seeds[:0]
	if l.pos == nil {
		l.pos = map[uint64]int64{}
	}
	clear(l.pos)
}

// excludeSeedEdges sets l.exclude to the seed edges (src[i], dst[i]) in
// both directions: for each seed, the other ends of its seed edges,
// ascending, each once (a pair given twice or reversed is one; a self
// pair leaves out the seed's self loops).
func (l *linkScratch) excludeSeedEdges(src, dst []uint64) {
	ends := l.ends[:0]
	for i, u := range src {
		v := dst[i]
		ends = append(ends, seedEnd{uint32(l.pos[u]), v})
		if u != v {
			ends = append(ends, seedEnd{uint32(l.pos[v]), u})
		}
	}
	slices.SortFunc(ends, func(a, b seedEnd) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	ends = slices.Compact(ends)
	x := &l.exclude
	x.reset()
	for k := 0; k < len(ends); {
		at, n := ends[k].at, 0
		for ; k < len(ends) && ends[k].at == at; k++ {
			x.IDs = append(x.IDs, ends[k].id)
			n++
		}
		x.At = append(x.At, at)
		x.Counts = append(x.Counts, uint32(n))
	}
	l.ends = ends
}

// add appends v to the seeds unless it is one already.
func (l *linkScratch) add(v uint64) {
	if _, ok := l.pos[v]; !ok {
		l.pos[v] = int64(len(l.seeds))
		l.seeds = append(l.seeds, v)
	}
}
