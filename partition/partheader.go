package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"graphnode/csr"
)

// A part file's header ends with the CRC-32C of its fixed fields and its
// section table, which holds every section's CRC-32C: that one number
// identifies the file's content. graph.toml records it per part
// (part[K].header_crc32c), so a reader of graph.toml can tell with one
// 4 KiB read that part-K/part.csr is the file this graph.toml describes,
// not one of another partitioning of the same size (two runs' outputs
// mixed in one directory, a host given another run's part), which the
// size check takes and only a whole-file CRC (inspect --verify) caught.

// partHeaderCRC reads the header of the part file at path and returns
// the CRC-32C it stores. ok is false when the header does not decode
// (truncated, bad magic, a damaged table): csr.Open says what is wrong
// with it, naming the section.
func partHeaderCRC(path string) (crc uint32, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, fmt.Errorf("partition: %w", err)
	}
	defer f.Close()
	b := make([]byte, csr.HeaderSize)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, false, fmt.Errorf("partition: read %s: %w", path, err)
	}
	h, err := csr.DecodeHeader(b[:n])
	if err != nil {
		return 0, false, nil
	}
	end := h.EncodedLen()
	return binary.LittleEndian.Uint32(b[end-4 : end]), true, nil
}

// headerProblem checks the header CRC of rel, when rel is a part file
// whose entry records one, against graph.toml's.
func (m *Manifest) headerProblem(dir, rel string) error {
	for p, e := range m.Part {
		if rel != PartFile(p) || e.HeaderCRC == "" {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(rel))
		crc, ok, err := partHeaderCRC(path)
		if err != nil || !ok {
			return err
		}
		if got := fmt.Sprintf("%08x", crc); got != e.HeaderCRC {
			return fmt.Errorf("partition: %s: header crc32c %s, graph.toml key \"part[%d].header_crc32c\" records %s: not the part file this graph.toml describes (damaged, or of another partitioning: copy part %d of the run that wrote this graph.toml): %w",
				path, got, p, e.HeaderCRC, p, csr.ErrCorrupt)
		}
		return nil
	}
	return nil
}
