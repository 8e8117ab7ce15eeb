package csr

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps one of them,
// or the operating system's error for a failed system call, and names the
// file and, where it applies, the section.
var (
	// ErrCorrupt: the bytes on disk are not a valid partition file.
	ErrCorrupt = errors.New("corrupt file")
	// ErrVersion: the file's major version is not one this build reads.
	ErrVersion = errors.New("unsupported format version")
	// ErrNoSection: a section that was asked for is absent.
	ErrNoSection = errors.New("no such section")
	// ErrInvalid: a caller passed something the format cannot hold (an
	// invalid Meta, a bad section name, a misused Writer).
	ErrInvalid = errors.New("invalid argument")
	// ErrChanged: the mapped file was truncated or rewritten in place
	// after Open checked it (Graph.Read).
	ErrChanged = errors.New("file changed while mapped")
)

// Format version written by this package. Readers accept any minor version
// of MajorVersion and refuse every other major version.
const (
	MajorVersion = 1
	MinorVersion = 0
)

// Alignment of every section's offset within the file.
const Alignment = 64

// ElemType is the element type of a section.
type ElemType uint8

const (
	TypeBytes   ElemType = 1 // opaque bytes
	TypeU8      ElemType = 2
	TypeI32     ElemType = 3
	TypeU32     ElemType = 4
	TypeI64     ElemType = 5
	TypeU64     ElemType = 6
	TypeF16     ElemType = 7
	TypeF32     ElemType = 8
	TypeRoaring ElemType = 9 // a portable roaring bitmap (RoaringFormatSpec)
)

// Size is the width of one element in bytes; 1 for TypeBytes and TypeRoaring.
func (t ElemType) Size() int {
	switch t {
	case TypeU8, TypeBytes, TypeRoaring:
		return 1
	case TypeF16:
		return 2
	case TypeI32, TypeU32, TypeF32:
		return 4
	case TypeI64, TypeU64:
		return 8
	}
	return 0
}

func (t ElemType) String() string {
	switch t {
	case TypeBytes:
		return "bytes"
	case TypeU8:
		return "u8"
	case TypeI32:
		return "i32"
	case TypeU32:
		return "u32"
	case TypeI64:
		return "i64"
	case TypeU64:
		return "u64"
	case TypeF16:
		return "f16"
	case TypeF32:
		return "f32"
	case TypeRoaring:
		return "roaring"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Names of the sections a partition file may hold (DESIGN.md §4).
const (
	SecIndptr    = "indptr"     // u64, local nodes + 1
	SecIndices   = "indices"    // u64 global ids, each neighbour list sorted
	SecWeights   = "weights"    // f32, one per edge (optional)
	SecEtype     = "etype"      // u32 relation id, one per edge (optional; knowledge graphs)
	SecFeat      = "feat"       // rows of the owned nodes, f32 or f16
	SecLabel     = "label"      // i32, LabelDim per owned node; -1 = missing
	SecTrain     = "train"      // roaring bitmap of local indices
	SecVal       = "val"        // roaring bitmap of local indices
	SecTest      = "test"       // roaring bitmap of local indices
	SecCacheIDs  = "cache_ids"  // u64 global ids of hot nodes owned elsewhere, strictly ascending
	SecCacheFeat = "cache_feat" // their feature rows, same dtype as feat
)

// Direction says which endpoint of an edge owns it: the node that is
// expanded when sampling.
type Direction uint8

const (
	// In: edges are stored with their destination; neighbour lists hold
	// in-neighbours (sources). The default, as in DGL and PyG.
	In Direction = 0
	// Out: edges are stored with their source; lists hold out-neighbours.
	Out Direction = 1
)

func (d Direction) String() string {
	if d == Out {
		return "out"
	}
	return "in"
}

// Meta is the fixed, partition-level part of the header.
type Meta struct {
	Part       uint32    // this partition's index
	NumParts   uint32    // partitions in the set
	Start, End uint64    // owned global id range [Start, End)
	TotalNodes uint64    // nodes in the whole graph
	NumEdges   uint64    // edges stored in this partition
	Direction  Direction // which endpoint owns an edge
	FeatDim    uint32    // feature columns; 0 when there are no features
	FeatType   ElemType  // TypeF32 or TypeF16; 0 when FeatDim == 0
	LabelDim   uint32    // label columns: 1 for a class index, C for multi-hot; 0 = none
	NumClasses uint32    // classes (LabelDim == 1) or label columns
}

// Section is one entry of the section table.
type Section struct {
	Name   string
	Type   ElemType
	Offset uint64 // from the start of the file; a multiple of Alignment
	Length uint64 // in bytes
	CRC    uint32 // CRC-32C (Castagnoli) of the section's bytes
}
