package csr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
)

// Layout constants of the header (see the diagram in doc.go).
const (
	// Magic opens every partition file.
	Magic = "GNODECSR"
	// HeaderSize is the region reserved for the header at offset 0; the
	// first section starts at or after it.
	HeaderSize = 4096
	// MaxSections bounds the section table.
	MaxSections = 64
	// MaxNameLen is the longest section name; names are NUL-padded to
	// MaxNameLen+1 bytes in the table.
	MaxNameLen = 15

	fixedLen = 80 // magic .. section count
	entryLen = 40 // one section table entry
	nameLen  = MaxNameLen + 1
)

// INVARIANT: the largest header, with its CRC, fits the reserved region.
const _ = uint(HeaderSize - (fixedLen + MaxSections*entryLen + 4))

// Header is the decoded header of a partition file.
type Header struct {
	Major, Minor uint16
	Flags        uint32 // reserved for minor versions; preserved, not interpreted
	FileSize     uint64 // size of the whole file in bytes
	Meta         Meta
	Sections     []Section // in file order: ascending offsets, no overlap
}

// EncodedLen is the number of bytes AppendHeader writes for h: the fixed
// fields, the section table and the CRC. The rest of the reserved region up
// to HeaderSize is zero.
func (h *Header) EncodedLen() int { return fixedLen + len(h.Sections)*entryLen + 4 }

// castagnoli is the CRC-32C table (hardware accelerated by hash/crc32).
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// AppendHeader appends the encoding of h to dst. It refuses any header that
// DecodeHeader would refuse, so every encoded header decodes to itself.
func AppendHeader(dst []byte, h Header) ([]byte, error) {
	if h.Major != MajorVersion {
		return dst, fmt.Errorf("csr: header: major version %d, this build writes %d: %w", h.Major, MajorVersion, ErrVersion)
	}
	if err := h.check(); err != nil {
		return dst, fmt.Errorf("csr: %w", err)
	}
	start := len(dst)
	le := binary.LittleEndian
	dst = append(dst, Magic...)
	dst = le.AppendUint16(dst, h.Major)
	dst = le.AppendUint16(dst, h.Minor)
	dst = le.AppendUint32(dst, h.Flags)
	dst = le.AppendUint64(dst, h.FileSize)
	m := h.Meta
	dst = le.AppendUint32(dst, m.Part)
	dst = le.AppendUint32(dst, m.NumParts)
	dst = le.AppendUint64(dst, m.Start)
	dst = le.AppendUint64(dst, m.End)
	dst = le.AppendUint64(dst, m.TotalNodes)
	dst = le.AppendUint64(dst, m.NumEdges)
	dst = le.AppendUint32(dst, m.FeatDim)
	dst = le.AppendUint32(dst, m.LabelDim)
	dst = le.AppendUint32(dst, m.NumClasses)
	dst = append(dst, byte(m.Direction), byte(m.FeatType))
	dst = le.AppendUint16(dst, uint16(len(h.Sections)))
	for _, s := range h.Sections {
		var name [nameLen]byte
		copy(name[:], s.Name)
		dst = append(dst, name[:]...)
		dst = append(dst, byte(s.Type), 0, 0, 0)
		dst = le.AppendUint32(dst, s.CRC)
		dst = le.AppendUint64(dst, s.Offset)
		dst = le.AppendUint64(dst, s.Length)
	}
	dst = le.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli()))
	return dst, nil
}

// DecodeHeader decodes the header at the start of b. b needs to hold only
// the encoded header (EncodedLen bytes), not the whole reserved region.
// It checks, in this order: magic, major version (ErrVersion), the header
// CRC, the meta fields and the section table (names, element types,
// alignment, order, overlap, FileSize covering every section). Bounds
// against the real file size are the caller's (Open's) business. Errors
// wrap ErrCorrupt or ErrVersion and never panic, whatever b holds.
func DecodeHeader(b []byte) (Header, error) {
	h, err := decodeHeader(b)
	if err != nil {
		return Header{}, fmt.Errorf("csr: %w", err)
	}
	return h, nil
}

