package partition

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"graphnode/csr"
)

// chunkBytes is the size of the conversion buffer a section streams
// through: large sections are never held whole in their on-disk form.
const chunkBytes = 1 << 20

// partWriter writes one partition file.
type partWriter struct {
	g      *Graph
	adj    *Adj
	rl     *relabeling
	opts   *WriteOptions
	part   int
	masks  [3][]*roaring.Bitmap
	report func(edges int64)
	cache  []uint32 // new ids of the cached nodes, ascending, or nil

	ids  []uint32 // scratch: one row in new ids
	keys []uint64 // scratch: one row as (new id << 32 | position)
	buf  []byte   // scratch: the conversion buffer, reused by every section
}

// write writes part-K/part.csr under tmp and fills e's counts.
func (pw *partWriter) write(ctx context.Context, tmp string, e *PartEntry) (FileEntry, error) {
	g, adj, p := pw.g, pw.adj, pw.part
	start, end := pw.rl.bounds[p], pw.rl.bounds[p+1]
	olds := pw.rl.oldOf[start:end]
	var edges uint64
	for _, u := range olds {
		edges += uint64(adj.Degree(u))
	}
	meta := csr.Meta{
		Part: uint32(p), NumParts: uint32(pw.opts.Parts), Start: start, End: end,
		TotalNodes: uint64(g.NumNodes), NumEdges: edges, Direction: adj.Direction,
	}
	if g.Labels != nil && g.LabelDim > 0 {
		meta.LabelDim, meta.NumClasses = uint32(g.LabelDim), uint32(pw.opts.classes)
	}
	hasFeat := g.Feat != nil && g.FeatDim > 0
	if hasFeat {
		meta.FeatDim, meta.FeatType = uint32(g.FeatDim), pw.opts.FeatType
	}
	rel := PartFile(p)
	path := filepath.Join(tmp, filepath.FromSlash(rel))
	if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil {
		return FileEntry{}, fmt.Errorf("partition: %w", err)
	}
	w, err := csr.Create(path, meta)
	if err != nil {
		return FileEntry{}, err
	}
	closed := false
	defer func() {
		if !closed {
			w.Abort()
		}
	}()

	sections := []struct {
		name string
		t    csr.ElemType
		on   bool
		fill func(*chunkWriter)
	}{
		{csr.SecIndptr, csr.TypeU64, true, func(c *chunkWriter) {
			var off uint64
			c.u64(0)
			for _, u := range olds {
				off += uint64(adj.Degree(u))
				c.u64(off)
			}
		}},
		{csr.SecIndices, csr.TypeU64, true, func(c *chunkWriter) {
			var cut, maxDeg uint64
			var n int64
			for i, u := range olds {
				for _, id := range pw.row(u) {
					if uint64(id) < start || uint64(id) >= end {
						cut++
					}
					c.u64(uint64(id))
				}
				maxDeg = max(maxDeg, uint64(adj.Degree(u)))
				n += int64(adj.Degree(u))
				if n >= cancelEvery || i == len(olds)-1 {
					if c.err == nil {
						c.err = ctx.Err()
					}
					pw.report(n)
					n = 0
				}
			}
			e.EdgeCut, e.MaxDegree = cut, maxDeg
		}},
		{csr.SecWeights, csr.TypeF32, adj.Weights != nil, func(c *chunkWriter) {
			for _, u := range olds {
				base := adj.Indptr[u]
				for _, k := range pw.order(u) {
					c.u32(math.Float32bits(adj.Weights[base+uint64(uint32(k))]))
				}
			}
		}},
		{csr.SecEtype, csr.TypeU32, adj.Etypes != nil, func(c *chunkWriter) {
			for _, u := range olds {
				base := adj.Indptr[u]
				for _, k := range pw.order(u) {
					c.u32(adj.Etypes[base+uint64(uint32(k))])
				}
			}
		}},
		{csr.SecFeat, pw.opts.FeatType, hasFeat, func(c *chunkWriter) { pw.featRows(c, olds) }},
		{csr.SecLabel, csr.TypeI32, g.Labels != nil && g.LabelDim > 0, func(c *chunkWriter) {
			d := g.LabelDim
			for _, u := range olds {
				for _, l := range g.Labels[int(u)*d : (int(u)+1)*d] {
					c.u32(uint32(l))
				}
			}
		}},
		// The cache: ids first (the writer sizes cache_feat by them).
		{csr.SecCacheIDs, csr.TypeU64, pw.cache != nil, func(c *chunkWriter) {
			for _, id := range pw.cache {
				c.u64(uint64(id))
			}
		}},
		{csr.SecCacheFeat, pw.opts.FeatType, pw.cache != nil, func(c *chunkWriter) {
			olds := make([]uint32, len(pw.cache))
			for i, id := range pw.cache {
				olds[i] = pw.rl.oldOf[id]
			}
			pw.featRows(c, olds)
		}},
	}
	for _, s := range sections {
		if !s.on {
			continue
		}
		err := w.Section(s.name, s.t, func(out io.Writer) error {
			c := &chunkWriter{w: out, buf: pw.buf[:0]}
			s.fill(c)
			pw.buf = c.buf
			return c.flush()
		})
		if err != nil {
			return FileEntry{}, err
		}
		if err := ctx.Err(); err != nil {
			return FileEntry{}, err
		}
	}
	counts := []*uint64{&e.Train, &e.Val, &e.Test}
	for s, name := range []string{csr.SecTrain, csr.SecVal, csr.SecTest} {
		if pw.masks[s] == nil {
			continue
		}
		b := pw.masks[s][p]
		*counts[s] = b.GetCardinality()
		if err := w.Bitmap(name, b); err != nil {
			return FileEntry{}, err
		}
	}
	e.Edges = edges
	closed = true
	if err := w.Close(); err != nil {
		return FileEntry{}, err
	}
	e.HeaderCRC = fmt.Sprintf("%08x", w.HeaderCRC())
	return fileEntry(path, rel)
}

