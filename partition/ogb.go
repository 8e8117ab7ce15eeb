package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// An OGB node-property dataset in its raw layout (as the ogb package
// unpacks it, and as WriteOGB writes it):
//
//	dir/raw/edge.csv            src,dst per line, node indices 0..N-1
//	dir/raw/num-node-list.csv   N            (optional)
//	dir/raw/num-edge-list.csv   E            (optional)
//	dir/raw/node-feat.csv       D comma-separated floats per node (optional)
//	dir/raw/node-label.csv      labels per node, "nan" or empty = none (optional)
//	dir/split/<scheme>/{train,valid,test}.csv   node indices, one per line
//
// Every file may also be name.gz (or gzip under its plain name). Node ids
// are dense already, so IDs stays empty. N is num-node-list's value, or
// the row count of the labels or features, or the largest edge endpoint
// plus one; whatever of these is present must agree. The edge, label and
// feature files are parsed on GOMAXPROCS goroutines (see rowReader);
// slots are presized from the counts files, so with them present memory
// peaks at 8E bytes for edges and 4ND for features.
func readOGB(ctx context.Context, dir string, opts ReadOptions) (*Graph, error) {
	raw := filepath.Join(dir, "raw")
	if st, err := os.Stat(raw); err != nil || !st.IsDir() {
		return nil, formatErrorf("%s: no raw/ directory (OGB layout)", dir)
	}
	o := &ogbReader{ctx: ctx, opts: opts, g: &Graph{}, n: -1}
	nNodes, err := readCount(ctx, filepath.Join(raw, "num-node-list.csv"))
	if err != nil {
		return nil, err
	}
	nEdges, err := readCount(ctx, filepath.Join(raw, "num-edge-list.csv"))
	if err != nil {
		return nil, err
	}
	o.n, o.nWhy = nNodes, "num-node-list.csv"
	edges, err := existing(filepath.Join(raw, "edge.csv"))
	if err != nil {
		if npz := filepath.Join(raw, "data.npz"); errors.Is(err, os.ErrNotExist) && isFile(npz) {
			// ogbn-papers100M ships so (OGB's master.csv: binary).
			return nil, formatErrorf("%s: OGB's binary layout (numpy arrays: edge_index, node_feat), which this reader does not take: "+
				"write its arrays as the CSV files of the raw layout (edge.csv, node-feat.csv, node-label.csv, num-node-list.csv) beside it", npz)
		}
		return nil, err
	}
	if err := o.edges(edges, nEdges); err != nil {
		return nil, err
	}
	if path, err := existing(filepath.Join(raw, "node-label.csv")); err == nil {
		if err := o.labels(path); err != nil {
			return nil, err
		}
	}
	if path, err := existing(filepath.Join(raw, "node-feat.csv")); err == nil {
		if err := o.features(path); err != nil {
			return nil, err
		}
	}
	g := o.g
	if o.n < 0 {
		o.n = int(o.maxID + 1)
		if len(g.Src) == 0 {
			o.n = 0
		}
	}
	if len(g.Src) > 0 && o.maxID >= uint64(o.n) {
		return nil, formatErrorf("%s: node %d out of range: %d nodes (%s)", edges, o.maxID, o.n, o.nWhy)
	}
	g.NumNodes = o.n
	if g.Labels != nil {
		if err := missingLabels(g, opts, o.labelPath, func(i uint32) string { return strconv.Itoa(int(i)) }); err != nil {
			return nil, err
		}
	}
	if err := o.splits(filepath.Join(dir, "split")); err != nil {
		return nil, err
	}
	return g, nil
}

type ogbReader struct {
	ctx       context.Context
	opts      ReadOptions
	g         *Graph
	n         int    // nodes, -1 until known
	nWhy      string // the file that fixed n
	maxID     uint64
	labelPath string
}

