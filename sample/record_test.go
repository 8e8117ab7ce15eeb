package sample

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
)

// sampleBatches are batches of several shapes, sampled from random graphs.
func sampleBatches(t testing.TB) []*Batch {
	var out []*Batch
	for i, schema := range []Schema{
		{FeatDim: 5, XType: F32, LabelDim: 1},
		{FeatDim: 3, XType: F16, LabelDim: 4},
		{FeatDim: 0, LabelDim: 0},
		{FeatDim: 1, XType: F32},
	} {
		g := randGraph(uint64(i), 120, 900, false, schema)
		whole := g.whole(t)
		s := newSampler(t, whole, whole, []int{4, 3, 2}[:1+i%3], false)
		rec := record(t, s, BatchKey{Seed: 1, Epoch: uint64(i), Batch: uint64(10 * i)}, []uint64{1, 2, 50, 119})
		v, err := Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		b := v.Batch()
		out = append(out, &b)
	}
	return out
}

func equalBatch(a, b *Batch) bool {
	return a.Epoch == b.Epoch && a.Index == b.Index && a.BatchSize == b.BatchSize && a.Schema == b.Schema &&
		slices.Equal(a.NID, b.NID) && slices.Equal(a.Row, b.Row) && slices.Equal(a.Col, b.Col) &&
		slices.Equal(a.NumSampledNodes, b.NumSampledNodes) && slices.Equal(a.NumSampledEdges, b.NumSampledEdges) &&
		bytes.Equal(a.X, b.X) && slices.Equal(a.Y, b.Y)
}

func TestRecordRoundTrip(t *testing.T) {
	ctx := context.Background()
	for i, b := range sampleBatches(t) {
		size, err := EncodedSize(b)
		if err != nil {
			t.Fatal(err)
		}
		if size%Align != 0 {
			t.Fatalf("batch %d: size %d not a multiple of %d", i, size, Align)
		}
		rec := aligned(size + 128)
		for j := range rec {
			rec[j] = 0xAA // used ring memory
		}
		if n, err := Encode(rec, b); err != nil || n != size {
			t.Fatalf("batch %d: Encode = %d, %v; want %d", i, n, err, size)
		}
		v, err := Decode(rec[:size])
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if got := v.Batch(); !equalBatch(&got, b) {
			t.Fatalf("batch %d: decode(encode(b)) != b", i)
		}
		if err := v.CheckEdges(); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		for s, span := range v.Sections {
			if span.Off%Align != 0 {
				t.Fatalf("batch %d: section %d at %d", i, s, span.Off)
			}
		}
		if b.Schema.XType == F32 && len(v.XF32())*4 != len(b.X) {
			t.Fatalf("batch %d: XF32 has %d values for %d bytes", i, len(v.XF32()), len(b.X))
		}
		// EncodeGather writes the same bytes, x straight from the source.
		rec2 := aligned(size)
		fs := sliceSource{nid: b.NID, x: b.X, rowBytes: b.Schema.RowBytes()}
		if n, err := EncodeGather(ctx, rec2, b, fs); err != nil || n != size || !bytes.Equal(rec2, rec[:size]) {
			t.Fatalf("batch %d: EncodeGather = %d, %v, equal %v", i, n, err, bytes.Equal(rec2, rec[:size]))
		}
		// Too small a buffer is refused, naming the sizes.
		if _, err := Encode(rec[:size-1], b); !errors.Is(err, ErrInvalid) {
			t.Fatalf("batch %d: short dst: err = %v", i, err)
		}
		if allocs := testing.AllocsPerRun(10, func() { Encode(rec, b) }); allocs != 0 {
			t.Fatalf("Encode allocates %v times", allocs)
		}
	}
}

// sliceSource serves rows already gathered, for ids in the order given.
type sliceSource struct {
	nid      []uint64
	x        []byte
	rowBytes int
}

func (s sliceSource) Gather(_ context.Context, ids []uint64, dst []byte) error {
	for i, id := range ids {
		j := slices.Index(s.nid, id)
		copy(dst[i*s.rowBytes:], s.x[j*s.rowBytes:(j+1)*s.rowBytes])
	}
	return nil
}

