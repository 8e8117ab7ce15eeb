package partition

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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

// partition.ReadMETIS runs multilevel's parser over this package's line
// scanner: its errors name the file and line as the other readers'
// LineErrors do (the parser's own cases are multilevel's tests), and the
// header's counts preallocate no more than the file can hold, for a file
// on disk, or than a fixed bound, for a gzip stream, whose size says
// nothing of its text.
func TestReadMETISErrors(t *testing.T) {
	for _, c := range []struct {
		text string
		gz   bool
		want string
	}{
		{"3 2\n2\n1 3\n2 x\n", false, "g:4: \"x\" is not an integer"},
		{"% c\n3 2 001\n2 1\n1 1 3\n2 1\n", true, "g:4: vertex 2: a neighbour without its edge weight"},
		{"3 2 2\n", false, "g:1: header: fmt 2: want binary digits abc (sizes, vertex weights, edge weights)"},
	} {
		path := rdWrite(t, t.TempDir(), "g", c.text, c.gz)
		_, err := ReadMETIS(context.Background(), bytes.NewReader(mustRead(t, path)), "g")
		rdWantLineError(t, err, "partition: "+c.want)
	}
	for _, c := range []struct{ text, want string }{
		{"3 2\n2\n1 3\n", "partition: g: 2 vertex lines, the header says 3: bad input"},
		{"% only\n", "partition: g: no header line: bad input"},
		{"2 4611686018427387903 011 1024\n", "partition: g: 0 vertex lines, the header says 2: bad input"},
		// Counts that match, but an edge listed at one end only (gpmetis
		// partitions it without a word, into one part; node partition
		// made it an edge of one direction).
		{"3 2\n2 3\n3\n1\n", "partition: g: vertex 1 lists 2, but vertex 2 does not list 1 with the same weight: a METIS graph lists every edge at both ends: bad input"},
		{"3 2\n2\n3\n1 2\n", "partition: g: vertex 3 lists 1, but vertex 1 does not list 3 with the same weight: a METIS graph lists every edge at both ends: bad input"},
		// Both ends, weights that differ.
		{"2 1 001\n2 5\n1 4\n", "partition: g: vertex 2 lists 1, but vertex 1 does not list 2 with the same weight: a METIS graph lists every edge at both ends: bad input"},
	} {
		_, err := ReadMETIS(context.Background(), strings.NewReader(c.text), "g")
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrFormat) {
			t.Errorf("%q: err = %v, want %s", c.text, err, c.want)
		}
	}
	dir := t.TempDir()
	for _, gz := range []bool{false, true} {
		path := rdWrite(t, dir, "huge"+strconv.FormatBool(gz), "4294967295 1000000000000 011 1024\n\n", gz)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = ReadMETIS(context.Background(), f, path)
		runtime.ReadMemStats(&after)
		f.Close()
		if !errors.Is(err, ErrFormat) {
			t.Fatalf("gzip %v: err = %v, want ErrFormat", gz, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
			t.Errorf("gzip %v: reading a header that claims 2^32-1 vertices allocated %d MiB", gz, got>>20)
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
	// Edge weights, the same both ways, so that the lines take the
	// general path of the parser, not the one for neighbours only.
	src.Adjwgt = make([]int32, len(src.Adjncy))
	for v := range n {
		for e := src.Xadj[v]; e < src.Xadj[v+1]; e++ {
			src.Adjwgt[e] = int32(1 + (v+int(src.Adjncy[e]))%9)
		}
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
