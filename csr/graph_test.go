package csr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

// fixture is a small partition with every section: part 1 of 3 owns
// global ids [4, 9) of 12.
type fixture struct {
	meta            Meta
	indptr, indices []uint64
	weights         []float32
	etypes          []uint32
	feat            []byte // little-endian rows of FeatType
	labels          []int32
	train, val      *roaring.Bitmap
	test            *roaring.Bitmap
	cacheIDs        []uint64
	cacheFeat       []byte
	portable        bool // write slices as a big-endian host does
}

func newFixture(ft ElemType) fixture {
	m := testMeta()
	m.FeatType = ft
	fx := fixture{
		meta:     m,
		indptr:   []uint64{0, 3, 3, 6, 7, 11},
		indices:  []uint64{0, 3, 5, 4, 4, 11, 1, 2, 7, 8, 10},
		weights:  []float32{0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, -1, float32(math.Inf(1))},
		etypes:   []uint32{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 7},
		labels:   []int32{0, -1, 3, 2, 1},
		train:    roaring.BitmapOf(0, 2),
		val:      roaring.BitmapOf(3),
		test:     roaring.BitmapOf(1, 4),
		cacheIDs: []uint64{0, 11},
	}
	row := func(v int) []byte {
		var b []byte
		for j := range int(m.FeatDim) {
			x := float32(v*10 + j)
			if ft == TypeF32 {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
			} else {
				b = binary.LittleEndian.AppendUint16(b, uint16(0x3c00+v*16+j)) // any f16 bits
			}
		}
		return b
	}
	for v := range int(m.End - m.Start) {
		fx.feat = append(fx.feat, row(v)...)
	}
	fx.cacheFeat = append(row(100), row(111)...)
	return fx
}

