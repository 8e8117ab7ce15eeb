package node

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"graphnode/csr"
	"graphnode/mesh"
	"graphnode/sample"
)

// handler answers peers' mesh requests from this node's partition: the
// same sample.SampleNeighbors a local sampler calls, rows and labels
// straight from the mapped file. It never waits on samplers or loaders.
// Safe for concurrent use.
type handler struct {
	graph *csr.Graph
	part  *sample.CSR
	src   *sample.LocalSource
	dtype mesh.DType

	rows    *freeList[[]byte]                  // buffers of answered pulls, back from the server
	samples *freeList[sample.NeighborResponse] // answers to sample requests, back from the server

	mu     sync.Mutex
	splits map[string][]uint64 // ascending global ids of each split asked for

	// changed logs, once, that the partition file changed under the node
	// (Node.partErr): every request after that fails the same way.
	changed sync.Once
}

func newHandler(g *csr.Graph) (*handler, error) {
	p, err := sample.FromCSR(g)
	if err != nil {
		return nil, err
	}
	h := &handler{graph: g, part: p, src: sample.NewLocalSource(p), splits: map[string][]uint64{},
		rows:    newFreeList(idleBuffers, func() *[]byte { return new([]byte) }),
		samples: newFreeList(idleBuffers, func() *sample.NeighborResponse { return new(sample.NeighborResponse) })}
	switch p.Schema().XType {
	case sample.F16:
		h.dtype = mesh.DTypeFloat16
	default:
		h.dtype = mesh.DTypeFloat32
	}
	return h, nil
}

// wireKey puts a batch's stream key into the mesh's opaque 32-byte key:
// little-endian in the first 8 bytes, the rest zero.
func wireKey(k uint64) (b [mesh.KeySize]byte) {
	binary.LittleEndian.PutUint64(b[:], k)
	return b
}

