package csr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
)

func testMeta() Meta {
	return Meta{Part: 1, NumParts: 3, Start: 4, End: 9, TotalNodes: 12, NumEdges: 11,
		Direction: Out, FeatDim: 3, FeatType: TypeF32, LabelDim: 1, NumClasses: 4}
}

func testHeader() Header {
	return Header{
		Major: MajorVersion, Minor: MinorVersion, Flags: 0x5, FileSize: 4096 + 256,
		Meta: testMeta(),
		Sections: []Section{
			{Name: SecIndptr, Type: TypeU64, Offset: 4096, Length: 48, CRC: 0xdeadbeef},
			{Name: SecIndices, Type: TypeU64, Offset: 4096 + 64, Length: 88, CRC: 1},
			{Name: "x_future_sec_15", Type: TypeBytes, Offset: 4096 + 192, Length: 0},
			{Name: SecTrain, Type: TypeRoaring, Offset: 4096 + 192, Length: 13},
		},
	}
}

// fixHeaderCRC recomputes the header CRC of an encoded file or header.
func fixHeaderCRC(b []byte) {
	end := fixedLen + int(binary.LittleEndian.Uint16(b[78:]))*entryLen
	binary.LittleEndian.PutUint32(b[end:], crc32.Checksum(b[:end], castagnoli()))
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []Header{
		testHeader(),
		{Major: MajorVersion, FileSize: HeaderSize, Meta: Meta{NumParts: 1}},
		{Major: MajorVersion, Minor: 9, FileSize: 1 << 40, Meta: Meta{Part: 3, NumParts: 4, Start: 10, End: 10, TotalNodes: 10}},
	} {
		b, err := AppendHeader([]byte("prefix"), h)
		if err != nil {
			t.Fatal(err)
		}
		if string(b[:6]) != "prefix" || len(b) != 6+h.EncodedLen() {
			t.Fatalf("AppendHeader wrote %d bytes after the prefix, want %d", len(b)-6, h.EncodedLen())
		}
		got, err := DecodeHeader(b[6:])
		if err != nil {
			t.Fatal(err)
		}
		if got.Major != h.Major || got.Minor != h.Minor || got.Flags != h.Flags || got.FileSize != h.FileSize || got.Meta != h.Meta {
			t.Fatalf("decoded %+v, want %+v", got, h)
		}
		if len(got.Sections) != len(h.Sections) {
			t.Fatalf("decoded %d sections, want %d", len(got.Sections), len(h.Sections))
		}
		for i := range h.Sections {
			if got.Sections[i] != h.Sections[i] {
				t.Fatalf("section %d: decoded %+v, want %+v", i, got.Sections[i], h.Sections[i])
			}
		}
	}
}

