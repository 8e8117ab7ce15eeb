package kv

import (
	"fmt"
	"math"
	"slices"
)

// Decoders check every length against the bytes left before they
// allocate, refuse trailing bytes, and never panic: every message they
// accept re-encodes to the same bytes. They reuse the slices of the
// message they decode into.

// reader walks one message; the first failure sticks.
type reader struct {
	b    []byte
	off  int
	kind Kind
	err  error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("kv: decode %s: at byte %d: %s: %w", r.kind, r.off, fmt.Sprintf(format, args...), ErrMalformed)
	}
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > r.left() {
		r.fail("%s needs %d bytes, %d left", what, n, r.left())
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) u16(what string) uint16 {
	if p := r.take(2, what); p != nil {
		return le.Uint16(p)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if p := r.take(4, what); p != nil {
		return le.Uint32(p)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if p := r.take(8, what); p != nil {
		return le.Uint64(p)
	}
	return 0
}

func (r *reader) name() string {
	p := r.take(1, "name length")
	if p == nil {
		return ""
	}
	b := r.take(int(p[0]), "name")
	if b == nil {
		return ""
	}
	if !validName(string(b)) {
		r.fail("table name %q is not valid", b)
		return ""
	}
	return string(b)
}

// u64s reads n ids into dst[:0].
func (r *reader) u64s(n uint32, dst []uint64, what string) []uint64 {
	if r.err != nil {
		return dst[:0]
	}
	if uint64(n)*8 > uint64(r.left()) {
		r.fail("%d %s need %d bytes, %d left", n, what, uint64(n)*8, r.left())
		return dst[:0]
	}
	p := r.take(int(n)*8, what)
	dst = slices.Grow(dst[:0], int(n))[:n]
	for i := range dst {
		dst[i] = le.Uint64(p[8*i:])
	}
	return dst
}

// f32s reads n float32 values into dst[:0].
func (r *reader) f32s(n uint64, dst []float32, what string) []float32 {
	if r.err != nil {
		return dst[:0]
	}
	if n > uint64(r.left())/4 {
		r.fail("%d %s need %d bytes, %d left", n, what, n*4, r.left())
		return dst[:0]
	}
	p := r.take(int(n)*4, what)
	dst = slices.Grow(dst[:0], int(n))[:n]
	for i := range dst {
		dst[i] = math.Float32frombits(le.Uint32(p[4*i:]))
	}
	return dst
}

// start checks the header of a message of kind k.
func start(b []byte, k Kind) *reader {
	r := &reader{b: b, kind: k}
	p := r.take(2, "header")
	switch {
	case p == nil:
	case Kind(p[0]) != k:
		r.fail("kind %s", Kind(p[0]))
	case p[1] != WireVersion:
		r.fail("wire version %d, this build speaks %d", p[1], WireVersion)
	}
	return r
}

func (r *reader) end() error {
	if r.err == nil && r.left() != 0 {
		r.fail("%d trailing bytes", r.left())
	}
	return r.err
}

// PeekKind is the kind of an encoded message, checking only its header.
func PeekKind(b []byte) (Kind, error) {
	if len(b) < 2 {
		return 0, fmt.Errorf("kv: decode: %d bytes, shorter than a header: %w", len(b), ErrMalformed)
	}
	if b[1] != WireVersion {
		return 0, fmt.Errorf("kv: decode %s: wire version %d, this build speaks %d: %w", Kind(b[0]), b[1], WireVersion, ErrMalformed)
	}
	return Kind(b[0]), nil
}

// DecodePullRequest decodes b into m.
func DecodePullRequest(b []byte, m *PullRequest) error {
	r := start(b, KindPullRequest)
	m.Table = r.name()
	m.MinVersion = r.u64("min version")
	m.IDs = r.u64s(r.u32("id count"), m.IDs, "ids")
	return r.end()
}

// DecodePullResponse decodes b into m.
func DecodePullResponse(b []byte, m *PullResponse) error {
	r := start(b, KindPullResponse)
	m.Version = r.u64("version")
	m.Dim = r.u32("dim")
	n := r.u32("row count")
	if n > 0 && m.Dim == 0 {
		r.fail("%d rows of dim 0", n)
	}
	m.Rows = r.f32s(uint64(n)*uint64(m.Dim), m.Rows, "row values")
	return r.end()
}

// DecodePushRequest decodes b into m.
func DecodePushRequest(b []byte, m *PushRequest) error {
	r := start(b, KindPushRequest)
	m.Table = r.name()
	m.Dim = r.u32("dim")
	n := r.u32("id count")
	if n > 0 && m.Dim == 0 {
		r.fail("%d ids of dim 0", n)
	}
	m.IDs = r.u64s(n, m.IDs, "ids")
	m.Grads = r.f32s(uint64(n)*uint64(m.Dim), m.Grads, "gradient values")
	return r.end()
}

// DecodePushSyncRequest decodes b into m.
func DecodePushSyncRequest(b []byte, m *PushSyncRequest) error {
	r := start(b, KindPushSyncRequest)
	m.Table = r.name()
	m.Step = r.u64("step")
	m.Trainer = r.u32("trainer")
	m.World = r.u32("world")
	m.Grads = r.f32s(uint64(r.u32("gradient count")), m.Grads, "gradient values")
	m.Session = r.session()
	return r.end()
}

// DecodeLeaveRequest decodes b into m.
func DecodeLeaveRequest(b []byte, m *LeaveRequest) error {
	r := start(b, KindLeaveRequest)
	m.Trainer = r.u32("trainer")
	m.Table, m.Session, m.Done = "", 0, false
	if r.err == nil && r.left() > 0 {
		m.Table = r.name()
		m.Session = r.session()
	}
	if r.err == nil && m.Session != 0 && r.left() > 0 {
		// Only 1 re-encodes to the same bytes.
		if p := r.take(1, "done"); p != nil && p[0] != 1 {
			r.fail("done byte %d (want 1, or no byte)", p[0])
		}
		m.Done = r.err == nil
	}
	return r.end()
}

// session reads the optional session that ends a message: none when no
// byte is left; 8 bytes, not all zero, otherwise (an explicit 0 would not
// re-encode to the same bytes).
func (r *reader) session() uint64 {
	if r.err != nil || r.left() == 0 {
		return 0
	}
	s := r.u64("session")
	if r.err == nil && s == 0 {
		r.fail("session 0 (a message without a session has no session bytes)")
	}
	return s
}

// DecodeAck decodes b into m.
func DecodeAck(b []byte, m *Ack) error {
	r := start(b, KindAck)
	m.Version = r.u64("version")
	return r.end()
}

// DecodeErrorMsg decodes b into m.
func DecodeErrorMsg(b []byte, m *ErrorMsg) error {
	r := start(b, KindError)
	m.Code = r.u16("code")
	n := r.u16("text length")
	m.Text = string(r.take(int(n), "text"))
	return r.end()
}
