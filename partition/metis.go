package partition

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// The METIS graph file (METIS manual, section 4.1.1):
//
//	% comment lines start with '%'
//	n m [fmt [ncon]]          header: vertices, undirected edges
//	[s] [w_1 .. w_ncon] v [e] v [e] ...     line i: vertex i (1-based)
//
// fmt is up to three binary digits "abc": a = vertex sizes s, b = ncon
// vertex weights w, c = an edge weight e after each neighbour v. Every
// edge {u, v} is listed in both u's and v's line, so the lines hold 2m
// neighbours. A vertex without neighbours has an empty line.
//
// ReadMETIS returns the graph as a WGraph (the multilevel partitioner's
// CSR, 0-based); vertex sizes are checked and dropped, since neither
// WGraph nor Graph holds them. WriteMETIS writes a WGraph for gpmetis,
// and ReadMETISPartition reads gpmetis's answer (graph.part.K: one part
// per line). Read with FormatMETIS gives a Graph of 2m directed edges
// (both directions of each edge) with the edge weights in Weights.

// ReadMETIS reads a METIS graph file from r; name is used in errors.
// Gzip input is decompressed. It checks ranges, self loops (which METIS
// refuses), and that the lines hold 2m neighbours; it does not check
// symmetry.
func ReadMETIS(ctx context.Context, r io.Reader, name string) (*WGraph, error) {
	in, err := wrapInput(r, name, statSize(r))
	if err != nil {
		return nil, err
	}
	return readMETIS(ctx, in, name)
}

// metisUnsizedPrealloc is the most entries the header's counts may
// preallocate per array when the input's size is unknown (a stream) or
// is not the text's (gzip); beyond it the arrays grow as lines arrive.
const metisUnsizedPrealloc = 1 << 20

