package sample

import "strconv"

// Kind is what a record on the ring says.
type Kind uint32

const (
	KindBatch       Kind = 1 // a mini-batch
	KindEndOfEpoch  Kind = 2 // the epoch's batches are all out; Index = their count
	KindError       Kind = 3 // the producer failed; the message says why
	KindEndOfStream Kind = 4 // no more records will follow
)

func (k Kind) String() string {
	switch k {
	case KindBatch:
		return "batch"
	case KindEndOfEpoch:
		return "end of epoch"
	case KindError:
		return "error"
	case KindEndOfStream:
		return "end of stream"
	}
	return "kind(" + strconv.FormatUint(uint64(k), 10) + ")"
}

// Batch is one sampled mini-batch in the shape of PyG's NeighborLoader
// output (DESIGN.md §5). Positions in Row and Col index NID.
type Batch struct {
	Epoch, Index uint64 // from the BatchKey
	BatchSize    int    // seeds: NID[:BatchSize], rows of Y
	Schema       Schema // x and y shape

	NID             []uint64 // seeds, then nodes new at hop 1, hop 2, …
	Row, Col        []int64  // edge_index: Row = neighbour, Col = node it was sampled for
	NumSampledNodes []int64  // per hop, seeds first: hops+1 entries summing to len(NID)
	NumSampledEdges []int64  // per hop: hops entries summing to len(Row)
	X               []byte   // len(NID) feature rows of Schema.RowBytes() bytes, or empty
	Y               []int64  // BatchSize × Schema.LabelDim labels, -1 = missing

	// Link batches only (Sampler.SampleLink), empty otherwise: the P node
	// pairs to score, as positions in NID (all P sources, then all P
	// destinations: edge_label_index of shape (2, P)), and their labels
	// (1 for a seed edge, 0 for a negative).
	EdgeLabelIndex []int64
	EdgeLabel      []float32
}

// Pairs is the number of node pairs of a link batch (0 otherwise).
func (b *Batch) Pairs() int { return len(b.EdgeLabel) }

// Hops is the number of hops sampled.
func (b *Batch) Hops() int { return len(b.NumSampledEdges) }

// NumNodes is len(NID).
func (b *Batch) NumNodes() int { return len(b.NID) }

// NumEdges is the number of sampled edges.
func (b *Batch) NumEdges() int { return len(b.Row) }

// reset empties b for the batch of key, keeping every buffer.
func (b *Batch) reset(key BatchKey, schema Schema, hops int) {
	b.Epoch, b.Index = key.Epoch, key.Batch
	b.Schema = schema
	b.BatchSize = 0
	b.NID = b.NID[:0]
	b.Row = b.Row[:0]
	b.Col = b.Col[:0]
	b.NumSampledNodes = b.NumSampledNodes[:0]
	b.NumSampledEdges = b.NumSampledEdges[:0]
	b.X = b.X[:0]
	b.Y = b.Y[:0]
	b.EdgeLabelIndex = b.EdgeLabelIndex[:0]
	b.EdgeLabel = b.EdgeLabel[:0]
	if cap(b.NumSampledEdges) < hops {
		b.NumSampledNodes = make([]int64, 0, hops+1)
		b.NumSampledEdges = make([]int64, 0, hops)
	}
}

// Header is the record header that encodes b.
func (b *Batch) Header() Header {
	return Header{
		Kind:      KindBatch,
		Epoch:     b.Epoch,
		Index:     b.Index,
		BatchSize: uint64(b.BatchSize),
		NumNodes:  uint64(len(b.NID)),
		NumEdges:  uint64(len(b.Row)),
		Hops:      uint32(len(b.NumSampledEdges)),
		FeatDim:   uint32(b.Schema.FeatDim),
		XType:     b.Schema.XType,
		LabelDim:  uint32(b.Schema.LabelDim),
		Pairs:     uint64(len(b.EdgeLabel)),
	}
}
