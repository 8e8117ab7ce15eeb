package csr

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestWriterCloseLeavesOnlyTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part.csr")
	newFixture(TypeF32).write(t, path)
	eq(t, "dir", dirNames(t, dir), []string{"part.csr"})
}

// TestWriterHeaderCRC: HeaderCRC is the CRC-32C the file's header ends
// with, which graph.toml records per part; 0 before Close.
func TestWriterHeaderCRC(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part.csr")
	crc := newFixture(TypeF32).write(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := DecodeHeader(b[:HeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	end := h.EncodedLen()
	if want := binary.LittleEndian.Uint32(b[end-4 : end]); crc != want || crc == 0 {
		t.Errorf("HeaderCRC %08x, the header ends with %08x", crc, want)
	}
	w, err := Create(filepath.Join(t.TempDir(), "x.csr"), newFixture(TypeF32).meta)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if got := w.HeaderCRC(); got != 0 {
		t.Errorf("HeaderCRC before Close: %08x, want 0", got)
	}
}

func TestWriterAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part.csr")
	w, err := Create(path, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Uint64s(SecIndptr, newFixture(TypeF32).indptr); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 1 || !strings.HasPrefix(names[0], ".part.csr.") || !strings.HasSuffix(names[0], ".tmp") {
		t.Fatalf("while writing: %v, want one temporary file", names)
	}
	w.Abort()
	w.Abort()
	eq(t, "dir", dirNames(t, dir), nil)
	if err := w.Close(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("Close after Abort: %v", err)
	}
	if err := w.Uint64s(SecIndices, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Section after Abort: %v", err)
	}
	eq(t, "dir", dirNames(t, dir), nil)
}

func TestWriterCloseIdempotent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part.csr")
	w, err := Create(path, Meta{NumParts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Uint64s(SecIndptr, []uint64{0}); err != nil {
		t.Fatal(err)
	}
	if err := w.Uint64s(SecIndices, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	w.Abort() // no-op after Close
	eq(t, "dir", dirNames(t, dir), []string{"part.csr"})
	if err := w.Uint64s("more", nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "writer is closed") {
		t.Fatalf("Section after Close: %v", err)
	}
	// A mask out of range after Close is a call on a closed writer too;
	// it must not become the result of the Close that succeeded.
	if err := w.Bitmap(SecTrain, roaring.BitmapOf(7)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "writer is closed") {
		t.Fatalf("Bitmap after Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close after a successful Close and a refused Bitmap: %v", err)
	}
}

// Every error removes the temporary file, names the path and the section,
// and is what every later call returns.
func TestWriterErrors(t *testing.T) {
	boom := errors.New("boom")
	fx := newFixture(TypeF32)
	start := func(w *Writer) error { return w.Uint64s(SecIndptr, fx.indptr) }
	cases := []struct {
		name  string
		run   func(w *Writer) error
		want  string
		sentl error
	}{
		{"fill fails", func(w *Writer) error {
			return w.Section("blob", TypeBytes, func(sw io.Writer) error { sw.Write([]byte("half")); return boom })
		}, `section "blob": boom`, boom},
		{"duplicate", func(w *Writer) error { start(w); return start(w) }, `section "indptr": written twice`, ErrInvalid},
		{"long name", func(w *Writer) error { return w.Bytes("sixteen_chars_xx", TypeBytes, nil) }, `section "sixteen_chars_xx": section name "sixteen_chars_xx" must be 1 to 15 bytes`, ErrInvalid},
		{"odd bytes", func(w *Writer) error { return w.Bytes("odd", TypeU32, []byte{1, 2, 3}) }, `section "odd": length 3 is not a multiple of the u32 element size 4`, ErrInvalid},
		{"unknown type", func(w *Writer) error { return w.Bytes("x", ElemType(99), nil) }, `section "x": unknown element type 99`, ErrInvalid},
		{"known type", func(w *Writer) error { return w.Uint32s(SecWeights, make([]uint32, 11)) }, `section "weights": element type u32, want f32`, ErrInvalid},
		{"known length", func(w *Writer) error { return w.Uint64s(SecIndptr, []uint64{0, 1}) }, `section "indptr": 16 bytes, meta says 48`, ErrInvalid},
		{"mask range", func(w *Writer) error { return w.Bitmap(SecTrain, roaring.BitmapOf(5)) }, `section "train": local index 5 >= 5 owned nodes`, ErrInvalid},
		{"too many", func(w *Writer) error {
			for i := range MaxSections + 1 {
				if err := w.Bytes(fmt.Sprintf("s%d", i), TypeBytes, []byte{byte(i)}); err != nil {
					return err
				}
			}
			return nil
		}, `section "s64": more than 64 sections`, ErrInvalid},
		{"missing indices", func(w *Writer) error { start(w); return w.Close() }, `section "indices": required section missing`, ErrInvalid},
		{"cache pair", func(w *Writer) error {
			start(w)
			w.Uint64s(SecIndices, fx.indices)
			w.Uint64s(SecCacheIDs, fx.cacheIDs)
			return w.Close()
		}, `section "cache_ids": "cache_ids" and "cache_feat" go together`, ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "part.csr")
			w, err := Create(path, fx.meta)
			if err != nil {
				t.Fatal(err)
			}
			err = c.run(w)
			prefix := "csr: write " + path + ": " + c.want
			if !errors.Is(err, c.sentl) || !strings.HasPrefix(err.Error(), prefix) {
				t.Fatalf("error\n  %v\nwant prefix\n  %s wrapping %v", err, prefix, c.sentl)
			}
			eq(t, "dir after the error", dirNames(t, dir), nil)
			if err2 := w.Close(); err2 != err {
				t.Fatalf("Close after the error: %v, want %v", err2, err)
			}
			eq(t, "dir after Close", dirNames(t, dir), nil)
		})
	}
}

func TestCreateErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part.csr")
	if _, err := Create(path, Meta{}); !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "csr: create "+path+": meta: part 0 of 0 parts") {
		t.Fatalf("bad meta: %v", err)
	}
	missing := filepath.Join(dir, "no", "part.csr")
	if _, err := Create(missing, testMeta()); !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "csr: create "+missing) {
		t.Fatalf("missing dir: %v", err)
	}
}

