package sample

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"unicode/utf8"
)

// Layout constants of a batch record (the diagram is in doc.go).
const (
	// Magic opens every record.
	Magic = "GNBR"
	// Major and minor version written by this package. Readers accept any
	// minor version of MajorVersion and refuse every other major version.
	MajorVersion = 1
	MinorVersion = 1
	// HeaderSize is the fixed header; the first section starts at it.
	HeaderSize = 256
	// Align is the alignment of every section offset and of the record
	// length; the ring places records at 64-byte aligned addresses.
	Align = 64
	// MaxMessage bounds the message of an error record.
	MaxMessage = 4096
)

// Header byte offsets.
const (
	offMagic     = 0
	offMajor     = 4
	offMinor     = 6
	offKind      = 8
	offHops      = 12
	offRecordLen = 16
	offEpoch     = 24
	offIndex     = 32
	offBatchSize = 40
	offNumNodes  = 48
	offNumEdges  = 56
	offFeatDim   = 64
	offXType     = 68
	offLabelDim  = 72
	offPairs     = 76 // minor 1; reserved (0) in minor 0
	offTable     = 80 // NumSections × (offset u64, length u64)
	offCRC       = HeaderSize - 4
)

// Sections of a record, in table order.
const (
	SecNID = iota
	SecEdgeIndex
	SecNumSampledNodes
	SecNumSampledEdges
	SecX
	SecY
	SecMessage
	SecEdgeLabelIndex // minor 1: link batches
	SecEdgeLabel
	NumSections
)

// INVARIANT: the section table ends before the CRC.
const _ = uint(offCRC - (offTable + NumSections*16))

// Span is one section's place in a record, in bytes from the record start.
type Span struct{ Off, Len uint64 }

// Header is the fixed part of a record: what it is and how big each part
// is. MsgLen is the message length of an error record.
type Header struct {
	Kind         Kind
	Epoch, Index uint64
	BatchSize    uint64
	NumNodes     uint64
	NumEdges     uint64
	Hops         uint32
	FeatDim      uint32
	XType        DType
	LabelDim     uint32
	Pairs        uint64 // node pairs of a link batch (a uint32 on the wire)
	MsgLen       uint64
}

// lengths are the exact byte lengths of the sections h implies, or false
// when they cannot be a record's. Counts are bounded by limit (≤ 2^40) and
// dims by their maxima first, so no product below can wrap.
func (h *Header) lengths(limit uint64) (l [NumSections]uint64, ok bool) {
	const big = 1 << 56
	if limit > 1<<40 || h.NumNodes > limit || h.NumEdges > limit || h.BatchSize > limit || h.MsgLen > limit || h.Pairs > limit || h.Pairs > 1<<32-1 ||
		h.FeatDim > MaxFeatDim || h.LabelDim > MaxLabelDim || h.Hops > MaxHops || h.XType.Size() == 0 {
		return l, false
	}
	l[SecNID] = 8 * h.NumNodes
	l[SecEdgeIndex] = 16 * h.NumEdges
	if h.Kind == KindBatch {
		l[SecNumSampledNodes] = 8 * (uint64(h.Hops) + 1)
		l[SecNumSampledEdges] = 8 * uint64(h.Hops)
	}
	l[SecX] = h.NumNodes * uint64(h.FeatDim) * uint64(h.XType.Size())
	l[SecY] = 8 * h.BatchSize * uint64(h.LabelDim)
	l[SecMessage] = h.MsgLen
	l[SecEdgeLabelIndex] = 16 * h.Pairs
	l[SecEdgeLabel] = 4 * h.Pairs
	for _, n := range l {
		if n > big {
			return l, false
		}
	}
	return l, true
}

// Layout is where each section of h's record goes: one after the other in
// table order, each at the next multiple of Align, and the record's total
// length, a multiple of Align.
func (h *Header) Layout() (spans [NumSections]Span, size int, err error) {
	l, ok := h.lengths(1 << 40)
	if !ok {
		return spans, 0, fmt.Errorf("sample: record of %d nodes, %d edges, feat dim %d: too large: %w", h.NumNodes, h.NumEdges, h.FeatDim, ErrInvalid)
	}
	off := uint64(HeaderSize)
	for i := range spans {
		spans[i] = Span{Off: off, Len: l[i]}
		off = alignUp(off + l[i])
	}
	return spans, int(off), nil
}

func alignUp(n uint64) uint64 { return (n + Align - 1) &^ (Align - 1) }

// EncodedSize is the number of bytes Encode writes for b: what the caller
// reserves on the ring.
func EncodedSize(b *Batch) (int, error) {
	h := b.Header()
	_, size, err := h.Layout()
	if err != nil {
		// The sizes may be too large because b is inconsistent (an
		// unknown dtype, too many hops): say that instead.
		if cerr := b.check(); cerr != nil {
			return 0, fmt.Errorf("sample: batch %d: %w", b.Index, cerr)
		}
	}
	return size, err
}