// featRows writes the feature rows of the nodes olds in the file's type.
func (pw *partWriter) featRows(c *chunkWriter, olds []uint32) {
	g, d := pw.g, pw.g.FeatDim
	for _, u := range olds {
		row := g.Feat[int(u)*d : (int(u)+1)*d]
		if pw.opts.FeatType == csr.TypeF16 {
			for _, f := range row {
				c.u16(F32ToF16(f))
			}
			continue
		}
		for _, f := range row {
			c.u32(math.Float32bits(f))
		}
	}
}

// row is u's neighbours in new ids, sorted ascending.
func (pw *partWriter) row(u uint32) []uint32 {
	if pw.adj.Weights != nil || pw.adj.Etypes != nil {
		keys := pw.order(u)
		pw.ids = pw.ids[:0]
		for _, k := range keys {
			pw.ids = append(pw.ids, uint32(k>>32))
		}
		return pw.ids
	}
	pw.ids = pw.ids[:0]
	for _, v := range pw.adj.Row(u) {
		pw.ids = append(pw.ids, pw.rl.newID[v])
	}
	slices.Sort(pw.ids)
	return pw.ids
}

// order is u's row as keys (new id << 32 | position in the row), sorted:
// the order in which its entries are written, so that weights and
// relations follow their neighbour. Ties keep the row's order, so equal
// neighbours with several relations stay sorted by relation.
func (pw *partWriter) order(u uint32) []uint64 {
	pw.keys = pw.keys[:0]
	for i, v := range pw.adj.Row(u) {
		pw.keys = append(pw.keys, uint64(pw.rl.newID[v])<<32|uint64(i))
	}
	slices.Sort(pw.keys)
	return pw.keys
}

// chunkWriter encodes little-endian values into a buffer that is
// flushed every chunkBytes. The first error sticks.
type chunkWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func (c *chunkWriter) u64(v uint64) {
	c.buf = binary.LittleEndian.AppendUint64(c.buf, v)
	c.maybeFlush()
}

func (c *chunkWriter) u32(v uint32) {
	c.buf = binary.LittleEndian.AppendUint32(c.buf, v)
	c.maybeFlush()
}

func (c *chunkWriter) u16(v uint16) {
	c.buf = binary.LittleEndian.AppendUint16(c.buf, v)
	c.maybeFlush()
}

func (c *chunkWriter) maybeFlush() {
	if len(c.buf) >= chunkBytes {
		c.flush()
	}
}

func (c *chunkWriter) flush() error {
	if c.err == nil && len(c.buf) > 0 {
		_, c.err = c.w.Write(c.buf)
	}
	c.buf = c.buf[:0]
	return c.err
}

// writeIDs writes orig_ids.bin and, as the graph needs them, names.txt,
// relations.txt and the knowledge-graph triple files.
func writeIDs(ctx context.Context, tmp string, g *Graph, rl *relabeling) ([]FileEntry, error) {
	var files []FileEntry
	add := func(rel string, fill func(c *chunkWriter)) error {
		f, err := writeFile(tmp, rel, func(w io.Writer) error {
			c := &chunkWriter{w: w}
			fill(c)
			if err := c.flush(); err != nil {
				return err
			}
			return ctx.Err()
		})
		files = append(files, f)
		return err
	}
	err := add(OrigIDsFile, func(c *chunkWriter) {
		for _, old := range rl.oldOf {
			c.u64(g.IDs.Orig(old))
		}
	})
	if err != nil {
		return nil, err
	}
	if g.IDs.Names != nil {
		if err := add(NamesFile, lines(g.IDs.Names)); err != nil {
			return nil, err
		}
	}
	if g.KG == nil {
		return files, nil
	}
	if err := add(RelationsFile, lines(g.KG.RelationNames)); err != nil {
		return nil, err
	}
	for _, t := range []struct {
		rel string
		tr  Triples
	}{{TriplesValidFile, g.KG.Valid}, {TriplesTestFile, g.KG.Test}} {
		err := add(t.rel, func(c *chunkWriter) {
			for i := range t.tr.Len() {
				h, r, tl := t.tr.Head[i], t.tr.Rel[i], t.tr.Tail[i]
				if int(h) >= g.NumNodes || int(tl) >= g.NumNodes {
					c.err = fmt.Errorf("partition: %s: triple %d names a node beyond %d nodes", t.rel, i, g.NumNodes)
					return
				}
				c.u64(uint64(rl.newID[h]))
				c.u64(uint64(r))
				c.u64(uint64(rl.newID[tl]))
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// lines writes one name per line; a name holding a line break is an error.
// The readers refuse such a name at the line that gives it (nameBreak),
// so this guards names that come from elsewhere.
func lines(names []string) func(c *chunkWriter) {
	return func(c *chunkWriter) {
		for i, s := range names {
			if nameBreak(s) >= 0 {
				c.err = fmt.Errorf("partition: name %d (%q) holds a line break", i, s)
				return
			}
			c.buf = append(c.buf, s...)
			c.buf = append(c.buf, '\n')
			c.maybeFlush()
		}
	}
}

// nameBreak returns the index of the first byte of name that the name
// files (names.txt, relations.txt: one name a line) cannot hold, a line
// break, or -1. lines refuses such a name, and the readers refuse it at
// the line that gives it, with this one rule.
func nameBreak[T ~string | ~[]byte](name T) int {
	for i := 0; i < len(name); i++ {
		if name[i] == '\n' || name[i] == '\r' {
			return i
		}
	}
	return -1
}
