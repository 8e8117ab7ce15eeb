package mesh

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Type is a message type. The enum is append-only: a number, once used,
// keeps its meaning forever, and retired numbers are never reused.
type Type uint16

const (
	TypeInvalid        Type = 0 // never sent
	TypeHello          Type = 1
	TypeHelloAck       Type = 2
	TypeError          Type = 3
	TypeSampleRequest  Type = 4
	TypeSampleResponse Type = 5
	TypePullRequest    Type = 6
	TypePullResponse   Type = 7
	TypeStatsRequest   Type = 8
	TypeStatsResponse  Type = 9
	// The parameter server (kv): opaque kv messages (wire_kv.go), served
	// when the Handler implements KVHandler. Pulls may be retried, pushes
	// never.
	TypeKVPullRequest  Type = 10
	TypeKVPullResponse Type = 11
	TypeKVPushRequest  Type = 12
	TypeKVPushResponse Type = 13
	// A peer's split ids and seed labels (wire_split.go).
	TypeSplitRequest  Type = 14
	TypeSplitResponse Type = 15
	TypeLabelRequest  Type = 16
	TypeLabelResponse Type = 17
	// The answer to a SampleRequest with Narrow set (wire_msg.go).
	TypeSampleResponseNarrow Type = 18
	// Remote loaders of server-client mode (wire_loader.go), served when
	// the Handler implements LoaderHandler: open one, then stream each of
	// its sub-rings as a sequence of LoaderRecord messages.
	TypeLoaderOpenRequest   Type = 19
	TypeLoaderOpenResponse  Type = 20
	TypeLoaderStreamRequest Type = 21
	TypeLoaderRecord        Type = 22
	// The files of a peer's partition directory (wire_file.go), served
	// when the Handler implements FileHandler.
	TypeFileRequest  Type = 23
	TypeFileResponse Type = 24
)

var typeNames = [...]string{
	"Invalid", "Hello", "HelloAck", "Error", "SampleRequest", "SampleResponse",
	"PullRequest", "PullResponse", "StatsRequest", "StatsResponse",
	"KVPullRequest", "KVPullResponse", "KVPushRequest", "KVPushResponse",
	"SplitRequest", "SplitResponse", "LabelRequest", "LabelResponse",
	"SampleResponseNarrow", "LoaderOpenRequest", "LoaderOpenResponse",
	"LoaderStreamRequest", "LoaderRecord", "FileRequest", "FileResponse",
}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint16(t))
}

// ErrorCode classifies an Error message. Append-only, like Type.
type ErrorCode uint16

const (
	CodeInternal    ErrorCode = 1 // the handler panicked or failed unexpectedly
	CodeMalformed   ErrorCode = 2 // the request did not decode
	CodeTooLarge    ErrorCode = 3 // the request exceeded the server's MaxMessage
	CodeUnsupported ErrorCode = 4 // a type this server does not serve
	CodeRefused     ErrorCode = 5 // the hello did not match (cluster, version, checksum, node)
	CodeHandler     ErrorCode = 6 // the handler returned an error
	CodeTimeout     ErrorCode = 7 // the server's request deadline passed
	CodeClosing     ErrorCode = 8 // the server is shutting down
	CodeNotFound    ErrorCode = 9 // the peer does not hold what was asked for (a file)
)

var codeNames = [...]string{
	"", "internal", "malformed", "too large", "unsupported", "refused",
	"handler", "timeout", "closing", "not found",
}

func (c ErrorCode) String() string {
	if c > 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code %d", uint16(c))
}

// HeaderSize is the size of a message header.
const HeaderSize = 8

// Header precedes every message:
//
//	offset size
//	0      2    type (Type)
//	2      2    flags, none defined: must be zero
//	4      4    payload length in bytes
//
// The payload follows; one message per direction of a stream.
type Header struct {
	Type  Type
	Flags uint16
	Len   uint32
}

// AppendHeader appends h's encoding to b.
func AppendHeader(b []byte, h Header) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(h.Type))
	b = binary.LittleEndian.AppendUint16(b, h.Flags)
	return binary.LittleEndian.AppendUint32(b, h.Len)
}

// DecodeHeader decodes the first HeaderSize bytes of b. A type it does
// not know is not an error here (the server answers it CodeUnsupported);
// type 0 and non-zero flags are.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("mesh: header: %d bytes, want %d: %w", len(b), HeaderSize, ErrMalformed)
	}
	h := Header{
		Type:  Type(binary.LittleEndian.Uint16(b)),
		Flags: binary.LittleEndian.Uint16(b[2:]),
		Len:   binary.LittleEndian.Uint32(b[4:]),
	}
	if h.Type == TypeInvalid {
		return Header{}, fmt.Errorf("mesh: header: type 0: %w", ErrMalformed)
	}
	if h.Flags != 0 {
		return Header{}, fmt.Errorf("mesh: header: %s: unknown flags %#x: %w", h.Type, h.Flags, ErrMalformed)
	}
	return h, nil
}

// msgType is the type in the header at the start of b.
func msgType(b []byte) Type { return Type(binary.LittleEndian.Uint16(b)) }

// beginMessage appends a header of type t with a length to be set by
// endMessage, and returns the offset of the header.
func beginMessage(b []byte, t Type) ([]byte, int) {
	return AppendHeader(b, Header{Type: t}), len(b)
}

// endMessage sets the length of the message begun at start to the bytes
// appended since, plus tail bytes the caller writes after it.
func endMessage(b []byte, start, tail int) ([]byte, error) {
	n := len(b) - start - HeaderSize + tail
	if n > math.MaxUint32 {
		t := msgType(b[start:])
		return b, fmt.Errorf("mesh: %s: payload of %d bytes exceeds the 4 GiB frame limit: %w", t, n, ErrTooLarge)
	}
	binary.LittleEndian.PutUint32(b[start+4:], uint32(n))
	return b, nil
}

