package multilevel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func mlEq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestReadMETIS(t *testing.T) {
	// The example graph of the METIS manual (fig. 2b: edge weights),
	// with a CRLF line and no newline at the end.
	const text = "% manual example\n7 11 001\n5 1 3 2 2 1\r\n1 1 3 2 4 1\n5 3 4 2 2 2 1 2\n2 1 3 2 6 2 7 5\n1 1 3 3 6 2\n5 2 4 2 7 6\n6 6 4 5"
	w, err := ReadMETIS(context.Background(), strings.NewReader(text), "g.graph")
	if err != nil {
		t.Fatal(err)
	}
	mlEq(t, "Xadj", w.Xadj, []int64{0, 3, 6, 10, 14, 17, 20, 22})
	mlEq(t, "Adjncy[:6]", w.Adjncy[:6], []uint32{4, 2, 1, 0, 2, 3})
	mlEq(t, "Adjwgt[:6]", w.Adjwgt[:6], []int32{1, 2, 1, 1, 2, 1})
	// A line longer than the reader's buffer (a hub of a large graph).
	var b strings.Builder
	n := 1 << 18
	b.WriteString(itoa(n+1) + " " + itoa(n) + "\n")
	for u := 2; u <= n+1; u++ {
		b.WriteString(itoa(u) + " ")
	}
	b.WriteString("\n")
	for range n {
		b.WriteString("1\n")
	}
	hub, err := ReadMETIS(context.Background(), strings.NewReader(b.String()), "hub")
	if err != nil {
		t.Fatal(err)
	}
	if hub.Xadj[1] != int64(n) || hub.Adjncy[n-1] != uint32(n) || hub.NumVertices() != n+1 {
		t.Errorf("hub: row 0 has %d entries, last %d; %d vertices", hub.Xadj[1], hub.Adjncy[n-1], hub.NumVertices())
	}
}

func TestReadMETISErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"3 2\n2\n1 3\n2 x\n", "g:4: \"x\" is not an integer"},
		{"3 2\n2\n1 3\n2 4\n", "g:4: vertex 3: neighbour 4 out of range 1..3"},
		{"3 2\n2\n2 3\n2\n", "g:3: vertex 2: self loop"},
		{"% c\n3 2 001\n2 1\n1 1 3\n2 1\n", "g:4: vertex 2: a neighbour without its edge weight"},
		{"3 1 011 2\n1 2 2 1\n1\n", "g:3: vertex 2: want 2 vertex weights, got 1"},
		{"3 1 010 1\n-1 2\n1\n", "g:2: vertex 1: negative weight -1"},
		{"3 1 010 2\n0 4611686018427387904 2\n0 4611686018427387904 1\n0 0\n", "g:3: vertex 2: weights of constraint 2 sum past 9223372036854775807"},
		{"2 1 001\n2 0\n1 0\n", "g:2: vertex 1: edge weight 0, want 1..2147483647"},
		{"2 1 100\n\n", "g:2: vertex 1: missing or negative size"},
		{"3 2 2\n", "g:1: header: fmt 2: want binary digits abc (sizes, vertex weights, edge weights)"},
		{"3 2 0 2\n", "g:1: header: ncon 2: want 1..1024, and vertex weights for more than 1"},
		{"3\n", "g:1: header \"3\": want n m [fmt [ncon]]"},
		{"2 1\n2\n1\n1\n", "g:4: more than the 2 vertex lines of the header"},
		{"2 0\n2\n1\n", "g:2: more than the 2*0 neighbours of the header's 0 edges"},
	} {
		_, err := ReadMETIS(context.Background(), strings.NewReader(c.text), "g")
		var le *LineError
		if !errors.As(err, &le) || !errors.Is(err, ErrFormat) || err.Error() != "multilevel: "+c.want {
			t.Errorf("%q: err = %v, want a LineError %q", c.text, err, "multilevel: "+c.want)
		}
	}
	for _, c := range []struct{ text, want string }{
		{"3 2\n2\n1 3\n", "multilevel: g: 2 vertex lines, the header says 3: bad input"},
		{"3 2\n2\n1\n\n", "multilevel: g: 2 neighbours listed, want 2*2 for the header's 2 edges: bad input"},
		{"% only\n", "multilevel: g: no header line: bad input"},
		{"4294967295 0\n\n\n", "multilevel: g: 2 vertex lines, the header says 4294967295: bad input"},
	} {
		_, err := ReadMETIS(context.Background(), strings.NewReader(c.text), "g")
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrFormat) {
			t.Errorf("%q: err = %v, want %s", c.text, err, c.want)
		}
	}
	// The header's counts preallocate no more than the file can hold
	// (a file on disk) or a fixed bound (a stream).
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
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	long := "70000 0\n" + strings.Repeat("\n", 70000)
	if _, err := ReadMETIS(ctx, strings.NewReader(long), "g"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestMETISRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		name         string
		vwgt, ewgt   bool
		ncon, n, deg int
	}{
		{"plain", false, false, 1, 200, 6},
		{"edge weights", false, true, 1, 150, 4},
		{"vertex weights", true, false, 3, 100, 5},
		{"both", true, true, 2, 120, 3},
		{"isolated", false, false, 1, 10, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := randomGraph(rng, c.n, c.deg, c.vwgt, c.ewgt, c.ncon)
			var b bytes.Buffer
			if err := WriteMETIS(&b, src); err != nil {
				t.Fatal(err)
			}
			got, err := ReadMETIS(context.Background(), &b, "rt")
			if err != nil {
				t.Fatal(err)
			}
			if c.ncon == 1 && !c.vwgt {
				got.Ncon = src.Ncon
			}
			mlEq(t, "graph", got, src)
		})
	}
}

