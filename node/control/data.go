package control

import (
	"encoding/binary"
	"fmt"
)

// Node-data frames: a trainer reads the features and labels of any node
// of the partition set by global id through its own node (DGL's
// DistGraph.ndata, GLT's DistFeature), which answers from its partition,
// its cache section and its peers. Their bodies start with a kind byte in
// [KindFeatRequest, KindDataError], never '{' nor a kv kind, and a
// version byte (docs/control.md, "Node data"). All integers are
// little-endian.
const (
	// FeatRequest and LabelRequest: n u32, ids n×u64.
	KindFeatRequest  byte = 0x20
	KindLabelRequest byte = 0x21
	// FeatResponse: dtype u8 (DTypeF32, DTypeF16), 0 u8, 0 u16, dim u32,
	// n u32, rows n×dim values (4 or 2 bytes each), in the order of ids.
	KindFeatResponse byte = 0x22
	// LabelResponse: 0 u16, dim u32, n u32, labels n×dim×i32 (-1 =
	// missing), in the order of ids.
	KindLabelResponse byte = 0x23
	// DataError: len u16, text (UTF-8).
	KindDataError byte = 0x24

	// DataVersion is the version byte of node-data frames.
	DataVersion byte = 1
)

// Feature dtypes of a FeatResponse.
const (
	DTypeF32 byte = 1
	DTypeF16 byte = 2
)

// IsData reports whether a frame body is a node-data message.
func IsData(body []byte) bool {
	return len(body) > 0 && body[0] >= KindFeatRequest && body[0] <= KindDataError
}

// DataRequest is a FeatRequest or LabelRequest: Kind and the ids asked for.
type DataRequest struct {
	Kind byte
	IDs  []uint64
}

// AppendDataRequest appends r's frame body to b.
func AppendDataRequest(b []byte, r *DataRequest) []byte {
	b = append(b, r.Kind, DataVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.IDs)))
	for _, id := range r.IDs {
		b = binary.LittleEndian.AppendUint64(b, id)
	}
	return b
}

// DecodeDataRequest decodes a FeatRequest or LabelRequest body into r,
// reusing r.IDs' capacity.
func DecodeDataRequest(body []byte, r *DataRequest) error {
	d, err := dataHead(body, "request", KindFeatRequest, KindLabelRequest)
	if err != nil {
		return err
	}
	r.Kind = body[0]
	n, err := d.count("ids", 8)
	if err != nil {
		return err
	}
	r.IDs = r.IDs[:0]
	for i := range n {
		r.IDs = append(r.IDs, binary.LittleEndian.Uint64(d.b[8*i:]))
	}
	return d.end(8 * n)
}

// FeatResponse is the answer to a FeatRequest: Dim values of DType per id.
type FeatResponse struct {
	DType byte
	Dim   uint32
	N     uint32
	Rows  []byte // N × Dim values; aliases the decoded body
}

// ValueBytes is the size of one value of dtype t, 0 for an unknown one.
func ValueBytes(t byte) int {
	switch t {
	case DTypeF32:
		return 4
	case DTypeF16:
		return 2
	}
	return 0
}

// AppendFeatResponseHead appends a FeatResponse's body up to its rows,
// which the caller appends (n × dim values of dtype).
func AppendFeatResponseHead(b []byte, dtype byte, dim, n uint32) []byte {
	b = append(b, KindFeatResponse, DataVersion, dtype, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, dim)
	return binary.LittleEndian.AppendUint32(b, n)
}

// FeatResponseHead is the size of a FeatResponse body before its rows.
const FeatResponseHead = 14

// DecodeFeatResponse decodes a FeatResponse body into r; r.Rows aliases
// body.
func DecodeFeatResponse(body []byte, r *FeatResponse) error {
	d, err := dataHead(body, "FeatResponse", KindFeatResponse, KindFeatResponse)
	if err != nil {
		return err
	}
	if len(d.b) < FeatResponseHead-2 {
		return d.fail("head", "%d bytes, want %d", len(d.b), FeatResponseHead-2)
	}
	r.DType = d.b[0]
	if d.b[1] != 0 || d.b[2] != 0 || d.b[3] != 0 {
		return d.fail("reserved", "not zero")
	}
	size := ValueBytes(r.DType)
	if size == 0 {
		return d.fail("dtype", "unknown dtype %d", r.DType)
	}
	r.Dim = binary.LittleEndian.Uint32(d.b[4:])
	r.N = binary.LittleEndian.Uint32(d.b[8:])
	d.b = d.b[12:]
	if values := uint64(r.N) * uint64(r.Dim); values > uint64(len(d.b)) || values*uint64(size) != uint64(len(d.b)) {
		return d.fail("rows", "%d bytes for %d rows of %d values of %d bytes", len(d.b), r.N, r.Dim, size)
	}
	r.Rows = d.b
	return nil
}

