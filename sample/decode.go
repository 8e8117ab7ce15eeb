package sample

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unsafe"
)

// View is a decoded record: its header and typed views of its sections.
// The views alias the record's bytes (no copy); they are valid while those
// bytes are, i.e. until the ring slot is released, and must not be written.
type View struct {
	Header   Header
	Minor    uint16
	Sections [NumSections]Span
	Size     int // record length in bytes

	NID             []uint64 // int64 on the wire; ids are below 2^63
	EdgeIndex       []int64  // 2 × NumEdges: all rows, then all cols
	NumSampledNodes []int64
	NumSampledEdges []int64
	X               []byte // NumNodes × FeatDim elements of XType
	Y               []int64
	Message         []byte // error records only
	// Link batches (minor 1): 2 × Pairs positions (all sources, then all
	// destinations) and Pairs labels.
	EdgeLabelIndex []int64
	EdgeLabel      []float32
}

// Row is edge_index[0]: the neighbour's position in NID, per edge.
func (v *View) Row() []int64 { return v.EdgeIndex[:v.Header.NumEdges] }

// Col is edge_index[1]: the position of the node it was sampled for.
func (v *View) Col() []int64 { return v.EdgeIndex[v.Header.NumEdges:] }

// Batch is the batch the record holds, its slices aliasing the record.
// Re-encoding it gives a record that decodes to the same View contents.
func (v *View) Batch() Batch {
	h := &v.Header
	return Batch{
		Epoch: h.Epoch, Index: h.Index, BatchSize: int(h.BatchSize),
		Schema:          Schema{FeatDim: int(h.FeatDim), XType: h.XType, LabelDim: int(h.LabelDim)},
		NID:             v.NID,
		Row:             v.Row(),
		Col:             v.Col(),
		NumSampledNodes: v.NumSampledNodes,
		NumSampledEdges: v.NumSampledEdges,
		X:               v.X,
		Y:               v.Y,
		EdgeLabelIndex:  v.EdgeLabelIndex,
		EdgeLabel:       v.EdgeLabel,
	}
}

// XF32 is x as float32 when XType is F32, else nil.
func (v *View) XF32() []float32 {
	if v.Header.XType != F32 || len(v.X) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(v.X))), len(v.X)/4)
}

// XF16 is x as raw binary16 values when XType is F16, else nil.
func (v *View) XF16() []uint16 {
	if v.Header.XType != F16 || len(v.X) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(v.X))), len(v.X)/2)
}

// Decode validates rec as one record and returns views of it. It checks
// the magic, the major version, the header CRC, the kind, every count
// against the section lengths, every section against the record size and
// alignment, and that the per-hop counts add up. It does not check that
// edge positions lie below NumNodes (CheckEdges does, in O(E)).
//
// rec must start at an 8-byte aligned address (the ring aligns records to
// 64 bytes; a Go []byte of 8 bytes or more is 8-byte aligned) and the host
// must be little-endian: the views are the record's bytes reinterpreted.
func Decode(rec []byte) (View, error) {
	if len(rec) < HeaderSize {
		return View{}, corrupt("record of %d bytes, header needs %d", len(rec), HeaderSize)
	}
	if got := crc32.Checksum(rec[:offCRC], castagnoli()); got != binary.LittleEndian.Uint32(rec[offCRC:]) {
		return View{}, corrupt("header CRC-32C %08x, stored %08x", got, binary.LittleEndian.Uint32(rec[offCRC:]))
	}
	return decode(rec)
}

