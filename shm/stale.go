package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// nameSuffix ends every ring file name.
const nameSuffix = ".ring"

// creator is the process a ring file's name says created it.
type creator struct {
	// ns is its pid namespace (pidNamespace); 0 when it could not tell,
	// and in names of the older form, which carry none.
	ns  uint64
	pid int
}

// self is the calling process as a creator.
func self() creator { return creator{ns: pidNamespace(), pid: os.Getpid()} }

// Name is the file name of the ring of loader id loaderID that this
// process creates: "<prefix>-<pid namespace>-<pid>-<loaderID>.ring". A
// pid alone is not unique on a host: two daemons in containers sharing
// /dev/shm are each pid 1 of their own namespace, and the second one's
// rings were refused as existing. The pid and its namespace (the inode
// of /proc/self/ns/pid) name one live process, and let RemoveStale find
// the files of a creator that died without removing them, and RemoveOwn
// a creator's own, without opening them.
func Name(prefix string, loaderID uint64) string { return self().name(prefix, loaderID) }

func (c creator) name(prefix string, loaderID uint64) string {
	return fmt.Sprintf("%s-%d-%d-%d%s", prefix, c.ns, c.pid, loaderID, nameSuffix)
}

// parseName returns the creator of a file named by Name with this
// prefix, or by the older form "<prefix>-<pid>-<loaderID>.ring" (ns 0).
func parseName(base, prefix string) (c creator, ok bool) {
	rest, ok := strings.CutPrefix(base, prefix+"-")
	if !ok {
		return creator{}, false
	}
	rest, ok = strings.CutSuffix(rest, nameSuffix)
	if !ok {
		return creator{}, false
	}
	fields := strings.Split(rest, "-")
	if len(fields) == 3 {
		ns, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return creator{}, false
		}
		c.ns, fields = ns, fields[1:]
	}
	if len(fields) != 2 {
		return creator{}, false
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 0 {
		return creator{}, false
	}
	if _, err := strconv.ParseUint(fields[1], 10, 64); err != nil {
		return creator{}, false
	}
	c.pid = pid
	return c, true
}

// headerGrace: a ring file of a creator in another pid namespace that
// has no valid header and no lock on it for this long is a dead
// creator's. Create locks the file right after it creates it and holds
// the lock until the header is written, so a live creator's file is
// without both for microseconds.
const headerGrace = 10 * time.Second

// RemoveStale deletes the ring files in dir named by Name with this
// prefix whose creator is gone, and keeps files of live creators and
// files not named by Name. A file whose header has FlagCreatorLock (every
// file this build creates) is stale when nobody holds its creator's lock:
// a creator that died dropped it, whatever became of its pid, and a live
// creator in another pid namespace sharing dir still holds it. For a file
// without the flag (format 1.0, or a header not yet or never written) the
// pids decide: the pid in the name no longer exists, nor does the creator
// pid in the header when the header is readable. Pids are judged only
// when the name carries this process's pid namespace, or none (the older
// form); a header-less file of another namespace is stale when nobody
// locks it and it is older than headerGrace. The daemon calls it at
// start, before it creates rings, so by the pids a file that names this
// process is stale too: a predecessor's whose pid this process got again
// (a restarted container's daemon gets the same pid). It returns the
// paths removed; errors name the file and do not stop the sweep.
func RemoveStale(dir, prefix string) ([]string, error) {
	me := self()
	return removeRings(dir, prefix, "stale", func(path string, c creator) bool { return staleFile(path, c, me) })
}

// RemoveOwn deletes the ring files in dir that this process created
// (named by Name with this prefix), whatever their state: for a creator
// about to exit without closing its rings (a node stopped by a second
// signal), whose files would otherwise hold their tmpfs memory until the
// next RemoveStale. The files of a process with the same pid in another
// pid namespace are not its own. A process that has a ring mapped keeps
// its pages until it unmaps them. It returns the paths removed; errors
// name the file and do not stop the sweep.
func RemoveOwn(dir, prefix string) ([]string, error) {
	me := self()
	return removeRings(dir, prefix, "own", func(_ string, c creator) bool { return c == me })
}

// removeRings deletes the regular files in dir named by Name with this
// prefix for which doomed (given the path and the creator the name says)
// says so; kind names them in errors ("stale", "own"). It returns the
// paths removed; errors name the file and do not stop the sweep.
func removeRings(dir, prefix, kind string, doomed func(path string, c creator) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("shm: remove %s rings in %s: %w", kind, dir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		c, ok := parseName(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if !doomed(path, c) {
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

// staleFile reports whether creator c of the ring file at path, as its
// name says, is gone (see RemoveStale); me is the process sweeping. A
// file that cannot be opened is not known to be stale.
func staleFile(path string, c creator, me creator) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	// A pid names the same process here only in the same namespace; a
	// name of the older form carries none and is judged as it always was.
	local := c.ns == 0 || c.ns == me.ns
	gone := func(pid int) bool { return local && (pid == me.pid || pidGone(pid)) }
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
		return gone(c.pid) && (h.CreatorPID == c.pid || gone(h.CreatorPID))
	case local:
		return gone(c.pid)
	default:
		return st != nil && time.Since(st.ModTime()) > headerGrace && lockFree(f)
	}
}