// randomGraph is a symmetric graph without self loops or duplicates.
func randomGraph(rng *rand.Rand, n, deg int, vwgt, ewgt bool, ncon int) *Graph {
	adj := make([]map[uint32]int32, n)
	for v := range adj {
		adj[v] = map[uint32]int32{}
	}
	for range n * deg / 2 {
		u, v := uint32(rng.IntN(n)), uint32(rng.IntN(n))
		if u == v {
			continue
		}
		w := int32(1 + rng.IntN(9))
		adj[u][v], adj[v][u] = w, w
	}
	g := &Graph{Xadj: make([]int64, n+1), Ncon: 1}
	for v := range n {
		for u := range uint32(n) { // ascending, deterministic
			if w, ok := adj[v][u]; ok {
				g.Adjncy = append(g.Adjncy, u)
				if ewgt {
					g.Adjwgt = append(g.Adjwgt, w)
				}
			}
		}
		g.Xadj[v+1] = int64(len(g.Adjncy))
	}
	if g.Adjncy == nil {
		g.Adjncy = []uint32{}
	}
	if vwgt {
		g.Ncon = ncon
		for range n * ncon {
			g.Vwgt = append(g.Vwgt, int64(rng.IntN(100)))
		}
	}
	return g
}

func TestWriteMETISRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		g    *Graph
		want string
	}{
		{"asymmetric", &Graph{Xadj: []int64{0, 1, 1}, Adjncy: []uint32{1}}, "not symmetric"},
		{"weights differ", &Graph{Xadj: []int64{0, 1, 2}, Adjncy: []uint32{1, 0}, Adjwgt: []int32{1, 2}}, "not symmetric"},
		{"duplicate", &Graph{Xadj: []int64{0, 2, 4}, Adjncy: []uint32{1, 1, 0, 0}}, "lists neighbour 1 twice"},
		{"self loop", &Graph{Xadj: []int64{0, 1}, Adjncy: []uint32{0}}, "self loop"},
	} {
		err := WriteMETIS(&bytes.Buffer{}, c.g)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrBadGraph) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	var b bytes.Buffer
	g := &Graph{Xadj: []int64{0, 1, 2, 2}, Adjncy: []uint32{1, 0}, Adjwgt: []int32{3, 3}, Vwgt: []int64{1, 2, 3}}
	if err := WriteMETIS(&b, g); err != nil {
		t.Fatal(err)
	}
	mlEq(t, "text", b.String(), "3 1 011 1\n1 2 3\n2 1 3\n3\n")
}

