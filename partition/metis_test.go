package partition

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"graphnode/partition/multilevel"
)

func TestReadMETIS(t *testing.T) {
	// The example graph of the METIS manual (fig. 2b: edge weights).
	const text = `% manual example
7 11 001
5 1 3 2 2 1
1 1 3 2 4 1
5 3 4 2 2 2 1 2
2 1 3 2 6 2 7 5
1 1 3 3 6 2
5 2 4 2 7 6
6 6 4 5
`
	for _, gz := range []bool{false, true} {
		path := rdWrite(t, t.TempDir(), "g.graph", text, gz)
		w, err := ReadMETIS(context.Background(), bytes.NewReader(mustRead(t, path)), "g.graph")
		if err != nil {
			t.Fatal(err)
		}
		rdEq(t, "Xadj", w.Xadj, []int64{0, 3, 6, 10, 14, 17, 20, 22})
		rdEq(t, "Adjncy[:6]", w.Adjncy[:6], []uint32{4, 2, 1, 0, 2, 3})
		rdEq(t, "Adjwgt[:6]", w.Adjwgt[:6], []int32{1, 2, 1, 1, 2, 1})
		g, err := Read(context.Background(), path, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rdEq(t, "NumNodes", g.NumNodes, 7)
		rdEq(t, "edges", len(g.Src), 22)
		rdEq(t, "Src[:4]", g.Src[:4], []uint32{0, 0, 0, 1})
		rdEq(t, "Dst[:4]", g.Dst[:4], []uint32{4, 2, 1, 0})
		rdEq(t, "Weights[:3]", g.Weights[:3], []float32{1, 2, 1})
		rdEq(t, "Stats", g.Stats, Stats{Lines: 7, EdgesRead: 22})
	}
}

func TestReadMETISErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"3 2\n2\n1 3\n2 x\n", "g:4: \"x\" is not an integer"},
		{"3 2\n2\n1 3\n2 4\n", "g:4: vertex 3: neighbour 4 out of range 1..3"},
		{"3 2\n2\n2 3\n2\n", "g:3: vertex 2: self loop"},
		{"% c\n3 2 001\n2 1\n1 1 3\n2 1\n", "g:4: vertex 2: a neighbour without its edge weight"},
		{"3 1 011 2\n1 2 2 1\n1\n", "g:3: vertex 2: want 2 vertex weights, got 1"},
		{"3 2 2\n", "g:1: header: fmt 2: want binary digits abc (sizes, vertex weights, edge weights)"},
		{"3 2 0 2\n", "g:1: header: ncon 2: want 1..1024, and vertex weights for more than 1"},
		{"2 1\n2\n1\n1\n", "g:4: more than the 2 vertex lines of the header"},
		{"2 0\n2\n1\n", "g:2: more than the 2*0 neighbours of the header's 0 edges"},
	} {
		_, err := ReadMETIS(context.Background(), strings.NewReader(c.text), "g")
		rdWantLineError(t, err, "partition: "+c.want)
	}
	for _, c := range []struct{ text, want string }{
		{"3 2\n2\n1 3\n", "partition: g: 2 vertex lines, the header says 3: bad input"},
		{"3 2\n2\n1\n\n", "partition: g: 2 neighbours listed, want 2*2 for the header's 2 edges: bad input"},
		{"% only\n", "partition: g: no header line: bad input"},
		// Counts a short file cannot hold are refused for the missing
		// lines; they are not allocated first (below).
		{"4294967295 0\n\n\n", "partition: g: 2 vertex lines, the header says 4294967295: bad input"},
		{"2 4611686018427387903 011 1024\n", "partition: g: 0 vertex lines, the header says 2: bad input"},
	} {
		_, err := ReadMETIS(context.Background(), strings.NewReader(c.text), "g")
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrFormat) {
			t.Errorf("%q: err = %v, want %s", c.text, err, c.want)
		}
	}
	// The header's counts preallocate no more than the file can hold
	// (a file on disk) or a fixed bound (a stream): a 16-byte file that
	// claims 2^32-1 vertices once took 32 GiB for its row offsets.
	path := filepath.Join(t.TempDir(), "huge.graph")
	if err := os.WriteFile(path, []byte("4294967295 0\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, open := range []func() io.Reader{
		func() io.Reader { return strings.NewReader("4294967295 1000000000000 011 1024\n\n") },
		func() io.Reader {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		},
	} {
		r := open()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := ReadMETIS(context.Background(), r, "huge"); !errors.Is(err, ErrFormat) {
			t.Fatalf("%T: err = %v, want ErrFormat", r, err)
		}
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
			t.Errorf("%T: reading a header that claims 2^32-1 vertices allocated %d MiB", r, got>>20)
		}
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := readAll(filepath.Clean(path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A file read through *os.File gets buffers sized to it: the graph must
// be the same as through an unsized reader, whether the whole file fits
// the first read or lines cross the end of the buffer.
func TestReadMETISFileSized(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 300
	indptr := make([]uint64, n+1)
	var indices []uint32
	for u := range n {
		for range 4 {
			indices = append(indices, uint32(rng.IntN(n)))
		}
		indptr[u+1] = uint64(len(indices))
	}
	src, err := multilevel.Symmetrize(n, indptr, indices)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := multilevel.WriteMETIS(&b, src); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "g.metis")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := statSize(f); got != int64(b.Len()) {
		t.Errorf("statSize = %d, want %d", got, b.Len())
	}
	got, err := ReadMETIS(context.Background(), f, path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReadMETIS(context.Background(), bytes.NewReader(b.Bytes()), "mem")
	if err != nil {
		t.Fatal(err)
	}
	rdEq(t, "graph", got, want)
	for _, c := range []struct{ size, max, want int }{
		{0, 1 << 20, 1 << 20},       // unknown
		{47505, 1 << 20, 47506},     // Cora: all of it and one byte
		{1 << 20, 1 << 20, 1 << 20}, // at the cap
		{3263190, 256 << 10, 256 << 10},
	} {
		if got := inBufSize(int64(c.size), c.max); got != c.want {
			t.Errorf("inBufSize(%d, %d) = %d, want %d", c.size, c.max, got, c.want)
		}
	}
}
