package node

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"graphnode/partition"
)

// checkSpace fails when the file system of dir has fewer than need bytes
// free for this user.
func checkSpace(dir string, need int64) error {
	free, err := freeSpace(dir)
	if err != nil {
		return err
	}
	if free < need {
		return fmt.Errorf("needs %s more on disk, %s has %s free", humanBytes(need), dir, humanBytes(free))
	}
	return nil
}

// freeSpace is the bytes an unprivileged writer may still use on dir's
// file system (tests set it).
var freeSpace = func(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// partial is a file being fetched: its bytes so far and their CRC-32C.
// It holds an exclusive lock on the file, so two fetches into one
// directory cannot interleave their bytes.
type partial struct {
	f    *os.File
	have int64
	crc  uint32
}

// openPartial opens (creating) path, locks it, and reads the bytes an
// earlier fetch left there to go on from them; more than size bytes are
// not a prefix of the file and are dropped.
func openPartial(path string, size int64) (*partial, error) {
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(file.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		file.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: another fetch is writing it: %w", path, ErrFetch)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	w := &partial{f: file}
	st, err := file.Stat()
	if err != nil {
		w.close()
		return nil, err
	}
	if st.Size() > size {
		if err := file.Truncate(0); err != nil {
			w.close()
			return nil, err
		}
		return w, nil
	}
	crc, err := crcOf(io.NewSectionReader(file, 0, st.Size()))
	if err != nil {
		w.close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if _, err := file.Seek(st.Size(), io.SeekStart); err != nil {
		w.close()
		return nil, err
	}
	w.have, w.crc = st.Size(), crc
	return w, nil
}

// crcOf is the CRC-32C of r's bytes.
func crcOf(r io.Reader) (uint32, error) {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	_, err := io.Copy(h, r)
	return h.Sum32(), err
}

func (w *partial) write(b []byte) error {
	n, err := w.f.Write(b)
	w.crc = crc32.Update(w.crc, crc32.MakeTable(crc32.Castagnoli), b[:n])
	w.have += int64(n)
	return err
}

// commit makes the whole file durable under final.
func (w *partial) commit(final string) error {
	if err := w.f.Sync(); err != nil {
		return err
	}
	if err := os.Rename(w.f.Name(), final); err != nil {
		return err
	}
	return partition.SyncDir(filepath.Dir(final))
}

// reset drops the file's bytes (they are wrong), keeping its lock.
func (w *partial) reset() error {
	if err := w.f.Truncate(0); err != nil {
		return err
	}
	if _, err := w.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	w.have, w.crc = 0, 0
	return nil
}

// remove deletes the file (its bytes are wrong).
func (w *partial) remove() { os.Remove(w.f.Name()) }

func (w *partial) close() { w.f.Close() }
