package partition

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"graphnode/csr"
)

// replaceFixture is an output dir that holds a partitioning of two parts
// (old), and a run of Write with Force that replaces it with one of one
// part.
type replaceFixture struct {
	parent, dir string
	old         *Manifest
}

func newReplaceFixture(t *testing.T) *replaceFixture {
	t.Helper()
	parent := t.TempDir()
	dir := filepath.Join(parent, "parts")
	old := partitionTo(t, testGraph(50, 200, false, false), dir, csr.In, 2, WriteOptions{})
	return &replaceFixture{parent: parent, dir: dir, old: old}
}

// force writes the one-part partitioning over dir.
func (f *replaceFixture) force(t *testing.T) (*Manifest, error) {
	t.Helper()
	g := testGraph(50, 200, false, false)
	adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Write(context.Background(), f.dir, g, adj, make([]uint32, 50), WriteOptions{Parts: 1, Force: true})
}

// holdsOld fails t unless dir holds the old partitioning whole.
func (f *replaceFixture) holdsOld(t *testing.T, dir string) {
	t.Helper()
	m, err := OpenDir(dir)
	if err != nil || m.Checksum != f.old.Checksum || m.Parts != 2 {
		t.Fatalf("%s does not hold the old partitioning: %+v, %v", dir, m, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "part-1", "part.csr")); err != nil {
		t.Errorf("old part-1 gone: %v", err)
	}
}

// besides lists the entries of the parent but dir.
func (f *replaceFixture) besides() []string {
	ents, _ := os.ReadDir(f.parent)
	var names []string
	for _, e := range ents {
		if e.Name() != filepath.Base(f.dir) {
			names = append(names, e.Name())
		}
	}
	return names
}

// replaceSeams puts back the seams the test sets.
func replaceSeams(t *testing.T) {
	rename, exch, remove := replaceRename, replaceExchange, replaceRemove
	t.Cleanup(func() { replaceRename, replaceExchange, replaceRemove = rename, exch, remove })
}

// noExchange is replaceExchange on a file system without RENAME_EXCHANGE.
func noExchange(from, to string) error {
	return &os.LinkError{Op: "exchange", Old: from, New: to, Err: unix.EINVAL}
}

// TestReplaceDirWhole: --force swaps the new partitioning in with one
// exchange, dir holding a whole partitioning (the old or the new) before
// and after every step, and leaves nothing beside it. The old one was
// moved aside first, and dir was absent until the new one was renamed
// in: a node starting then found no partitioning, and a crash left none.
func TestReplaceDirWhole(t *testing.T) {
	probe := t.TempDir()
	a, b := filepath.Join(probe, "a"), filepath.Join(probe, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := exchange(a, b); errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		t.Skipf("the file system of %s has no RENAME_EXCHANGE: %v", probe, err)
	}

	f := newReplaceFixture(t)
	replaceSeams(t)
	var steps []string
	watch := func(step string, from, to string) {
		m, err := OpenDir(f.dir)
		if err != nil {
			t.Errorf("%s %s -> %s: %s holds no partitioning: %v", step, filepath.Base(from), filepath.Base(to), f.dir, err)
			return
		}
		if m.Parts != 1 && m.Parts != 2 {
			t.Errorf("%s: %s holds %d parts", step, f.dir, m.Parts)
		}
	}
	rename, exch := replaceRename, replaceExchange
	replaceRename = func(from, to string) error {
		watch("before rename", from, to)
		defer watch("after rename", from, to)
		steps = append(steps, "rename")
		return rename(from, to)
	}
	replaceExchange = func(from, to string) error {
		watch("before exchange", from, to)
		defer watch("after exchange", from, to)
		steps = append(steps, "exchange")
		return exch(from, to)
	}
	m, err := f.force(t)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(steps, "exchange") {
		t.Errorf("steps %v: no exchange", steps)
	}
	if got, err := OpenDir(f.dir); err != nil || got.Parts != 1 || got.Checksum != m.Checksum {
		t.Fatalf("after --force: %+v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "part-1")); !os.IsNotExist(err) {
		t.Errorf("part-1 of the old partitioning survived: %v", err)
	}
	if left := f.besides(); len(left) > 0 {
		t.Errorf("left beside the output: %v", left)
	}
}

// TestReplaceDirMoveBack: where the file system has no exchange, a
// failure to rename the new partitioning into place moves the old one
// back to dir, whole, and the error says so and where the new one is
// (kept: it took the whole run). The old one was left in .parts.old-*,
// which the error did not name, and dir was gone.
func TestReplaceDirMoveBack(t *testing.T) {
	f := newReplaceFixture(t)
	replaceSeams(t)
	replaceExchange = noExchange
	rename := replaceRename
	replaceRename = func(from, to string) error {
		if to == f.dir && strings.HasPrefix(filepath.Base(from), ".parts.tmp-") {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EIO}
		}
		return rename(from, to)
	}
	_, err := f.force(t)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("err = %v, want EIO", err)
	}
	f.holdsOld(t, f.dir)
	left := f.besides()
	if len(left) != 1 || !strings.HasPrefix(left[0], ".parts.tmp-") {
		t.Fatalf("beside the output: %v, want the new partitioning's .parts.tmp-*", left)
	}
	tmp := filepath.Join(f.parent, left[0])
	want := "rename the new partitioning into place: rename " + tmp + " " + f.dir + ": input/output error; the previous partitioning is back in " + f.dir + ", and the finished output is left whole in " + tmp
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant it to say %q", err, want)
	}
	if m, err := OpenDir(tmp); err != nil || m.Parts != 1 {
		t.Errorf("the finished output in %s: %+v, %v", tmp, m, err)
	}
}

