// Package csr is the partition file part.csr: its on-disk format, a
// streaming Writer, and Open, which maps a file read-only, validates it and
// hands out typed views (DESIGN.md §4).
//
// # Format
//
// One little-endian file. A fixed header region of HeaderSize bytes at
// offset 0, then the sections, each starting at a multiple of Alignment
// (64) bytes; the gaps are zeros.
//
//	offset  size  field
//	     0     8  magic "GNODECSR"
//	     8     2  major version        readers refuse any other major
//	    10     2  minor version        readers accept any minor
//	    12     4  flags                none defined; preserved
//	    16     8  file size            bytes; catches truncation anywhere
//	    24     4  part                 Meta ...
//	    28     4  nparts
//	    32     8  start                owned global ids [start, end)
//	    40     8  end
//	    48     8  total nodes
//	    56     8  edges
//	    64     4  feat dim
//	    68     4  label dim
//	    72     4  classes
//	    76     1  direction            0 in, 1 out
//	    77     1  feat type            ElemType: 0, f32 or f16
//	    78     2  n = section count    at most MaxSections (64)
//	    80  40·n  section table, in file order:
//	              +0  16  name, NUL-padded (1..15 printable ASCII bytes)
//	              +16  1  ElemType
//	              +17  3  zero
//	              +20  4  CRC-32C (Castagnoli) of the section's bytes
//	              +24  8  offset (multiple of 64, >= HeaderSize)
//	              +32  8  length in bytes (multiple of the element size)
//	 80+40n    4  CRC-32C of bytes [0, 80+40n)
//	          ...  zeros up to HeaderSize (4096)
//
//	┌──────────────┬─────────┬─────┬─────────┬─────┬───────┬─────┬──────┐
//	│ header 4 KiB │ indptr  │ pad │ indices │ pad │ feat  │ ... │ test │
//	└──────────────┴─────────┴─────┴─────────┴─────┴───────┴─────┴──────┘
//	0              4096      ↑64-aligned     ↑64-aligned             file size
//
// Sections the format knows (SecIndptr ...) have a fixed element type and,
// where Meta fixes it, a fixed length; `indptr` and `indices` are
// required. Other names are carried as they are, so a later minor version
// can add sections that this one skips.
//
// # Writing
//
//  1. Create(path, meta) opens a temporary file beside path.
//  2. Section (or Uint64s, Uint32s, Int32s, Float32s, Bytes, Bitmap) once
//     per section, in the order they should lie in the file. Each streams
//     its bytes through one buffer, computing the CRC on the way.
//  3. Close writes the header at offset 0, fsyncs, renames the file to
//     path and fsyncs the directory: path holds either the old file or the
//     complete new one, never a partial one. Abort, or any error, removes
//     the temporary file instead. Both are idempotent; defer w.Abort()
//     right after Create is the intended use.
//
// A Writer is used by one goroutine.
//
// # Reading
//
// Open maps the whole file read-only and checks the header, every
// section's bounds, type and length, the CSR structure (indptr starts at
// 0, never decreases, ends at the edge count; each neighbour list sorted;
// ids below TotalNodes), labels, masks and cache ids (owned elsewhere,
// strictly ascending) before any view is handed out; OpenOptions.Verify adds every section's CRC. An error names
// the file and the section and wraps ErrCorrupt (or ErrVersion):
//
//	csr: open parts/part-1/part.csr: section "indptr": not monotone at 1234 (5 after 9): corrupt file
//
// A Graph is safe for concurrent use. The slices its methods return are
// views into the mapping: read-only (writing to them faults), not to be
// kept past Close, which unmaps them; a view used after Close faults.
// Mask returns a fresh bitmap the caller owns.
//
// The file must not be truncated or rewritten in place while it is
// mapped (cp or scp over it do both); Writer's rename never does that to
// an open file. A reader that cannot rule it out, a daemon serving the
// file for weeks, reads the views inside Graph.Read, once per request or
// batch: a change found before or during the reads is then an error that
// wraps ErrChanged and names the file, and stays one, instead of a SIGBUS
// that ends the process (changed.go). The Graph keeps the file open for
// that; Graph.File hands the descriptor to a child process, whose
// OpenFile maps the inode its parent checked, and Identity tells one
// file from another.
//
// Views are typed with unsafe.Slice over the mapping, so Open refuses to
// run on a big-endian host.
package csr
