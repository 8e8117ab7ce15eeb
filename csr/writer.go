package csr

import (
	"bufio"
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
	"strings"
	"unsafe"

	"github.com/RoaringBitmap/roaring/v2"
)

// writeBufSize is the buffered writer's size and the unit of every write
// to the file but the last, each at a multiple of it: 2 MiB, the huge page
// of x86-64 and arm64. Whole aligned 2 MiB writes let the page cache hold
// the file in 2 MiB folios, which readers' mappings then map with huge
// pages, so that the sampler's random reads of the neighbour index and the
// feature rows miss the TLB far less (on the 2.4 M-node / 59 M-edge
// partition just written, one sampler: 17.7 M sampled edges per
// CPU-second with the earlier 1 MiB writes at odd offsets against 22.3 M,
// medians of 5 runs).
const writeBufSize = 2 << 20

// Writer writes one partition file: sections in the order they are added,
// each 64-byte aligned, then the header and section table at offset 0.
// The file is written under a temporary name and renamed into place by
// Close after fsync, so a reader never sees a partial file.
// cache_ids must come before cache_feat, whose length it fixes.
// A Writer is not safe for concurrent use.
//
// Any error is final: the Writer removes its temporary file, and every
// later call returns that first error.
type Writer struct {
	path string // final name
	tmp  string // temporary name in the same directory
	meta Meta
	f    *os.File
	bw   *bufio.Writer
	out  *chunkFile // what bw flushes into
	tab  *crc32.Table

	off      uint64 // bytes written so far; the next section's offset
	sections []Section
	err      error // first failure, or the reason the Writer is done
	done     bool  // Close or Abort has run
	portable bool  // tests: encode slices element by element, as a big-endian host does
	// headerCRC is the CRC-32C the header ends with, once Close wrote it.
	headerCRC uint32
}

