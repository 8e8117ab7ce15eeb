package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// nameSuffix ends every ring file name.
const nameSuffix = ".ring"

// Name is the file name of the ring of loader id loaderID created by
// process pid: "<prefix>-<pid>-<loaderID>.ring". The pid in the name lets
// RemoveStale find the files of a creator that died without removing
// them, without opening them.
func Name(prefix string, pid int, loaderID uint64) string {
	return fmt.Sprintf("%s-%d-%d%s", prefix, pid, loaderID, nameSuffix)
}

// parseName returns the creator pid of a file named by Name with this
// prefix.
func parseName(base, prefix string) (pid int, ok bool) {
	rest, ok := strings.CutPrefix(base, prefix+"-")
	if !ok {
		return 0, false
	}
	rest, ok = strings.CutSuffix(rest, nameSuffix)
	if !ok {
		return 0, false
	}
	pidText, idText, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return 0, false
	}
	if _, err := strconv.ParseUint(idText, 10, 64); err != nil {
		return 0, false
	}
	return pid, true
}

// RemoveStale deletes the ring files in dir named by Name with this
// prefix whose creator is gone: the pid in the name no longer exists,
// nor does the creator pid in the header when the header is readable.
// Files of live creators, and files not named by Name, are kept. The
// daemon calls it at start, before it creates rings, so a file that
// names this process is stale too: a predecessor's whose pid this
// process got again (a restarted container's daemon gets the same pid),
// which would otherwise stay, and make Create of the same loader id fail
// because the file exists. It returns the paths removed; errors name the
// file and do not stop the sweep.
func RemoveStale(dir, prefix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("shm: remove stale rings in %s: %w", dir, err)
	}
	self := os.Getpid()
	gone := func(pid int) bool { return pid == self || pidGone(pid) }
	var removed []string
	var errs []error
	for _, e := range entries {
		pid, ok := parseName(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() || !gone(pid) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if creator, ok := headerCreator(path); ok && creator != pid && !gone(creator) {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("shm: remove stale ring %s: %w", path, err))
			continue
		}
		removed = append(removed, path)
	}
	return removed, errors.Join(errs...)
}

// headerCreator reads the creator pid from a ring file's header, if the
// header is valid.
func headerCreator(path string) (int, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, false
	}
	var b [HeaderSize]byte
	n, _ := f.ReadAt(b[:], 0)
	h, err := decodeHeader(b[:n], st.Size())
	if err != nil {
		return 0, false
	}
	return h.CreatorPID, true
}
