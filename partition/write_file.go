package partition

// Writing one file of a partitioning: its CRC-32C and size as written, the
// temporary directory, and the fsync of a directory.

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

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