func TestDecodeHeaderErrors(t *testing.T) {
	good, err := AppendHeader(nil, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	entry := func(i int) int { return fixedLen + i*entryLen }
	cases := []struct {
		name  string
		edit  func(b []byte) []byte
		crc   bool // recompute the header CRC after edit
		want  string
		sentl error
	}{
		{"empty", func(b []byte) []byte { return nil }, false, `header: bad magic ""`, ErrCorrupt},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, false, `header: bad magic "XNODECSR"`, ErrCorrupt},
		{"short fixed", func(b []byte) []byte { return b[:40] }, false, "header: truncated at 40 bytes", ErrCorrupt},
		{"short table", func(b []byte) []byte { return b[:fixedLen+10] }, false, "header: truncated at 90 bytes, 4 sections need 244", ErrCorrupt},
		{"major", func(b []byte) []byte { le.PutUint16(b[8:], 2); return b }, true, "header: major version 2 (minor 0), this build reads 1", ErrVersion},
		{"major without crc", func(b []byte) []byte { le.PutUint16(b[8:], 7); return b }, false, "header: major version 7", ErrVersion},
		{"crc", func(b []byte) []byte { b[50] ^= 1; return b }, false, "header: checksum mismatch", ErrCorrupt},
		{"too many sections", func(b []byte) []byte { le.PutUint16(b[78:], MaxSections+1); return b }, false, "header: 65 sections, at most 64", ErrCorrupt},
		{"range", func(b []byte) []byte { le.PutUint64(b[40:], 13); return b }, true, "header: node range [4, 13) outside [0, 12)", ErrCorrupt},
		{"parts", func(b []byte) []byte { le.PutUint32(b[24:], 3); return b }, true, "header: part 3 of 3 parts", ErrCorrupt},
		{"direction", func(b []byte) []byte { b[76] = 2; return b }, true, "direction 2", ErrCorrupt},
		{"feat type", func(b []byte) []byte { b[77] = byte(TypeU32); return b }, true, "feature type u32, want f32 or f16", ErrCorrupt},
		{"name not padded", func(b []byte) []byte { copy(b[entry(0):], "abcdefghijklmnop"); return b }, true, `header: section 0: name "abcdefghijklmnop" is not NUL-padded`, ErrCorrupt},
		{"name empty", func(b []byte) []byte { clear(b[entry(0) : entry(0)+16]); return b }, true, `header: section 0: section name "" must be 1 to 15 bytes`, ErrCorrupt},
		{"name space", func(b []byte) []byte { b[entry(0)+1] = ' '; return b }, true, `header: section 0: section name "i dptr" has byte 0x20`, ErrCorrupt},
		{"duplicate", func(b []byte) []byte { copy(b[entry(1):], "indptr\x00\x00"); return b }, true, `section "indptr": appears twice`, ErrCorrupt},
		{"type", func(b []byte) []byte { b[entry(1)+16] = 42; return b }, true, `section "indices": unknown element type 42`, ErrCorrupt},
		{"reserved", func(b []byte) []byte { b[entry(1)+18] = 1; return b }, true, `section "indices": reserved bytes are not zero`, ErrCorrupt},
		{"align", func(b []byte) []byte { le.PutUint64(b[entry(1)+24:], 4096+72); return b }, true, `section "indices": offset 4168 not 64-byte aligned`, ErrCorrupt},
		{"overlap", func(b []byte) []byte { le.PutUint64(b[entry(1)+24:], 4096); return b }, true, `section "indices": offset 4096 overlaps the header or the previous section (ends at 4144)`, ErrCorrupt},
		{"in header", func(b []byte) []byte { le.PutUint64(b[entry(0)+24:], 64); return b }, true, `section "indptr": offset 64 overlaps the header`, ErrCorrupt},
		{"overflow", func(b []byte) []byte { le.PutUint64(b[entry(3)+32:], 1<<63); return b }, true, `section "train": offset 4288 + length 9223372036854775808 overflows`, ErrCorrupt},
		{"elem size", func(b []byte) []byte { le.PutUint64(b[entry(1)+32:], 20); return b }, true, `section "indices": length 20 is not a multiple of the u64 element size 8`, ErrCorrupt},
		{"file size", func(b []byte) []byte { le.PutUint64(b[16:], 4096+200); return b }, true, "header: file size 4296, but sections end at 4301", ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.edit(bytes.Clone(good))
			if c.crc {
				fixHeaderCRC(b)
			}
			_, err := DecodeHeader(b)
			if err == nil {
				t.Fatal("decoded a bad header")
			}
			if !errors.Is(err, c.sentl) || !strings.HasPrefix(err.Error(), "csr: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want %q wrapping %v", err, c.want, c.sentl)
			}
		})
	}
}

func TestAppendHeaderRefuses(t *testing.T) {
	h := testHeader()
	h.Major = 2
	if _, err := AppendHeader(nil, h); !errors.Is(err, ErrVersion) {
		t.Fatalf("major 2: %v, want ErrVersion", err)
	}
	h = testHeader()
	h.Sections[1].Name = "a_name_of_16_chr"
	if _, err := AppendHeader(nil, h); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "must be 1 to 15 bytes") {
		t.Fatalf("long name: %v", err)
	}
	h = testHeader()
	h.Sections = make([]Section, MaxSections+1)
	if _, err := AppendHeader(nil, h); err == nil {
		t.Fatal("encoded 65 sections")
	}
}

func TestMetaValidate(t *testing.T) {
	if err := testMeta().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Meta{Part: 2, NumParts: 2, Start: 5, End: 4, TotalNodes: 3, Direction: 3, FeatType: TypeF32, LabelDim: 2, NumClasses: 3}
	err := bad.Validate()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("%v, want ErrInvalid", err)
	}
	// Every problem is reported, not only the first.
	for _, want := range []string{"part 2 of 2", "node range [5, 4)", "direction 3", "feature type f32 without feature columns", "2 multi-hot label columns but 3 classes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

func FuzzDecodeHeader(f *testing.F) {
	for _, h := range []Header{testHeader(), {Major: MajorVersion, FileSize: HeaderSize, Meta: Meta{NumParts: 1}}} {
		b, err := AppendHeader(nil, h)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrVersion", err)
			}
			return
		}
		enc, err := AppendHeader(nil, h)
		if err != nil {
			t.Fatalf("decoded header does not encode: %v", err)
		}
		if !bytes.Equal(enc, b[:len(enc)]) {
			t.Fatalf("re-encoded header differs:\n got %x\nwant %x", enc, b[:len(enc)])
		}
	})
}