// readMETIS is ReadMETIS of an opened input. The header's counts are
// not trusted for memory: a file of size bytes holds at most size+1
// vertex lines and size/2+1 neighbours (each at least a digit and a
// separator), so a short file that claims billions of vertices is
// refused for its missing lines without first allocating for them.
func readMETIS(ctx context.Context, in *inFile, name string) (*WGraph, error) {
	limit := int64(metisUnsizedPrealloc)
	if in.size > 0 && in.gz == nil {
		limit = in.size + 2
	}
	s := newLineScanner(ctx, in, nil, name)
	var (
		g            *WGraph
		n, m         int64
		vsize, vwgt  bool
		ewgt         bool
		v            int64 // vertex lines read
		toks         []int64
		headerParsed bool
		plain        bool // no sizes or weights: lines list neighbours only
	)
	for {
		line, ok := s.next()
		if !ok {
			break
		}
		if len(line) > 0 && line[0] == '%' {
			continue
		}
		if headerParsed && plain && v < n {
			// The common case, neighbours only: parsed straight into
			// the adjacency. A line it cannot take as it is (a sign, a
			// stray character, a range or count error) is parsed again
			// below, which names the fault.
			if adj, ok := metisAppendRow(g.Adjncy, line, uint32(v+1), uint32(n), 2*m); ok {
				g.Adjncy = adj
				v++
				g.Xadj = append(g.Xadj, int64(len(g.Adjncy)))
				continue
			}
		}
		var msg string
		if toks, msg = metisInts(line, toks[:0]); msg != "" {
			return nil, s.errorf("%s", msg)
		}
		if !headerParsed {
			if len(toks) == 0 {
				continue
			}
			headerParsed = true
			if g, n, m, vsize, vwgt, ewgt, msg = metisHeader(toks, line, limit); msg != "" {
				return nil, s.errorf("%s", msg)
			}
			plain = !vsize && !vwgt && !ewgt
			continue
		}
		if v == n {
			if len(toks) == 0 {
				continue // blank lines after the last vertex
			}
			return nil, s.errorf("more than the %d vertex lines of the header", n)
		}
		k := 0
		if vsize {
			if len(toks) < 1 || toks[0] < 0 {
				return nil, s.errorf("vertex %d: missing or negative size", v+1)
			}
			k++
		}
		if vwgt {
			nc := g.ncon()
			if len(toks) < k+nc {
				return nil, s.errorf("vertex %d: want %d vertex weights, got %d", v+1, nc, len(toks)-k)
			}
			for c := range nc {
				if toks[k+c] < 0 {
					return nil, s.errorf("vertex %d: negative weight %d", v+1, toks[k+c])
				}
			}
			g.Vwgt = append(g.Vwgt, toks[k:k+nc]...)
			k += nc
		}
		step := 1
		if ewgt {
			step = 2
		}
		if (len(toks)-k)%step != 0 {
			return nil, s.errorf("vertex %d: a neighbour without its edge weight", v+1)
		}
		for ; k < len(toks); k += step {
			u := toks[k]
			if u < 1 || u > n {
				return nil, s.errorf("vertex %d: neighbour %d out of range 1..%d", v+1, u, n)
			}
			if u == v+1 {
				return nil, s.errorf("vertex %d: self loop", v+1)
			}
			if int64(len(g.Adjncy)) == 2*m {
				return nil, s.errorf("more than the 2*%d neighbours of the header's %d edges", m, m)
			}
			g.Adjncy = append(g.Adjncy, uint32(u-1))
			if ewgt {
				w := toks[k+1]
				if w <= 0 || w > math.MaxInt32 {
					return nil, s.errorf("vertex %d: edge weight %d, want 1..%d", v+1, w, math.MaxInt32)
				}
				g.Adjwgt = append(g.Adjwgt, int32(w))
			}
		}
		v++
		g.Xadj = append(g.Xadj, int64(len(g.Adjncy)))
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	switch {
	case !headerParsed:
		return nil, formatErrorf("%s: no header line", name)
	case v < n:
		return nil, formatErrorf("%s: %d vertex lines, the header says %d", name, v, n)
	case int64(len(g.Adjncy)) != 2*m:
		return nil, formatErrorf("%s: %d neighbours listed, want 2*%d for the header's %d edges", name, len(g.Adjncy), m, m)
	}
	return g, nil
}

// statSize is the size of r when it is a regular file (an *os.File), or
// 0; it sizes the read buffers.
func statSize(r io.Reader) int64 {
	f, ok := r.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return 0
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	return st.Size()
}

// metisHeader parses "n m [fmt [ncon]]" and returns an empty graph
// (Xadj holds its leading 0) whose arrays have room for the header's
// counts, but for no more than limit entries each.
func metisHeader(toks []int64, line []byte, limit int64) (g *WGraph, n, m int64, vsize, vwgt, ewgt bool, msg string) {
	if len(toks) < 2 || len(toks) > 4 {
		return nil, 0, 0, false, false, false, fmt.Sprintf("header %q: want n m [fmt [ncon]]", line)
	}
	n, m = toks[0], toks[1]
	if n < 0 || n > math.MaxUint32 || m < 0 || m > math.MaxInt64/2 {
		return nil, 0, 0, false, false, false, fmt.Sprintf("header %q: vertex or edge count out of range", line)
	}
	fmtv, ncon := int64(0), int64(1)
	if len(toks) > 2 {
		fmtv = toks[2]
	}
	if len(toks) > 3 {
		ncon = toks[3]
	}
	if fmtv < 0 || fmtv > 111 || fmtv%10 > 1 || fmtv/10%10 > 1 {
		return nil, 0, 0, false, false, false, fmt.Sprintf("header: fmt %d: want binary digits abc (sizes, vertex weights, edge weights)", fmtv)
	}
	vsize, vwgt, ewgt = fmtv/100 == 1, fmtv/10%10 == 1, fmtv%10 == 1
	if ncon < 1 || ncon > 1024 || (ncon > 1 && !vwgt) {
		return nil, 0, 0, false, false, false, fmt.Sprintf("header: ncon %d: want 1..1024, and vertex weights for more than 1", ncon)
	}
	g = &WGraph{Xadj: make([]int64, 1, min(n+1, limit)), Adjncy: make([]uint32, 0, min(2*m, limit/2, 1<<28)), Ncon: int(ncon)}
	if ewgt {
		g.Adjwgt = make([]int32, 0, cap(g.Adjncy))
	}
	if vwgt {
		g.Vwgt = make([]int64, 0, min(n*ncon, limit/2))
	}
	return g, n, m, vsize, vwgt, ewgt, ""
}

// metisAppendRow appends the neighbours listed on the line of vertex
// self (1-based; n vertices) to adj, 0-based, when every one is a plain
// decimal in 1..n other than self and adj stays within max entries; ok
// is false, and adj must be dropped, for anything else.
func metisAppendRow(adj []uint32, line []byte, self, n uint32, max int64) ([]uint32, bool) {
	i := 0
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) {
			return adj, true
		}
		var u uint64
		j := i
		for ; j < len(line) && j-i < 11; j++ {
			d := line[j] - '0'
			if d > 9 {
				break
			}
			u = u*10 + uint64(d)
		}
		if j == i || (j < len(line) && line[j] != ' ' && line[j] != '\t') {
			return adj, false
		}
		if u < 1 || u > uint64(n) || u == uint64(self) || int64(len(adj)) == max {
			return adj, false
		}
		adj = append(adj, uint32(u-1))
		i = j
	}
}

// metisInts appends the blank-separated integers of line to out.
func metisInts(line []byte, out []int64) ([]int64, string) {
	i := 0
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) {
			return out, ""
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		v, ok := parseInt(line[i:j])
		if !ok {
			return out, fmt.Sprintf("%q is not an integer", line[i:j])
		}
		out = append(out, v)
		i = j
	}
}