// streamKey reverses wireKey; a key with other bytes set is not ours.
func streamKey(b [mesh.KeySize]byte) (uint64, error) {
	for _, c := range b[8:] {
		if c != 0 {
			return 0, fmt.Errorf("node: sample request key % x: bytes 8..31 must be zero: %w", b, sample.ErrInvalid)
		}
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func (h *handler) SampleNeighbors(ctx context.Context, req *mesh.SampleRequest) (*mesh.SampleResponse, error) {
	key, err := streamKey(req.Key)
	if err != nil {
		return nil, err
	}
	if err := h.sampleFits(ctx, req); err != nil {
		return nil, err
	}
	nreq := sample.NeighborRequest{Key: key, Hop: int(req.Hop), Fanout: int(req.Fanout), Weighted: req.Weighted, Nodes: req.IDs,
		Exclude: sample.Exclusion{At: req.ExcludeAt, Counts: req.ExcludeCounts, IDs: req.ExcludeIDs}}
	resp := h.samples.get()
	resp.Reset()
	if err := sample.SampleNeighbors(h.part, &nreq, resp); err != nil {
		h.samples.put(resp)
		return nil, err
	}
	return &mesh.SampleResponse{Counts: resp.Counts, Neighbors: resp.Neighbors}, nil
}

// sampleFits refuses (mesh.ErrTooLarge) a sample request whose answer
// could exceed the server's answer limit, from the degrees alone, before
// any neighbour is copied: a peer's request of a few megabytes (one
// node of high degree repeated, fanout -1) could otherwise make this node
// build gigabytes only for the server to refuse them.
func (h *handler) sampleFits(ctx context.Context, req *mesh.SampleRequest) error {
	limit := int64(mesh.AnswerLimit(ctx))
	if limit == 0 {
		return nil
	}
	width := int64(8)
	if req.Narrow {
		width = 4
	}
	size := 4 * int64(len(req.IDs)) // the counts
	if f, n := int64(req.Fanout), int64(len(req.IDs)); f >= 0 && size <= limit && (n == 0 || f <= (limit-size)/(width*n)) {
		// Fanout × ids fits already: no pass over the degrees on the
		// path of every remote hop (the sampling reads them next).
		return nil
	}
	start, end := h.part.Start(), h.part.End()
	for _, v := range req.IDs {
		if v < start || v >= end {
			continue // not owned: SampleNeighbors refuses it
		}
		d := int64(len(h.part.Neighbors(uint32(v - start))))
		if req.Fanout >= 0 {
			d = min(d, int64(req.Fanout))
		}
		if size += width * d; size > limit {
			return fmt.Errorf("node: sample request of %d ids at fanout %d: the answer could reach %d bytes, over the limit of %d: %w",
				len(req.IDs), req.Fanout, size, limit, mesh.ErrTooLarge)
		}
	}
	return nil
}

// ReleaseSample takes back the slices of an answer the server has
// encoded (mesh.SampleReleaser), for the next SampleNeighbors to fill.
func (h *handler) ReleaseSample(r *mesh.SampleResponse) {
	h.samples.put(&sample.NeighborResponse{Counts: r.Counts[:0], Neighbors: r.Neighbors[:0]})
}

// PullFeatures copies the rows of req.IDs out of the mapped feature
// section: one copy, into a buffer the server writes to the stream and
// hands back (ReleaseRows).
func (h *handler) PullFeatures(ctx context.Context, req *mesh.PullRequest) (*mesh.PullResponse, error) {
	rb := h.part.Schema().RowBytes()
	if rb == 0 {
		return nil, fmt.Errorf("node: partition %d has no features", h.graph.Meta().Part)
	}
	if limit := mesh.AnswerLimit(ctx); limit > 0 && int64(len(req.IDs))*int64(rb) > int64(limit) {
		return nil, fmt.Errorf("node: pull of %d rows of %d bytes: over the answer limit of %d bytes: %w", len(req.IDs), rb, limit, mesh.ErrTooLarge)
	}
	n := len(req.IDs) * rb
	var rows []byte
	if b := h.rows.get(); cap(*b) >= n {
		rows = (*b)[:n]
	} else {
		rows = make([]byte, n, n+n/8)
	}
	if err := h.src.Gather(ctx, req.IDs, rows); err != nil {
		h.ReleaseRows(rows)
		return nil, err
	}
	return &mesh.PullResponse{DType: h.dtype, RowSize: uint32(rb), Rows: rows}, nil
}

// ReleaseRows takes back the rows of a pull the server has written
// (mesh.RowsReleaser), for the next PullFeatures to fill.
func (h *handler) ReleaseRows(rows []byte) {
	h.rows.put(&rows)
}

// SplitIDs lists the split's owned nodes in ascending global id; each
// split is read once.
func (h *handler) SplitIDs(_ context.Context, req *mesh.SplitRequest) (*mesh.SplitResponse, error) {
	ids, err := h.split(req.Split)
	if err != nil {
		return nil, err
	}
	return &mesh.SplitResponse{IDs: ids}, nil
}

func (h *handler) split(name string) ([]uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ids, ok := h.splits[name]; ok {
		return ids, nil
	}
	switch name {
	case "train", "val", "test":
	default:
		return nil, fmt.Errorf("node: split %q is not one of train, val, test", name)
	}
	mask, err := h.graph.Mask(name)
	if err != nil {
		return nil, err
	}
	start := h.graph.Meta().Start
	ids := make([]uint64, 0, mask.GetCardinality())
	for it := mask.Iterator(); it.HasNext(); {
		ids = append(ids, start+uint64(it.Next()))
	}
	h.splits[name] = ids
	return ids, nil
}

func (h *handler) Labels(ctx context.Context, req *mesh.LabelRequest) (*mesh.LabelResponse, error) {
	k := h.part.Schema().LabelDim
	if k == 0 {
		return nil, fmt.Errorf("node: partition %d has no labels", h.graph.Meta().Part)
	}
	if limit := mesh.AnswerLimit(ctx); limit > 0 && 4*int64(len(req.IDs))*int64(k) > int64(limit) {
		return nil, fmt.Errorf("node: labels of %d ids of %d labels each: over the answer limit of %d bytes: %w", len(req.IDs), k, limit, mesh.ErrTooLarge)
	}
	wide := make([]int64, len(req.IDs)*k)
	if err := h.src.GatherLabels(ctx, req.IDs, wide); err != nil {
		return nil, err
	}
	out := make([]int32, len(wide))
	for i, v := range wide {
		out[i] = int32(v)
	}
	return &mesh.LabelResponse{Dim: uint32(k), Labels: out}, nil
}
