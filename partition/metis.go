package partition

import (
	"context"
	"io"
	"os"

	"graphnode/partition/multilevel"
)

// ReadMETIS reads a METIS graph file (see multilevel.METISParser for the
// format) from r, gzip or not; name is used in errors, which are
// LineErrors or wrap ErrFormat. It checks ranges, self loops (which
// METIS refuses), that the lines hold 2m neighbours, and that every edge
// is listed at both ends with the same weight. Read with FormatMETIS gives a Graph of 2m directed
// edges (both directions of each edge) with the edge weights in Weights.
func ReadMETIS(ctx context.Context, r io.Reader, name string) (*multilevel.Graph, error) {
	in, err := wrapInput(r, name, statSize(r))
	if err != nil {
		return nil, err
	}
	return readMETIS(ctx, in, name)
}

// readMETIS is ReadMETIS of an opened input: the lines of in, through
// this package's scanner (gzip, cancellation, positions), go to
// multilevel's parser, which bounds what the header's counts preallocate
// by the size of the text (unknown for gzip).
func readMETIS(ctx context.Context, in *inFile, name string) (*multilevel.Graph, error) {
	textSize := in.size
	if in.gz != nil {
		textSize = 0
	}
	p := multilevel.NewMETISParser(textSize)
	s := newLineScanner(ctx, in, nil, name)
	for {
		line, ok := s.next()
		if !ok {
			break
		}
		if err := p.Line(line); err != nil {
			return nil, s.errorf("%s", err.Error())
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	g, err := p.Graph()
	if err == nil {
		err = multilevel.CheckSymmetric(g)
	}
	if err != nil {
		return nil, formatErrorf("%s: %s", name, err.Error())
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
