package node

import (
	"context"
	"testing"

	"graphnode/csr"
	"graphnode/sample"
)

// BenchmarkClusterGather is a sampler's gather of one batch's rows (every
// node of a 2-part set of 1500: half of them pulled from the peer, 100
// float32 features each), prefetch then Gather, over an in-process mesh:
// the common path, one pull per peer.
func BenchmarkClusterGather(b *testing.B) {
	src, ids := gatherBatch(b)
	dst := make([]byte, len(ids)*src.rowBytes)
	ctx := context.Background()
	b.SetBytes(int64(len(dst)))
	b.ReportAllocs()
	for b.Loop() {
		if err := src.prefetch(ctx, ids).Gather(ctx, ids, dst); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClusterGatherLabels is the labels of the same batch.
func BenchmarkClusterGatherLabels(b *testing.B) {
	src, ids := gatherBatch(b)
	dst := make([]int64, len(ids)*src.labelDim)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := src.GatherLabels(ctx, ids, dst); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMeshRemoteSample is one hop's neighbour request of every node
// of the peer's part at fanout 10: one request.
func BenchmarkMeshRemoteSample(b *testing.B) {
	c := startMeshClusterDim(b, 2, 0, csr.TypeF32, 0, 8)
	r := newMeshRemote(c.client(b, 0), c.book)
	lo, hi := c.book.Range(1)
	req := &sample.NeighborRequest{Key: 1, Fanout: 10}
	for v := lo; v < hi; v++ {
		req.Nodes = append(req.Nodes, v)
	}
	var resp sample.NeighborResponse
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := r.SampleNeighbors(ctx, 1, req, &resp); err != nil {
			b.Fatal(err)
		}
	}
}

// gatherBatch is part 0's source of a 2-part set of 1500 nodes with 100
// float32 features each, over an in-process mesh, and a batch of every
// node.
func gatherBatch(b *testing.B) (*clusterSource, []uint64) {
	c := startMeshClusterDim(b, 2, 0, csr.TypeF32, 0, 100)
	src, err := newClusterSource(c.parts_[0], c.book, c.client(b, 0))
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]uint64, c.book.NumNodes())
	for i := range ids {
		ids[i] = uint64(i)
	}
	return src, ids
}
