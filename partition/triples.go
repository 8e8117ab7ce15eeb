package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// tripleBytes is the size of one triple in triples-{valid,test}.bin:
// head, relation, tail, each a u64 LE, ids in the new numbering.
const tripleBytes = 24

// ErrTriples: a triples file does not hold what graph.toml says.
var ErrTriples = errors.New("invalid triples file")

// ReadTriples reads the validation or test triples of a knowledge graph's
// partition directory (file is TriplesValidFile or TriplesTestFile). The
// file must be listed in m with its size and CRC-32C, hold the number of
// triples m records, and name only nodes below m.Nodes and relations
// below m.Relations; every failure names the file (and the triple).
func ReadTriples(dir string, m *Manifest, file string) (Triples, error) {
	var want uint64
	switch file {
	case TriplesValidFile:
		want = m.TriplesValid
	case TriplesTestFile:
		want = m.TriplesTest
	default:
		return Triples{}, fmt.Errorf("partition: %s: not a triples file (want %s or %s)", file, TriplesValidFile, TriplesTestFile)
	}
	if m.Relations == 0 {
		return Triples{}, fmt.Errorf("partition: %s: graph.toml has no relations: not a knowledge graph (partition it with --format kg): %w", filepath.Join(dir, file), ErrTriples)
	}
	e := m.Lookup(file)
	if e == nil {
		if want == 0 {
			return Triples{}, nil // the input had no such split
		}
		return Triples{}, fmt.Errorf("partition: %s: %d triples recorded but the file is not listed in graph.toml: %w", file, want, ErrManifest)
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
	if err != nil {
		return Triples{}, fmt.Errorf("partition: %w", err)
	}
	if int64(len(b)) != e.Size {
		return Triples{}, fmt.Errorf("partition: %s: %d bytes, graph.toml records %d: %w", file, len(b), e.Size, ErrTriples)
	}
	if crc := fmt.Sprintf("%08x", crc32.Checksum(b, castagnoli())); crc != e.CRC32C {
		return Triples{}, fmt.Errorf("partition: %s: crc32c %s, graph.toml records %s: %w", file, crc, e.CRC32C, ErrTriples)
	}
	if uint64(len(b)) != want*tripleBytes {
		return Triples{}, fmt.Errorf("partition: %s: %d bytes, want %d triples of %d bytes (graph.toml): %w", file, len(b), want, tripleBytes, ErrTriples)
	}
	t, err := DecodeTriples(b, m.Nodes, m.Relations)
	if err != nil {
		return Triples{}, fmt.Errorf("partition: %s: %w", file, err)
	}
	return t, nil
}

// DecodeTriples decodes triples of 3 u64 LE (head, relation, tail) and
// checks every id: heads and tails below nodes, relations below rels.
func DecodeTriples(b []byte, nodes uint64, rels int) (Triples, error) {
	if len(b)%tripleBytes != 0 {
		return Triples{}, fmt.Errorf("%d bytes is not a whole number of %d-byte triples: %w", len(b), tripleBytes, ErrTriples)
	}
	n := len(b) / tripleBytes
	nodes = min(nodes, 1<<32) // ids are uint32 in memory
	t := Triples{Head: make([]uint32, n), Rel: make([]uint32, n), Tail: make([]uint32, n)}
	for i := range n {
		rec := b[i*tripleBytes:]
		h, r, tl := binary.LittleEndian.Uint64(rec), binary.LittleEndian.Uint64(rec[8:]), binary.LittleEndian.Uint64(rec[16:])
		switch {
		case h >= nodes || tl >= nodes:
			return Triples{}, fmt.Errorf("triple %d (%d, %d, %d) names a node beyond %d nodes: %w", i, h, r, tl, nodes, ErrTriples)
		case r >= uint64(rels):
			return Triples{}, fmt.Errorf("triple %d (%d, %d, %d) names a relation beyond %d relations: %w", i, h, r, tl, rels, ErrTriples)
		}
		t.Head[i], t.Rel[i], t.Tail[i] = uint32(h), uint32(r), uint32(tl)
	}
	return t, nil
}

// AppendTriples appends t in the layout DecodeTriples reads.
func AppendTriples(b []byte, t Triples) []byte {
	for i := range t.Len() {
		b = binary.LittleEndian.AppendUint64(b, uint64(t.Head[i]))
		b = binary.LittleEndian.AppendUint64(b, uint64(t.Rel[i]))
		b = binary.LittleEndian.AppendUint64(b, uint64(t.Tail[i]))
	}
	return b
}