// TestReplaceDirMoveBackFails: when moving the old partitioning back
// fails too, the error names where it lies, and where the new one does.
func TestReplaceDirMoveBackFails(t *testing.T) {
	f := newReplaceFixture(t)
	replaceSeams(t)
	replaceExchange = noExchange
	rename := replaceRename
	replaceRename = func(from, to string) error {
		if to == f.dir {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EIO}
		}
		return rename(from, to)
	}
	_, err := f.force(t)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("err = %v, want EIO", err)
	}
	var old, tmp string
	for _, name := range f.besides() {
		switch {
		case strings.HasPrefix(name, ".parts.old-"):
			old = filepath.Join(f.parent, name)
		case strings.HasPrefix(name, ".parts.tmp-"):
			tmp = filepath.Join(f.parent, name)
		}
	}
	if old == "" || tmp == "" {
		t.Fatalf("beside the output: %v, want .parts.old-* and .parts.tmp-*", f.besides())
	}
	f.holdsOld(t, old)
	want := "moving the previous partitioning back failed too (rename " + old + " " + f.dir + ": input/output error): it is in " + old + ", and the finished output in " + tmp + ": move one of them to " + f.dir
	if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant it to say %q", err, want)
	}
}

// TestReplaceDirRemoveFails: the new partitioning is in place when the
// old one cannot be removed; the error says so and where the old one
// is, and the next run names it as the previous output. The error named
// only a file inside it, and the next run said nothing of it.
func TestReplaceDirRemoveFails(t *testing.T) {
	for _, tt := range []struct {
		name string
		exch func(string, string) error
	}{
		{"exchange", exchange},
		{"move-aside", noExchange},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newReplaceFixture(t)
			replaceSeams(t)
			replaceExchange = tt.exch
			replaceRemove = func(path string) error {
				return &os.PathError{Op: "unlinkat", Path: filepath.Join(path, "part-0", "part.csr"), Err: syscall.EACCES}
			}
			_, err := f.force(t)
			left := f.besides()
			if len(left) != 1 || !strings.HasPrefix(left[0], ".parts.old-") {
				t.Fatalf("beside the output: %v, want .parts.old-*", left)
			}
			old := filepath.Join(f.parent, left[0])
			want := "partition: output " + f.dir + " holds the new partitioning, but the previous one, moved aside to " + old + ", was not removed: "
			if !errors.Is(err, syscall.EACCES) || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), ": remove it") {
				t.Errorf("err = %v\nwant it to begin %q", err, want)
			}
			if m, err := OpenDir(f.dir); err != nil || m.Parts != 1 {
				t.Errorf("%s after --force: %+v, %v", f.dir, m, err)
			}
			f.holdsOld(t, old)

			c, err := CheckOutput(f.dir, true)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := c.Leftovers(), []Leftover{{Path: old, Old: true}}; !slices.Equal(got, want) {
				t.Errorf("Leftovers() = %+v, want %+v", got, want)
			}
		})
	}
}

