package shm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCreateRefusesMoreThanMemory: a preallocated ring in tmpfs larger
// than the memory available is refused before anything is reserved, and
// leaves no file; one that fits, one without Prealloc, one whose estimate
// is unknown, and one outside tmpfs are made.
func TestCreateRefusesMoreThanMemory(t *testing.T) {
	dir := testDir(t)
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Skipf("%s is not tmpfs", dir)
	}
	const ringBytes = 2 << 20 // 2 sub-rings of 1 MiB, plus a page of header
	opts := Options{SubRings: 2, Capacity: ringBytes, Prealloc: true}
	known := func(n int64) func() (int64, bool) { return func() (int64, bool) { return n, true } }
	unknown := func() (int64, bool) { return 0, false }
	path := filepath.Join(dir, Name("mem", 1))
	_, err := create(path, opts, known(1<<20))
	if !errors.Is(err, ErrNoMemory) || !strings.Contains(err.Error(), "only 1MiB is available") || !strings.Contains(err.Error(), path) {
		t.Fatalf("create with 1 MiB available: %v, want ErrNoMemory naming the path and what is available", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("refused ring left its file: %v", err)
	}
	for i, c := range []struct {
		opts  Options
		avail func() (int64, bool)
		dir   string
	}{
		{opts, known(8 << 20), dir},
		{Options{SubRings: 2, Capacity: ringBytes}, known(1 << 20), dir}, // no Prealloc: nothing reserved now
		{opts, unknown, dir},
		{opts, known(1 << 20), t.TempDir()}, // not tmpfs (or skipped below)
	} {
		p := filepath.Join(c.dir, Name("mem", uint64(i+2)))
		if i == 3 {
			if unix.Statfs(c.dir, &st) != nil || st.Type == unix.TMPFS_MAGIC {
				continue
			}
		}
		r, err := create(p, c.opts, c.avail)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		r.Remove()
	}
}

// TestMemAvailable: the estimate of this host is known, positive and no
// more than its memory.
func TestMemAvailable(t *testing.T) {
	free, ok := MemAvailable()
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Skip(err)
	}
	total := int64(si.Totalram) * int64(si.Unit)
	if !ok || free <= 0 || free > total {
		t.Fatalf("MemAvailable = %d, %v; want (0, %d]", free, ok, total)
	}
}
