package csr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"unsafe"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"
)

// OpenOptions tune Open.
type OpenOptions struct {
	// Verify checks the CRC-32C of every section. The header's CRC and the
	// structural checks (bounds, monotone indptr, id ranges) always run.
	Verify bool
}

// Graph is an opened partition file: read-only typed views over a memory
// mapping. Views returned by its methods are valid until Close.
// A Graph is safe for concurrent use by multiple goroutines.
type Graph struct {
	path     string
	meta     Meta
	sections []Section
	m        mmap.MMap // the whole file, read-only
	f        *os.File  // open until Close: Check's fstat, File for samplers
	id       Identity
	header   []byte // as Open checked it, for Check to compare
	watch    watch

	// Typed views into m, set by Open and never written again.
	indptr, indices []uint64
	weights         []float32
	etypes          []uint32
	feat            []byte
	featF32         []float32
	labels          []int32
	cacheIDs        []uint64
	cacheFeat       []byte
	rowBytes        int

	mu struct {
		sync.RWMutex
		closed bool // m is unmapped
	}
}

// littleEndian reports whether this host stores integers little-endian,
// as the file does; the typed views rely on it.
func littleEndian() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }

// Open maps the partition file at path and validates it: the header (magic,
// version, CRC, table), every section's bounds, type and length, the CSR
// structure (monotone indptr ending at the edge count, sorted neighbour
// lists, ids below TotalNodes), labels, masks and cache ids. With
// opts.Verify it also checks every section's CRC-32C. No view is handed
// out before all checks pass. The file stays open until Close (Read
// watches it through the descriptor).
func Open(path string, opts OpenOptions) (*Graph, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // it names path again ("open path: …")
		}
		return nil, fmt.Errorf("csr: open %s: %w", path, err)
	}
	return openFile(f, path, opts)
}

// OpenFile is Open of a file already open for reading, such as a
// descriptor a parent process handed down (Graph.File): the graph maps
// the inode f is, whatever lies at its name now. The Graph owns f: Close
// closes it, and so does an OpenFile that fails. Errors name f.Name().
func OpenFile(f *os.File, opts OpenOptions) (*Graph, error) {
	return openFile(f, f.Name(), opts)
}

func openFile(f *os.File, path string, opts OpenOptions) (*Graph, error) {
	if !littleEndian() {
		f.Close()
		return nil, fmt.Errorf("csr: open %s: this host is big-endian; partition files are mapped as little-endian views: %w", path, ErrVersion)
	}
	g, err := mapFile(f, path, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("csr: open %s: %w", path, err)
	}
	return g, nil
}

// mapFile maps f and checks it; errors leave the path to openFile.
func mapFile(f *os.File, path string, opts OpenOptions) (*Graph, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s): %w", fi.Mode(), ErrCorrupt)
	}
	size := fi.Size()
	hb := make([]byte, min(size, HeaderSize))
	if _, err := f.ReadAt(hb, 0); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	h, err := decodeHeader(hb)
	if err != nil {
		return nil, err
	}
	for _, s := range h.Sections {
		// DecodeHeader bounds offset+length by MaxInt64: no overflow.
		if s.Offset+s.Length > uint64(size) {
			return nil, fmt.Errorf("section %q: offset %d + length %d beyond the end of the file (%d bytes): %w",
				s.Name, s.Offset, s.Length, size, ErrCorrupt)
		}
	}
	if uint64(size) != h.FileSize {
		return nil, fmt.Errorf("header: file is %d bytes, header says %d: %w", size, h.FileSize, ErrCorrupt)
	}
	// size >= HeaderSize > 0 here (FileSize covers the header), so the
	// mapping is never of length 0, even for an empty partition.
	m, err := mmap.Map(f, mmap.RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	// Huge pages where the kernel has them for files: the pages that
	// faults bring in come as 2 MiB folios mapped whole (see
	// writeBufSize for the pages a fresh file is cached in). Advice only:
	// a kernel without it refuses with EINVAL and the mapping is as good.
	_ = unix.Madvise(m, unix.MADV_HUGEPAGE)
	hlen := h.EncodedLen()
	dev, ino := inodeOf(fi)
	g := &Graph{path: path, meta: h.Meta, sections: h.Sections, m: m, f: f, header: hb[:hlen:hlen],
		id: Identity{Dev: dev, Ino: ino, Size: size, HeaderCRC: binary.LittleEndian.Uint32(hb[hlen-4:])}}
	st := stampOf(fi)
	g.watch.last.Store(&st)
	// Validation reads the whole mapping: a copy over the file meanwhile
	// is an error here, not a fault that ends the process.
	if err := g.guard(func() error { return g.load(opts) }); err != nil {
		m.Unmap()
		return nil, err
	}
	return g, nil
}