func TestReadPartition(t *testing.T) {
	parts, err := ReadPartition(strings.NewReader("0\r\n3\n\n1\n"), 3, "p")
	if err != nil {
		t.Fatal(err)
	}
	mlEq(t, "parts", parts, []uint32{0, 3, 1})
	for _, c := range []struct {
		text string
		n    int
		want string
	}{
		{"0\n-1\n", 2, "multilevel: p:2: part \"-1\" is not a partition number"},
		{"0\n1\n2\n", 2, "multilevel: p:3: more than the 2 vertices"},
		{"0\n", 2, "multilevel: p: 1 lines, want 2 vertices: bad input"},
	} {
		_, err := ReadPartition(strings.NewReader(c.text), c.n, "p")
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrFormat) {
			t.Errorf("%q: err = %v, want %s", c.text, err, c.want)
		}
	}
}

// metisAppendRow, METISParser's path for lines of neighbours only, must
// take a line only when the general path reads the same neighbours from
// it without an error.
func FuzzMETISAppendRow(f *testing.F) {
	for _, s := range []string{"", "1 3", "2\t4  5", "03 1", "+2", "2 x", "7", "0", "99999999999", "3 3", "1 2 3 4"} {
		f.Add([]byte(s), uint32(3), uint32(6), int64(4))
	}
	f.Fuzz(func(t *testing.T, line []byte, self, n uint32, max int64) {
		prefix := []uint32{7}
		if max < int64(len(prefix)) {
			return // ReadMETIS never holds more than max entries
		}
		fast, ok := metisAppendRow(prefix, line, self, n, max)
		if !ok {
			return
		}
		toks, msg := metisInts(line, nil)
		if msg != "" {
			t.Fatalf("%q: fast path took it, general path: %s", line, msg)
		}
		if int64(len(prefix)+len(toks)) > max {
			t.Fatalf("%q: %d entries past the most %d", line, len(prefix)+len(toks), max)
		}
		want := []uint32{7}
		for _, u := range toks {
			if u < 1 || u > int64(n) || u == int64(self) {
				t.Fatalf("%q: fast path took neighbour %d (vertex %d of %d)", line, u, self, n)
			}
			want = append(want, uint32(u-1))
		}
		if !slices.Equal(fast, want) {
			t.Fatalf("%q: fast path read %v, general path %v", line, fast, want)
		}
	})
}

// FuzzReadMETIS feeds ReadMETIS arbitrary files. What it accepts must be
// a valid Graph, must survive WriteMETIS and ReadMETIS unchanged, and
// must partition: Partition into 1..4 parts returns a part below k for
// every vertex and leaves no part empty. ReadMETIS does not check
// symmetry, so the partitioner sees one-sided edges here too.
func FuzzReadMETIS(f *testing.F) {
	for _, s := range []string{
		"3 3\n2 3\n1 3\n1 2\n",
		"% c\n4 3 011 2\n1 2 2 3 3 1\n0 5 1 3 4 2\n2 2 1 1\n1 1 2 2\n",
		"5 3 100\n3 2\n1 1\n0 4 5\n4 3\n0 3\n",
		"2 1\n2\n\n",    // one entry for one edge: rejected
		"3 1\n2\n3\n\n", // one-sided edges, counted right: accepted
		"4 2 001\n2 7 3 1\n1 7\n1 1\n\n",
		"1 0\n\n",
		"3 1 010 2\n1 0 2\n0 1 1\n5 5\n",
		"0 0\n",
	} {
		f.Add([]byte(s), uint8(2), uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, parts, seed uint8) {
		g, err := ReadMETIS(context.Background(), bytes.NewReader(data), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("ReadMETIS accepted a graph that Validate rejects: %v", err)
		}
		// WriteMETIS takes exactly the graphs METIS does: symmetric, with
		// equal weights both ways, no neighbour twice in a row.
		var b bytes.Buffer
		werr := WriteMETIS(&b, g)
		if clean := metisClean(g); !clean {
			if !errors.Is(werr, ErrBadGraph) {
				t.Fatalf("WriteMETIS of a one-sided or duplicated graph: %v, want ErrBadGraph", werr)
			}
		} else if werr != nil {
			t.Fatalf("WriteMETIS: %v", werr)
		} else {
			back, err := ReadMETIS(context.Background(), &b, "rewritten")
			if err != nil {
				t.Fatalf("ReadMETIS of WriteMETIS's output: %v\n%s", err, b.Bytes())
			}
			if !slices.Equal(back.Xadj, g.Xadj) || !slices.Equal(back.Adjncy, g.Adjncy) || !slices.Equal(back.Adjwgt, g.Adjwgt) || !slices.Equal(back.Vwgt, g.Vwgt) || back.ncon() != g.ncon() {
				t.Fatalf("round trip changed the graph:\n%s", b.Bytes())
			}
		}
		n := g.NumVertices()
		if n == 0 || n > 1<<12 {
			return
		}
		k := min(n, 1+int(parts)%4)
		where, err := Partition(context.Background(), g, Options{Parts: k, Seed: uint64(seed)})
		if err != nil {
			t.Fatalf("Partition into %d parts: %v", k, err)
		}
		if len(where) != n {
			t.Fatalf("%d parts entries for %d vertices", len(where), n)
		}
		q, err := Measure(g, where, k)
		if err != nil {
			t.Fatal(err)
		}
		if q.Empty > 0 {
			t.Fatalf("%d of %d parts empty", q.Empty, k)
		}
	})
}

