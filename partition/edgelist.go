package partition

import (
	"context"
	"math"
	"strconv"
)

// An edge list is one edge per line: `src dst [weight]`. Fields are
// separated by runs of blanks (space, tab) or by one comma with optional
// blanks around it; an empty field ("1,,2") is an error. A line or the
// rest of a line starting with '#' or '%' at a field boundary is a comment
// ("1 2 # note"; "C#" is an id). An optional header line is skipped
// (ReadOptions.Header).
//
// Node order. Integer ids: node i is the i-th smallest id of the node
// set, so ids that are exactly 0..N-1 map to themselves and IDs.Ints stays
// nil; otherwise IDs.Ints lists the ids ascending. The reader stores raw
// ids in Src/Dst while it reads and relabels them in place at the end
// through a bitmap rank (no hash map) unless the ids are sparse (largest id
// well above 64 per node) or above 2^32-1, where a map is used. String ids:
// first-seen order (node file first, then edges, then label file), names
// in IDs.Names.
//
// IDs "auto" decides integers or strings from the node file when there is
// one, else from the data: ids are integers until the first id that is not
// a decimal integer, then every id is a string and the integer ids read so
// far are named by their decimal form (so "007" and "7" differ from then
// on, while before they were the same node).
//
// The node set: with a node file, its ids, and an edge endpoint or label id
// outside it is dangling (ReadOptions.Dangling); without one, the edge
// endpoints, and a label-file id that is no endpoint is dangling.
//
// Memory: Src and Dst (and Weights) are presized from the file size and
// the line length of the first megabyte, so a file of E edges takes about
// 8E bytes (12E weighted) at peak; when the estimate is short, append grows
// the slices by 1.25x, briefly holding old and new arrays.

// edgeSplit is at most how many fields splitFields returns; more are
// counted but not kept.
const edgeSplit = 4

// splitFields splits an edge-list line into fields, stripping a trailing
// comment. It returns the number of fields (which may exceed len(out); the
// first len(out) are stored) and "" or what is wrong.
func splitFields(line []byte, out *[edgeSplit][]byte) (int, string) {
	n, i, comma := 0, 0, false
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) || line[i] == '#' || line[i] == '%' {
			if comma {
				return n, "empty field after ','"
			}
			return n, ""
		}
		if line[i] == ',' {
			return n, "empty field before ','"
		}
		start := i
		for i < len(line) && line[i] != ' ' && line[i] != '\t' && line[i] != ',' {
			i++
		}
		if n < edgeSplit {
			out[n] = line[start:i]
		}
		n++
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		comma = i < len(line) && line[i] == ','
		if comma {
			i++
		}
	}
}

// edgeList reads an edge list with its optional node and label files.
type edgeList struct {
	ctx  context.Context
	opts ReadOptions
	g    *Graph

	strs    bool // ids are strings
	decided bool // strs is fixed (by ReadOptions.IDs or the node file)

	// Integer ids. narrow: Src/Dst hold raw ids (all below 2^32). Wide:
	// they hold first-seen indices into wideIDs.
	wide    bool
	maxID   uint64
	wideIdx map[uint64]uint32
	wideIDs []uint64
	known   *idSet // the node file's ids, nil without one
	index   *intIndex

	names      *nameIDs // string ids
	knownNames bool     // names holds the node file: new names are dangling

	labels labelFile
}