// readMETISFile is Read for FormatMETIS.
func readMETISFile(ctx context.Context, path string, opts ReadOptions) (*Graph, error) {
	in, err := openInput(path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	w, err := readMETIS(ctx, in, path)
	if err != nil {
		return nil, err
	}
	n := w.NumVertices()
	g := &Graph{NumNodes: n, Src: make([]uint32, len(w.Adjncy)), Dst: w.Adjncy}
	for v := range n {
		for e := w.Xadj[v]; e < w.Xadj[v+1]; e++ {
			g.Src[e] = uint32(v)
		}
	}
	if w.Adjwgt != nil {
		g.Weights = make([]float32, len(w.Adjwgt))
		for i, x := range w.Adjwgt {
			g.Weights[i] = float32(x)
		}
	}
	g.Stats.Lines = int64(n)
	g.Stats.EdgesRead = int64(len(w.Adjncy))
	opts.Progress.report(path, in.size, in.size)
	return g, nil
}

// WriteMETIS writes g in the METIS graph format for gpmetis: header
// "n m" ("n m fmt ncon" with weights: fmt 010 vertex weights, 001 edge
// weights, 011 both), then one 1-based line per vertex. g must be what
// METIS accepts, and WriteMETIS checks it all: WGraph.Validate (ranges,
// weights, no self loops), no duplicate neighbour in a row, and symmetry:
// every entry (v, u, w) has its twin (u, v, w). Symmetry is checked with
// a sum over entries of hash(v, u, w) - hash(u, v, w), which is zero for
// a symmetric graph and, for an asymmetric one, zero only with
// probability about 2^-64; the check needs no memory beyond one uint32
// per vertex (for the duplicates).
func WriteMETIS(w io.Writer, g *WGraph) error {
	if err := g.Validate(); err != nil {
		return fmt.Errorf("partition: write metis: %w", err)
	}
	n := g.NumVertices()
	stamp := make([]uint32, n)
	var asym uint64
	for v := range n {
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			u := g.Adjncy[e]
			if stamp[u] == uint32(v)+1 {
				return fmt.Errorf("partition: write metis: vertex %d lists neighbour %d twice: %w", v, u, ErrBadGraph)
			}
			stamp[u] = uint32(v) + 1
			wt := uint64(g.ewgt(e))
			asym += metisEntryHash(uint64(v), uint64(u), wt) - metisEntryHash(uint64(u), uint64(v), wt)
		}
	}
	if asym != 0 {
		return fmt.Errorf("partition: write metis: not symmetric (some edge u-v lacks v-u with the same weight): %w", ErrBadGraph)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	b := make([]byte, 0, 256)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, g.NumEdges(), 10)
	if g.Vwgt != nil || g.Adjwgt != nil {
		f := "001"
		if g.Vwgt != nil {
			f = "010"
			if g.Adjwgt != nil {
				f = "011"
			}
		}
		b = append(b, ' ')
		b = append(b, f...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(g.ncon()), 10)
	}
	b = append(b, '\n')
	nc := g.ncon()
	for v := range n {
		if g.Vwgt != nil {
			for c := range nc {
				b = strconv.AppendInt(b, g.Vwgt[v*nc+c], 10)
				b = append(b, ' ')
			}
		}
		for e := g.Xadj[v]; e < g.Xadj[v+1]; e++ {
			b = strconv.AppendUint(b, uint64(g.Adjncy[e])+1, 10)
			b = append(b, ' ')
			if g.Adjwgt != nil {
				b = strconv.AppendInt(b, int64(g.Adjwgt[e]), 10)
				b = append(b, ' ')
			}
		}
		if len(b) > 0 && b[len(b)-1] == ' ' {
			b = b[:len(b)-1]
		}
		b = append(b, '\n')
		if len(b) >= 64<<10 {
			if _, err := bw.Write(b); err != nil {
				return fmt.Errorf("partition: write metis: %w", err)
			}
			b = b[:0]
		}
	}
	if _, err := bw.Write(b); err != nil {
		return fmt.Errorf("partition: write metis: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("partition: write metis: %w", err)
	}
	return nil
}

// metisEntryHash mixes one adjacency entry (splitmix64's finalizer over
// the packed pair, then the weight).
func metisEntryHash(v, u, w uint64) uint64 {
	x := v<<32 | u
	x = metisMix(x ^ metisMix(w+0x9e3779b97f4a7c15))
	return x
}

func metisMix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// ReadMETISPartition reads a gpmetis partition file (graph.part.K): n
// lines, line i the part of vertex i-1.
func ReadMETISPartition(r io.Reader, n int) ([]uint32, error) {
	in, err := wrapInput(r, "metis partition", 0)
	if err != nil {
		return nil, err
	}
	s := newLineScanner(context.Background(), in, nil, "")
	parts := make([]uint32, 0, n)
	for {
		line, ok := s.next()
		if !ok {
			break
		}
		if len(line) == 0 {
			continue
		}
		p, ok := parseUint(line)
		if !ok || p > math.MaxUint32 {
			return nil, s.errorf("part %q is not a partition number", line)
		}
		if len(parts) == n {
			return nil, s.errorf("more than the %d vertices", n)
		}
		parts = append(parts, uint32(p))
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(parts) != n {
		return nil, formatErrorf("metis partition: %d lines, want %d vertices", len(parts), n)
	}
	return parts, nil
}