// Create starts a partition file at path. meta must pass Meta.Validate;
// Meta.NumEdges must be the number of edges that will be written.
func Create(path string, meta Meta) (*Writer, error) {
	if p := meta.problems(); len(p) > 0 {
		return nil, fmt.Errorf("csr: create %s: meta: %s: %w", path, strings.Join(p, "; "), ErrInvalid)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	var f *os.File
	var tmp string
	var err error
	// The name says which file and which process it belongs to; the random
	// part keeps two Writers of one process apart. O_EXCL never reuses a
	// name, and 0666 lets the umask decide, as for any created file.
	for range 16 {
		tmp = filepath.Join(dir, fmt.Sprintf(".%s.%d-%08x.tmp", base, os.Getpid(), rand.Uint32()))
		f, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("csr: create %s: %w", path, err)
	}
	w := &Writer{path: path, tmp: tmp, meta: meta, f: f, off: HeaderSize, tab: castagnoli()}
	w.out = &chunkFile{f: f}
	w.bw = bufio.NewWriterSize(w.out, writeBufSize)
	// The header's place is zeros until Close writes it, and goes through
	// the buffer so that every flush starts at a multiple of writeBufSize.
	if _, err := w.bw.Write(make([]byte, HeaderSize)); err != nil {
		return nil, w.fail(fmt.Errorf("csr: create %s: %w", path, err))
	}
	return w, nil
}

// chunkFile is what the Writer's buffer flushes into: the file, and a
// count of the writes that did not start at a multiple of writeBufSize
// (none do: the buffer only ever flushes when full, because
// sectionWriter never hands it more than a buffer at once).
type chunkFile struct {
	f         *os.File
	off       int64
	unaligned int
}

func (c *chunkFile) Write(p []byte) (int, error) {
	if c.off%writeBufSize != 0 {
		c.unaligned++
	}
	n, err := c.f.Write(p)
	c.off += int64(n)
	return n, err
}

// Section streams one section: fill writes exactly the section's bytes.
// The CRC-32C is computed on the way. fill must not keep the io.Writer.
// Sections known to the format (SecIndptr ...) must have their element
// type and, where Meta fixes it, their length.
func (w *Writer) Section(name string, t ElemType, fill func(io.Writer) error) error {
	if err := w.begin(name, t); err != nil {
		return err
	}
	sw := &sectionWriter{w: w}
	err := fill(sw)
	sw.closed = true
	if err != nil {
		return w.fail(fmt.Errorf("csr: write %s: section %q: %w", w.path, name, w.ioErr(err)))
	}
	if sw.err != nil {
		return w.fail(fmt.Errorf("csr: write %s: section %q: %w", w.path, name, w.ioErr(sw.err)))
	}
	return w.end(name, t, sw.n, sw.crc)
}

// begin checks a new section before any of its bytes are written.
func (w *Writer) begin(name string, t ElemType) error {
	if w.done || w.err != nil {
		return w.stopped()
	}
	invalid := func(format string, a ...any) error {
		return w.fail(fmt.Errorf("csr: write %s: section %q: %s: %w", w.path, name, fmt.Sprintf(format, a...), ErrInvalid))
	}
	if err := checkName(name); err != nil {
		return invalid("%v", err)
	}
	if t.Size() == 0 {
		return invalid("unknown element type %d", uint8(t))
	}
	if len(w.sections) == MaxSections {
		return invalid("more than %d sections", MaxSections)
	}
	for _, s := range w.sections {
		if s.Name == name {
			return invalid("written twice")
		}
	}
	if want, ok := knownType(w.meta, name); ok && want != t {
		if want == 0 {
			return invalid("meta has no feature columns")
		}
		return invalid("element type %s, want %s", t, want)
	}
	if name == SecLabel && w.meta.LabelDim == 0 {
		return invalid("meta has no label columns")
	}
	// cache_feat's length is fixed by the number of cache_ids, which
	// must therefore come first.
	if name == SecCacheFeat && !w.has(SecCacheIDs) {
		return invalid("written before %q, which fixes its length", SecCacheIDs)
	}
	return nil
}

// end checks the section's length, pads to the next section and records
// the table entry.
func (w *Writer) end(name string, t ElemType, n uint64, crc uint32) error {
	if n%uint64(t.Size()) != 0 {
		return w.fail(fmt.Errorf("csr: write %s: section %q: length %d is not a multiple of the %s element size %d: %w", w.path, name, n, t, t.Size(), ErrInvalid))
	}
	if want, ok := knownLen(w.meta, name, w.cacheRows()); ok && want != n {
		return w.fail(fmt.Errorf("csr: write %s: section %q: %d bytes, meta says %d: %w", w.path, name, n, want, ErrInvalid))
	}
	w.sections = append(w.sections, Section{Name: name, Type: t, Offset: w.off, Length: n, CRC: crc})
	w.off += n
	var zero [Alignment]byte
	pad := (Alignment - w.off%Alignment) % Alignment
	if _, err := w.bw.Write(zero[:pad]); err != nil {
		return w.fail(fmt.Errorf("csr: write %s: section %q: %w", w.path, name, w.ioErr(err)))
	}
	w.off += pad
	return nil
}

// cacheRows is the number of cache_ids written so far (0 without them).
func (w *Writer) cacheRows() uint64 {
	for _, s := range w.sections {
		if s.Name == SecCacheIDs {
			return s.Length / 8
		}
	}
	return 0
}

// sectionWriter counts and checksums the bytes of one section.
type sectionWriter struct {
	w      *Writer
	n      uint64
	crc    uint32
	err    error
	closed bool
}

func (s *sectionWriter) Write(p []byte) (int, error) {
	if s.closed {
		return 0, fmt.Errorf("csr: write %s: section writer used after its fill returned: %w", s.w.path, ErrInvalid)
	}
	if s.err != nil {
		return 0, s.err
	}
	// At most a buffer at a time: a larger write into an empty
	// bufio.Writer would go to the file directly, at whatever size it has,
	// and leave every later flush off the writeBufSize boundaries.
	n := 0
	for n < len(p) {
		k, err := s.w.bw.Write(p[n:min(len(p), n+writeBufSize)])
		s.crc = crc32.Update(s.crc, s.w.tab, p[n:n+k])
		s.n += uint64(k)
		n += k
		if err != nil {
			s.err = err
			return n, err
		}
	}
	return n, nil
}

// chunks writes count elements of size bytes, encoding them with put
// straight into the buffered writer's free space: put(buf, i, k) fills
// buf with elements i..i+k. One call per buffer, not per element.
func (s *sectionWriter) chunks(count, size int, put func(buf []byte, i, k int)) error {
	for i := 0; i < count; {
		buf := s.w.bw.AvailableBuffer()
		k := min(count-i, cap(buf)/size)
		if k == 0 {
			if err := s.w.bw.Flush(); err != nil {
				return err
			}
			continue
		}
		buf = buf[:k*size]
		put(buf, i, k)
		if _, err := s.Write(buf); err != nil {
			return err
		}
		i += k
	}
	return nil
}

// Uint64s, Uint32s, Int32s, Float32s write a whole section from a slice.
func (w *Writer) Uint64s(name string, v []uint64) error {
	return writeSlice(w, name, TypeU64, v, func(b []byte, v []uint64) {
		for j, x := range v {
			binary.LittleEndian.PutUint64(b[8*j:], x)
		}
	})
}

func (w *Writer) Uint32s(name string, v []uint32) error {
	return writeSlice(w, name, TypeU32, v, func(b []byte, v []uint32) {
		for j, x := range v {
			binary.LittleEndian.PutUint32(b[4*j:], x)
		}
	})
}

func (w *Writer) Int32s(name string, v []int32) error {
	return writeSlice(w, name, TypeI32, v, func(b []byte, v []int32) {
		for j, x := range v {
			binary.LittleEndian.PutUint32(b[4*j:], uint32(x))
		}
	})
}

func (w *Writer) Float32s(name string, v []float32) error {
	return writeSlice(w, name, TypeF32, v, func(b []byte, v []float32) {
		for j, x := range v {
			binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
		}
	})
}

// writeSlice writes v as one section. On a little-endian host the slice's
// memory already is the file's encoding and is written as it is, through
// the buffer.
// Elsewhere put encodes it a chunk at a time into the buffer's free space.
func writeSlice[T uint64 | uint32 | int32 | float32](w *Writer, name string, t ElemType, v []T, put func([]byte, []T)) error {
	return w.Section(name, t, func(iw io.Writer) error {
		sw := iw.(*sectionWriter)
		size := int(unsafe.Sizeof(T(0)))
		if littleEndian() && !w.portable {
			// Sound because: the view covers exactly v's len(v)*size bytes,
			// v stays alive and unmodified for the call, byte needs no
			// alignment, T holds no pointers, and on this host T's bytes in
			// memory are its little-endian encoding.
			b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*size)
			_, err := sw.Write(b)
			return err
		}
		return sw.chunks(len(v), size, func(buf []byte, i, k int) { put(buf, v[i:i+k]) })
	})
}

