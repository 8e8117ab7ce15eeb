package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"graphnode/mesh"
	"graphnode/partition"
	"graphnode/sample"
)

// meshRemote is a sampler's sample.Remote: one SampleRequest per peer
// per hop (with the exclusions of its nodes, a link batch's hop 0),
// decoded straight into the sampler's reused response slices; several
// when one would pass the mesh's message limit (mesh.SampleCuts), their
// answers appended in order. The mesh responses (and the read buffers
// they keep) are reused.
//
// When every id of the partition set fits in 32 bits (up to 4 G nodes),
// requests are narrow: ids travel as u32 both ways, half the bytes.
type meshRemote struct {
	c      *mesh.Client
	resps  *freeList[mesh.SampleResponse]
	narrow bool
}

func newMeshRemote(c *mesh.Client, book partition.Book) meshRemote {
	return meshRemote{c: c, resps: newFreeList(idleBuffers, func() *mesh.SampleResponse { return new(mesh.SampleResponse) }),
		narrow: book.NumNodes() <= 1<<32}
}

// idleBuffers is how many idle buffers of a kind a sampler or a handler
// keeps: enough for the batches in flight, each with a few peers. A list
// only ever holds buffers that were in use at once (a sampler's gathers
// in flight, a daemon's concurrent pulls), so it keeps the peak working
// set, sized by the largest answers (a few to tens of MB at ogbn-products
// scale), and never grows past it.
const idleBuffers = 64

func (r meshRemote) SampleNeighbors(ctx context.Context, part int, req *sample.NeighborRequest, resp *sample.NeighborResponse) error {
	mreq := mesh.SampleRequest{Key: wireKey(req.Key), Hop: uint16(req.Hop), Weighted: req.Weighted, Fanout: int32(req.Fanout), IDs: req.Nodes, Narrow: r.narrow,
		ExcludeAt: req.Exclude.At, ExcludeCounts: req.Exclude.Counts, ExcludeIDs: req.Exclude.IDs}
	resp.Counts, resp.Neighbors = resp.Counts[:0], resp.Neighbors[:0]
	cuts := mesh.SampleCuts(&mreq, r.c.MaxMessage())
	if cuts == nil {
		return r.sample(ctx, part, &mreq, resp)
	}
	for k := range len(cuts) - 1 {
		s := mreq.Slice(cuts[k], cuts[k+1])
		if err := r.sample(ctx, part, &s, resp); err != nil {
			return err
		}
	}
	return nil
}

// sample appends the peer's answer to mreq to resp, decoded straight into
// resp's slices when they are empty (the only request, or the first). An
// answer the peer refuses as too large (fanout -1 over nodes of high
// degree: the fanout did not bound it) is asked again in two halves, down
// to a single node, whose refusal is the error.
func (r meshRemote) sample(ctx context.Context, part int, mreq *mesh.SampleRequest, resp *sample.NeighborResponse) error {
	mresp := r.resps.get()
	first := len(resp.Counts) == 0
	if first {
		mresp.Counts, mresp.Neighbors = resp.Counts, resp.Neighbors
	}
	err := r.c.Sample(ctx, part, mreq, mresp)
	switch {
	case first:
		resp.Counts, resp.Neighbors = mresp.Counts, mresp.Neighbors
		mresp.Counts, mresp.Neighbors = nil, nil // the sampler's, not the pool's
		if err != nil {
			resp.Counts, resp.Neighbors = resp.Counts[:0], resp.Neighbors[:0]
		}
	case err == nil:
		resp.Counts = append(resp.Counts, mresp.Counts...)
		resp.Neighbors = append(resp.Neighbors, mresp.Neighbors...)
	}
	r.resps.put(mresp)
	if n := len(mreq.IDs); n > 1 && errors.Is(err, mesh.ErrTooLarge) {
		lo, hi := mreq.Slice(0, n/2), mreq.Slice(n/2, n)
		if err := r.sample(ctx, part, &lo, resp); err != nil {
			return err
		}
		return r.sample(ctx, part, &hi, resp)
	}
	return err
}

// clusterSource is a sampler's FeatureSource and LabelSource in a
// partition set of several parts: owned rows from the mapped partition,
// cached rows from its cache section, and the rest in one request per
// peer per batch, sent before the local rows are copied; in several
// concurrent ones when one would pass the mesh's message limit (a batch
// of rows of a few MB each). Safe for concurrent use.
type clusterSource struct {
	local      *sample.LocalSource
	part       *sample.CSR
	start, end uint64
	rowBytes   int
	labelDim   int
	dtype      mesh.DType
	book       partition.Book
	cli        *mesh.Client
	cache      cacheIndex // rows of cacheFeat by global id
	cacheFeat  []byte

	hits, misses atomic.Uint64
	scratch      *freeList[routes]

	// The most ids of one pull and of one label request, by the
	// client's MaxMessage; the errors say that one row, or one node's
	// labels, cannot fit a message at all.
	perPull, perLabel int
	pullErr, labelErr error
}