// raw is the bytes of section i. Open checked the bounds.
func (g *Graph) raw(i int) []byte {
	s := g.sections[i]
	return g.m[s.Offset : s.Offset+s.Length : s.Offset+s.Length]
}

// rawNamed is the bytes of a named section, or nil when absent.
func (g *Graph) rawNamed(name string) []byte {
	for i, s := range g.sections {
		if s.Name == name {
			return g.raw(i)
		}
	}
	return nil
}

// view returns b as a slice of T, or nil when b is nil.
//
// Sound because: b lies inside the read-only mapping, which is
// page-aligned, at an offset that is a multiple of Alignment (64), so the
// first element is aligned for any T used here (at most 8 bytes); len(b) is
// a multiple of the element size (checked by DecodeHeader, type checked by
// checkTable); the host is little-endian, as the file (checked by Open);
// the memory is not Go heap, so the GC neither moves nor frees it, and it
// stays mapped until Close, after which views must not be used.
func view[T uint64 | uint32 | int32 | float32](b []byte) []T {
	if b == nil {
		return nil
	}
	n := len(b) / int(unsafe.Sizeof(T(0)))
	if n == 0 {
		return []T{}
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// load validates the mapped file and sets the views.
func (g *Graph) load(opts OpenOptions) error {
	m := g.meta
	if err := checkTable(m, g.sections, g.raw, opts.Verify); err != nil {
		return err
	}
	// Types and lengths are right from here on; the views are built to
	// check the contents and are only handed out if every check passes.
	g.indptr = view[uint64](g.rawNamed(SecIndptr))
	g.indices = view[uint64](g.rawNamed(SecIndices))
	if err := checkCSR(g.indptr, g.indices, m.TotalNodes); err != nil {
		return err
	}
	g.weights = view[float32](g.rawNamed(SecWeights))
	g.etypes = view[uint32](g.rawNamed(SecEtype))
	g.rowBytes = int(rowBytes(m))
	g.feat = g.rawNamed(SecFeat)
	if m.FeatType == TypeF32 {
		g.featF32 = view[float32](g.feat)
	}
	g.labels = view[int32](g.rawNamed(SecLabel))
	if err := checkLabels(m, g.labels); err != nil {
		return err
	}
	for _, name := range []string{SecTrain, SecVal, SecTest} {
		if b := g.rawNamed(name); b != nil {
			if _, err := decodeMask(name, b, m.End-m.Start); err != nil {
				return err
			}
		}
	}
	g.cacheIDs = view[uint64](g.rawNamed(SecCacheIDs))
	g.cacheFeat = g.rawNamed(SecCacheFeat)
	return checkCacheIDs(m, g.cacheIDs)
}

// Close unmaps and closes the file. It is idempotent. Views obtained
// before Close must not be used after it: their memory is gone and
// reading it faults.
func (g *Graph) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.closed {
		return nil
	}
	g.mu.closed = true
	err := g.m.Unmap()
	if cerr := g.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("csr: close %s: %w", g.path, err)
	}
	return nil
}

// Path is the file this graph was opened from.
func (g *Graph) Path() string { return g.path }

// Meta is the partition-level metadata from the header.
func (g *Graph) Meta() Meta { return g.meta }

