package csr

import "io"

// Writer writes one partition file: sections in the order they are added,
// each 64-byte aligned, then the header and section table at offset 0.
// The file is written under a temporary name and renamed into place by
// Close after fsync, so a reader never sees a partial file.
// A Writer is not safe for concurrent use.
type Writer struct {
	// TODO(csr): implemented by the csr work.
}

// Create starts a partition file at path.
func Create(path string, meta Meta) (*Writer, error) { panic("csr: Create not implemented") }

// Section streams one section: fill writes exactly the section's bytes.
// The CRC-32C is computed on the way.
func (w *Writer) Section(name string, t ElemType, fill func(io.Writer) error) error {
	panic("csr: not implemented")
}

// Uint64s, Uint32s, Int32s, Float32s write a whole section from a slice.
func (w *Writer) Uint64s(name string, v []uint64) error   { panic("csr: not implemented") }
func (w *Writer) Uint32s(name string, v []uint32) error   { panic("csr: not implemented") }
func (w *Writer) Int32s(name string, v []int32) error     { panic("csr: not implemented") }
func (w *Writer) Float32s(name string, v []float32) error { panic("csr: not implemented") }

// Bytes writes a section of raw bytes with the given element type.
func (w *Writer) Bytes(name string, t ElemType, b []byte) error { panic("csr: not implemented") }

// Close writes the header, fsyncs, renames the file into place and fsyncs
// the directory. After a failed Close the temporary file is removed.
func (w *Writer) Close() error { panic("csr: not implemented") }

// Abort removes the temporary file. Safe to call after Close (no-op).
func (w *Writer) Abort() { panic("csr: not implemented") }