func TestControlRecords(t *testing.T) {
	long := strings.Repeat("x", 20000)
	for _, tc := range []struct {
		kind  Kind
		msg   string
		index uint64
		want  string // the message decoded
	}{
		{KindEndOfEpoch, "", 17, ""},
		{KindError, "sample: batch 3: node 9 not owned", 3, "sample: batch 3: node 9 not owned"},
		{KindEndOfStream, "", 0, ""},
		// ControlSize reserves what EncodeControl writes: a message cut
		// to MaxMessage, not the whole message.
		{KindError, long[:MaxMessage], 1, long[:MaxMessage]},
		{KindError, long[:MaxMessage+1], 1, long[:MaxMessage]},
		{KindError, long, 1, long[:MaxMessage]},
		// The cut falls before a character, not inside it: the message
		// stays UTF-8.
		{KindError, long[:MaxMessage-1] + "é and more", 1, long[:MaxMessage-1]},
	} {
		rec := aligned(ControlSize(tc.msg))
		n, err := EncodeControl(rec, tc.kind, 5, tc.index, tc.msg)
		if err != nil || n != len(rec) {
			t.Fatalf("%v, message of %d bytes: EncodeControl = %d, %v; ControlSize %d", tc.kind, len(tc.msg), n, err, len(rec))
		}
		v, err := Decode(rec)
		if err != nil {
			t.Fatalf("%v: %v", tc.kind, err)
		}
		if v.Header.Kind != tc.kind || v.Header.Epoch != 5 || v.Header.Index != tc.index || string(v.Message) != tc.want {
			t.Fatalf("%v: decoded %+v message of %d bytes, want %d", tc.kind, v.Header, len(v.Message), len(tc.want))
		}
	}
	if _, err := EncodeControl(aligned(512), KindBatch, 0, 0, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("control record of kind batch: err = %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	b := sampleBatches(t)[0]
	size, _ := EncodedSize(b)
	good := aligned(size)
	Encode(good, b)
	le := binary.LittleEndian
	for _, tc := range []struct {
		name   string
		mutate func(r []byte) []byte
		want   error
	}{
		{"short", func(r []byte) []byte { return r[:100] }, ErrCorrupt},
		{"truncated", func(r []byte) []byte { return r[:size-64] }, ErrCorrupt},
		{"crc", func(r []byte) []byte { r[40]++; return r }, ErrCorrupt},
		{"magic", func(r []byte) []byte { r[0] = 'X'; return reCRC(r) }, ErrCorrupt},
		{"major", func(r []byte) []byte { le.PutUint16(r[offMajor:], 2); return reCRC(r) }, ErrVersion},
		{"kind", func(r []byte) []byte { le.PutUint32(r[offKind:], 9); return reCRC(r) }, ErrCorrupt},
		{"nodes", func(r []byte) []byte { le.PutUint64(r[offNumNodes:], 1<<50); return reCRC(r) }, ErrCorrupt},
		{"edges", func(r []byte) []byte { le.PutUint64(r[offNumEdges:], 3); return reCRC(r) }, ErrCorrupt},
		{"misaligned", func(r []byte) []byte { le.PutUint64(r[offTable:], HeaderSize+8); return reCRC(r) }, ErrCorrupt},
		{"overlap", func(r []byte) []byte { le.PutUint64(r[offTable+16:], HeaderSize); return reCRC(r) }, ErrCorrupt},
		{"counts", func(r []byte) []byte {
			o := le.Uint64(r[offTable+16*SecNumSampledEdges:])
			le.PutUint64(r[o:], le.Uint64(r[o:])+1)
			return r
		}, ErrCorrupt},
		{"seeds", func(r []byte) []byte { le.PutUint64(r[offBatchSize:], 0); return reCRC(r) }, ErrCorrupt},
	} {
		r := tc.mutate(bytes.Clone(good))
		if _, err := Decode(r); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := Decode(good); err != nil {
		t.Fatal(err)
	}
}

func reCRC(r []byte) []byte {
	binary.LittleEndian.PutUint32(r[offCRC:], crc32.Checksum(r[:offCRC], castagnoli()))
	return r
}