// write writes every section of fx to path and returns the Writer's
// HeaderCRC.
func (fx fixture) write(t testing.TB, path string) uint32 {
	t.Helper()
	w, err := Create(path, fx.meta)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.portable = fx.portable
	for _, err := range []error{
		w.Uint64s(SecIndptr, fx.indptr),
		w.Uint64s(SecIndices, fx.indices),
		w.Float32s(SecWeights, fx.weights),
		w.Uint32s(SecEtype, fx.etypes),
		w.Bytes(SecFeat, fx.meta.FeatType, fx.feat),
		w.Int32s(SecLabel, fx.labels),
		w.Bitmap(SecTrain, fx.train),
		w.Bitmap(SecVal, fx.val),
		w.Bitmap(SecTest, fx.test),
		w.Uint64s(SecCacheIDs, fx.cacheIDs),
		w.Bytes(SecCacheFeat, fx.meta.FeatType, fx.cacheFeat),
		w.Close(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return w.HeaderCRC()
}

func leBytes[T uint64 | uint32 | int32 | float32](v []T) []byte {
	var b []byte
	for _, x := range v {
		b, _ = binary.Append(b, binary.LittleEndian, x)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	for _, ft := range []ElemType{TypeF32, TypeF16} {
		t.Run(ft.String(), func(t *testing.T) {
			fx := newFixture(ft)
			path := filepath.Join(t.TempDir(), "part.csr")
			fx.write(t, path)
			g, err := Open(path, OpenOptions{Verify: true})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if g.Path() != path || g.Meta() != fx.meta || g.NumNodes() != 5 || g.NumEdges() != 11 || g.RowBytes() != 3*ft.Size() {
				t.Fatalf("path %s meta %+v nodes %d edges %d row %d", g.Path(), g.Meta(), g.NumNodes(), g.NumEdges(), g.RowBytes())
			}
			eq(t, "indptr", g.Indptr(), fx.indptr)
			eq(t, "indices", g.Indices(), fx.indices)
			eq(t, "weights", leBytes(g.Weights()), leBytes(fx.weights))
			eq(t, "etypes", g.Etypes(), fx.etypes)
			eq(t, "labels", g.Labels(), fx.labels)
			eq(t, "feat", g.FeatBytes(), fx.feat)
			eq(t, "cache ids", g.CacheIDs(), fx.cacheIDs)
			eq(t, "cache feat", g.CacheFeat(), fx.cacheFeat)
			eq(t, "neighbors 2", g.Neighbors(2), []uint64{4, 4, 11})
			eq(t, "neighbors 1", g.Neighbors(1), []uint64{})
			eq(t, "feat row 3", g.FeatRow(3), fx.feat[3*g.RowBytes():4*g.RowBytes()])
			if ft == TypeF32 {
				eq(t, "feat f32", g.FeatF32()[6:9], []float32{20, 21, 22})
			} else if g.FeatF32() != nil {
				t.Fatal("FeatF32 of f16 features is not nil")
			}
			for name, want := range map[string]*roaring.Bitmap{SecTrain: fx.train, SecVal: fx.val, SecTest: fx.test, "absent": roaring.New()} {
				got, err := g.Mask(name)
				if err != nil || !got.Equals(want) {
					t.Fatalf("mask %s = %v, %v; want %v", name, got, err, want)
				}
				got.Add(4) // the caller's own copy
			}
			if again, _ := g.Mask(SecTrain); !again.Equals(fx.train) {
				t.Fatalf("mask changed by a caller: %v", again)
			}
			want := map[string][]byte{
				SecIndptr: leBytes(fx.indptr), SecIndices: leBytes(fx.indices), SecWeights: leBytes(fx.weights),
				SecEtype: leBytes(fx.etypes), SecFeat: fx.feat, SecLabel: leBytes(fx.labels),
				SecCacheIDs: leBytes(fx.cacheIDs), SecCacheFeat: fx.cacheFeat,
			}
			var names []string
			for i, s := range g.Sections() {
				names = append(names, s.Name)
				raw, err := g.Section(s.Name)
				if err != nil {
					t.Fatal(err)
				}
				if b, ok := want[s.Name]; ok && !bytes.Equal(raw, b) {
					t.Errorf("section %s = %x, want %x", s.Name, raw, b)
				}
				if s.CRC != crc32.Checksum(raw, castagnoli()) || uint64(len(raw)) != s.Length {
					t.Errorf("section %s: crc %08x length %d do not match its bytes", s.Name, s.CRC, s.Length)
				}
				if s.Offset%Alignment != 0 || s.Offset < HeaderSize || (i > 0 && s.Offset < g.Sections()[i-1].Offset) {
					t.Errorf("section %s at offset %d", s.Name, s.Offset)
				}
			}
			eq(t, "section names", names, []string{SecIndptr, SecIndices, SecWeights, SecEtype, SecFeat, SecLabel,
				SecTrain, SecVal, SecTest, SecCacheIDs, SecCacheFeat})
			if _, err := g.Section("nope"); !errors.Is(err, ErrNoSection) || !strings.Contains(err.Error(), `section "nope"`) {
				t.Fatalf("absent section: %v", err)
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			if err := g.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := g.Mask(SecTrain); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Mask after Close: %v", err)
			}
		})
	}
}

func eq[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) || (got == nil) != (want == nil) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func TestEmptyPartition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part.csr")
	m := Meta{Part: 2, NumParts: 3, Start: 7, End: 7, TotalNodes: 7, FeatDim: 4, FeatType: TypeF16, LabelDim: 1, NumClasses: 2}
	w, err := Create(path, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		w.Uint64s(SecIndptr, []uint64{0}),
		w.Uint64s(SecIndices, nil),
		w.Float32s(SecWeights, nil),
		w.Bytes(SecFeat, TypeF16, nil),
		w.Bitmap(SecTrain, roaring.New()),
		w.Int32s(SecLabel, nil), // the last section is empty and ends the file
		w.Close(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	g, err := Open(path, OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.NumNodes() != 0 || g.NumEdges() != 0 || g.Indices() == nil || len(g.Weights()) != 0 || g.Weights() == nil || g.Etypes() != nil {
		t.Fatalf("nodes %d edges %d indices %v weights %v etypes %v", g.NumNodes(), g.NumEdges(), g.Indices(), g.Weights(), g.Etypes())
	}
	if mask, err := g.Mask(SecTrain); err != nil || !mask.IsEmpty() {
		t.Fatalf("mask %v, %v", mask, err)
	}
	if fi, _ := os.Stat(path); fi.Size() != HeaderSize+2*Alignment { // indptr and the empty bitmap
		t.Fatalf("file is %d bytes", fi.Size())
	}
}

// sectionOffset is the offset of a section in an encoded file.
func sectionOffset(t *testing.T, b []byte, name string) Section {
	t.Helper()
	h, err := DecodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range h.Sections {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no section %s", name)
	return Section{}
}

// tableEntry is the offset of a section's table entry in the header.
func tableEntry(t *testing.T, b []byte, name string) int {
	h, _ := DecodeHeader(b)
	for i, s := range h.Sections {
		if s.Name == name {
			return fixedLen + i*entryLen
		}
	}
	t.Fatalf("no section %s", name)
	return 0
}

func TestOpenCorrupt(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csr")
	newFixture(TypeF32).write(t, good)
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	u64 := func(b []byte, sec string, i int, v uint64) {
		le.PutUint64(b[sectionOffset(t, b, sec).Offset+uint64(8*i):], v)
	}
	type tc struct {
		name   string
		edit   func(b []byte) []byte
		verify bool
		want   string // after "csr: open PATH: "
		sentl  error
	}
	cases := []tc{
		{"magic", func(b []byte) []byte { copy(b, "PK\x03\x04"); return b }, false, `header: bad magic "PK\x03\x04ECSR"`, ErrCorrupt},
		{"major", func(b []byte) []byte { le.PutUint16(b[8:], 2); fixHeaderCRC(b); return b }, false, "header: major version 2 (minor 0), this build reads 1: unsupported format version", ErrVersion},
		{"header byte", func(b []byte) []byte { b[33]++; return b }, false, "header: checksum mismatch", ErrCorrupt},
		{"offset out of bounds", func(b []byte) []byte {
			le.PutUint64(b[tableEntry(t, b, SecCacheFeat)+24:], uint64(len(b))+64)
			le.PutUint64(b[16:], uint64(len(b))+64+24)
			fixHeaderCRC(b)
			return b
		}, false, fmt.Sprintf(`section "cache_feat": offset %d + length 24 beyond the end of the file (%d bytes)`, len(orig)+64, len(orig)), ErrCorrupt},
		{"file longer", func(b []byte) []byte { return append(b, make([]byte, 64)...) }, false, fmt.Sprintf("header: file is %d bytes, header says %d", len(orig)+64, len(orig)), ErrCorrupt},
		{"crc with verify", func(b []byte) []byte { b[sectionOffset(t, b, SecFeat).Offset+5] ^= 0x10; return b }, true, `section "feat": checksum mismatch`, ErrCorrupt},
		{"label crc with verify", func(b []byte) []byte { b[sectionOffset(t, b, SecLabel).Offset] ^= 1; return b }, true, `section "label": checksum mismatch`, ErrCorrupt},
		{"indptr not monotone", func(b []byte) []byte { u64(b, SecIndptr, 2, 100); return b }, false, `section "indptr": not monotone at 3 (6 after 100): corrupt file`, ErrCorrupt},
		{"indptr start", func(b []byte) []byte { u64(b, SecIndptr, 0, 1); return b }, false, `section "indptr": starts at 1, want 0`, ErrCorrupt},
		{"indptr end", func(b []byte) []byte { u64(b, SecIndptr, 5, 10); return b }, false, `section "indptr": ends at 10, but there are 11 indices`, ErrCorrupt},
		{"unsorted", func(b []byte) []byte { u64(b, SecIndices, 0, 4); return b }, false, `section "indices": neighbour list of node 0 not sorted at edge 1`, ErrCorrupt},
		{"id range", func(b []byte) []byte { u64(b, SecIndices, 10, 12); return b }, false, `section "indices": id 12 of node 4 at edge 10 >= 12 total nodes`, ErrCorrupt},
		{"label class", func(b []byte) []byte { b[sectionOffset(t, b, SecLabel).Offset+8] = 4; return b }, false, `section "label": node 2 has class 4, want -1 or [0, 4)`, ErrCorrupt},
		{"cache id owned here", func(b []byte) []byte { u64(b, SecCacheIDs, 1, 8); return b }, false, `section "cache_ids": id 8 at 1 is outside [0, 12) or owned here [4, 9)`, ErrCorrupt},
		// node/'s cache index finds a row by the id's rank among the cache
		// ids: out of order or listed twice, rows would be ambiguous or wrong.
		{"cache ids out of order", func(b []byte) []byte { u64(b, SecCacheIDs, 0, 10); u64(b, SecCacheIDs, 1, 3); return b }, false, `section "cache_ids": id 3 at 1 follows 10: not strictly ascending`, ErrCorrupt},
		{"cache id twice", func(b []byte) []byte { u64(b, SecCacheIDs, 1, 0); return b }, false, `section "cache_ids": id 0 at 1 follows 0: not strictly ascending`, ErrCorrupt},
		{"mask", func(b []byte) []byte { b[sectionOffset(t, b, SecVal).Offset+4] ^= 0xff; return b }, false, `section "val": malformed roaring bitmap`, ErrCorrupt},
		{"type", func(b []byte) []byte { b[tableEntry(t, b, SecWeights)+16] = byte(TypeU32); fixHeaderCRC(b); return b }, false, `section "weights": element type u32, want f32`, ErrCorrupt},
		{"length", func(b []byte) []byte { le.PutUint64(b[tableEntry(t, b, SecEtype)+32:], 40); fixHeaderCRC(b); return b }, false, `section "etype": 40 bytes, the header implies 44`, ErrCorrupt},
		{"missing indices", func(b []byte) []byte { copy(b[tableEntry(t, b, SecIndices):], "indicez"); fixHeaderCRC(b); return b }, false, `section "indices": required section missing`, ErrCorrupt},
	}
	// Truncation anywhere: the first section that no longer fits is named,
	// or the header when only padding was cut.
	secs := sectionsOf(t, orig)
	for _, cut := range []int{0, 5, 79, 100, HeaderSize - 1, HeaderSize, HeaderSize + 20, int(secs[4].Offset) + 3, len(orig) - 1} {
		want := "header: "
		switch {
		case cut < len(Magic):
			want = "header: bad magic"
		case cut < fixedLen+len(secs)*entryLen+4:
			want = "header: truncated"
		default:
			for _, s := range secs {
				if s.Offset+s.Length > uint64(cut) {
					want = "section \"" + s.Name + "\": offset"
					break
				}
			}
		}
		cases = append(cases, tc{fmt.Sprintf("truncate %d", cut), func(b []byte) []byte { return b[:cut] }, false, want, ErrCorrupt})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "bad.csr")
			if err := os.WriteFile(path, c.edit(bytes.Clone(orig)), 0o644); err != nil {
				t.Fatal(err)
			}
			g, err := Open(path, OpenOptions{Verify: c.verify})
			if err == nil {
				g.Close()
				t.Fatal("opened a corrupt file")
			}
			prefix := "csr: open " + path + ": " + c.want
			if !errors.Is(err, c.sentl) || !strings.HasPrefix(err.Error(), prefix) {
				t.Fatalf("error\n  %q\nwant prefix\n  %q wrapping %v", err, prefix, c.sentl)
			}
		})
	}
}

func sectionsOf(t *testing.T, b []byte) []Section {
	h, err := DecodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h.Sections
}

// A flipped byte in a section the structural checks do not read is
// caught by Verify only; a minor version this build does not know opens.
func TestOpenVerifyAndMinor(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part.csr")
	newFixture(TypeF32).write(t, path)
	b, _ := os.ReadFile(path)
	b[sectionOffset(t, b, SecFeat).Offset] ^= 1
	binary.LittleEndian.PutUint16(b[10:], 77)
	fixHeaderCRC(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path, OpenOptions{})
	if err != nil {
		t.Fatalf("without Verify: %v", err)
	}
	g.Close()
	if _, err := Open(path, OpenOptions{Verify: true}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `section "feat": checksum mismatch`) {
		t.Fatalf("with Verify: %v", err)
	}
}

func TestOpenMultiHot(t *testing.T) {
	fx := newFixture(TypeF32)
	fx.meta.LabelDim, fx.meta.NumClasses = 2, 2
	fx.labels = []int32{0, 1, 1, 1, -1, -1, 0, 0, 1, 0}
	path := filepath.Join(t.TempDir(), "part.csr")
	fx.write(t, path)
	g, err := Open(path, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "labels", g.Labels(), fx.labels)
	g.Close()
	b, _ := os.ReadFile(path)
	b[sectionOffset(t, b, SecLabel).Offset+4*7] = 2
	os.WriteFile(path, b, 0o644)
	if _, err := Open(path, OpenOptions{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `section "label": node 3 column 1 is 2, want -1, 0 or 1`) {
		t.Fatalf("multi-hot 2: %v", err)
	}
}

func TestOpenMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.csr")
	// The path once: os's error names it too.
	if _, err := Open(path, OpenOptions{}); !errors.Is(err, os.ErrNotExist) || err.Error() != "csr: open "+path+": no such file or directory" {
		t.Fatalf("%v", err)
	}
	// The mode as ls shows it (it printed d--------- for a drwx------).
	if _, err := Open(filepath.Dir(path), OpenOptions{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not a regular file (drwx") {
		t.Fatalf("directory: %v", err)
	}
}