// metisClean reports, by brute force, whether g is what METIS accepts:
// every entry (v, u, w) has its twin (u, v, w), and no row lists a
// neighbour twice.
func metisClean(g *Graph) bool {
	type entry struct{ v, u uint32 }
	w := map[entry]int64{}
	for v := range g.NumVertices() {
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			k := entry{uint32(v), g.Adjncy[e]}
			if _, dup := w[k]; dup {
				return false
			}
			w[k] = g.ewgt(e)
		}
	}
	for k, x := range w {
		if y, ok := w[entry{k.u, k.v}]; !ok || y != x {
			return false
		}
	}
	return true
}

// TestCheckSymmetric: random symmetric graphs pass; one entry's weight
// changed, or one entry pointed elsewhere, is refused naming a pair
// (v, u) whose entries do not match: the weights v lists u with are not
// those u lists v with.
func TestCheckSymmetric(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		n := 2 + rng.IntN(40)
		w := map[[2]int]int32{}
		for range rng.IntN(3 * n) {
			u, v := rng.IntN(n), rng.IntN(n)
			if u != v {
				w[[2]int{min(u, v), max(u, v)}] = 1 + rng.Int32N(5)
			}
		}
		g := &Graph{Xadj: make([]int64, n+1)}
		rows := make([][][2]int32, n)
		for k, x := range w {
			rows[k[0]] = append(rows[k[0]], [2]int32{int32(k[1]), x})
			rows[k[1]] = append(rows[k[1]], [2]int32{int32(k[0]), x})
		}
		for v, r := range rows {
			for _, e := range r {
				g.Adjncy = append(g.Adjncy, uint32(e[0]))
				g.Adjwgt = append(g.Adjwgt, e[1])
			}
			g.Xadj[v+1] = int64(len(g.Adjncy))
		}
		if err := CheckSymmetric(g); err != nil {
			t.Fatalf("trial %d: symmetric graph refused: %v", trial, err)
		}
		if len(g.Adjncy) == 0 {
			continue
		}
		e := rng.IntN(len(g.Adjncy))
		if trial%2 == 0 {
			g.Adjwgt[e] += 1
		} else {
			g.Adjncy[e] = uint32((int(g.Adjncy[e]) + 1 + rng.IntN(n-1)) % n)
		}
		err := CheckSymmetric(g)
		var v, u int
		if err == nil {
			// Pointed at a vertex that lists it back with that weight:
			// still symmetric only if the old twin is gone too, which
			// cannot be; a self loop is Validate's to refuse.
			if trial%2 == 1 && g.Validate() != nil {
				continue
			}
			t.Fatalf("trial %d: entry %d changed, graph accepted", trial, e)
		}
		if _, scanErr := fmt.Sscanf(err.Error(), "vertex %d lists %d", &v, &u); scanErr != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		v, u = v-1, u-1
		vu, uv := weightsOf(g, v, u), weightsOf(g, u, v)
		slices.Sort(vu)
		slices.Sort(uv)
		if len(vu) == 0 || slices.Equal(vu, uv) {
			t.Fatalf("trial %d: %v, but %d lists %d with weights %v and %d lists %d with %v", trial, err, v+1, u+1, vu, u+1, v+1, uv)
		}
	}
}

// weightsOf is the weights of v's entries for u.
func weightsOf(g *Graph, v, u int) []int32 {
	var ws []int32
	for f := g.Xadj[v]; f < g.Xadj[v+1]; f++ {
		if int(g.Adjncy[f]) == u {
			ws = append(ws, g.Adjwgt[f])
		}
	}
	return ws
}