// decode is Decode after the CRC; the fuzz target calls it directly so
// that mutations reach the checks behind the CRC.
func decode(rec []byte) (View, error) {
	var v View
	if len(rec) < HeaderSize {
		return v, corrupt("record of %d bytes, header needs %d", len(rec), HeaderSize)
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return v, fmt.Errorf("sample: decode: typed views need a little-endian host: %w", ErrInvalid)
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(rec)))%8 != 0 {
		return v, fmt.Errorf("sample: decode: record not 8-byte aligned: %w", ErrInvalid)
	}
	le := binary.LittleEndian
	if string(rec[offMagic:offMagic+4]) != Magic {
		return v, corrupt("magic %q, want %q", rec[offMagic:offMagic+4], Magic)
	}
	if major := le.Uint16(rec[offMajor:]); major != MajorVersion {
		return v, fmt.Errorf("sample: decode: major version %d, this build reads %d: %w", major, MajorVersion, ErrVersion)
	}
	v.Minor = le.Uint16(rec[offMinor:])
	h := &v.Header
	h.Kind = Kind(le.Uint32(rec[offKind:]))
	h.Hops = le.Uint32(rec[offHops:])
	size := le.Uint64(rec[offRecordLen:])
	h.Epoch = le.Uint64(rec[offEpoch:])
	h.Index = le.Uint64(rec[offIndex:])
	h.BatchSize = le.Uint64(rec[offBatchSize:])
	h.NumNodes = le.Uint64(rec[offNumNodes:])
	h.NumEdges = le.Uint64(rec[offNumEdges:])
	h.FeatDim = le.Uint32(rec[offFeatDim:])
	h.XType = DType(le.Uint32(rec[offXType:]))
	h.LabelDim = le.Uint32(rec[offLabelDim:])
	h.Pairs = uint64(le.Uint32(rec[offPairs:]))
	sections := NumSections
	if v.Minor == 0 {
		// Minor 0 has no link sections: their table entries and the pair
		// count were reserved bytes, zero.
		sections = SecEdgeLabelIndex
		for _, c := range rec[offPairs : offPairs+4] {
			if c != 0 {
				return v, corrupt("minor version 0 with reserved bytes set")
			}
		}
		for _, c := range rec[offTable+16*sections : offTable+16*NumSections] {
			if c != 0 {
				return v, corrupt("minor version 0 with reserved bytes set")
			}
		}
	}
	for i := range sections {
		v.Sections[i] = Span{Off: le.Uint64(rec[offTable+16*i:]), Len: le.Uint64(rec[offTable+16*i+8:])}
	}
	h.MsgLen = v.Sections[SecMessage].Len

	if size < HeaderSize || size%Align != 0 || size > uint64(len(rec)) {
		return v, corrupt("record length %d: want a multiple of %d in [%d, %d]", size, Align, HeaderSize, len(rec))
	}
	v.Size = int(size)
	switch h.Kind {
	case KindBatch:
		if h.Hops == 0 || h.BatchSize == 0 || h.BatchSize > h.NumNodes || h.MsgLen != 0 {
			return v, corrupt("batch with %d hops, %d seeds, %d nodes, %d message bytes", h.Hops, h.BatchSize, h.NumNodes, h.MsgLen)
		}
	case KindEndOfEpoch, KindError, KindEndOfStream:
		if h.Hops|h.FeatDim|h.LabelDim|uint32(h.XType) != 0 || h.BatchSize|h.NumNodes|h.NumEdges|h.Pairs != 0 {
			return v, corrupt("%v record with batch counts", h.Kind)
		}
		if h.Kind != KindError && h.MsgLen != 0 || h.MsgLen > MaxMessage {
			return v, corrupt("%v record with a %d-byte message", h.Kind, h.MsgLen)
		}
	default:
		return v, corrupt("kind %d unknown", uint32(h.Kind))
	}
	want, ok := h.lengths(size)
	if !ok {
		return v, corrupt("counts (%d nodes, %d edges, %d seeds, feat dim %d %v, label dim %d, %d hops) do not fit %d bytes",
			h.NumNodes, h.NumEdges, h.BatchSize, h.FeatDim, h.XType, h.LabelDim, h.Hops, size)
	}
	prev := uint64(HeaderSize)
	for i, s := range v.Sections[:sections] {
		if s.Len != want[i] {
			return v, corrupt("section %d is %d bytes, counts say %d", i, s.Len, want[i])
		}
		if s.Off%Align != 0 || s.Off < prev || s.Off > size || s.Len > size-s.Off {
			return v, corrupt("section %d at [%d, +%d) outside [%d, %d) or misaligned", i, s.Off, s.Len, prev, size)
		}
		prev = s.Off + s.Len
	}
	// The record is aligned, every offset is a multiple of 64 and every
	// length was checked against the counts and the record size above, so
	// each view below lies inside rec and is aligned for its type. rec is
	// plain bytes (the ring's mapping) with no Go pointers in it.
	sec := func(i int) []byte { s := v.Sections[i]; return rec[s.Off : s.Off+s.Len : s.Off+s.Len] }
	v.NID = u64s(sec(SecNID))
	v.EdgeIndex = i64s(sec(SecEdgeIndex))
	v.NumSampledNodes = i64s(sec(SecNumSampledNodes))
	v.NumSampledEdges = i64s(sec(SecNumSampledEdges))
	v.X = sec(SecX)
	v.Y = i64s(sec(SecY))
	v.Message = sec(SecMessage)
	v.EdgeLabelIndex = i64s(sec(SecEdgeLabelIndex))
	v.EdgeLabel = f32s(sec(SecEdgeLabel))
	if h.Kind == KindBatch {
		if uint64(v.NumSampledNodes[0]) != h.BatchSize {
			return v, corrupt("num_sampled_nodes[0] = %d, batch size %d", v.NumSampledNodes[0], h.BatchSize)
		}
		if err := checkCounts(v.NumSampledNodes, v.NumSampledEdges, h.NumNodes, h.NumEdges); err != nil {
			return v, corrupt("%v", err)
		}
		// Pairs are few (a batch's seed edges and their negatives):
		// checked here, unlike the edges (CheckEdges).
		for i, p := range v.EdgeLabelIndex {
			if p < 0 || uint64(p) >= h.NumNodes {
				return v, corrupt("edge_label_index entry %d = %d, outside [0, %d)", i, p, h.NumNodes)
			}
		}
	}
	return v, nil
}

// CheckEdges verifies that every edge position lies in [0, NumNodes)
// (Decode checks edge_label_index's).
func (v *View) CheckEdges() error {
	n := int64(v.Header.NumNodes)
	for i, p := range v.EdgeIndex {
		if p < 0 || p >= n {
			return corrupt("edge_index[%d][%d] = %d, outside [0, %d)", i/int(max(v.Header.NumEdges, 1)), i%int(max(v.Header.NumEdges, 1)), p, n)
		}
	}
	return nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("sample: decode: "+format+": %w", append(args, ErrCorrupt)...)
}

func u64s(b []byte) []uint64 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}

func f32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func i64s(b []byte) []int64 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}