// decodeHeader is DecodeHeader with errors that start at "header:" or
// "section ...:", so that Open can put the path in front.
func decodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < len(Magic) || string(b[:len(Magic)]) != Magic {
		return h, fmt.Errorf("header: bad magic %q, want %q: %w", b[:min(len(b), len(Magic))], Magic, ErrCorrupt)
	}
	if len(b) < fixedLen {
		return h, fmt.Errorf("header: truncated at %d bytes: %w", len(b), ErrCorrupt)
	}
	le := binary.LittleEndian
	h.Major = le.Uint16(b[8:])
	h.Minor = le.Uint16(b[10:])
	// The version is checked before the CRC: another major version may
	// place its CRC elsewhere, and "unsupported version" is the true story.
	if h.Major != MajorVersion {
		return h, fmt.Errorf("header: major version %d (minor %d), this build reads %d: %w", h.Major, h.Minor, MajorVersion, ErrVersion)
	}
	n := int(le.Uint16(b[78:]))
	if n > MaxSections {
		return h, fmt.Errorf("header: %d sections, at most %d allowed: %w", n, MaxSections, ErrCorrupt)
	}
	end := fixedLen + n*entryLen
	if len(b) < end+4 {
		return h, fmt.Errorf("header: truncated at %d bytes, %d sections need %d: %w", len(b), n, end+4, ErrCorrupt)
	}
	if got, want := crc32.Checksum(b[:end], castagnoli()), le.Uint32(b[end:]); got != want {
		return h, fmt.Errorf("header: checksum mismatch (stored %08x, computed %08x): %w", want, got, ErrCorrupt)
	}
	h.Flags = le.Uint32(b[12:])
	h.FileSize = le.Uint64(b[16:])
	h.Meta = Meta{
		Part:       le.Uint32(b[24:]),
		NumParts:   le.Uint32(b[28:]),
		Start:      le.Uint64(b[32:]),
		End:        le.Uint64(b[40:]),
		TotalNodes: le.Uint64(b[48:]),
		NumEdges:   le.Uint64(b[56:]),
		FeatDim:    le.Uint32(b[64:]),
		LabelDim:   le.Uint32(b[68:]),
		NumClasses: le.Uint32(b[72:]),
		Direction:  Direction(b[76]),
		FeatType:   ElemType(b[77]),
	}
	h.Sections = make([]Section, n)
	for i := range h.Sections {
		e := b[fixedLen+i*entryLen : fixedLen+(i+1)*entryLen]
		raw := e[:nameLen]
		name, _, _ := bytes.Cut(raw, []byte{0})
		if len(name) == len(raw) || !allZero(raw[len(name):]) {
			return h, fmt.Errorf("header: section %d: name %q is not NUL-padded: %w", i, raw, ErrCorrupt)
		}
		if !allZero(e[nameLen+1 : nameLen+4]) {
			return h, fmt.Errorf("section %q: reserved bytes are not zero: %w", name, ErrCorrupt)
		}
		h.Sections[i] = Section{
			Name:   string(name),
			Type:   ElemType(e[nameLen]),
			CRC:    le.Uint32(e[20:]),
			Offset: le.Uint64(e[24:]),
			Length: le.Uint64(e[32:]),
		}
	}
	if err := h.check(); err != nil {
		return Header{}, err
	}
	return h, nil
}

