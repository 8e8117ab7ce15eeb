package partition

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// ReadOrigIDs reads orig_ids.bin (new id -> original id, DESIGN.md §4),
// checked against graph.toml: listed, m.Nodes ids, the recorded CRC-32C.
func ReadOrigIDs(dir string, m *Manifest) ([]uint64, error) {
	e := m.Lookup(OrigIDsFile)
	if e == nil {
		return nil, fmt.Errorf("partition: %s is not listed in graph.toml: %w", OrigIDsFile, ErrManifest)
	}
	b, err := os.ReadFile(filepath.Join(dir, OrigIDsFile))
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	if uint64(len(b)) != 8*m.Nodes {
		return nil, fmt.Errorf("partition: %s: %d bytes, want 8 × %d nodes: %w", OrigIDsFile, len(b), m.Nodes, ErrManifest)
	}
	if crc := fmt.Sprintf("%08x", crc32.Checksum(b, castagnoli())); crc != e.CRC32C {
		return nil, fmt.Errorf("partition: %s: crc32c %s, graph.toml records %s: %w", OrigIDsFile, crc, e.CRC32C, ErrManifest)
	}
	ids := make([]uint64, m.Nodes)
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return ids, nil
}