// Bytes writes a section of raw bytes with the given element type.
func (w *Writer) Bytes(name string, t ElemType, b []byte) error {
	return w.Section(name, t, func(sw io.Writer) error {
		_, err := sw.Write(b)
		return err
	})
}

// Bitmap writes b as a TypeRoaring section in the portable format, run
// optimised. b itself is not modified. Split masks (SecTrain ...) must
// hold local indices below End-Start.
func (w *Writer) Bitmap(name string, b *roaring.Bitmap) error {
	// A done Writer answers as Section would; fail would otherwise make
	// the range error below the result of a Close that succeeded.
	if w.done || w.err != nil {
		return w.stopped()
	}
	if isMask(name) && !b.IsEmpty() && uint64(b.Maximum()) >= w.meta.End-w.meta.Start {
		return w.fail(fmt.Errorf("csr: write %s: section %q: local index %d >= %d owned nodes: %w",
			w.path, name, b.Maximum(), w.meta.End-w.meta.Start, ErrInvalid))
	}
	c := b.Clone()
	c.RunOptimize()
	return w.Section(name, TypeRoaring, func(sw io.Writer) error {
		_, err := c.WriteTo(sw)
		return err
	})
}

// Close writes the header, fsyncs, renames the file into place and fsyncs
// the directory. After a failed Close the temporary file is removed.
// Close is idempotent: later calls return the first call's result.
func (w *Writer) Close() error {
	if w.done || w.err != nil {
		w.done = true
		return w.err
	}
	w.done = true
	for _, name := range []string{SecIndptr, SecIndices} {
		if !w.has(name) {
			return w.fail(fmt.Errorf("csr: write %s: section %q: required section missing: %w", w.path, name, ErrInvalid))
		}
	}
	if w.has(SecCacheIDs) != w.has(SecCacheFeat) {
		return w.fail(fmt.Errorf("csr: write %s: section %q: %q and %q go together: %w", w.path, SecCacheIDs, SecCacheIDs, SecCacheFeat, ErrInvalid))
	}
	if err := w.bw.Flush(); err != nil {
		return w.fail(fmt.Errorf("csr: write %s: %w", w.path, w.ioErr(err)))
	}
	h := Header{Major: MajorVersion, Minor: MinorVersion, FileSize: w.off, Meta: w.meta, Sections: w.sections}
	buf, err := AppendHeader(make([]byte, 0, HeaderSize), h)
	if err != nil {
		return w.fail(fmt.Errorf("csr: write %s: %w", w.path, err))
	}
	// AppendHeader ends with the header's CRC-32C.
	w.headerCRC = binary.LittleEndian.Uint32(buf[len(buf)-4:])
	buf = buf[:HeaderSize] // zero padding: the capacity was zeroed by make
	if _, err := w.f.WriteAt(buf, 0); err != nil {
		return w.fail(fmt.Errorf("csr: write %s: header: %w", w.path, w.ioErr(err)))
	}
	if err := w.f.Sync(); err != nil {
		return w.fail(fmt.Errorf("csr: write %s: fsync: %w", w.path, w.ioErr(err)))
	}
	if err := w.f.Close(); err != nil {
		return w.fail(fmt.Errorf("csr: write %s: %w", w.path, w.ioErr(err)))
	}
	w.f = nil
	if err := os.Rename(w.tmp, w.path); err != nil {
		os.Remove(w.tmp) // fail removes it only while it is open
		return w.fail(fmt.Errorf("csr: write %s: %w", w.path, err))
	}
	// The file is in place; a failure to sync its directory leaves it
	// complete but perhaps not durable, which the caller should hear of.
	if err := syncDir(filepath.Dir(w.path)); err != nil {
		w.err = fmt.Errorf("csr: write %s: fsync directory: %w", w.path, err)
	}
	return w.err
}

