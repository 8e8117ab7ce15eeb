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