func TestSectionWriterAfterFill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part.csr")
	w, _ := Create(path, testMeta())
	defer w.Abort()
	var kept io.Writer
	if err := w.Section("blob", TypeBytes, func(sw io.Writer) error { kept = sw; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Write([]byte("late")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("write after fill: %v", err)
	}
}

// The file at path is always either the old complete file or the new
// complete one: never absent, never partial, whether the new write is
// in progress, aborted or closed.
func TestWriterReplaceIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part.csr")
	old := newFixture(TypeF32)
	old.write(t, path)
	check := func(want uint32) {
		t.Helper()
		g, err := Open(path, OpenOptions{Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if g.Meta().FeatDim != want {
			t.Fatalf("FeatDim %d, want %d", g.Meta().FeatDim, want)
		}
	}
	for _, finish := range []string{"abort", "fail", "close"} {
		nu := newFixture(TypeF16)
		nu.meta.FeatDim = 1
		nu.feat, nu.cacheFeat = nu.feat[:10], nu.cacheFeat[:4]
		w, err := Create(path, nu.meta)
		if err != nil {
			t.Fatal(err)
		}
		w.Uint64s(SecIndptr, nu.indptr)
		check(3)
		w.Uint64s(SecIndices, nu.indices)
		w.Bytes(SecFeat, TypeF16, nu.feat)
		check(3)
		switch finish {
		case "abort":
			w.Abort()
			check(3)
		case "fail":
			w.Bytes(SecFeat, TypeF16, nil)
			check(3)
		case "close":
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			check(1)
		}
	}
	eq(t, "dir", dirNames(t, dir), []string{"part.csr"})
}

// The element-by-element encoding of big-endian hosts writes the same
// bytes as the little-endian fast path.
func TestWriterPortableEncoding(t *testing.T) {
	dir := t.TempDir()
	fast, portable := newFixture(TypeF32), newFixture(TypeF32)
	portable.portable = true
	fast.write(t, filepath.Join(dir, "fast"))
	portable.write(t, filepath.Join(dir, "portable"))
	a, _ := os.ReadFile(filepath.Join(dir, "fast"))
	b, _ := os.ReadFile(filepath.Join(dir, "portable"))
	if len(a) < HeaderSize+11*Alignment || !bytes.Equal(a, b) {
		t.Fatalf("files differ: %d and %d bytes", len(a), len(b))
	}
}

func BenchmarkWriter(b *testing.B) {
	const n = 1 << 20
	v := make([]uint64, n)
	for i := range v {
		v[i] = uint64(i) * 7
	}
	// sink=discard measures encoding, checksumming and buffering alone;
	// sink=file a whole file: Create, the section, Close with fsync.
	for _, portable := range []bool{false, true} {
		b.Run(fmt.Sprintf("sink=discard/portable=%v", portable), func(b *testing.B) {
			w := &Writer{path: "discard", meta: Meta{NumParts: 1, NumEdges: n}, tab: castagnoli(),
				bw: bufio.NewWriterSize(io.Discard, writeBufSize), portable: portable}
			b.ReportAllocs()
			b.SetBytes(8 * n)
			for b.Loop() {
				w.sections = w.sections[:0]
				if err := w.Uint64s(SecIndices, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("sink=file", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "part.csr")
		b.ReportAllocs()
		b.SetBytes(8 * n)
		for b.Loop() {
			w, err := Create(path, Meta{NumParts: 1, NumEdges: n})
			if err != nil {
				b.Fatal(err)
			}
			w.Uint64s(SecIndptr, []uint64{0})
			w.Uint64s(SecIndices, v)
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Every write to the file starts at a multiple of writeBufSize, whatever
// the sizes of the sections and of the writes that fill them, so that the
// page cache can hold the file in huge-page folios; and the file still
// reads back whole.
func TestWriterWritesAlignedChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part.csr")
	const edges = writeBufSize/8*2 + 13 // more than two buffers of ids
	w, err := Create(path, Meta{NumParts: 1, End: 1, TotalNodes: 1, NumEdges: edges})
	if err != nil {
		t.Fatal(err)
	}
	indices := make([]uint64, edges) // node 0's self loops
	if err := w.Uint64s(SecIndptr, []uint64{0, edges}); err != nil {
		t.Fatal(err)
	}
	if err := w.Uint64s(SecIndices, indices); err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 3*writeBufSize+5)
	for i := range blob {
		blob[i] = byte(i * 31)
	}
	if err := w.Bytes("blob", TypeU8, blob); err != nil {
		t.Fatal(err)
	}
	small := []uint32{1, 2, 3}
	if err := w.Uint32s("small", small); err != nil {
		t.Fatal(err)
	}
	out := w.out
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out.unaligned != 0 || out.off < 5*writeBufSize {
		t.Fatalf("%d of the writes started off a %d-byte boundary; %d bytes went through the buffer", out.unaligned, writeBufSize, out.off)
	}
	g, err := Open(path, OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got := g.rawNamed("blob"); !bytes.Equal(got, blob) {
		t.Fatalf("blob section: %d bytes, want the %d written", len(got), len(blob))
	}
}

// TestWriterRenameFailureRemovesTemp: Close fails at the rename (a
// non-empty directory stands at the path) and must leave no temporary
// file behind, as after any failed Close.
func TestWriterRenameFailureRemovesTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part.csr")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	fx := newFixture(TypeF32)
	w, err := Create(path, fx.meta)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Uint64s(SecIndptr, fx.indptr); err != nil {
		t.Fatal(err)
	}
	if err := w.Uint64s(SecIndices, fx.indices); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Close onto a non-empty directory: %v, want an error naming %s", err, path)
	}
	if names := dirNames(t, dir); len(names) != 1 || names[0] != "part.csr" {
		t.Fatalf("after the failed Close the directory holds %v, want only part.csr", names)
	}
}

// TestWriterRefusesWhatOpenRefuses: sections Open would reject are
// refused as they begin, naming the section and the reason, instead of
// producing a file that cannot be read.
func TestWriterRefusesWhatOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		meta  func(*Meta)
		write func(w *Writer, fx fixture) error
		want  string
	}{
		{"label without label columns", func(m *Meta) { m.LabelDim, m.NumClasses = 0, 0 },
			func(w *Writer, _ fixture) error { return w.Int32s(SecLabel, nil) }, `section "label": meta has no label columns`},
		{"cache_feat before cache_ids", func(*Meta) {},
			func(w *Writer, fx fixture) error { return w.Bytes(SecCacheFeat, fx.meta.FeatType, nil) }, `section "cache_feat": written before "cache_ids"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fx := newFixture(TypeF32)
			tc.meta(&fx.meta)
			w, err := Create(filepath.Join(dir, "part.csr"), fx.meta)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			if err := w.Uint64s(SecIndptr, fx.indptr); err != nil {
				t.Fatal(err)
			}
			err = tc.write(w, fx)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalid containing %q", err, tc.want)
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Fatalf("after the refusal the directory holds %v", names)
			}
		})
	}
}
