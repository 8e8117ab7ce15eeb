package csr

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// changedFixture writes the fixture to a fresh path, dated a minute back
// so that a rewrite within the same clock tick still moves the mtime,
// and opens it.
func changedFixture(t *testing.T) (string, *Graph) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "part.csr")
	newFixture(TypeF32).write(t, path)
	past := time.Now().Add(-time.Minute)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return path, g
}

// rewrite writes b over path in place, as cp does: truncate, then write.
func rewrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantChanged checks that err is the file's change, with why in it.
func wantChanged(t *testing.T, err error, path, why string) {
	t.Helper()
	if !errors.Is(err, ErrChanged) || !strings.HasPrefix(err.Error(), "csr: "+path+": ") ||
		!strings.Contains(err.Error(), why) || !strings.HasSuffix(err.Error(), ": file changed while mapped") {
		t.Fatalf("got %v, want csr: %s: …%s…: file changed while mapped", err, path, why)
	}
}

// TestReadChanged: a file truncated or rewritten in place under the
// mapping is an error from Read, before or while its reads run, and
// stays one; the process survives the SIGBUS of a page past the end.
func TestReadChanged(t *testing.T) {
	other := filepath.Join(t.TempDir(), "other.csr")
	fx := newFixture(TypeF32)
	fx.labels = []int32{1, 1, 1, 1, 1} // another header CRC, the same size
	fx.write(t, other)

	otherBytes, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, path string) // between Open and Read
		during func(t *testing.T, path string) // inside Read, before the reads
		why    string
	}{
		{name: "truncated", before: func(t *testing.T, path string) {
			if err := os.Truncate(path, HeaderSize); err != nil {
				t.Fatal(err)
			}
		}, why: "the file is 4096 bytes, SIZE when opened: it was truncated or rewritten in place"},
		{name: "rewritten", before: func(t *testing.T, path string) { rewrite(t, path, otherBytes) },
			why: "its header is not the one opened: the file was rewritten in place"},
		{name: "fault", during: func(t *testing.T, path string) {
			if err := os.Truncate(path, HeaderSize); err != nil {
				t.Fatal(err)
			}
		}, why: "a read at offset 4096 of the mapping faulted: the file shrank or was rewritten in place"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, g := changedFixture(t)
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.before != nil {
				tc.before(t, path)
			}
			ran := false
			var first uint64
			err = g.Read(func() error {
				if tc.during != nil {
					tc.during(t, path)
				}
				ran = true
				first = g.Indptr()[0] // offset 4096: past the end once truncated
				return nil
			})
			wantChanged(t, err, path, strings.Replace(tc.why, "SIZE", strconv.FormatInt(g.Identity().Size, 10), 1))
			if ran != (tc.during != nil) || first != 0 {
				t.Errorf("reads ran %v (want %v), indptr[0] = %d", ran, tc.during != nil, first)
			}
			// It sticks, and the mapping is not touched again, even once
			// the file holds its bytes again.
			rewrite(t, path, orig)
			err2 := g.Read(func() error { t.Error("Read ran its reads after a change"); return nil })
			if err2 != err {
				t.Errorf("second Read: %v, want the first error %v", err2, err)
			}
			if _, err := g.Mask(SecTrain); err != err2 {
				t.Errorf("Mask: %v, want %v", err, err2)
			}
		})
	}
}

// TestReadUnchanged: a copy of the same bytes over the file, or a change
// of its mode, is no change; f's own error comes back as it is.
func TestReadUnchanged(t *testing.T) {
	path, g := changedFixture(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rewrite(t, path, b)
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	if err := g.Read(func() error { got = append(got, g.Neighbors(2)...); return nil }); err != nil {
		t.Fatal(err)
	}
	eq(t, "neighbors 2", got, []uint64{4, 4, 11})
	mine := errors.New("mine")
	if err := g.Read(func() error { return mine }); err != mine {
		t.Fatalf("Read: %v, want f's error", err)
	}
	bm, err := g.Mask(SecTrain)
	if err != nil || bm.String() != "{0,2}" {
		t.Fatalf("Mask: %v %v", bm, err)
	}
}

// TestReadPanics: a runtime error in f is the file's change when the file
// changed (its bytes are no longer those Open checked), and goes on as a
// panic otherwise.
func TestReadPanics(t *testing.T) {
	path, g := changedFixture(t)
	past := len(g.Indices())
	outOfRange := func() error { _ = g.Indices()[past]; return nil }
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "index out of range") {
				t.Errorf("recovered %v, want the index out of range", r)
			}
		}()
		g.Read(outOfRange)
		t.Error("Read returned from a panic of an unchanged file")
	}()
	err := g.Read(func() error {
		if err := os.Truncate(path, HeaderSize+8); err != nil {
			t.Fatal(err)
		}
		return outOfRange()
	})
	wantChanged(t, err, path, fmt.Sprintf("the file is %d bytes, %d when opened: it was truncated or rewritten in place", HeaderSize+8, g.Identity().Size))
}

// TestIdentityAndOpenFile: OpenFile of the descriptor a Graph holds maps
// the file Open checked even after another is renamed over the path;
// Identity tells the two apart.
func TestIdentityAndOpenFile(t *testing.T) {
	path, g := changedFixture(t)
	id := g.Identity()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if id.Size != fi.Size() || id.Ino == 0 || id.HeaderCRC == 0 {
		t.Fatalf("identity %v of a %d-byte file", id, fi.Size())
	}
	fx := newFixture(TypeF32)
	fx.labels = []int32{1, 1, 1, 1, 1}
	tmp := filepath.Join(filepath.Dir(path), "new.csr")
	fx.write(t, tmp)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	byPath, err := Open(path, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer byPath.Close()
	if nid := byPath.Identity(); nid.Ino == id.Ino || nid.HeaderCRC == id.HeaderCRC {
		t.Errorf("the new file's identity %v, the old %v", nid, id)
	}
	fd, err := dupFile(g.File())
	if err != nil {
		t.Fatal(err)
	}
	inherited, err := OpenFile(fd, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer inherited.Close()
	if inherited.Identity() != id || inherited.Path() != path {
		t.Errorf("OpenFile: %s %v, want %s %v", inherited.Path(), inherited.Identity(), path, id)
	}
	eq(t, "neighbors 2 of the inherited file", inherited.Neighbors(2), []uint64{4, 4, 11})
	// The rename left the mapping alone: Read finds no change.
	if err := g.Read(func() error { return nil }); err != nil {
		t.Errorf("Read after a rename over the path: %v", err)
	}
}

// dupFile is a second descriptor of f under f's name, as a child
// process inherits it.
func dupFile(f *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}
