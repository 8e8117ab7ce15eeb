package sample

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
)

// Config is what a Sampler samples from and how.
type Config struct {
	// Fanouts per hop; -1 takes every neighbour. 1 to MaxHops hops.
	Fanouts []int
	// Weighted samples proportionally to edge weights where the graph has
	// them (uniformly where it has none).
	Weighted bool
	// Local is this process's partition (or a Union of all of them).
	Local Local
	// Remote expands nodes outside Local's range; nil when Local covers
	// every node that sampling can reach.
	Remote Remote
	// Book routes nodes outside Local's range to their owner. Required with
	// Remote.
	Book Book
	// Schema is the shape of x and y in the batch.
	Schema Schema
	// Features fills x (Sampler.Gather); nil when Schema.FeatDim is 0.
	Features FeatureSource
	// Labels fills y; nil when Schema.LabelDim is 0.
	Labels LabelSource
}

// Validate reports every problem of c, not just the first.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Fanouts) == 0 || len(c.Fanouts) > MaxHops {
		errs = append(errs, fmt.Errorf("fanouts: %d hops, want 1 to %d", len(c.Fanouts), MaxHops))
	}
	for k, f := range c.Fanouts {
		if f < -1 {
			errs = append(errs, fmt.Errorf("fanouts[%d] = %d, want -1 or ≥ 0", k, f))
		}
	}
	if c.Local == nil {
		errs = append(errs, errors.New("local: nil"))
	}
	if c.Remote != nil && (c.Book == nil || c.Book.Parts() < 1) {
		errs = append(errs, errors.New("book: empty, required with remote"))
	}
	if err := c.Schema.validate(); err != nil {
		errs = append(errs, fmt.Errorf("schema: %w", err))
	}
	if c.Schema.FeatDim > 0 && c.Features == nil {
		errs = append(errs, errors.New("features: nil with a feat dim"))
	}
	if c.Schema.LabelDim > 0 && c.Labels == nil {
		errs = append(errs, errors.New("labels: nil with a label dim"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sample: config: %w: %w", err, ErrInvalid)
	}
	return nil
}

// Sampler builds batches. It owns every scratch buffer it needs and reuses
// them, so a steady-state batch allocates nothing when all nodes are
// local. A Sampler is not safe for concurrent use: run one per goroutine;
// they share the (read-only) graph and sources.
//
// Memory: besides the batch, a Sampler whose Local range has at most
// 2^24 ids keeps about 4.13 bytes per id of it (see denseMap), allocated
// by the first Sample: 4.1 MB for 1 M nodes, 9.9 MB for 2.4 M; with a
// Remote, per id of the whole graph when it has at most 2^24 nodes. A
// larger range dedups through the hash alone, sized by the batch.
type Sampler struct {
	cfg        Config
	start, end uint64
	dense      denseMap // positions of ids in [start, end), when small enough
	pos        posMap   // positions of every other id
	batch      Batch

	local peer    // the request for Local of the current hop
	peers []peer  // one per partition of the book, used with Remote
	owner []int32 // per frontier node: index into peers, or -1 for local
	// hopNbrs are the hop's neighbours in frontier order, with Remote.
	hopNbrs []uint64
	wg      sync.WaitGroup
	sink    uint64 // keeps touch's loads alive

	link linkScratch // SampleLink's
	// exclude is the edges SampleLink leaves out of its seeds' draws, by
	// seed position; nil in a node batch.
	exclude *Exclusion
}

// peer holds one hop's request to one partition and its answer.
type peer struct {
	req  NeighborRequest
	resp NeighborResponse
	err  error
	node int // merge cursor into req.Nodes
	nbr  int // merge cursor into resp.Neighbors

	excl Exclusion // req.Exclude's buffers, kept between hops
	at   uint32    // splitExclusion's count of req.Nodes
}

// New checks cfg and makes a Sampler.
func New(cfg Config) (*Sampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sampler{cfg: cfg, start: cfg.Local.Start(), end: cfg.Local.End()}
	switch {
	case cfg.Remote != nil && cfg.Book.NumNodes() <= denseMaxIDs:
		// Half the nodes of a batch may live elsewhere: index the whole
		// graph, so that they too dedup without hashing.
		s.dense.init(0, cfg.Book.NumNodes())
	case s.end-s.start <= denseMaxIDs:
		s.dense.init(s.start, s.end)
	}
	if cfg.Remote != nil {
		s.peers = make([]peer, cfg.Book.Parts())
	}
	return s, nil
}

// Sample builds the batch of seeds under key: n_id, edge_index, the
// per-hop counts and y (DESIGN.md §5, PyG NeighborLoader semantics). x is
// filled by Gather, or straight into a record by EncodeGather. The batch
// is the Sampler's and valid until its next Sample.
func (s *Sampler) Sample(ctx context.Context, key BatchKey, seeds []uint64) (*Batch, error) {
	b := &s.batch
	b.reset(key, s.cfg.Schema, len(s.cfg.Fanouts))
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sample: batch %d: %w", key.Batch, err)
	}
	if len(seeds) == 0 || len(seeds) > math.MaxInt32 {
		return nil, fmt.Errorf("sample: batch %d: %d seeds: %w", key.Batch, len(seeds), ErrInvalid)
	}
	s.dense.reset()
	if s.dense.n > 0 {
		s.pos.reset(0) // only ids outside the local range
	} else {
		s.pos.reset(len(seeds) * 8)
	}
	for i, v := range seeds {
		if p, ok := s.place(v, int32(i)); !ok {
			return nil, fmt.Errorf("sample: batch %d: seed %d at positions %d and %d: duplicate seed: %w", key.Batch, v, p, i, ErrInvalid)
		}
	}
	b.BatchSize = len(seeds)
	b.NID = append(b.NID, seeds...)
	b.NumSampledNodes = append(b.NumSampledNodes, int64(len(seeds)))
	stream := key.Stream()
	lo, hi := 0, len(seeds)
	for hop, fanout := range s.cfg.Fanouts {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sample: batch %d hop %d: %w", key.Batch, hop, err)
		}
		req := NeighborRequest{Key: stream, Hop: hop, Fanout: fanout, Weighted: s.cfg.Weighted}
		var ex *Exclusion
		if hop == 0 && s.exclude != nil && !s.exclude.Empty() {
			// Both ends of an excluded pair are seeds, and only hop 0
			// expands seeds.
			ex = s.exclude
		}
		if err := s.expand(ctx, req, b.NID[lo:hi], ex); err != nil {
			return nil, fmt.Errorf("sample: batch %d hop %d: %w", key.Batch, hop, err)
		}
		e0 := len(b.Row)
		if err := s.merge(lo, hi); err != nil {
			return nil, fmt.Errorf("sample: batch %d hop %d: %w", key.Batch, hop, err)
		}
		b.NumSampledNodes = append(b.NumSampledNodes, int64(len(b.NID)-hi))
		b.NumSampledEdges = append(b.NumSampledEdges, int64(len(b.Row)-e0))
		lo, hi = hi, len(b.NID)
	}
	if k := s.cfg.Schema.LabelDim; k > 0 {
		b.Y = resize(b.Y, len(seeds)*k)
		if err := s.cfg.Labels.GatherLabels(ctx, seeds, b.Y); err != nil {
			return nil, fmt.Errorf("sample: batch %d labels: %w", key.Batch, err)
		}
	}
	return b, nil
}

