package shm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A ring file on tmpfs (/dev/shm) is memory: reserving it takes pages the
// filesystem's size allows (often half the host's memory, or more than a
// container's memory limit) whether or not the host or the process's
// memory cgroup can give them, and the out-of-memory killer then ends the
// node, or the trainer, instead of the ring being refused with a word.

// fitsMemory refuses a ring of size bytes in f's filesystem when that is
// tmpfs and avail says less memory than size is available.
func fitsMemory(f *os.File, size int64, avail func() (int64, bool)) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return nil
	}
	free, ok := avail()
	if !ok || size <= free {
		return nil
	}
	return fmt.Errorf("reserve %s (%d bytes): a ring in tmpfs is memory, and only %s is available (MemAvailable, or the memory cgroup's limit less its usage): %w",
		ApproxSize(size), size, ApproxSize(max(free, 0)), ErrNoMemory)
}

// InMemory reports whether dir is on tmpfs, whose files are memory.
func InMemory(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.TMPFS_MAGIC
}

// MemAvailable is how many bytes of memory this process can still fill:
// the kernel's MemAvailable estimate, or less when its memory cgroup
// (v2 memory.max − memory.current, v1 memory.limit_in_bytes −
// memory.usage_in_bytes) leaves less. ok is false when neither is known.
func MemAvailable() (int64, bool) {
	free, ok := meminfoAvailable()
	if c, cok := cgroupAvailable(); cok && (!ok || c < free) {
		free, ok = c, true
	}
	return free, ok
}

// meminfoAvailable reads MemAvailable from /proc/meminfo.
func meminfoAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !found {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// cgroupAvailable is the room left under this process's memory cgroup
// limit, v2 or v1, looked up at the cgroup's path in /sys/fs/cgroup and,
// where that path is not visible (a cgroup namespace shows its root), at
// the mount's root. ok is false without a limit.
func cgroupAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dirs []string
		var limitFile, usageFile string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dirs = []string{filepath.Join("/sys/fs/cgroup", parts[2]), "/sys/fs/cgroup"}
			limitFile, usageFile = "memory.max", "memory.current"
		case strings.Contains(","+parts[1]+",", ",memory,"):
			dirs = []string{filepath.Join("/sys/fs/cgroup/memory", parts[2]), "/sys/fs/cgroup/memory"}
			limitFile, usageFile = "memory.limit_in_bytes", "memory.usage_in_bytes"
		default:
			continue
		}
		for _, dir := range dirs {
			limit, lok := readInt(filepath.Join(dir, limitFile))
			usage, uok := readInt(filepath.Join(dir, usageFile))
			// "max" (v2) does not parse; v1 says "no limit" with a
			// number near 2^63.
			if lok && uok && limit < 1<<62 {
				return limit - usage, true
			}
			if lok || uok {
				break // this cgroup is visible and has no limit
			}
		}
	}
	return 0, false
}

// readInt reads a file holding one decimal integer.
func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}