// LabelResponse is the answer to a LabelRequest: Dim labels per id.
type LabelResponse struct {
	Dim    uint32
	Labels []int32 // N × Dim, -1 = missing
}

// AppendLabelResponse appends r's body (n = len(Labels) / Dim ids) to b.
func AppendLabelResponse(b []byte, r *LabelResponse) []byte {
	n := 0
	if r.Dim > 0 {
		n = len(r.Labels) / int(r.Dim)
	}
	b = append(b, KindLabelResponse, DataVersion, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, r.Dim)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	for _, y := range r.Labels {
		b = binary.LittleEndian.AppendUint32(b, uint32(y))
	}
	return b
}

// DecodeLabelResponse decodes a LabelResponse body into r, reusing
// r.Labels' capacity.
func DecodeLabelResponse(body []byte, r *LabelResponse) error {
	d, err := dataHead(body, "LabelResponse", KindLabelResponse, KindLabelResponse)
	if err != nil {
		return err
	}
	if len(d.b) < 10 {
		return d.fail("head", "%d bytes, want 10", len(d.b))
	}
	if d.b[0] != 0 || d.b[1] != 0 {
		return d.fail("reserved", "not zero")
	}
	r.Dim = binary.LittleEndian.Uint32(d.b[2:])
	n := binary.LittleEndian.Uint32(d.b[6:])
	if r.Dim == 0 {
		return d.fail("dim", "0")
	}
	d.b = d.b[10:]
	if values := uint64(n) * uint64(r.Dim); values > uint64(len(d.b)) || values*4 != uint64(len(d.b)) {
		return d.fail("labels", "%d bytes for %d ids of %d labels", len(d.b), n, r.Dim)
	}
	r.Labels = r.Labels[:0]
	for i := 0; i < len(d.b); i += 4 {
		r.Labels = append(r.Labels, int32(binary.LittleEndian.Uint32(d.b[i:])))
	}
	return nil
}

// AppendDataError appends a DataError body saying text (cut to 64 KiB).
func AppendDataError(b []byte, text string) []byte {
	if len(text) > 0xffff {
		text = text[:0xffff]
	}
	b = append(b, KindDataError, DataVersion)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(text)))
	return append(b, text...)
}

// DecodeDataError decodes a DataError body's text.
func DecodeDataError(body []byte) (string, error) {
	d, err := dataHead(body, "DataError", KindDataError, KindDataError)
	if err != nil {
		return "", err
	}
	if len(d.b) < 2 {
		return "", d.fail("len", "missing")
	}
	n := int(binary.LittleEndian.Uint16(d.b))
	if len(d.b)-2 != n {
		return "", d.fail("text", "%d bytes, header says %d", len(d.b)-2, n)
	}
	return string(d.b[2:]), nil
}

// dataDecoder is a node-data body past its kind and version bytes.
type dataDecoder struct {
	msg string
	b   []byte
}

// dataHead checks the kind (lo..hi) and version of body.
func dataHead(body []byte, msg string, lo, hi byte) (*dataDecoder, error) {
	d := &dataDecoder{msg: msg}
	switch {
	case len(body) < 2:
		return nil, d.fail("head", "%d bytes", len(body))
	case body[0] < lo || body[0] > hi:
		return nil, d.fail("kind", "%#x", body[0])
	case body[1] != DataVersion:
		return nil, d.fail("version", "%d, this build speaks %d", body[1], DataVersion)
	}
	d.b = body[2:]
	return d, nil
}

func (d *dataDecoder) fail(field, format string, a ...any) error {
	return fmt.Errorf("control: node data %s: %s: %s: %w", d.msg, field, fmt.Sprintf(format, a...), ErrProtocol)
}

// count reads a u32 count of size-byte elements that must follow.
func (d *dataDecoder) count(field string, size int) (int, error) {
	if len(d.b) < 4 {
		return 0, d.fail(field, "no count")
	}
	n := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	if uint64(n)*uint64(size) > uint64(len(d.b)) {
		return 0, d.fail(field, "count %d of %d-byte elements exceeds the %d bytes left", n, size, len(d.b))
	}
	return int(n), nil
}

// end checks that exactly n bytes followed.
func (d *dataDecoder) end(n int) error {
	if len(d.b) != n {
		return d.fail("end", "%d trailing bytes", len(d.b)-n)
	}
	return nil
}
