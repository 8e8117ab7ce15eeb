package partition

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"graphnode/csr"
)

// writeTestKG writes testKG into two parts (new ids: b=0, a=1, c=2),
// stored with the heads, and returns the directory and its manifest.
func writeTestKG(t *testing.T) (string, *Manifest) {
	t.Helper()
	g := testKG()
	dir := filepath.Join(t.TempDir(), "parts")
	ctx := context.Background()
	adj, err := BuildAdj(ctx, g, csr.Out, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Write(ctx, dir, g, adj, []uint32{1, 0, 1}, WriteOptions{Parts: 2, Method: "given"})
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

func TestReadTriples(t *testing.T) {
	dir, m := writeTestKG(t)
	for _, c := range []struct {
		file string
		want Triples
	}{
		{TriplesValidFile, Triples{Head: []uint32{2}, Rel: []uint32{1}, Tail: []uint32{0}}},
		{TriplesTestFile, Triples{Head: []uint32{0, 1}, Rel: []uint32{0, 0}, Tail: []uint32{2, 2}}},
	} {
		got, err := ReadTriples(dir, m, c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s = %+v, want %+v", c.file, got, c.want)
		}
	}
}

func TestReadTriplesErrors(t *testing.T) {
	dir, m := writeTestKG(t)
	path := filepath.Join(dir, TriplesTestFile)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		edit  func(b []byte) []byte // nil: remove the file
		mf    func(m *Manifest)
		file  string
		want  string
		isErr error
	}{
		{name: "missing", want: "no such file"},
		{name: "flipped byte", edit: func(b []byte) []byte { b[3] ^= 1; return b }, want: "crc32c", isErr: ErrTriples},
		{name: "truncated", edit: func(b []byte) []byte { return b[:len(b)-1] }, want: "bytes, graph.toml records", isErr: ErrTriples},
		{name: "count", mf: func(m *Manifest) { m.TriplesTest = 3 }, want: "want 3 triples", isErr: ErrTriples},
		{name: "unlisted", mf: func(m *Manifest) { m.File = slicesWithout(m.File, TriplesTestFile) }, want: "not listed", isErr: ErrManifest},
		{name: "not a kg", mf: func(m *Manifest) { m.Relations = 0 }, want: "not a knowledge graph", isErr: ErrTriples},
		{name: "other file", file: "orig_ids.bin", want: "not a triples file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mm := *m
			mm.File = append([]FileEntry(nil), m.File...)
			if c.mf != nil {
				c.mf(&mm)
			}
			b := append([]byte(nil), orig...)
			if c.edit == nil && c.mf == nil && c.file == "" {
				os.Remove(path)
			} else if c.edit != nil {
				b = c.edit(b)
			}
			if c.edit != nil {
				os.WriteFile(path, b, 0o644)
			}
			defer os.WriteFile(path, orig, 0o644)
			file := c.file
			if file == "" {
				file = TriplesTestFile
			}
			_, err := ReadTriples(dir, &mm, file)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
			if c.isErr != nil && !errors.Is(err, c.isErr) {
				t.Errorf("err = %v, want %v", err, c.isErr)
			}
			if file == TriplesTestFile && !strings.Contains(err.Error(), TriplesTestFile) {
				t.Errorf("err = %v does not name the file", err)
			}
		})
	}
}

func slicesWithout(fs []FileEntry, path string) []FileEntry {
	var out []FileEntry
	for _, f := range fs {
		if f.Path != path {
			out = append(out, f)
		}
	}
	return out
}

func TestDecodeTriplesBounds(t *testing.T) {
	tr := Triples{Head: []uint32{0, 4}, Rel: []uint32{1, 0}, Tail: []uint32{2, 3}}
	b := AppendTriples(nil, tr)
	if got, err := DecodeTriples(b, 5, 2); err != nil || !reflect.DeepEqual(got, tr) {
		t.Fatalf("DecodeTriples = %+v, %v", got, err)
	}
	for _, c := range []struct {
		nodes uint64
		rels  int
		want  string
	}{{4, 2, "triple 1 (4, 0, 3) names a node beyond 4 nodes"}, {5, 1, "triple 0 (0, 1, 2) names a relation beyond 1 relations"}} {
		if _, err := DecodeTriples(b, c.nodes, c.rels); err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrTriples) {
			t.Errorf("nodes %d rels %d: err = %v, want %q", c.nodes, c.rels, err, c.want)
		}
	}
}