// Sections lists the section table in file order. The slice is a copy.
func (g *Graph) Sections() []Section { return append([]Section(nil), g.sections...) }

// NumNodes is the number of owned (local) nodes.
func (g *Graph) NumNodes() int { return len(g.indptr) - 1 }

// NumEdges is the number of stored edges.
func (g *Graph) NumEdges() int { return len(g.indices) }

// Indptr is the CSR row pointer: NumNodes()+1 entries.
func (g *Graph) Indptr() []uint64 { return g.indptr }

// Indices are the neighbours' global ids, each list sorted ascending.
func (g *Graph) Indices() []uint64 { return g.indices }

// Neighbors is the sorted neighbour list of local node v. It panics, as
// an index expression would, when v >= NumNodes().
func (g *Graph) Neighbors(v uint32) []uint64 {
	return g.indices[g.indptr[v]:g.indptr[v+1]]
}

// Weights are per-edge weights aligned with Indices, or nil.
func (g *Graph) Weights() []float32 { return g.weights }

// Etypes are per-edge relation ids aligned with Indices, or nil.
func (g *Graph) Etypes() []uint32 { return g.etypes }

// FeatBytes is the raw feature block (NumNodes rows of RowBytes), or nil.
func (g *Graph) FeatBytes() []byte { return g.feat }

// RowBytes is the size of one feature row in bytes (FeatDim × element size).
func (g *Graph) RowBytes() int { return g.rowBytes }

// FeatRow is the raw feature row of local node v, or nil without features.
// It panics when v >= NumNodes() and features are present.
func (g *Graph) FeatRow(v uint32) []byte {
	if g.feat == nil {
		return nil
	}
	off := int(v) * g.rowBytes
	return g.feat[off : off+g.rowBytes : off+g.rowBytes]
}

// FeatF32 is the feature block as float32 when FeatType is TypeF32, else nil.
func (g *Graph) FeatF32() []float32 { return g.featF32 }

// Labels are LabelDim int32 values per local node (-1 = missing), or nil.
func (g *Graph) Labels() []int32 { return g.labels }

// Mask decodes the roaring bitmap of local indices of a split section
// (SecTrain, SecVal, SecTest). It returns an empty bitmap when the section
// is absent. The bitmap is a fresh copy owned by the caller. It reads the
// mapping through Read: a file changed under it is ErrChanged.
func (g *Graph) Mask(name string) (*roaring.Bitmap, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.mu.closed {
		return nil, fmt.Errorf("csr: %s: section %q: graph is closed: %w", g.path, name, ErrInvalid)
	}
	for i, s := range g.sections {
		if s.Name != name {
			continue
		}
		if s.Type != TypeRoaring {
			return nil, fmt.Errorf("csr: %s: section %q: element type %s, not a roaring bitmap: %w", g.path, name, s.Type, ErrInvalid)
		}
		var bm *roaring.Bitmap
		err := g.Read(func() (err error) {
			bm, err = decodeMask(name, g.raw(i), g.meta.End-g.meta.Start)
			return err
		})
		if errors.Is(err, ErrChanged) {
			return nil, err // it names the file
		}
		if err != nil {
			return nil, fmt.Errorf("csr: %s: %w", g.path, err)
		}
		return bm, nil
	}
	return roaring.New(), nil
}

// CacheIDs are the global ids of cached hot nodes owned elsewhere,
// strictly ascending, or nil.
func (g *Graph) CacheIDs() []uint64 { return g.cacheIDs }

// CacheFeat are the feature rows of CacheIDs, same row layout as FeatBytes.
func (g *Graph) CacheFeat() []byte { return g.cacheFeat }

// Section returns the raw bytes of a named section, a view valid until
// Close. An absent section is an error wrapping ErrNoSection.
func (g *Graph) Section(name string) ([]byte, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.mu.closed {
		return nil, fmt.Errorf("csr: %s: section %q: graph is closed: %w", g.path, name, ErrInvalid)
	}
	if b := g.rawNamed(name); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("csr: %s: section %q: %w", g.path, name, ErrNoSection)
}