// check holds the rules shared by the encoder and the decoder.
func (h *Header) check() error {
	if p := h.Meta.problems(); len(p) > 0 {
		return fmt.Errorf("header: %s: %w", strings.Join(p, "; "), ErrCorrupt)
	}
	if len(h.Sections) > MaxSections {
		return fmt.Errorf("header: %d sections, at most %d allowed: %w", len(h.Sections), MaxSections, ErrCorrupt)
	}
	prevEnd := uint64(HeaderSize)
	for i, s := range h.Sections {
		if err := checkName(s.Name); err != nil {
			return fmt.Errorf("header: section %d: %w: %w", i, err, ErrCorrupt)
		}
		for _, t := range h.Sections[:i] {
			if t.Name == s.Name {
				return fmt.Errorf("section %q: appears twice in the table: %w", s.Name, ErrCorrupt)
			}
		}
		size := uint64(s.Type.Size())
		switch {
		case size == 0:
			return fmt.Errorf("section %q: unknown element type %d: %w", s.Name, uint8(s.Type), ErrCorrupt)
		case s.Offset%Alignment != 0:
			return fmt.Errorf("section %q: offset %d not %d-byte aligned: %w", s.Name, s.Offset, Alignment, ErrCorrupt)
		case s.Offset < prevEnd:
			return fmt.Errorf("section %q: offset %d overlaps the header or the previous section (ends at %d): %w", s.Name, s.Offset, prevEnd, ErrCorrupt)
		case s.Offset > math.MaxInt64 || s.Length > math.MaxInt64-s.Offset:
			return fmt.Errorf("section %q: offset %d + length %d overflows: %w", s.Name, s.Offset, s.Length, ErrCorrupt)
		case s.Length%size != 0:
			return fmt.Errorf("section %q: length %d is not a multiple of the %s element size %d: %w", s.Name, s.Length, s.Type, size, ErrCorrupt)
		}
		prevEnd = s.Offset + s.Length
	}
	if h.FileSize < prevEnd {
		return fmt.Errorf("header: file size %d, but sections end at %d: %w", h.FileSize, prevEnd, ErrCorrupt)
	}
	return nil
}

// checkName accepts 1..MaxNameLen printable ASCII bytes without spaces.
func checkName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("section name %q must be 1 to %d bytes", name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("section name %q has byte %#02x, want printable ASCII", name, c)
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Validate reports every problem of m at once, or nil. Create refuses an
// invalid Meta with ErrInvalid; Open refuses a file holding one with
// ErrCorrupt.
func (m Meta) Validate() error {
	if p := m.problems(); len(p) > 0 {
		return fmt.Errorf("csr: meta: %s: %w", strings.Join(p, "; "), ErrInvalid)
	}
	return nil
}

func (m Meta) problems() []string {
	var p []string
	if m.NumParts == 0 || m.Part >= m.NumParts {
		p = append(p, fmt.Sprintf("part %d of %d parts", m.Part, m.NumParts))
	}
	if m.Start > m.End || m.End > m.TotalNodes {
		p = append(p, fmt.Sprintf("node range [%d, %d) outside [0, %d)", m.Start, m.End, m.TotalNodes))
	} else if m.End-m.Start > math.MaxUint32 {
		p = append(p, fmt.Sprintf("%d owned nodes exceed the uint32 local index", m.End-m.Start))
	}
	if m.Direction != In && m.Direction != Out {
		p = append(p, fmt.Sprintf("direction %d, want 0 (in) or 1 (out)", uint8(m.Direction)))
	}
	switch {
	case m.FeatDim == 0 && m.FeatType != 0:
		p = append(p, fmt.Sprintf("feature type %s without feature columns", m.FeatType))
	case m.FeatDim != 0 && m.FeatType != TypeF32 && m.FeatType != TypeF16:
		p = append(p, fmt.Sprintf("feature type %s, want f32 or f16", m.FeatType))
	}
	switch {
	case m.LabelDim == 1 && m.NumClasses == 0:
		p = append(p, "class labels with 0 classes")
	case m.LabelDim > 1 && m.NumClasses != m.LabelDim:
		p = append(p, fmt.Sprintf("%d multi-hot label columns but %d classes", m.LabelDim, m.NumClasses))
	}
	return p
}
