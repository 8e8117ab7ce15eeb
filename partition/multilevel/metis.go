package multilevel

import (
	"bufio"
	"context"
	"io"
	"io/fs"
	"math"
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
// METISParser reads the format a line at a time, into a Graph (0-based);
// vertex sizes are checked and dropped, since Graph does not hold them.
// ReadMETIS runs it over a plain stream; partition.ReadMETIS runs it over
// its own line scanner (gzip, progress, positions in its errors).
// WriteMETIS writes a Graph for gpmetis, and ReadPartition reads
// gpmetis's answer (graph.part.K: one part per line).

// SyntaxError is what is wrong with one line of a METIS file, or with
// the file as a whole once read, without the position: the reader that
// hands METISParser its lines knows the file and the line, and adds them
// (see ReadMETIS's LineError).
type SyntaxError struct {
	Msg string
}

func (e *SyntaxError) Error() string { return e.Msg }

// Unwrap makes errors.Is(err, ErrFormat) true.
func (e *SyntaxError) Unwrap() error { return ErrFormat }

// LineError is a bad line of a METIS file: File:Line: Msg.
type LineError struct {
	File string // as given to ReadMETIS
	Line int64  // 1-based
	Msg  string
}

func (e *LineError) Error() string {
	return "multilevel: " + e.File + ":" + itoa(e.Line) + ": " + e.Msg
}

// Unwrap makes errors.Is(err, ErrFormat) true.
func (e *LineError) Unwrap() error { return ErrFormat }

// METISParser is the state of reading one METIS graph file. The header's
// counts are not trusted for memory: the arrays are allocated for them,
// but for no more than the file can hold (see NewMETISParser), so that a
// short file that claims billions of vertices is refused for its missing
// lines without first allocating for them.
type METISParser struct {
	limit       int64
	g           *Graph
	n, m        int64
	vsize, vwgt bool
	ewgt        bool
	plain       bool    // no sizes or weights: lines list neighbours only
	v           int64   // vertex lines read
	vtot        []int64 // per constraint: the weights read so far
	toks        []int64
}

// NewMETISParser starts reading a METIS file of textSize bytes of text,
// 0 when unknown (a stream, or gzip, whose size on disk is not its
// text's). A file of b bytes holds at most b+1 vertex lines and b/2+1
// neighbours (each at least a digit and a separator), so the header's
// counts preallocate no more than b+2 entries per array, or
// metisUnsizedLimit when b is unknown; beyond that the arrays grow as
// lines arrive.
func NewMETISParser(textSize int64) *METISParser {
	limit := int64(metisUnsizedLimit)
	if textSize > 0 {
		limit = textSize + 2
	}
	return &METISParser{limit: limit}
}

// Line reads the next line, without its line break. The error is a
// *SyntaxError, which the caller places in the file.
func (p *METISParser) Line(line []byte) error {
	if len(line) > 0 && line[0] == '%' {
		return nil
	}
	if p.g != nil && p.plain && p.v < p.n {
		// The common case, neighbours only: parsed straight into the
		// adjacency. A line it cannot take as it is (a sign, a stray
		// character, a range or count error) is parsed again below,
		// which names the fault.
		if adj, ok := metisAppendRow(p.g.Adjncy, line, uint32(p.v+1), uint32(p.n), 2*p.m); ok {
			p.g.Adjncy = adj
			p.v++
			p.g.Xadj = append(p.g.Xadj, int64(len(p.g.Adjncy)))
			return nil
		}
	}
	var msg string
	if p.toks, msg = metisInts(line, p.toks[:0]); msg != "" {
		return &SyntaxError{msg}
	}
	toks := p.toks
	if p.g == nil {
		if len(toks) == 0 {
			return nil
		}
		return p.header(toks, line)
	}
	g, v := p.g, p.v
	bad := func(parts ...string) error {
		return &SyntaxError{string(appendAll(append([]byte("vertex "), itoa(v+1)...), parts...))}
	}
	if v == p.n {
		if len(toks) == 0 {
			return nil // blank lines after the last vertex
		}
		return &SyntaxError{"more than the " + itoa(p.n) + " vertex lines of the header"}
	}
	k := 0
	if p.vsize {
		if len(toks) < 1 || toks[0] < 0 {
			return bad(": missing or negative size")
		}
		k++
	}
	if p.vwgt {
		nc := g.ncon()
		if len(toks) < k+nc {
			return bad(": want ", itoa(nc), " vertex weights, got ", itoa(len(toks)-k))
		}
		if len(p.vtot) != nc {
			p.vtot = make([]int64, nc)
		}
		for c := range nc {
			if toks[k+c] < 0 {
				return bad(": negative weight ", itoa(toks[k+c]))
			}
			if toks[k+c] > math.MaxInt64-p.vtot[c] {
				return bad(": weights of constraint ", itoa(c+1), " sum past ", itoa(int64(math.MaxInt64)))
			}
			p.vtot[c] += toks[k+c]
		}
		g.Vwgt = append(g.Vwgt, toks[k:k+nc]...)
		k += nc
	}
	step := 1
	if p.ewgt {
		step = 2
	}
	if (len(toks)-k)%step != 0 {
		return bad(": a neighbour without its edge weight")
	}
	for ; k < len(toks); k += step {
		u := toks[k]
		if u < 1 || u > p.n {
			return bad(": neighbour ", itoa(u), " out of range 1..", itoa(p.n))
		}
		if u == v+1 {
			return bad(": self loop")
		}
		if int64(len(g.Adjncy)) == 2*p.m {
			return &SyntaxError{"more than the 2*" + itoa(p.m) + " neighbours of the header's " + itoa(p.m) + " edges"}
		}
		g.Adjncy = append(g.Adjncy, uint32(u-1))
		if p.ewgt {
			w := toks[k+1]
			if w <= 0 || w > math.MaxInt32 {
				return bad(": edge weight ", itoa(w), ", want 1..", itoa(int64(math.MaxInt32)))
			}
			g.Adjwgt = append(g.Adjwgt, int32(w))
		}
	}
	p.v++
	g.Xadj = append(g.Xadj, int64(len(g.Adjncy)))
	return nil
}

// header parses "n m [fmt [ncon]]" and starts an empty graph (Xadj holds
// its leading 0) whose arrays have room for the header's counts, but for
// no more than p.limit entries each.
func (p *METISParser) header(toks []int64, line []byte) error {
	if len(toks) < 2 || len(toks) > 4 {
		return &SyntaxError{"header " + strconv.Quote(string(line)) + ": want n m [fmt [ncon]]"}
	}
	n, m := toks[0], toks[1]
	if n < 0 || n > math.MaxUint32 || m < 0 || m > math.MaxInt64/2 {
		return &SyntaxError{"header " + strconv.Quote(string(line)) + ": vertex or edge count out of range"}
	}
	fmtv, ncon := int64(0), int64(1)
	if len(toks) > 2 {
		fmtv = toks[2]
	}
	if len(toks) > 3 {
		ncon = toks[3]
	}
	if fmtv < 0 || fmtv > 111 || fmtv%10 > 1 || fmtv/10%10 > 1 {
		return &SyntaxError{"header: fmt " + itoa(fmtv) + ": want binary digits abc (sizes, vertex weights, edge weights)"}
	}
	vsize, vwgt, ewgt := fmtv/100 == 1, fmtv/10%10 == 1, fmtv%10 == 1
	if ncon < 1 || ncon > 1024 || (ncon > 1 && !vwgt) {
		return &SyntaxError{"header: ncon " + itoa(ncon) + ": want 1..1024, and vertex weights for more than 1"}
	}
	limit := p.limit
	g := &Graph{Xadj: make([]int64, 1, min(n+1, limit)), Adjncy: make([]uint32, 0, min(2*m, limit/2, 1<<28)), Ncon: int(ncon)}
	if ewgt {
		g.Adjwgt = make([]int32, 0, cap(g.Adjncy))
	}
	if vwgt {
		g.Vwgt = make([]int64, 0, min(n*ncon, limit/2))
	}
	p.g, p.n, p.m = g, n, m
	p.vsize, p.vwgt, p.ewgt = vsize, vwgt, ewgt
	p.plain = !vsize && !vwgt && !ewgt
	return nil
}

// Graph is the graph read, once every line has been given to Line. The
// error, a *SyntaxError, says what the file lacks.
func (p *METISParser) Graph() (*Graph, error) {
	switch {
	case p.g == nil:
		return nil, &SyntaxError{"no header line"}
	case p.v < p.n:
		return nil, &SyntaxError{itoa(p.v) + " vertex lines, the header says " + itoa(p.n)}
	case int64(len(p.g.Adjncy)) != 2*p.m:
		return nil, &SyntaxError{itoa(len(p.g.Adjncy)) + " neighbours listed, want 2*" + itoa(p.m) + " for the header's " + itoa(p.m) + " edges"}
	}
	return p.g, nil
}

// metisUnsizedLimit is the most entries the header's counts may
// preallocate per array when the input's size is unknown.
const metisUnsizedLimit = 1 << 20

// metisCancelLines is how many lines ReadMETIS reads between checks of
// its context.
const metisCancelLines = 1 << 16

// ReadMETIS reads a METIS graph file from r (plain text; partition.ReadMETIS
// also reads gzip); name is used in errors, which are LineErrors or wrap
// ErrFormat. It checks ranges, self loops (which METIS refuses), and that
// the lines hold 2m neighbours; like gpmetis, it does not check symmetry
// (see CheckSymmetric).
func ReadMETIS(ctx context.Context, r io.Reader, name string) (*Graph, error) {
	p := NewMETISParser(statSize(r))
	br := bufio.NewReaderSize(r, int(min(p.limit, 1<<20)))
	var line int64
	var long []byte // a line longer than br's buffer, gathered
	for {
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, b...)
			continue
		}
		if len(long) > 0 {
			b = append(long, b...)
			long = long[:0]
		}
		if err != nil && err != io.EOF {
			return nil, errorOf(err, name)
		}
		if len(b) > 0 {
			line++
			if line%metisCancelLines == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			b = trimEOL(b)
			if perr := p.Line(b); perr != nil {
				return nil, &LineError{File: name, Line: line, Msg: perr.Error()}
			}
		}
		if err == io.EOF {
			break
		}
	}
	g, err := p.Graph()
	if err != nil {
		return nil, errorOf(ErrFormat, name, ": ", err.Error())
	}
	return g, nil
}

// trimEOL drops a trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// statSize is the size of r when it is a regular file (an *os.File), or
// 0.
func statSize(r io.Reader) int64 {
	f, ok := r.(interface{ Stat() (fs.FileInfo, error) })
	if !ok {
		return 0
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	return st.Size()
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

// metisInts appends the blank-separated integers of line to out, or
// says which token is not one.
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
		v, err := strconv.ParseInt(string(line[i:j]), 10, 64)
		if err != nil {
			return out, strconv.Quote(string(line[i:j])) + " is not an integer"
		}
		out = append(out, v)
		i = j
	}
}

// appendAll appends every part to b.
func appendAll(b []byte, parts ...string) []byte {
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}
