package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// testDir is a directory on tmpfs for the test's ring files: under
// /dev/shm where it exists, else the test's temporary directory.
func testDir(t testing.TB) string {
	t.Helper()
	if st, err := os.Stat(DefaultDir); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp(DefaultDir, "shm-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// newTestRing creates a ring of w sub-rings of perSub bytes each.
func newTestRing(t testing.TB, w int, perSub int64) *Ring {
	t.Helper()
	path := filepath.Join(testDir(t), Name("test", 1))
	r, err := Create(path, Options{SubRings: w, Capacity: int64(w) * perSub})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Remove() })
	return r
}

// gen fills b with the content of record i of sub-ring w.
func gen(b []byte, w, i int) {
	x := uint32(w*7919 + i*104729 + 1)
	for j := range b {
		x = x*1664525 + 1013904223
		b[j] = byte(x >> 24)
	}
}

// checkRec fails unless rec is record i of sub-ring w of length n.
func checkRec(t testing.TB, rec []byte, w, i, n int) {
	t.Helper()
	want := make([]byte, n)
	gen(want, w, i)
	if len(rec) != n || string(rec) != string(want) {
		t.Fatalf("sub-ring %d record %d: got %d bytes, want %d (content equal: %v)", w, i, len(rec), n, string(rec) == string(want))
	}
}

// offsetIn is the offset of rec's first byte within sub-ring w's area.
func offsetIn(r *Ring, w int, rec []byte) int64 {
	return int64(uintptr(unsafe.Pointer(unsafe.SliceData(rec))) - uintptr(unsafe.Pointer(&r.area(w)[0])))
}

// putCreator overwrites the creator pid in r's header.
func putCreator(r *Ring, pid int) {
	binary.LittleEndian.PutUint32(r.mem[offCreatorPID:], uint32(pid))
}

// deadPID is the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run /bin/true for a dead pid: %v", err)
	}
	return cmd.Process.Pid
}

// putFlags overwrites the header flags of r's file (0: a format 1.0
// file's header, as far as liveness goes).
func putFlags(r *Ring, flags uint32) {
	binary.LittleEndian.PutUint32(r.mem[offFlags:], flags)
}

// TestCreateMode: a ring has the mode and the group asked for, group 0
// included (it was taken for "no group": the ring kept its creator's).
func TestCreateMode(t *testing.T) {
	dir := testDir(t)
	gid, group := os.Getgid(), os.Getgid()
	root := os.Getuid() == 0
	if root {
		group = 65534 // root may give a file any group
	}
	for _, tc := range []struct {
		name     string
		opts     Options
		wantMode os.FileMode
		wantGID  int
		// root: only root may give the file that group; the ring is
		// made in a directory setgid to 65534, where a file not given a
		// group gets 65534 (not root's own 0).
		root bool
	}{
		{"default", Options{SubRings: 2, Capacity: 1 << 20}, 0o600, gid, false},
		{"group", Options{SubRings: 2, Capacity: 1 << 20, Group: true, GID: group}, 0o660, group, false},
		{"group=0", Options{SubRings: 1, Capacity: 1 << 20, Group: true, GID: 0}, 0o660, 0, true},
		{"group=0,mode=0600", Options{SubRings: 1, Capacity: 1 << 20, Mode: 0o600, Group: true, GID: 0}, 0o600, 0, true},
		{"explicit", Options{SubRings: 1, Capacity: 1 << 20, Mode: 0o640}, 0o640, gid, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".ring")
			if tc.root {
				if !root {
					t.Skip("needs root to give a file group 0")
				}
				sub := filepath.Join(dir, tc.name)
				if err := os.Mkdir(sub, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(sub, -1, 65534); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(sub, 0o700|os.ModeSetgid); err != nil {
					t.Fatal(err)
				}
				path = filepath.Join(sub, "ring")
			}
			r, err := Create(path, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Remove()
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != tc.wantMode {
				t.Errorf("mode %#o, want %#o", st.Mode().Perm(), tc.wantMode)
			}
			if g := int(st.Sys().(*syscall.Stat_t).Gid); g != tc.wantGID {
				t.Errorf("gid %d, want %d", g, tc.wantGID)
			}
			wantSub := tc.opts.Capacity / int64(tc.opts.SubRings)
			if r.Capacity() != wantSub || r.SubRings() != tc.opts.SubRings || r.MaxRecord() != wantSub-64 {
				t.Errorf("capacity %d, sub-rings %d, max record %d; want %d, %d, %d",
					r.Capacity(), r.SubRings(), r.MaxRecord(), wantSub, tc.opts.SubRings, wantSub-64)
			}
			if want := int64(PageSize) + int64(tc.opts.SubRings)*wantSub; st.Size() != want {
				t.Errorf("file size %d, want %d", st.Size(), want)
			}
			if r.CreatorPID() != os.Getpid() {
				t.Errorf("creator pid %d, want %d", r.CreatorPID(), os.Getpid())
			}
		})
	}
}

