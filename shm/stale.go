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
// prefix whose creator is gone, and keeps files of live creators and
// files not named by Name. A file whose header has FlagCreatorLock (every
// file this build creates) is stale when nobody holds its creator's lock:
// a creator that died dropped it, whatever became of its pid, and a live
// creator in another pid namespace sharing dir still holds it. For a file
// without the flag (format 1.0, or a header not yet or never written) the
// pids decide: the pid in the name no longer exists, nor does the creator
// pid in the header when the header is readable. The daemon calls it at
// start, before it creates rings, so by the pids a file that names this
// process is stale too: a predecessor's whose pid this process got again
// (a restarted container's daemon gets the same pid). It returns the
// paths removed; errors name the file and do not stop the sweep.
func RemoveStale(dir, prefix string) ([]string, error) {
	self := os.Getpid()
	gone := func(pid int) bool { return pid == self || pidGone(pid) }
	return removeRings(dir, prefix, "stale", func(path string, pid int) bool { return staleFile(path, pid, gone) })
}

// RemoveOwn deletes the ring files in dir that process pid created
// (named by Name with this prefix and pid), whatever their state: for a
// creator about to exit without closing its rings (a node stopped by a
// second signal), whose files would otherwise hold their tmpfs memory
// until the next RemoveStale. A process that has a ring mapped keeps its
// pages until it unmaps them. It returns the paths removed; errors name
// the file and do not stop the sweep.
func RemoveOwn(dir, prefix string, pid int) ([]string, error) {
	return removeRings(dir, prefix, "own", func(_ string, p int) bool { return p == pid })
}

// removeRings deletes the regular files in dir named by Name with this
// prefix for which doomed (given the path and the creator pid in the
// name) says so; kind names them in errors ("stale", "own"). It returns
// the paths removed; errors name the file and do not stop the sweep.
func removeRings(dir, prefix, kind string, doomed func(path string, pid int) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("shm: remove %s rings in %s: %w", kind, dir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		pid, ok := parseName(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if !doomed(path, pid) {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("shm: remove %s ring %s: %w", kind, path, err))
			continue
		}
		removed = append(removed, path)
	}
	return removed, errors.Join(errs...)
}

// staleFile reports whether the creator of the ring file at path, named
// with pid, is gone (see RemoveStale). A file that cannot be opened is
// not known to be stale.
func staleFile(path string, pid int, gone func(int) bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var h header
	st, err := f.Stat()
	if err == nil {
		var b [HeaderSize]byte
		n, _ := f.ReadAt(b[:], 0)
		h, err = decodeHeader(b[:n], st.Size())
	}
	switch {
	case err == nil && h.Flags&FlagCreatorLock != 0:
		return lockFree(f)
	case err == nil:
		return gone(pid) && (h.CreatorPID == pid || gone(h.CreatorPID))
	default:
		return gone(pid)
	}
}