// Encode writes b as one record at the start of dst, which must hold
// EncodedSize(b) bytes, and returns that size. b.X must be gathered
// (Sampler.Gather). It never allocates.
func Encode(dst []byte, b *Batch) (int, error) {
	spans, size, err := encodeTopology(dst, b)
	if err != nil {
		return 0, err
	}
	if want := spans[SecX].Len; uint64(len(b.X)) != want {
		return 0, fmt.Errorf("sample: encode batch %d: x is %d bytes, want %d (gathered?): %w", b.Index, len(b.X), want, ErrInvalid)
	}
	copy(dst[spans[SecX].Off:], b.X)
	return size, nil
}

// EncodeGather is Encode with x gathered from fs straight into the
// record, skipping b.X and one copy of the largest section.
func EncodeGather(ctx context.Context, dst []byte, b *Batch, fs FeatureSource) (int, error) {
	spans, size, err := encodeTopology(dst, b)
	if err != nil {
		return 0, err
	}
	if x := spans[SecX]; x.Len > 0 {
		if err := fs.Gather(ctx, b.NID, dst[x.Off:x.Off+x.Len]); err != nil {
			return 0, fmt.Errorf("sample: encode batch %d features: %w", b.Index, err)
		}
	}
	return size, nil
}

// encodeTopology checks b and writes everything but the x section's bytes.
func encodeTopology(dst []byte, b *Batch) ([NumSections]Span, int, error) {
	var spans [NumSections]Span
	if err := b.check(); err != nil {
		return spans, 0, fmt.Errorf("sample: encode batch %d: %w", b.Index, err)
	}
	h := b.Header()
	spans, size, err := h.Layout()
	if err != nil {
		return spans, 0, err
	}
	if len(dst) < size {
		return spans, 0, fmt.Errorf("sample: encode batch %d: record of %d bytes into %d: %w", b.Index, size, len(dst), ErrInvalid)
	}
	rec := dst[:size]
	putHeader(rec, &h, spans, size)
	putU64s(rec[spans[SecNID].Off:], b.NID)
	ei := rec[spans[SecEdgeIndex].Off:]
	putI64s(ei, b.Row)
	putI64s(ei[8*len(b.Row):], b.Col)
	putI64s(rec[spans[SecNumSampledNodes].Off:], b.NumSampledNodes)
	putI64s(rec[spans[SecNumSampledEdges].Off:], b.NumSampledEdges)
	putI64s(rec[spans[SecY].Off:], b.Y)
	putI64s(rec[spans[SecEdgeLabelIndex].Off:], b.EdgeLabelIndex)
	putF32s(rec[spans[SecEdgeLabel].Off:], b.EdgeLabel)
	// Padding after each section is zeroed: the ring hands out used memory
	// and the bytes of a record should depend on the batch alone.
	for i, s := range spans {
		end := uint64(size)
		if i+1 < NumSections {
			end = spans[i+1].Off
		}
		clear(rec[s.Off+s.Len : end])
	}
	return spans, size, nil
}

// check verifies that b's slices agree with each other.
func (b *Batch) check() error {
	n, e, hops := len(b.NID), len(b.Row), len(b.NumSampledEdges)
	switch {
	case len(b.Col) != e:
		return fmt.Errorf("%d rows, %d cols: %w", e, len(b.Col), ErrInvalid)
	case len(b.NumSampledNodes) != hops+1:
		return fmt.Errorf("%d node counts for %d hops: %w", len(b.NumSampledNodes), hops, ErrInvalid)
	case hops < 1 || hops > MaxHops:
		return fmt.Errorf("%d hops, want 1 to %d: %w", hops, MaxHops, ErrInvalid)
	case b.BatchSize < 1 || b.BatchSize > n || int64(b.BatchSize) != b.NumSampledNodes[0]:
		return fmt.Errorf("batch size %d, %d nodes, %d seeds counted: %w", b.BatchSize, n, b.NumSampledNodes[0], ErrInvalid)
	case len(b.Y) != b.BatchSize*b.Schema.LabelDim:
		return fmt.Errorf("%d labels for %d seeds of dim %d: %w", len(b.Y), b.BatchSize, b.Schema.LabelDim, ErrInvalid)
	case len(b.EdgeLabelIndex) != 2*len(b.EdgeLabel):
		return fmt.Errorf("%d edge_label_index entries for %d edge labels: %w", len(b.EdgeLabelIndex), len(b.EdgeLabel), ErrInvalid)
	}
	for i, p := range b.EdgeLabelIndex {
		if p < 0 || p >= int64(n) {
			return fmt.Errorf("edge_label_index entry %d = %d, outside [0, %d): %w", i, p, n, ErrInvalid)
		}
	}
	if err := b.Schema.validate(); err != nil {
		return fmt.Errorf("schema: %w: %w", err, ErrInvalid)
	}
	if err := checkCounts(b.NumSampledNodes, b.NumSampledEdges, uint64(n), uint64(e)); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	return nil
}