// routes is one Gather's ids grouped by owning peer, with their
// positions in the batch, and the peers' answers, one per request of at
// most perPull ids (whose buffers are reused by the next Gather that gets
// these routes from the pool); for a feature gather also the owned and
// cached rows to copy, so that each id is looked up once.
type routes struct {
	ids           [][]uint64
	pos           [][]int
	pulls         [][]mesh.PullResponse
	owned, cached []rowCopy
}

// rowCopy copies row src (of the mapped partition's features, or of the
// cache section) to row dst of the batch.
type rowCopy struct{ dst, src uint32 }

func newClusterSource(p *sample.CSR, book partition.Book, cli *mesh.Client) (*clusterSource, error) {
	g := p.Graph()
	s := &clusterSource{
		local: sample.NewLocalSource(p), part: p, start: p.Start(), end: p.End(),
		rowBytes: p.Schema().RowBytes(), labelDim: p.Schema().LabelDim,
		book: book, cli: cli, cacheFeat: g.CacheFeat(),
		dtype: mesh.DTypeFloat32,
	}
	if p.Schema().XType == sample.F16 {
		s.dtype = mesh.DTypeFloat16
	}
	ids := g.CacheIDs()
	if len(s.cacheFeat) != len(ids)*s.rowBytes {
		ids, s.cacheFeat = nil, nil // no features: nothing to cache
	}
	var err error
	if s.cache, err = newCacheIndex(ids); err != nil {
		return nil, fmt.Errorf("node: %s: cache_ids: %w", g.Path(), err)
	}
	s.scratch = newRoutes(book.Parts())
	s.sizeRequests()
	return s, nil
}

// newRemoteSource is the source of a node that holds no part (a client
// node): it owns and caches no node, so every id is asked of its owner.
func newRemoteSource(book partition.Book, cli *mesh.Client, rowBytes int, dtype mesh.DType, labelDim int) *clusterSource {
	s := &clusterSource{rowBytes: rowBytes, labelDim: labelDim, dtype: dtype, book: book, cli: cli, scratch: newRoutes(book.Parts())}
	s.sizeRequests()
	return s
}

// sizeRequests sets how many ids one pull and one label request may
// carry, so that each answer fits the client's MaxMessage.
func (s *clusterSource) sizeRequests() {
	limit := mesh.DefaultMaxMessage
	if s.cli != nil {
		limit = s.cli.MaxMessage()
	}
	if s.rowBytes > 0 {
		s.perPull, s.pullErr = mesh.PullIDsPerMessage(limit, s.rowBytes)
	}
	if s.labelDim > 0 {
		s.perLabel, s.labelErr = mesh.LabelIDsPerMessage(limit, s.labelDim)
	}
}

// newRoutes is a pool of routes over parts peers.
func newRoutes(parts int) *freeList[routes] {
	return newFreeList(idleBuffers, func() *routes {
		return &routes{ids: make([][]uint64, parts), pos: make([][]int, parts), pulls: make([][]mesh.PullResponse, parts)}
	})
}

// route groups the ids not owned here by owner. With rows set (a feature
// gather) it lists the owned and the cached ids' rows instead of routing
// them; otherwise (labels) it leaves the owned ids out. The caller
// returns r to the pool.
func (s *clusterSource) route(ids []uint64, rows bool) *routes {
	r := s.scratch.get()
	for p := range r.ids {
		r.ids[p], r.pos[p] = r.ids[p][:0], r.pos[p][:0]
	}
	r.owned, r.cached = r.owned[:0], r.cached[:0]
	for i, id := range ids {
		if l := id - s.start; l < s.end-s.start {
			if rows {
				r.owned = append(r.owned, rowCopy{uint32(i), uint32(l)})
			}
			continue
		}
		if rows {
			if j, ok := s.cache.lookup(id); ok {
				r.cached = append(r.cached, rowCopy{uint32(i), uint32(j)})
				continue
			}
		}
		o := s.book.Owner(min(id, s.book.NumNodes()-1))
		r.ids[o] = append(r.ids[o], id)
		r.pos[o] = append(r.pos[o], i)
	}
	if rows {
		s.hits.Add(uint64(len(r.cached)))
	}
	return r
}