// Gather fills b.X with the features of b.NID from the configured source.
func (s *Sampler) Gather(ctx context.Context, b *Batch) error {
	b.X = resize(b.X, len(b.NID)*s.cfg.Schema.RowBytes())
	if len(b.X) == 0 {
		return nil
	}
	if err := s.cfg.Features.Gather(ctx, b.NID, b.X); err != nil {
		return fmt.Errorf("sample: batch %d features: %w", b.Index, err)
	}
	return nil
}

// expand samples the frontier: remote requests go out first, one per peer,
// local nodes are sampled meanwhile, then all answers are checked. ex,
// when not nil, is the frontier's exclusions by frontier position; each
// request carries those of its nodes.
func (s *Sampler) expand(ctx context.Context, req NeighborRequest, frontier []uint64, ex *Exclusion) error {
	owned := s.local.req.Nodes[:0] // with Remote, the owned part of the last frontier
	s.local.req = req
	s.local.resp.Reset()
	s.local.node, s.local.nbr = 0, 0
	if s.cfg.Remote == nil {
		s.local.req.Nodes = frontier
		if ex != nil {
			s.local.req.Exclude = *ex
		}
		return SampleNeighbors(s.cfg.Local, &s.local.req, &s.local.resp)
	}
	s.local.req.Nodes = owned
	for i := range s.peers {
		p := &s.peers[i]
		p.req = NeighborRequest{Key: req.Key, Hop: req.Hop, Fanout: req.Fanout, Weighted: req.Weighted, Nodes: p.req.Nodes[:0]}
		p.resp.Reset()
		p.err, p.node, p.nbr = nil, 0, 0
	}
	s.owner = s.owner[:0]
	for _, v := range frontier {
		if v-s.start < s.end-s.start {
			s.local.req.Nodes = append(s.local.req.Nodes, v)
			s.owner = append(s.owner, -1)
			continue
		}
		if v >= s.cfg.Book.NumNodes() {
			return fmt.Errorf("node %d outside the graph of %d nodes: %w", v, s.cfg.Book.NumNodes(), ErrNotOwned)
		}
		o := s.cfg.Book.Owner(v)
		s.peers[o].req.Nodes = append(s.peers[o].req.Nodes, v)
		s.owner = append(s.owner, int32(o))
	}
	if ex != nil {
		s.splitExclusion(ex)
	}
	for i := range s.peers {
		p := &s.peers[i]
		if len(p.req.Nodes) == 0 {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			p.err = s.cfg.Remote.SampleNeighbors(ctx, i, &p.req, &p.resp)
		}()
	}
	err := SampleNeighbors(s.cfg.Local, &s.local.req, &s.local.resp)
	s.wg.Wait()
	if err != nil {
		return err
	}
	for i := range s.peers {
		p := &s.peers[i]
		if len(p.req.Nodes) == 0 {
			continue
		}
		if p.err == nil {
			p.err = p.resp.check(&p.req, s.cfg.Book.NumNodes())
		}
		if p.err != nil {
			return fmt.Errorf("part %d: %w", i, p.err)
		}
	}
	return nil
}