// checkCounts verifies that the per-hop counts are non-negative and add
// up. A count past what is left of the total fails at once, so that no
// sum can wrap around 2^64 back to the total.
func checkCounts(nodes, edges []int64, n, e uint64) error {
	var sn, se uint64
	for i, c := range nodes {
		if c < 0 {
			return fmt.Errorf("negative node count %d", c)
		}
		if uint64(c) > n-sn {
			return fmt.Errorf("node counts up to hop %d add up to more than the batch's %d nodes", i, n)
		}
		sn += uint64(c)
	}
	for i, c := range edges {
		if c < 0 {
			return fmt.Errorf("negative edge count %d", c)
		}
		if uint64(c) > e-se {
			return fmt.Errorf("edge counts up to hop %d add up to more than the batch's %d edges", i, e)
		}
		se += uint64(c)
	}
	if sn != n || se != e {
		return fmt.Errorf("counts add up to %d nodes, %d edges; batch has %d, %d", sn, se, n, e)
	}
	return nil
}

// ControlSize is the size of the control record (not KindBatch) that
// EncodeControl writes for msg, which only KindError records hold: what
// the caller reserves on the ring. Like EncodeControl it counts at most
// MaxMessage bytes of msg, so that a long message does not make the
// reservation larger than the record (or than a sub-ring, which would
// lose the error record to ErrTooLarge).
func ControlSize(msg string) int {
	return int(alignUp(HeaderSize + uint64(len(cutMessage(msg)))))
}

// cutMessage is the part of msg an error record carries: at most
// MaxMessage bytes, cut before a character rather than inside one, so
// that the message stays UTF-8 (a reader decodes it as such).
func cutMessage(msg string) string {
	if len(msg) <= MaxMessage {
		return msg
	}
	i := MaxMessage
	for i > MaxMessage-utf8.UTFMax && !utf8.RuneStart(msg[i]) {
		i-- // a character is at most UTFMax bytes; past that, msg is not UTF-8 anyway
	}
	return msg[:i]
}

// EncodeControl writes an end-of-epoch, error or end-of-stream record.
// For KindEndOfEpoch, index is the number of batches the epoch had. The
// message of an error record is cut to MaxMessage bytes (fewer when a
// character straddles the cut).
func EncodeControl(dst []byte, kind Kind, epoch, index uint64, msg string) (int, error) {
	if kind != KindEndOfEpoch && kind != KindError && kind != KindEndOfStream {
		return 0, fmt.Errorf("sample: encode control record of kind %v: %w", kind, ErrInvalid)
	}
	if kind != KindError {
		msg = ""
	}
	msg = cutMessage(msg)
	h := Header{Kind: kind, Epoch: epoch, Index: index, MsgLen: uint64(len(msg))}
	spans, size, err := h.Layout()
	if err != nil {
		return 0, err
	}
	if len(dst) < size {
		return 0, fmt.Errorf("sample: encode %v record of %d bytes into %d: %w", kind, size, len(dst), ErrInvalid)
	}
	rec := dst[:size]
	putHeader(rec, &h, spans, size)
	m := rec[spans[SecMessage].Off:]
	copy(m, msg)
	clear(m[len(msg):])
	return size, nil
}

// putHeader writes the header of h into rec[:HeaderSize], CRC last.
func putHeader(rec []byte, h *Header, spans [NumSections]Span, size int) {
	le := binary.LittleEndian
	hd := rec[:HeaderSize]
	clear(hd)
	copy(hd[offMagic:], Magic)
	le.PutUint16(hd[offMajor:], MajorVersion)
	le.PutUint16(hd[offMinor:], MinorVersion)
	le.PutUint32(hd[offKind:], uint32(h.Kind))
	le.PutUint32(hd[offHops:], h.Hops)
	le.PutUint64(hd[offRecordLen:], uint64(size))
	le.PutUint64(hd[offEpoch:], h.Epoch)
	le.PutUint64(hd[offIndex:], h.Index)
	le.PutUint64(hd[offBatchSize:], h.BatchSize)
	le.PutUint64(hd[offNumNodes:], h.NumNodes)
	le.PutUint64(hd[offNumEdges:], h.NumEdges)
	le.PutUint32(hd[offFeatDim:], h.FeatDim)
	le.PutUint32(hd[offXType:], uint32(h.XType))
	le.PutUint32(hd[offLabelDim:], h.LabelDim)
	le.PutUint32(hd[offPairs:], uint32(h.Pairs))
	for i, s := range spans {
		le.PutUint64(hd[offTable+16*i:], s.Off)
		le.PutUint64(hd[offTable+16*i+8:], s.Len)
	}
	le.PutUint32(hd[offCRC:], crc32.Checksum(hd[:offCRC], castagnoli()))
}

// castagnoli is the CRC-32C table; hash/crc32 caches it and uses the
// SSE4.2 instruction for it.
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

func putU64s(dst []byte, v []uint64) {
	d := dst[:8*len(v)]
	for i, x := range v {
		binary.LittleEndian.PutUint64(d[8*i:], x)
	}
}

func putF32s(dst []byte, v []float32) {
	d := dst[:4*len(v)]
	for i, x := range v {
		binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(x))
	}
}

func putI64s(dst []byte, v []int64) {
	d := dst[:8*len(v)]
	for i, x := range v {
		binary.LittleEndian.PutUint64(d[8*i:], uint64(x))
	}
}