// chunksInFlight is how many requests of one peer's split ids fetch
// has in flight at once. A server bounds each request, its answer's
// write included, by a deadline from the request's arrival
// (mesh.DefaultServerRequestTimeout + mesh.AnswerGrace, 32 s), and the
// answers in flight on a connection share its bandwidth: with every
// chunk sent at once, each answer took as long as all of them, and past
// about 32 s × the link's throughput every one was cut, retried and the
// batch failed "peer unavailable". Two keep the link busy (one answer
// streams while the peer reads the next request's rows) and each answer
// within twice its own time. Peers are asked in parallel all the same.
const chunksInFlight = 2

// fetch runs get for every request of at most per ids of every peer with
// ids, and returns the first error in peer order (each already names its
// peer). A peer's ids are one request unless they are more than per
// (chunk c holds ids[chunkBounds(len(ids), per, c)]); its chunks go
// chunksInFlight at a time, and stop at its first error. Peers are asked
// in parallel, one goroutine each (chunksInFlight for a split one).
func fetch(r *routes, per int, get func(part, chunk int, ids []uint64, pos []int) error) error {
	n := 0
	for _, ids := range r.ids {
		if len(ids) > 0 {
			n += chunks(len(ids), per)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	k := 0
	for p, ids := range r.ids {
		if len(ids) == 0 {
			continue
		}
		m, pos := chunks(len(ids), per), r.pos[p]
		if m == 1 { // the common case: one request, nothing shared
			part, err := p, &errs[k]
			k++
			wg.Go(func() { *err = get(part, 0, ids, pos) })
			continue
		}
		part, perr := p, errs[k:k+m]
		k += m
		failed := new(atomic.Bool) // the peer's chunks stop at its first error
		for lane := range min(m, chunksInFlight) {
			wg.Go(func() {
				for c := lane; c < m && !failed.Load(); c += chunksInFlight {
					lo, hi := chunkBounds(len(ids), per, c)
					if perr[c] = get(part, c, ids[lo:hi], pos[lo:hi]); perr[c] != nil {
						failed.Store(true)
					}
				}
			})
		}
	}
	wg.Wait()
	return firstErr(errs)
}

// chunks is how many requests of at most per ids n ids take: one up to
// per (and for none); one whatever n when per is 0 (nothing to ask:
// rows of 0 bytes, no labels).
func chunks(n, per int) int {
	if n <= per || per <= 0 {
		return 1
	}
	return (n + per - 1) / per
}

// chunkBounds is the ids [lo, hi) of request c of the chunks(n, per)
// requests of n ids: all of them when there is one.
func chunkBounds(n, per, c int) (lo, hi int) {
	if per <= 0 {
		return 0, n
	}
	return c * per, min((c+1)*per, n)
}

// tooLarge is err, the reason why no request of what ids asks can fit
// a message, for the first peer with ids; nil when every id is local.
func tooLarge(r *routes, err error) error {
	for p, ids := range r.ids {
		if len(ids) > 0 {
			return fmt.Errorf("node: part %d: %w", p, err)
		}
	}
	return nil
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Gather writes the rows of ids into dst: pulls go out first, then owned
// and cached rows are copied while they travel.
func (s *clusterSource) Gather(ctx context.Context, ids []uint64, dst []byte) error {
	return s.prefetch(ctx, ids).Gather(ctx, ids, dst)
}

// prefetch routes ids and sends the pulls of the rows that are neither
// owned nor cached; the rows wait in the answers' buffers until the
// returned gather copies them, with the owned and cached rows, into the
// batch's ring record. So the pulls of a batch travel while it waits for
// its turn to write, and x is written once, straight into the ring.
func (s *clusterSource) prefetch(ctx context.Context, ids []uint64) *prefetched {
	p := &prefetched{s: s, r: s.route(ids, true), done: make(chan error, 1)}
	go func() { p.done <- s.pull(ctx, p.r) }()
	return p
}

// pull asks every peer for the rows r routes to it, in requests of at
// most perPull ids, into r.pulls.
func (s *clusterSource) pull(ctx context.Context, r *routes) error {
	if s.pullErr != nil {
		return tooLarge(r, s.pullErr)
	}
	for part, ids := range r.ids {
		if n := chunks(len(ids), s.perPull); len(ids) > 0 && len(r.pulls[part]) < n {
			r.pulls[part] = append(r.pulls[part], make([]mesh.PullResponse, n-len(r.pulls[part]))...)
		}
	}
	return fetch(r, s.perPull, func(part, c int, pids []uint64, _ []int) error {
		s.misses.Add(uint64(len(pids)))
		resp := &r.pulls[part][c]
		if err := s.cli.Pull(ctx, part, &mesh.PullRequest{IDs: pids}, resp); err != nil {
			return err
		}
		if resp.DType != s.dtype || int(resp.RowSize) != s.rowBytes {
			return fmt.Errorf("node: part %d answered rows of %d bytes (dtype %d), want %d (dtype %d): %w",
				part, resp.RowSize, resp.DType, s.rowBytes, s.dtype, sample.ErrBadResponse)
		}
		return nil
	})
}

// prefetched is one batch's rows in flight: a sample.FeatureSource for
// the ids it was made for, used once. Its routes go back to the pool when
// it is used or released, after the pulls have ended.
type prefetched struct {
	s    *clusterSource
	r    *routes
	done chan error
	used bool
}

// Gather copies the owned and cached rows of ids into dst, waits for the
// pulls and copies their rows. ids must be those prefetch was given.
func (p *prefetched) Gather(ctx context.Context, ids []uint64, dst []byte) error {
	s, rb := p.s, p.s.rowBytes
	if p.used {
		return fmt.Errorf("node: prefetched rows gathered twice: %w", sample.ErrInvalid)
	}
	if len(dst) != len(ids)*rb {
		p.release()
		return fmt.Errorf("node: gather %d rows of %d bytes into %d bytes: %w", len(ids), rb, len(dst), sample.ErrInvalid)
	}
	if s.part != nil {
		copyRows(dst, s.part.FeatBlock(), p.r.owned, rb)
	}
	copyRows(dst, s.cacheFeat, p.r.cached, rb)
	p.used = true
	defer s.scratch.put(p.r)
	if err := <-p.done; err != nil {
		return err
	}
	per := s.perPull
	for part, pos := range p.r.pos {
		if len(pos) == 0 {
			continue
		}
		for c, resp := range p.r.pulls[part][:chunks(len(pos), per)] {
			rows := resp.Rows
			lo, hi := chunkBounds(len(pos), per, c)
			for k, i := range pos[lo:hi] {
				copy(dst[i*rb:(i+1)*rb], rows[k*rb:(k+1)*rb])
			}
		}
	}
	return nil
}

// copyRows copies rows of rb bytes from src to dst as cs says.
func copyRows(dst, src []byte, cs []rowCopy, rb int) {
	for _, c := range cs {
		d, s := int(c.dst)*rb, int(c.src)*rb
		copy(dst[d:d+rb], src[s:s+rb])
	}
}

// release waits for the pulls of a prefetch that will not be gathered
// and returns its routes to the pool.
func (p *prefetched) release() {
	if p.used {
		return
	}
	p.used = true
	<-p.done
	p.s.scratch.put(p.r)
}

// GatherLabels writes the labels of ids (the seeds) into dst: owned ones
// from the partition, the others in one request per peer (several, at
// once, when one would pass the mesh's message limit).
func (s *clusterSource) GatherLabels(ctx context.Context, ids []uint64, dst []int64) error {
	k := s.labelDim
	if len(dst) != len(ids)*k {
		return fmt.Errorf("node: gather %d labels of dim %d into %d values: %w", len(ids), k, len(dst), sample.ErrInvalid)
	}
	r := s.route(ids, false)
	defer s.scratch.put(r)
	if s.labelErr != nil {
		if err := tooLarge(r, s.labelErr); err != nil {
			return err
		}
	}
	done := make(chan error, 1)
	go func() {
		done <- fetch(r, s.perLabel, func(p, _ int, pids []uint64, pos []int) error {
			var resp mesh.LabelResponse
			if err := s.cli.Labels(ctx, p, &mesh.LabelRequest{IDs: pids}, &resp); err != nil {
				return err
			}
			if int(resp.Dim) != k {
				return fmt.Errorf("node: part %d answered %d labels per node, want %d: %w", p, resp.Dim, k, sample.ErrBadResponse)
			}
			for j, i := range pos {
				for c := range k {
					dst[i*k+c] = int64(resp.Labels[j*k+c])
				}
			}
			return nil
		})
	}()
	for i, id := range ids {
		if l := id - s.start; l < s.end-s.start {
			for c, y := range s.part.Labels(uint32(l)) {
				dst[i*k+c] = int64(y)
			}
		}
	}
	return <-done
}

// report is the source's counters and the client's metrics.
func (s *clusterSource) report() *samplerReport {
	return &samplerReport{CacheHits: s.hits.Load(), CacheMisses: s.misses.Load(), Peers: s.cli.Metrics()}
}