// splitExclusion gives each request of the hop (expand's, s.owner set)
// the exclusions ex of its nodes, renumbered to their positions in it.
func (s *Sampler) splitExclusion(ex *Exclusion) {
	s.local.excl.reset()
	s.local.at = 0
	for i := range s.peers {
		s.peers[i].excl.reset()
		s.peers[i].at = 0
	}
	j, o := 0, 0 // cursor into ex.At, offset of its run
	for i, own := range s.owner {
		p := &s.local
		if own >= 0 {
			p = &s.peers[own]
		}
		if j < len(ex.At) && int(ex.At[j]) == i {
			c := int(ex.Counts[j])
			p.excl.add(p.at, ex.IDs[o:o+c])
			j, o = j+1, o+c
		}
		p.at++
	}
	s.local.req.Exclude = s.local.excl
	for i := range s.peers {
		s.peers[i].req.Exclude = s.peers[i].excl
	}
}

// merge walks the frontier n_id[lo:hi] in order, takes each node's
// neighbours from whoever expanded it, appends new nodes to n_id and one
// edge per sampled neighbour.
func (s *Sampler) merge(lo, hi int) error {
	b := &s.batch
	total := len(s.local.resp.Neighbors)
	for i := range s.peers {
		total += len(s.peers[i].resp.Neighbors)
	}
	if len(b.NID)+total > math.MaxInt32 {
		return fmt.Errorf("more than %d nodes in one batch: %w", math.MaxInt32, ErrInvalid)
	}
	// Order the hop's neighbours as the frontier is ordered; cols follow.
	// Row, Col and NID grow once per hop and are written by index.
	nbrs := s.local.resp.Neighbors
	if s.cfg.Remote != nil {
		nbrs = s.hopNbrs[:0]
	}
	e0 := len(b.Col)
	b.Col = slices.Grow(b.Col, total)[:e0+total]
	col := b.Col[e0:]
	e := 0
	for i := lo; i < hi; i++ {
		src := &s.local
		if s.cfg.Remote != nil {
			if o := s.owner[i-lo]; o >= 0 {
				src = &s.peers[o]
			}
		}
		c := int(src.resp.Counts[src.node])
		if s.cfg.Remote != nil {
			nbrs = append(nbrs, src.resp.Neighbors[src.nbr:src.nbr+c]...)
		}
		src.node++
		src.nbr += c
		for k := range col[e : e+c] {
			col[e+k] = int64(i)
		}
		e += c
	}
	if s.cfg.Remote != nil {
		s.hopNbrs = nbrs
	}
	b.Row = slices.Grow(b.Row, total)[:e0+total]
	row := b.Row[e0:]
	n := len(b.NID)
	nid := slices.Grow(b.NID, total)[:n+total]
	// Insert in chunks, touching each chunk's entries first: those loads
	// are independent, so their cache misses overlap.
	d := &s.dense
	for at := 0; at < len(nbrs); at += prefetchChunk {
		c := nbrs[at:min(len(nbrs), at+prefetchChunk)]
		s.touch(c)
		out := row[at : at+len(c)]
		for k, v := range c {
			var p int32
			var added bool
			if l := v - d.start; l < d.n {
				p, added = d.insert(l, int32(n))
			} else {
				p, added = s.pos.insert(v, int32(n))
			}
			nid[n] = v // kept only when added
			if added {
				n++
			}
			out[k] = int64(p)
		}
	}
	b.NID = nid[:n]
	return nil
}

// place maps v to pos unless it is present; it returns v's position after
// the call and whether it was inserted.
func (s *Sampler) place(v uint64, pos int32) (int32, bool) {
	if l := v - s.dense.start; l < s.dense.n {
		return s.dense.insert(l, pos)
	}
	return s.pos.insert(v, pos)
}

// touch loads the entry of every id of c (for a local id, its word of
// the seen bitset), so that the inserts that follow find them in cache:
// the loads do not depend on each other, so their misses overlap. It
// changes nothing.
func (s *Sampler) touch(c []uint64) {
	d := &s.dense
	var sink uint64
	for _, v := range c {
		if l := v - d.start; l < d.n {
			sink += d.seen[l/64]
		} else {
			sink += uint64(s.pos.peek(v))
		}
	}
	s.sink += sink
}

// resize returns a slice of n elements, reusing buf's capacity. It grows
// by an eighth more than asked, so that batches whose sizes wander
// around a mean settle on one buffer instead of replacing it (tens of
// megabytes, fresh pages to fault in) whenever one is a little larger.
func resize[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n, n+n/8)
	}
	return buf[:n]
}