// TestLeftovers: beside the output, a run's temporary output and a
// previous output moved aside are named, each as what it is; another
// output's, and files, are not.
func TestLeftovers(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "parts")
	for _, d := range []string{"parts", ".parts.tmp-1", ".parts.old-2", ".other.old-3", ".parts.tmpfoo"} {
		if err := os.Mkdir(filepath.Join(parent, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(parent, ".parts.old-4"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := CheckOutput(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []Leftover{{Path: filepath.Join(parent, ".parts.old-2"), Old: true}, {Path: filepath.Join(parent, ".parts.tmp-1")}}
	if got := c.Leftovers(); !slices.Equal(got, want) {
		t.Errorf("Leftovers() = %+v, want %+v", got, want)
	}
}

// TestReplaceDirFileInPlace: a file or a link put in the output's place
// during a --force run is the user's, not the partitioning the run was
// asked to replace: it is left at dir, and the error says so and where
// the finished output is, as without --force. RENAME_EXCHANGE swaps a
// directory with a file as readily as with a directory, and the file
// was moved to .parts.old-* and removed (before the exchange, removed by
// os.Remove).
func TestReplaceDirFileInPlace(t *testing.T) {
	for _, tt := range []struct {
		name string
		exch func(string, string) error
	}{
		{"exchange", exchange},
		{"move-aside", noExchange},
	} {
		for _, kind := range []string{"file", "link"} {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				replaceSeams(t)
				replaceExchange = tt.exch
				parent := t.TempDir()
				dir := filepath.Join(parent, "parts")
				m := partitionTo(t, testGraph(50, 200, false, false), filepath.Join(parent, ".parts.tmp-1"), csr.In, 1, WriteOptions{})
				tmp := filepath.Join(parent, ".parts.tmp-1")
				switch kind {
				case "file":
					if err := os.WriteFile(dir, []byte("the user's\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				case "link":
					if err := os.Mkdir(filepath.Join(parent, "elsewhere"), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink("elsewhere", dir); err != nil {
						t.Fatal(err)
					}
				}
				before, err := os.Lstat(dir)
				if err != nil {
					t.Fatal(err)
				}
				err = replaceDir(tmp, dir)
				if !errors.Is(err, ErrOutputNotEmpty) || !strings.Contains(err.Error(), "appeared in its place") || !strings.Contains(err.Error(), "left whole in "+tmp) {
					t.Errorf("err = %v, want ErrOutputNotEmpty naming what appeared and %s", err, tmp)
				}
				if after, err := os.Lstat(dir); err != nil || !os.SameFile(before, after) {
					t.Errorf("the user's %s at %s was replaced or removed: %v", kind, dir, err)
				}
				if got, err := OpenDir(tmp); err != nil || got.Checksum != m.Checksum {
					t.Errorf("the finished output in %s: %+v, %v", tmp, got, err)
				}
			})
		}
	}
}

// TestLeftoversThroughLink: an output that is a symbolic link is written
// where it points, and its runs leave their directories beside the
// directory it points to, where Leftovers finds them. It looked beside
// the link, and named none.
func TestLeftoversThroughLink(t *testing.T) {
	links, disk := t.TempDir(), t.TempDir()
	real := filepath.Join(disk, "parts")
	for _, d := range []string{"parts/part-0", ".parts.tmp-1", ".parts.old-2"} {
		if err := os.MkdirAll(filepath.Join(disk, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(links, "out")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	c, err := CheckOutput(link, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []Leftover{{Path: filepath.Join(disk, ".parts.old-2"), Old: true}, {Path: filepath.Join(disk, ".parts.tmp-1")}}
	if got := c.Leftovers(); !slices.Equal(got, want) {
		t.Errorf("Leftovers() = %+v, want %+v", got, want)
	}
}