// readChunk bounds each allocation of readMessage to data that has
// arrived, so a header that promises 256 MiB costs memory only as the
// bytes come in.
const readChunk = 1 << 20

// readMessage reads one header and its payload from r. A payload longer
// than limit is refused after the header, with ErrTooLarge, and the header
// is returned so the caller can say which message it was.
func readMessage(r io.Reader, limit int) (Header, []byte, error) {
	return readMessageInto(r, limit, nil)
}

// readMessageInto is readMessage reading the payload into buf's memory
// when it is large enough (callers that keep buf between messages of
// similar size allocate nothing). Otherwise it grows a buffer as the
// bytes arrive, doubling, so memory stays within twice what was received
// plus readChunk, whatever the header promises.
func readMessageInto(r io.Reader, limit int, buf []byte) (Header, []byte, error) {
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return Header{}, nil, err
	}
	h, err := DecodeHeader(hb[:])
	if err != nil {
		return Header{}, nil, err
	}
	if uint64(h.Len) > uint64(limit) {
		return h, nil, fmt.Errorf("mesh: %s: payload of %d bytes exceeds the limit of %d: %w", h.Type, h.Len, limit, ErrTooLarge)
	}
	n := int(h.Len)
	buf = buf[:0]
	for len(buf) < n {
		k := min(n-len(buf), readChunk)
		if cap(buf)-len(buf) < k {
			grown := make([]byte, len(buf), min(n, max(2*cap(buf), len(buf)+k)))
			copy(grown, buf)
			buf = grown
		}
		if _, err := io.ReadFull(r, buf[len(buf):len(buf)+k]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return h, nil, fmt.Errorf("mesh: %s: payload: %w", h.Type, err)
		}
		buf = buf[:len(buf)+k]
	}
	return h, buf, nil
}

// decoder reads a payload field by field. The first failure sticks: later
// reads return zero values, and err names the message and field.
type decoder struct {
	msg string
	b   []byte
	err error
}

func (d *decoder) fail(field, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("mesh: %s: %s: %s: %w", d.msg, field, fmt.Sprintf(format, args...), ErrMalformed)
	}
	d.b = nil
}

func (d *decoder) take(field string, n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(field, "need %d bytes, %d left", n, len(d.b))
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8(field string) uint8 {
	if p := d.take(field, 1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16(field string) uint16 {
	if p := d.take(field, 2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32(field string) uint32 {
	if p := d.take(field, 4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if p := d.take(field, 8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// zero consumes n reserved bytes, which must be zero so that every value
// has exactly one encoding.
func (d *decoder) zero(field string, n int) {
	for _, c := range d.take(field, uint64(n)) {
		if c != 0 {
			d.fail(field, "reserved bytes not zero")
			return
		}
	}
}

// str reads a string with a uint16 length prefix.
func (d *decoder) str(field string) string {
	n := d.u16(field)
	return string(d.take(field, uint64(n)))
}

// count reads a uint32 element count and checks, before the caller
// allocates, that count elements of size bytes are left.
func (d *decoder) count(field string, size int) int {
	n := d.u32(field)
	if d.err == nil && uint64(n)*uint64(size) > uint64(len(d.b)) {
		d.fail(field, "count %d of %d-byte elements exceeds the %d bytes left", n, size, len(d.b))
		return 0
	}
	return int(n)
}

// u64s reads a counted array of uint64 into dst[:0].
func (d *decoder) u64s(field string, dst []uint64) []uint64 {
	n := d.count(field, 8)
	p := d.take(field, uint64(n)*8)
	dst = dst[:0]
	if cap(dst) < n {
		dst = make([]uint64, 0, n)
	}
	for i := range n {
		dst = append(dst, binary.LittleEndian.Uint64(p[8*i:]))
	}
	return dst
}

// u32s reads a counted array of uint32 into dst[:0].
func (d *decoder) u32s(field string, dst []uint32) []uint32 {
	n := d.count(field, 4)
	p := d.take(field, uint64(n)*4)
	dst = dst[:0]
	if cap(dst) < n {
		dst = make([]uint32, 0, n)
	}
	for i := range n {
		dst = append(dst, binary.LittleEndian.Uint32(p[4*i:]))
	}
	return dst
}

// u32sAs64 reads a counted array of uint32 into dst[:0], widened.
func (d *decoder) u32sAs64(field string, dst []uint64) []uint64 {
	n := d.count(field, 4)
	p := d.take(field, uint64(n)*4)
	dst = dst[:0]
	if cap(dst) < n {
		dst = make([]uint64, 0, n)
	}
	for i := range n {
		dst = append(dst, uint64(binary.LittleEndian.Uint32(p[4*i:])))
	}
	return dst
}

// end reports the first failure, or trailing bytes.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("end", "%d trailing bytes", len(d.b))
	}
	return d.err
}

func appendStr(b []byte, s string) []byte {
	if len(s) > math.MaxUint16 {
		s = s[:math.MaxUint16]
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendU64s(b []byte, v []uint64) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

// appendU32sOf64 appends v as a counted array of uint32; every value
// must fit (see fitU32).
func appendU32sOf64(b []byte, v []uint64) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

// fitU32 is the first value of v above MaxUint32, and whether none is.
func fitU32(v []uint64) (uint64, bool) {
	for _, x := range v {
		if x > math.MaxUint32 {
			return x, false
		}
	}
	return 0, true
}

func appendU32s(b []byte, v []uint32) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	return b
}