// readCount reads a one-number file such as num-node-list.csv; -1 when
// the file does not exist.
func readCount(ctx context.Context, name string) (int, error) {
	path, err := existing(name)
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	n := -1
	err = scanFile(ctx, path, nil, func(s *lineScanner, line []byte) error {
		if len(bytes.TrimSpace(line)) == 0 {
			return nil
		}
		v, ok := parseUint(bytes.TrimSpace(line))
		switch {
		case n >= 0:
			return s.errorf("want one count (one graph), got a second line")
		case !ok || v > math.MaxUint32:
			return s.errorf("count %q is not a number below 2^32", line)
		}
		n = int(v)
		return nil
	})
	if err == nil && n < 0 {
		err = formatErrorf("%s: empty", path)
	}
	return n, err
}

// rows runs a rowReader over path.
func (o *ogbReader) rows(path string, limit int, limitWhat string, grow func(int), prefix func(in *inFile) ([]byte, error),
	newWorker func() any, parse func(w any, block []byte, row0 int, line0 int64) error) (int, []any, error) {
	in, err := openInput(path)
	if err != nil {
		return 0, nil, err
	}
	defer in.Close()
	r := &rowReader{ctx: o.ctx, in: in, progress: o.opts.Progress, limit: limit, limitWhat: limitWhat, grow: grow, parse: parse, newWorker: newWorker}
	if prefix != nil {
		if r.prefix, err = prefix(in); err != nil {
			return 0, nil, err
		}
	}
	return r.run()
}

type ogbEdgeWorker struct {
	selfLoops int64
	maxID     uint64
}

func (o *ogbReader) edges(path string, nEdges int) error {
	g := o.g
	// The slots are allocated for the count num-edge-list.csv states
	// when the file can hold that many edges (an edge line is at least
	// "0,1\n"); a count it cannot hold is reported after reading, with
	// the count found, instead of being allocated.
	prefix := func(in *inFile) ([]byte, error) {
		if nEdges >= 0 && int64(nEdges) <= in.maxRows(4) {
			g.Src, g.Dst = make([]uint32, nEdges), make([]uint32, nEdges)
		}
		return nil, nil
	}
	grow := func(rows int) {
		if rows > len(g.Src) {
			g.Src = append(g.Src, make([]uint32, rows-len(g.Src))...)
			g.Dst = append(g.Dst, make([]uint32, rows-len(g.Dst))...)
		}
	}
	limitID := uint64(maxNarrowID)
	if o.n >= 0 {
		limitID = uint64(o.n) - 1
	}
	rows, ws, err := o.rows(path, nEdges, "edges (num-edge-list.csv)", grow, prefix, func() any { return &ogbEdgeWorker{} },
		func(w any, block []byte, row0 int, line0 int64) error {
			ew := w.(*ogbEdgeWorker)
			row := row0
			return eachLine(block, line0, func(l []byte, no int64) error {
				i := bytes.IndexByte(l, ',')
				if i < 0 || bytes.IndexByte(l[i+1:], ',') >= 0 {
					return &LineError{File: path, Line: no, Msg: fmt.Sprintf("want 2 columns, got %d", bytes.Count(l, []byte{','})+1)}
				}
				a, oka := parseUint(l[:i])
				b, okb := parseUint(l[i+1:])
				if !oka || !okb {
					return &LineError{File: path, Line: no, Msg: fmt.Sprintf("%q is not a pair of node indices", l)}
				}
				if a > limitID || b > limitID {
					return &LineError{File: path, Line: no, Msg: fmt.Sprintf("node %d out of range: %d nodes (%s)", max(a, b), o.n, o.nWhy)}
				}
				g.Src[row], g.Dst[row] = uint32(a), uint32(b)
				row++
				ew.maxID = max(ew.maxID, a, b)
				if a == b {
					ew.selfLoops++
				}
				return nil
			})
		})
	if err != nil {
		return err
	}
	if nEdges >= 0 && rows != nEdges {
		return formatErrorf("%s: %d edges, num-edge-list.csv says %d", path, rows, nEdges)
	}
	g.Src, g.Dst = g.Src[:rows:rows], g.Dst[:rows:rows]
	for _, w := range ws {
		ew := w.(*ogbEdgeWorker)
		g.Stats.SelfLoops += ew.selfLoops
		o.maxID = max(o.maxID, ew.maxID)
	}
	g.Stats.Lines += int64(rows)
	g.Stats.EdgesRead += int64(rows)
	return nil
}

