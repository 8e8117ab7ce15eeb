package kv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// kvFullDiskEnv names the tmpfs that TestSaveFullDisk runs on when this
// test binary runs again inside its own mount namespace.
const kvFullDiskEnv = "GRAPHNODE_KV_FULL_DISK"

// TestSaveFullDisk saves a checkpoint of a small and a large table (saved
// in that order, by name) onto a
// tmpfs that holds it and a little more, trains on, and saves again: the
// second save fails for the full disk, names the table's file, leaves no
// temporary file, and the directory still loads as the first checkpoint
// in both tables. (Saving table by table would have replaced the small
// table, whose new file fits, and kept the large one old.)
//
// The tmpfs is mounted in a new user and mount namespace, in which this
// test binary runs again; the test skips where the kernel does not allow
// that.
func TestSaveFullDisk(t *testing.T) {
	small := spec("first", 100, 4, SGD(0.1), Async, 1)
	large := spec("second", 4000, 4, SGD(0.1), Async, 1)
	if dir := os.Getenv(kvFullDiskEnv); dir != "" {
		saveOnFullDisk(t, dir, small, large)
		return
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1) (util-linux) for a small tmpfs")
	}
	mnt := t.TempDir()
	probe := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size=4k none "$1"`, "sh", mnt)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs in a user namespace here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	// 25 pages: the first checkpoint takes 1 + 16, the second's small
	// table fits beside it and its large one does not.
	cmd := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size=100k none "$1" && exec "$2" -test.run='^TestSaveFullDisk$' -test.count=1 -test.v`, "sh", mnt, os.Args[0])
	cmd.Env = append(os.Environ(), kvFullDiskEnv+"="+mnt)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "second save: kv: save") {
		t.Fatalf("run on a full tmpfs: %v\n%s", err, out)
	}
}

// saveOnFullDisk is TestSaveFullDisk on the tmpfs at dir.
func saveOnFullDisk(t *testing.T, dir string, small, large Spec) {
	s := newStore(t, 0, small, large)
	push := func(step int) {
		for _, sp := range []Spec{small, large} {
			ids := []uint64{0, uint64(step), sp.Rows - 1}
			grads := make([]float32, len(ids)*sp.Dim)
			for i := range grads {
				grads[i] = float32(step+i%5) - 2
			}
			if err := s.Push(sp.Name, ids, grads); err != nil {
				t.Fatal(err)
			}
		}
	}
	push(1)
	if err := s.Save(dir); err != nil {
		t.Fatalf("first save: %v", err)
	}
	want := snapshot(t, s)
	push(2)
	err := s.Save(dir)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), filepath.Join(dir, "second.part0.kvt")) {
		t.Fatalf("second save: %v, want no space left naming second.part0.kvt", err)
	}
	t.Logf("second save: %v", err)
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"first.part0.kvt", "second.part0.kvt"}) {
		t.Errorf("after the failed save %s holds %v, want the two checkpoint files", dir, names)
	}
	back := newStore(t, 0, small, large)
	if err := back.Load(dir); err != nil {
		t.Fatal(err)
	}
	got := snapshot(t, back)
	for _, name := range []string{"first", "second"} {
		if !slices.Equal(got[name], want[name]) {
			t.Errorf("table %s after the failed save is not the first checkpoint", name)
		}
	}
}
