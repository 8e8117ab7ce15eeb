package partition

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"

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

// castagnoli is the CRC-32C table (hardware-accelerated by hash/crc32),
// built on first use: as a package variable it was built at start-up by
// every program that links this package, 0.2–0.3 ms before main.
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// writeFile creates tmp/rel, fills it, fsyncs it, and returns its entry.
func writeFile(tmp, rel string, fill func(io.Writer) error) (FileEntry, error) {
	path := filepath.Join(tmp, filepath.FromSlash(rel))
	f, err := os.Create(path)
	if err != nil {
		return FileEntry{}, fmt.Errorf("partition: %w", err)
	}
	h := crc32.New(castagnoli())
	cw := &countWriter{w: io.MultiWriter(f, h)}
	err = fill(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return FileEntry{}, fmt.Errorf("partition: write %s: %w", rel, err)
	}
	return FileEntry{Path: rel, Size: cw.n, CRC32C: fmt.Sprintf("%08x", h.Sum32())}, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// fileEntry reads a written file back for its size and CRC-32C.
func fileEntry(path, rel string) (FileEntry, error) {
	size, crc, err := FileCRC(path)
	if err != nil {
		return FileEntry{}, err
	}
	return FileEntry{Path: rel, Size: size, CRC32C: fmt.Sprintf("%08x", crc)}, nil
}

// FileCRC is the size and CRC-32C of the file at path.
func FileCRC(path string) (int64, uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("partition: %w", err)
	}
	defer f.Close()
	h := crc32.New(castagnoli())
	n, err := io.CopyBuffer(h, f, make([]byte, chunkBytes))
	if err != nil {
		return 0, 0, fmt.Errorf("partition: read %s: %w", path, err)
	}
	return n, h.Sum32(), nil
}

// mkdirTemp makes a new directory in parent named prefix and a random
// suffix, as os.MkdirTemp does, but with the mode of a plain mkdir (0777
// less the umask) instead of 0700: it becomes the output that the daemon
// and the trainers, perhaps other users, read.
func mkdirTemp(parent, prefix string) (string, error) {
	for range 10000 {
		dir := filepath.Join(parent, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		err := os.Mkdir(dir, 0o777)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("make a temporary directory in %s: every name tried exists", parent)
}

// SyncDir fsyncs a directory so that the entries made in it persist.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("partition: sync %s: %w", dir, err)
	}
	return nil
}

// F32ToF16 converts f to IEEE 754 half precision, rounding to nearest
// with ties to even; values beyond the half range become ±Inf, NaN stays
// NaN (quiet).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(mant>>13)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Half subnormal: value = m × 2^-24, m = significand >> (14-e).
		shift := uint32(14 - e)
		if shift > 24 {
			return sign
		}
		mant |= 0x800000
		m := mant >> shift
		rem, half := mant&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || rem == half && m&1 == 1 {
			m++ // may carry into the smallest normal, which is right
		}
		return sign | uint16(m)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, up to Inf, which is right
	}
	return sign | uint16(h)
}

// F16ToF32 converts a half-precision value to float32 exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: normalise.
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}
