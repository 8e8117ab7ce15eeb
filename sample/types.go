package sample

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps one of them
// (or an error of a FeatureSource, LabelSource or Remote it was handed).
var (
	// ErrInvalid: a caller passed something this package cannot work with:
	// a bad Config or PlanOptions field, duplicate seeds, a buffer of the
	// wrong size.
	ErrInvalid = errors.New("invalid argument")
	// ErrNotOwned: a node was asked of a partition that does not own it, or
	// lies outside the graph.
	ErrNotOwned = errors.New("node not owned")
	// ErrBadResponse: a Remote answered with counts or neighbours that do
	// not fit its request.
	ErrBadResponse = errors.New("bad remote response")
	// ErrCorrupt: bytes handed to Decode are not a valid batch record.
	ErrCorrupt = errors.New("corrupt batch record")
	// ErrVersion: a batch record's major version is not one this build reads.
	ErrVersion = errors.New("unsupported batch record version")
)

// DType is the element type of the feature block x.
type DType uint32

const (
	F32 DType = 0 // IEEE 754 binary32
	F16 DType = 1 // IEEE 754 binary16
)

// Size is the width of one element in bytes, 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case F32:
		return 4
	case F16:
		return 2
	}
	return 0
}

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case F16:
		return "f16"
	}
	return fmt.Sprintf("dtype(%d)", uint32(d))
}

// Schema is the shape of a partition's node data.
type Schema struct {
	FeatDim  int   // feature columns; 0 when there are no features
	XType    DType // element type of a feature row
	LabelDim int   // label columns: 1 for a class index, C for multi-hot; 0 = none
}

// RowBytes is the size of one feature row.
func (s Schema) RowBytes() int { return s.FeatDim * s.XType.Size() }

func (s Schema) validate() error {
	var errs []error
	if s.FeatDim < 0 || s.FeatDim > MaxFeatDim {
		errs = append(errs, fmt.Errorf("feat dim %d outside [0, %d]", s.FeatDim, MaxFeatDim))
	}
	if s.XType.Size() == 0 {
		errs = append(errs, fmt.Errorf("x dtype %v unknown", s.XType))
	}
	if s.LabelDim < 0 || s.LabelDim > MaxLabelDim {
		errs = append(errs, fmt.Errorf("label dim %d outside [0, %d]", s.LabelDim, MaxLabelDim))
	}
	return errors.Join(errs...)
}

// Limits that keep every count of a batch record well inside int and
// uint32 arithmetic.
const (
	MaxHops     = 32
	MaxFeatDim  = 1 << 20
	MaxLabelDim = 1 << 16
)

// Local is one partition's graph as the sampler reads it: the owned global
// id range [Start, End) and, for each owned node (local index = gid −
// Start), its sorted neighbour list in global ids. Implementations must be
// safe for concurrent reads; the mmap'd csr.Graph (through FromCSR), Mem
// and Union are.
type Local interface {
	Start() uint64
	End() uint64
	// Neighbors is the sorted neighbour list of local node v.
	Neighbors(v uint32) []uint64
	// Weights are the edge weights aligned with Neighbors(v), or nil when
	// the graph is unweighted.
	Weights(v uint32) []float32
}

// Partition is a Local that also holds its nodes' features and labels.
type Partition interface {
	Local
	Schema() Schema
	// FeatRow is the raw feature row (Schema().RowBytes() bytes) of local
	// node v, or nil when there are no features.
	FeatRow(v uint32) []byte
	// Labels are the LabelDim labels of local node v (-1 = missing), or nil.
	Labels(v uint32) []int32
}

// Book routes global ids to the partition that owns them. partition.Book
// is the implementation; sample declares only what it needs of it.
type Book interface {
	Parts() int
	NumNodes() uint64
	// Range is the id range [start, end) of partition p.
	Range(p int) (start, end uint64)
	// Owner is the partition owning gid < NumNodes().
	Owner(gid uint64) int
	// Local is gid's owner and its local index there.
	Local(gid uint64) (part int, local uint32)
}

// Remote expands nodes owned by another partition. node/ implements it
// over the mesh; the peer answers by calling SampleNeighbors on its own
// partition, so the answer is the one a local expansion would give.
// Implementations must be safe for concurrent use: a Sampler calls it for
// several peers at once. resp is the caller's, to be filled (Reset first).
type Remote interface {
	SampleNeighbors(ctx context.Context, part int, req *NeighborRequest, resp *NeighborResponse) error
}

// FeatureSource writes the feature rows of ids, in order, into dst
// (len(ids) × RowBytes bytes). node/ composes the local partition, the
// hot-node cache and peer pulls behind it; LocalSource serves a Partition.
type FeatureSource interface {
	Gather(ctx context.Context, ids []uint64, dst []byte) error
}

// LabelSource writes the LabelDim labels of each of ids, in order, into
// dst (len(ids) × LabelDim values; -1 = missing).
type LabelSource interface {
	GatherLabels(ctx context.Context, ids []uint64, dst []int64) error
}
