package csr

import "github.com/RoaringBitmap/roaring/v2"

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
	// TODO(csr): implemented by the csr work.
}

// Open maps the partition file at path and validates it.
func Open(path string, opts OpenOptions) (*Graph, error) { panic("csr: Open not implemented") }

// Close unmaps the file. It is idempotent.
func (g *Graph) Close() error { panic("csr: not implemented") }

// Path is the file this graph was opened from.
func (g *Graph) Path() string { panic("csr: not implemented") }

// Meta is the partition-level metadata from the header.
func (g *Graph) Meta() Meta { panic("csr: not implemented") }

// Sections lists the section table in file order.
func (g *Graph) Sections() []Section { panic("csr: not implemented") }

// NumNodes is the number of owned (local) nodes.
func (g *Graph) NumNodes() int { panic("csr: not implemented") }

// NumEdges is the number of stored edges.
func (g *Graph) NumEdges() int { panic("csr: not implemented") }

// Indptr is the CSR row pointer: NumNodes()+1 entries.
func (g *Graph) Indptr() []uint64 { panic("csr: not implemented") }

// Indices are the neighbours' global ids, each list sorted ascending.
func (g *Graph) Indices() []uint64 { panic("csr: not implemented") }

// Neighbors is the sorted neighbour list of local node v.
func (g *Graph) Neighbors(v uint32) []uint64 { panic("csr: not implemented") }

// Weights are per-edge weights aligned with Indices, or nil.
func (g *Graph) Weights() []float32 { panic("csr: not implemented") }

// Etypes are per-edge relation ids aligned with Indices, or nil.
func (g *Graph) Etypes() []uint32 { panic("csr: not implemented") }

// FeatBytes is the raw feature block (NumNodes rows of RowBytes), or nil.
func (g *Graph) FeatBytes() []byte { panic("csr: not implemented") }

// RowBytes is the size of one feature row in bytes (FeatDim × element size).
func (g *Graph) RowBytes() int { panic("csr: not implemented") }

// FeatRow is the raw feature row of local node v.
func (g *Graph) FeatRow(v uint32) []byte { panic("csr: not implemented") }

// FeatF32 is the feature block as float32 when FeatType is TypeF32, else nil.
func (g *Graph) FeatF32() []float32 { panic("csr: not implemented") }

// Labels are LabelDim int32 values per local node (-1 = missing), or nil.
func (g *Graph) Labels() []int32 { panic("csr: not implemented") }

// Mask decodes the roaring bitmap of local indices of a split section
// (SecTrain, SecVal, SecTest). It returns an empty bitmap when the section
// is absent. The bitmap is a fresh copy owned by the caller.
func (g *Graph) Mask(name string) (*roaring.Bitmap, error) { panic("csr: not implemented") }

// CacheIDs are the global ids of cached hot nodes owned elsewhere, or nil.
func (g *Graph) CacheIDs() []uint64 { panic("csr: not implemented") }

// CacheFeat are the feature rows of CacheIDs, same row layout as FeatBytes.
func (g *Graph) CacheFeat() []byte { panic("csr: not implemented") }

// Section returns the raw bytes of a named section.
func (g *Graph) Section(name string) ([]byte, error) { panic("csr: not implemented") }