// rowSlots sets the node count from a per-node file that has rows rows,
// or checks it against the count already known.
func (o *ogbReader) rowSlots(path string, rows int) error {
	if o.n < 0 {
		o.n, o.nWhy = rows, filepath.Base(path)
		return nil
	}
	if rows != o.n {
		return formatErrorf("%s: %d rows, want %d nodes (%s)", path, rows, o.n, o.nWhy)
	}
	return nil
}

// splits reads split/<scheme>/{train,valid,test}.csv.
func (o *ogbReader) splits(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	var schemes []string
	for _, e := range entries {
		if e.IsDir() {
			schemes = append(schemes, e.Name())
		}
	}
	slices.Sort(schemes)
	scheme := o.opts.SplitScheme
	switch {
	case scheme != "" && !slices.Contains(schemes, scheme):
		return formatErrorf("%s: no split scheme %q; there are: %s", dir, scheme, strings.Join(schemes, ", "))
	case scheme == "" && len(schemes) == 1:
		scheme = schemes[0]
	case scheme == "" && len(schemes) > 1:
		return formatErrorf("%s: several split schemes (%s); choose one", dir, strings.Join(schemes, ", "))
	case scheme == "":
		return nil
	}
	for _, part := range []struct {
		name string
		to   *[]uint32
	}{{"train.csv", &o.g.Train}, {"valid.csv", &o.g.Val}, {"test.csv", &o.g.Test}} {
		path, err := existing(filepath.Join(dir, scheme, part.name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		ids := []uint32{}
		// A repeat was dropped later without a word (the split's count
		// said 2, its kept nodes 1). One bit a node: 14 MB for papers100M.
		seen := newIDSet(uint64(o.n), 0)
		err = scanFile(o.ctx, path, o.opts.Progress, func(s *lineScanner, line []byte) error {
			if len(line) == 0 {
				return nil
			}
			v, ok := parseUint(line)
			if !ok || v >= uint64(o.n) {
				return s.errorf("%q is not a node index below %d", line, o.n)
			}
			if !seen.add(v) {
				return s.errorf("node %d listed twice", v)
			}
			ids = append(ids, uint32(v))
			return nil
		})
		if err != nil {
			return err
		}
		*part.to = ids
	}
	return nil
}

// features reads node-feat.csv: FeatDim (the first line's column count)
// floats per row, every row checked.
func (o *ogbReader) features(path string) error {
	g := o.g
	var dim int
	prefix := func(in *inFile) ([]byte, error) {
		p, err := firstLine(in)
		if dim = columns(p); dim == 0 {
			return nil, &LineError{File: path, Line: 1, Msg: "no feature columns"}
		}
		// A row of dim features is at least "0,…,0\n" (see edges).
		if o.n >= 0 && int64(o.n) <= in.maxRows(2*int64(dim)) {
			g.Feat = make([]float32, o.n*dim)
		}
		return p, err
	}
	grow := func(rows int) {
		if need := rows * dim; need > len(g.Feat) {
			g.Feat = append(g.Feat, make([]float32, need-len(g.Feat))...)
		}
	}
	rows, _, err := o.rows(path, o.n, "nodes", grow, prefix, func() any { return nil }, func(_ any, block []byte, row0 int, line0 int64) error {
		row := row0
		return eachLine(block, line0, func(l []byte, no int64) error {
			if err := parseFeatRow(l, g.Feat[row*dim:(row+1)*dim]); err != "" {
				return &LineError{File: path, Line: no, Msg: err}
			}
			row++
			return nil
		})
	})
	if err != nil {
		return err
	}
	g.FeatDim = dim
	g.Feat = g.Feat[: rows*dim : rows*dim]
	return o.rowSlots(path, rows)
}

// parseFeatRow parses one row of comma-separated floats into out.
func parseFeatRow(l []byte, out []float32) string {
	c := 0
	for {
		j := 0
		for j < len(l) && l[j] != ',' {
			j++
		}
		if c < len(out) {
			v, ok := parseFloat32(l[:j])
			if !ok {
				return fmt.Sprintf("column %d: %q is not a number", c+1, l[:j])
			}
			if !finite32(v) {
				return fmt.Sprintf("column %d: %q is not a finite number", c+1, l[:j])
			}
			out[c] = v
		}
		c++
		if j == len(l) {
			break
		}
		l = l[j+1:]
	}
	if c != len(out) {
		// Line 1 sets the width, and may be the short one.
		return fmt.Sprintf("got %d columns, line 1 has %d", c, len(out))
	}
	return ""
}

// labels reads node-label.csv: LabelDim (the first line's column count)
// integers per row; "nan", an empty field or -1 is no label. One column
// is a class index; several are multi-hot, each 0 or 1.
func (o *ogbReader) labels(path string) error {
	g := o.g
	o.labelPath = path
	var dim int
	prefix := func(in *inFile) ([]byte, error) {
		p, err := firstLine(in)
		if dim = columns(p); dim == 0 {
			dim = 1 // an empty first line is one missing label
		}
		// A row of dim missing labels is dim-1 commas and "\n" (see edges).
		if o.n >= 0 && int64(o.n) <= in.maxRows(int64(dim)) {
			g.Labels = make([]int32, o.n*dim)
		}
		return p, err
	}
	type labelWorker struct{ max int32 }
	rows, ws, err := o.rows(path, o.n, "nodes", func(rows int) {
		if need := rows * dim; need > len(g.Labels) {
			g.Labels = append(g.Labels, make([]int32, need-len(g.Labels))...)
		}
	}, prefix, func() any { return &labelWorker{max: -1} }, func(w any, block []byte, row0 int, line0 int64) error {
		lw := w.(*labelWorker)
		row := row0
		return eachLine(block, line0, func(l []byte, no int64) error {
			out := g.Labels[row*dim : (row+1)*dim]
			c := 0
			for f := range bytes.SplitSeq(l, []byte{','}) {
				if c < dim {
					v, ok := parseLabel(f)
					if !ok {
						return &LineError{File: path, Line: no, Msg: fmt.Sprintf("column %d: %q is not a label", c+1, f)}
					}
					if dim > 1 && v > 1 {
						return &LineError{File: path, Line: no, Msg: fmt.Sprintf("column %d: %d: rows of %d columns are multi-hot labels, each 0, 1 or missing", c+1, v, dim)}
					}
					out[c] = v
					lw.max = max(lw.max, v)
				}
				c++
			}
			if c != dim {
				return &LineError{File: path, Line: no, Msg: fmt.Sprintf("got %d columns, line 1 has %d", c, dim)}
			}
			row++
			return nil
		})
	})
	if err != nil {
		return err
	}
	g.LabelDim = dim
	g.Labels = g.Labels[: rows*dim : rows*dim]
	g.NumClasses = dim
	if dim == 1 {
		g.NumClasses = 0
		for _, w := range ws {
			g.NumClasses = max(g.NumClasses, int(w.(*labelWorker).max)+1)
		}
	}
	return o.rowSlots(path, rows)
}

// parseLabel parses an OGB label: an integer (or an integral float such
// as "3.0"), with "nan", "" and -1 meaning none (-1).
func parseLabel(f []byte) (int32, bool) {
	f = bytes.TrimSpace(f)
	if len(f) == 0 || bytes.EqualFold(f, []byte("nan")) {
		return -1, true
	}
	if v, ok := parseInt(f); ok && v >= -1 && v <= math.MaxInt32 {
		return int32(v), true
	}
	v, ok := parseFloat32(f)
	if !ok || v != float32(math.Trunc(float64(v))) || v < -1 || v > 1<<24 {
		if ok && v != v { // NaN spelled otherwise
			return -1, true
		}
		return 0, false
	}
	return int32(v), true
}

// isFile reports whether name is a regular file.
func isFile(name string) bool {
	st, err := os.Stat(name)
	return err == nil && st.Mode().IsRegular()
}