// FuzzDecodeTriples: whatever the bytes, DecodeTriples either refuses
// them or returns triples within the bounds that re-encode to the input.
func FuzzDecodeTriples(f *testing.F) {
	f.Add(AppendTriples(nil, Triples{Head: []uint32{0, 4}, Rel: []uint32{1, 0}, Tail: []uint32{2, 3}}), uint64(5), 2)
	f.Add([]byte{1, 2, 3}, uint64(5), 2)
	f.Add(make([]byte, 48), uint64(1), 1)
	f.Fuzz(func(t *testing.T, b []byte, nodes uint64, rels int) {
		if rels < 0 || rels > 1<<20 {
			return
		}
		tr, err := DecodeTriples(b, nodes, rels)
		if err != nil {
			if !errors.Is(err, ErrTriples) {
				t.Fatalf("error %v does not wrap ErrTriples", err)
			}
			return
		}
		for i := range tr.Len() {
			if uint64(tr.Head[i]) >= nodes || uint64(tr.Tail[i]) >= nodes || int(tr.Rel[i]) >= rels {
				t.Fatalf("triple %d out of bounds", i)
			}
		}
		if got := AppendTriples(nil, tr); string(got) != string(b) {
			t.Fatalf("re-encoded %x, want %x", got, b)
		}
	})
}

func TestReadOrigIDs(t *testing.T) {
	dir, m := writeTestKG(t)
	ids, err := ReadOrigIDs(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids, []uint64{1, 0, 2}) { // new ids: b=0, a=1, c=2
		t.Errorf("orig ids %v, want [1 0 2]", ids)
	}
	path := filepath.Join(dir, OrigIDsFile)
	b, _ := os.ReadFile(path)
	b[0] ^= 1
	os.WriteFile(path, b, 0o644)
	if _, err := ReadOrigIDs(dir, m); err == nil || !strings.Contains(err.Error(), "orig_ids.bin: crc32c") {
		t.Errorf("flipped bit: err = %v", err)
	}
	os.WriteFile(path, b[:16], 0o644)
	if _, err := ReadOrigIDs(dir, m); err == nil || !strings.Contains(err.Error(), "16 bytes, want 8 × 3 nodes") {
		t.Errorf("truncated: err = %v", err)
	}
}

// TestInspectPartChecksTriples: inspect --verify --part K checks a
// knowledge graph's evaluation triples, which every host holds with its
// part (node fetch brings them); it passed a corrupt triples-test.bin
// that the check of the whole directory caught.
func TestInspectPartChecksTriples(t *testing.T) {
	dir, _ := writeTestKG(t)
	path := filepath.Join(dir, TriplesTestFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x05
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, part := range []*int{nil, new(int), func() *int { one := 1; return &one }()} {
		r, err := Inspect(context.Background(), dir, InspectOptions{Verify: true, Part: part})
		if err != nil {
			t.Fatal(err)
		}
		var checked, failed []string
		for _, f := range r.Files {
			checked = append(checked, f.Path)
			if f.Err != nil {
				failed = append(failed, f.Path)
			}
		}
		which := "every part"
		if part != nil {
			which = "part " + strconv.Itoa(*part)
		}
		if r.OK() || strings.Join(failed, " ") != TriplesTestFile {
			t.Errorf("%s: OK %v, checked %v, failed %v; want %s failed", which, r.OK(), checked, failed, TriplesTestFile)
		}
		if part != nil && len(checked) != 3 {
			t.Errorf("part %d: checked %v, want its part file and both triples files", *part, checked)
		}
	}
}