func (w *Writer) has(name string) bool {
	for _, s := range w.sections {
		if s.Name == name {
			return true
		}
	}
	return false
}

// HeaderCRC is the CRC-32C the written header ends with (it covers the
// fixed fields and the section table, so every section's CRC-32C), after
// a successful Close; 0 before.
func (w *Writer) HeaderCRC() uint32 {
	if !w.done || w.err != nil {
		return 0
	}
	return w.headerCRC
}

// Abort removes the temporary file. Safe to call after Close (no-op) and
// more than once.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.fail(fmt.Errorf("csr: write %s: aborted: %w", w.path, ErrInvalid))
}

// ioErr is err without the name of the temporary file when err is the
// file's own error ("write parts/.part.csr.123-ab.tmp: no space left on
// device"): the messages name the file being written, w.path, already.
func (w *Writer) ioErr(err error) error {
	if pe, ok := err.(*fs.PathError); ok && pe.Path == w.tmp {
		return pe.Err
	}
	return err
}

// fail records err as the Writer's final state (unless one is recorded
// already), closes and removes the temporary file, and returns the
// recorded error.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	if w.f != nil {
		w.f.Close()
		w.f = nil
		os.Remove(w.tmp)
	}
	return w.err
}

// stopped is the error of a call on a Writer that is done.
func (w *Writer) stopped() error {
	if w.err != nil {
		return w.err
	}
	return fmt.Errorf("csr: write %s: writer is closed: %w", w.path, ErrInvalid)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