func readEdgeList(ctx context.Context, path string, opts ReadOptions) (*Graph, error) {
	in, err := openInput(path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	return readEdgeListFrom(ctx, in, opts)
}

// readEdgeListFrom reads the edge list in (and opts' node and label files).
func readEdgeListFrom(ctx context.Context, in *inFile, opts ReadOptions) (*Graph, error) {
	r := &edgeList{ctx: ctx, opts: opts, g: &Graph{}, names: newNameIDs(0)}
	switch opts.IDs {
	case IDsString:
		r.strs, r.decided = true, true
	case IDsInt:
		r.decided = true
	}
	if opts.NodeFile != "" {
		if err := r.readNodes(opts.NodeFile); err != nil {
			return nil, err
		}
	}
	if err := r.readEdges(in); err != nil {
		return nil, err
	}
	if opts.LabelFile != "" {
		if err := r.labels.read(ctx, opts.LabelFile, opts.Progress); err != nil {
			return nil, err
		}
	}
	if !r.strs {
		r.finishInts()
	}
	res, err := r.resolveLabels()
	if err != nil {
		return nil, err
	}
	if r.strs {
		r.g.NumNodes = len(r.names.names)
		r.g.IDs.Names = r.names.names
	}
	if opts.LabelFile != "" {
		if err := r.labels.apply(r.g, opts, res, r.nodeName); err != nil {
			return nil, err
		}
	}
	return r.g, nil
}

// resolveLabels maps the label file's ids to nodes, applying the dangling
// policy (Add for integer ids was applied by finishInts).
func (r *edgeList) resolveLabels() ([]nodeLabel, error) {
	l := &r.labels
	res := make([]nodeLabel, 0, len(l.pairs))
	for _, p := range l.pairs {
		var i uint32
		var ok bool
		if r.strs {
			if i, ok = r.names.lookup([]byte(p.id)); !ok && r.opts.Dangling == Add {
				if msg := nameFault("node id", NamesFile, p.id); msg != "" {
					return nil, l.errorf(p, "%s", msg)
				}
				r.g.Stats.Dangling++
				i, ok = r.names.add(p.id), true
			}
		} else {
			id, isInt := parseUint([]byte(p.id))
			if !isInt {
				return nil, l.errorf(p, "node id %q is not an integer", p.id)
			}
			i, ok = r.index.lookup(id)
		}
		if !ok {
			r.g.Stats.Dangling++
			if r.opts.Dangling == Error {
				return nil, l.errorf(p, "node %q is not a node of the graph", p.id)
			}
			r.g.Stats.DanglingDrop++
			continue
		}
		res = append(res, nodeLabel{i, p.tok})
	}
	return res, nil
}

// readEdges reads the edge file into r.g.
func (r *edgeList) readEdges(in *inFile) error {
	s := newLineScanner(r.ctx, in, r.opts.Progress, in.path)
	r.presize(s)
	header := r.opts.Header
	var f, f2 [edgeSplit][]byte
	var held []byte // auto header/ids: the first line, until the second says what it was
	var heldLine int64
	// skipped is a held first line taken for a header because the
	// second line's ids were integers, while it could be an edge: if a
	// later id is not an integer after all, the first line was an edge
	// of string ids, and it is read then, as the first edge.
	var skipped []byte
	want := 2
	if r.opts.Weighted {
		want = 3
	}
	first := true
	g := r.g
	fast := !r.opts.Weighted && !r.strs // integer pairs may take fastPair
	for {
		line, ok := s.next()
		if !ok {
			break
		}
		if fast && !first && held == nil {
			if a, b, ok := fastPair(line); ok {
				g.Stats.Lines++
				if err := r.intEdge(s, a, b, 0); err != nil {
					return err
				}
				fast = !r.strs
				continue
			}
		}
		if isComment(line) {
			continue
		}
		n, msg := splitFields(line, &f)
		if first {
			first = false
			if header == HeaderYes {
				continue
			}
			if header == HeaderAuto && !r.strs && msg == "" && noneNumeric(&f, n) {
				if r.decided { // integer ids: this is a header
					continue
				}
				held, heldLine = append([]byte(nil), line...), s.line
				continue
			}
		}
		if msg == "" {
			msg = countMsg(n, want)
		}
		if msg != "" {
			return s.errorf("%s", msg)
		}
		if held != nil {
			if !isUint(f[0]) || !isUint(f[1]) { // string ids: the held line is data
				if err := r.heldEdge(s, held, heldLine, want); err != nil {
					return err
				}
			} else if hn, _ := splitFields(held, &f2); hn == want && !r.opts.Weighted {
				skipped = held // a weighted edge has a numeric weight: never one
			}
			held = nil
		}
		if skipped != nil && !r.strs && (!isUint(f[0]) || !isUint(f[1])) {
			r.toStrings()
			if err := r.heldEdge(s, skipped, heldLine, want); err != nil {
				return err
			}
			r.lastEdgeFirst()
			skipped = nil
		}
		if err := r.edge(s, &f); err != nil {
			return err
		}
		fast = fast && !r.strs
	}
	if s.Err() != nil {
		return s.Err()
	}
	if held != nil {
		if err := r.heldEdge(s, held, heldLine, want); err != nil {
			return err
		}
	}
	s.done()
	return nil
}

// lastEdgeFirst moves the edge added last to the front of the edges.
func (r *edgeList) lastEdgeFirst() {
	g := r.g
	rotate(g.Src)
	rotate(g.Dst)
	rotate(g.Weights)
}

// rotate moves the last element of s to its front.
func rotate[T any](s []T) {
	if len(s) < 2 {
		return
	}
	last := s[len(s)-1]
	copy(s[1:], s)
	s[0] = last
}

// heldEdge processes the first line of the file after the second showed
// that it was data, not a header.
func (r *edgeList) heldEdge(s *lineScanner, line []byte, lineNo int64, want int) error {
	var f [edgeSplit][]byte
	n, _ := splitFields(line, &f)
	cur := s.line
	s.line = lineNo
	err := error(nil)
	if msg := countMsg(n, want); msg != "" {
		err = s.errorf("%s", msg)
	} else {
		err = r.edge(s, &f)
	}
	s.line = cur
	return err
}

func countMsg(n, want int) string {
	if n == want {
		return ""
	}
	msg := "want " + strconv.Itoa(want) + " fields, got " + strconv.Itoa(n)
	if n == 3 && want == 2 {
		msg += " (a third column needs the weighted option)"
	}
	return msg
}

// noneNumeric: no field of a split line is a number, as in a header.
func noneNumeric(f *[edgeSplit][]byte, n int) bool {
	for _, b := range f[:min(n, edgeSplit)] {
		if _, ok := parseFloat32(b); ok {
			return false
		}
	}
	return n > 0
}

// presize reserves Src/Dst for the estimated number of lines, from the
// file size and the first buffer's line length (and compression ratio).
func (r *edgeList) presize(s *lineScanner) {
	s.fill()
	buf := s.buf[s.start:s.end]
	lines := int64(1)
	for _, c := range buf {
		if c == '\n' {
			lines++
		}
	}
	est := lines
	if !s.eof && len(buf) > 0 {
		total := float64(s.in.size)
		if s.in.gz != nil {
			if c := s.in.consumed(); c > 0 {
				total *= float64(len(buf)) / float64(c)
			}
		}
		est = int64(total/float64(len(buf))*float64(lines)*1.05) + 1024
	}
	est = min(est, math.MaxInt32*4)
	r.g.Src = make([]uint32, 0, est)
	r.g.Dst = make([]uint32, 0, est)
	if r.opts.Weighted {
		r.g.Weights = make([]float32, 0, est)
	}
}

func isUint(b []byte) bool {
	_, ok := parseUint(b)
	return ok
}

// edge adds the edge of one split line.
func (r *edgeList) edge(s *lineScanner, f *[edgeSplit][]byte) error {
	g := r.g
	g.Stats.Lines++
	var w float32
	if r.opts.Weighted {
		var ok bool
		if w, ok = parseFloat32(f[2]); !ok {
			return s.errorf("weight %q is not a number", f[2])
		}
		if !finite32(w) {
			return s.errorf("weight %q is not a finite number", f[2])
		}
	}
	if !r.strs {
		x, okx := r.intID(f[0])
		y, oky := r.intID(f[1])
		if !okx || !oky {
			bad := f[0]
			if okx {
				bad = f[1]
			}
			if r.decided {
				return s.errorf("node id %q is not an integer", bad)
			}
			r.toStrings()
			return r.edgeNames(s, f, w)
		}
		return r.intEdge(s, x, y, w)
	}
	return r.edgeNames(s, f, w)
}

// intEdge adds the edge x -> y of integer ids.
func (r *edgeList) intEdge(s *lineScanner, x, y uint64, w float32) error {
	g := r.g
	g.Stats.EdgesRead++
	if r.known != nil {
		keep, err := r.knownInts(s, x, y)
		if !keep {
			return err
		}
	}
	if !r.wide && (x > maxNarrowID || y > maxNarrowID) {
		r.goWide()
	}
	var a, b uint32
	if r.wide {
		a, b = r.wideIndex(x), r.wideIndex(y)
	} else {
		a, b = uint32(x), uint32(y)
		r.maxID = max(r.maxID, x, y)
	}
	r.add(a, b, w)
	return nil
}

// fastPair parses the most common line, "digits sep digits" with sep a
// run of blanks or one comma among blanks, in one pass; any other line
// (comments, weights, strings, errors) takes the general path.
func fastPair(line []byte) (a, b uint64, ok bool) {
	i := 0
	for i < len(line) && line[i]-'0' <= 9 {
		a = a*10 + uint64(line[i]-'0')
		i++
	}
	// A leading zero leaves the line to edge, which decides what it
	// means (intID).
	if i == 0 || i > 19 || (line[0] == '0' && i > 1) {
		return 0, 0, false
	}
	j, commas := i, 0
	for j < len(line) && (line[j] == ' ' || line[j] == '\t' || line[j] == ',') {
		if line[j] == ',' {
			commas++
		}
		j++
	}
	k := j
	for k < len(line) && line[k]-'0' <= 9 {
		b = b*10 + uint64(line[k]-'0')
		k++
	}
	if j == i || commas > 1 || k == j || k-j > 19 || k != len(line) || (line[j] == '0' && k-j > 1) {
		return 0, 0, false
	}
	return a, b, true
}

// knownInts applies the dangling policy to an edge of integer ids when a
// node file defines the node set.
func (r *edgeList) knownInts(s *lineScanner, x, y uint64) (bool, error) {
	if r.known.has(x) && r.known.has(y) {
		return true, nil
	}
	r.g.Stats.Dangling++
	switch r.opts.Dangling {
	case Add:
		r.known.add(x)
		r.known.add(y)
		return true, nil
	case Error:
		bad := x
		if r.known.has(x) {
			bad = y
		}
		return false, s.errorf("node %d is not in the node file %s", bad, r.opts.NodeFile)
	}
	r.g.Stats.DanglingDrop++
	return false, nil
}

// edgeNames adds an edge of string ids.
func (r *edgeList) edgeNames(s *lineScanner, f *[edgeSplit][]byte, w float32) error {
	g := r.g
	g.Stats.EdgesRead++
	var a, b uint32
	if r.knownNames {
		var oka, okb bool
		a, oka = r.names.lookup(f[0])
		b, okb = r.names.lookup(f[1])
		if !oka || !okb {
			g.Stats.Dangling++
			switch r.opts.Dangling {
			case Add:
				if err := edgeNameFault(s, f); err != nil {
					return err
				}
				a, b = r.names.intern(f[0]), r.names.intern(f[1])
			case Error:
				bad := f[0]
				if oka {
					bad = f[1]
				}
				return s.errorf("node %q is not in the node file %s", bad, r.opts.NodeFile)
			default:
				g.Stats.DanglingDrop++
				return nil
			}
		}
	} else {
		if err := edgeNameFault(s, f); err != nil {
			return err
		}
		a, b = r.names.intern(f[0]), r.names.intern(f[1])
	}
	r.add(a, b, w)
	return nil
}

// edgeNameFault refuses an edge whose string ids names.txt cannot hold.
func edgeNameFault(s *lineScanner, f *[edgeSplit][]byte) error {
	for _, id := range f[:2] {
		if msg := nameFault("node id", NamesFile, id); msg != "" {
			return s.errorf("%s", msg)
		}
	}
	return nil
}

// add appends edge a -> b (and its weight when the list is weighted),
// counting a self loop.
func (r *edgeList) add(a, b uint32, w float32) {
	g := r.g
	if a == b {
		g.Stats.SelfLoops++
	}
	g.Src = append(g.Src, a)
	g.Dst = append(g.Dst, b)
	if r.opts.Weighted {
		g.Weights = append(g.Weights, w)
	}
}