func TestCreateExclusive(t *testing.T) {
	r := newTestRing(t, 1, PageSize)
	_, err := Create(r.Path(), Options{SubRings: 1, Capacity: PageSize})
	if !errors.Is(err, os.ErrExist) || !strings.Contains(err.Error(), r.Path()) {
		t.Fatalf("second Create: %v, want an exists error naming %s", err, r.Path())
	}
	// The failed Create must not have removed the first ring's file.
	if _, err := Open(r.Path()); err != nil {
		t.Fatalf("Open after failed Create: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want []string // substrings, all of which must appear
	}{
		{Options{SubRings: 4, Capacity: 1 << 30}, nil},
		{Options{SubRings: 0, Capacity: 1 << 30}, []string{"shm: options: sub_rings = 0"}},
		{Options{SubRings: 4, Capacity: 4*PageSize - 1}, []string{"capacity = 16383 bytes gives 0 per sub-ring"}},
		{Options{SubRings: 1, Capacity: 1 << 20, Mode: 0o666}, []string{"mode 0666"}},
		{Options{SubRings: 1, Capacity: 1 << 20, Mode: 0o400}, []string{"mode 0400"}},
		{Options{SubRings: MaxSubRings + 1, Capacity: 1 << 20, Mode: 0o644}, []string{"sub_rings = 4097", "mode 0644"}},
		// Its file size wrapped negative: "size -9223372036854775808 bytes".
		{Options{SubRings: 1, Capacity: math.MaxInt64}, []string{"capacity = 9223372036854775807 bytes: at most 9223372036854771711 with 1 sub-rings"}},
		{Options{SubRings: 1, Capacity: math.MaxInt64 - PageSize}, nil},
		{Options{SubRings: 1, Capacity: 1 << 20, Group: true, GID: 0}, nil},
		// A gid once meant a group when positive: without Group it is
		// refused rather than ignored.
		{Options{SubRings: 1, Capacity: 1 << 20, GID: 1000}, []string{"gid = 1000 without Group"}},
		{Options{SubRings: 1, Capacity: 1 << 20, Group: true, GID: -1}, []string{"gid = -1, want 0..4294967294"}},
		{Options{SubRings: 1, Capacity: 1 << 20, Group: true, GID: math.MaxUint32}, []string{"gid = 4294967295, want 0..4294967294"}},
	} {
		err := tc.opts.Validate()
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%+v: %v, want nil", tc.opts, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", tc.opts, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q does not say %q", tc.opts, err, w)
			}
		}
	}
}

func TestOpenRejects(t *testing.T) {
	dir := testDir(t)
	r := newTestRing(t, 2, PageSize)
	good, err := os.ReadFile(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func([]byte) []byte
		want   error
		text   string
	}{
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, ErrCorrupt, "bad magic"},
		{"major", func(b []byte) []byte { b[offMajor] = 2; return b }, ErrVersion, "major version 2"},
		{"truncated", func(b []byte) []byte { return b[:len(b)-PageSize] }, ErrCorrupt, "header says"},
		{"subrings", func(b []byte) []byte { b[offSubRings] = 3; return b }, ErrCorrupt, "file size field 12288, want 16384"},
		{"counters", func(b []byte) []byte { b[ctl(1)+ctlWrite] = 65; return b }, ErrCorrupt, "sub-ring 1: write counter 65"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".ring")
			if err := os.WriteFile(path, tc.mutate(append([]byte(nil), good...)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Open: %v, want %v naming %s and saying %q", err, tc.want, path, tc.text)
			}
		})
	}
}

// TestOpenMissing: a ring that cannot be opened is named once ("shm:
// open PATH: open PATH: …" said it twice), and the cause still matches.
func TestOpenMissing(t *testing.T) {
	path := filepath.Join(testDir(t), "gone.ring")
	_, err := Open(path)
	if want := "shm: open " + path + ": no such file or directory"; err == nil || err.Error() != want || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open: %v, want %q matching os.ErrNotExist", err, want)
	}
}

func TestCloseRemoveIdempotent(t *testing.T) {
	r := newTestRing(t, 1, PageSize)
	p, err := r.Producer(0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(context.Background(), make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if u := r.Used(0); u != 64+128 {
		t.Fatalf("Used %d, want 192", u)
	}
	for i := range 2 {
		if err := r.Remove(); err != nil {
			t.Fatalf("Remove %d: %v", i, err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("Close %d: %v", i, err)
		}
	}
	if _, err := os.Stat(r.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file after Remove: %v", err)
	}
	// The ring's Close stopped the heartbeat and closed both ends to
	// calls: they fail instead of touching unmapped memory.
	if err := p.Write(context.Background(), []byte("x")); !errors.Is(err, ErrOrder) {
		t.Fatalf("Write after the ring's Close: %v, want ErrOrder", err)
	}
	if _, err := c.Next(context.Background(), 0); !errors.Is(err, ErrOrder) {
		t.Fatalf("Next after the ring's Close: %v, want ErrOrder", err)
	}
	if err := c.Release(0); !errors.Is(err, ErrOrder) {
		t.Fatalf("Release after the ring's Close: %v, want ErrOrder", err)
	}
	if u := r.Used(0); u != 0 {
		t.Fatalf("Used after Close: %d, want 0", u)
	}
	if err := errors.Join(p.Close(), c.Close()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Producer(0); !errors.Is(err, ErrOrder) {
		t.Fatalf("Producer after Close: %v, want ErrOrder", err)
	}
}

func TestAttachOnce(t *testing.T) {
	r := newTestRing(t, 2, PageSize)
	if _, err := r.Producer(1); err != nil {
		t.Fatal(err)
	}
	_, err := r.Producer(1)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), fmt.Sprintf("producer pid %d", os.Getpid())) {
		t.Fatalf("second Producer(1): %v, want ErrBusy naming pid %d", err, os.Getpid())
	}
	if _, err := r.Producer(2); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Producer(2) of 2 sub-rings: %v, want ErrInvalid", err)
	}
	if _, err := r.Consumer(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Consumer(); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Consumer: %v, want ErrBusy", err)
	}
}
