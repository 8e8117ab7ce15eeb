package shm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// shmFullDiskEnv names the tmpfs that TestCreatePreallocFullDisk runs on
// when this test binary runs again inside its own mount namespace.
const shmFullDiskEnv = "GRAPHNODE_SHM_FULL_DISK"

// TestCreatePreallocFullDisk creates a 1 MiB ring on a 256 KiB tmpfs (a
// /dev/shm that is full): with Prealloc, Create fails with ENOSPC naming
// the ring, its size and the directory's size and free space, and leaves
// no file, where without it the file would be
// created sparse and the producer killed by SIGBUS at the first page
// beyond the tmpfs. The tmpfs is mounted in a new user and mount
// namespace, in which this test binary runs again; the test skips where
// the kernel does not allow that.
func TestCreatePreallocFullDisk(t *testing.T) {
	if dir := os.Getenv(shmFullDiskEnv); dir != "" {
		path := filepath.Join(dir, "full.ring")
		_, err := Create(path, Options{SubRings: 2, Capacity: 1 << 20, Prealloc: true})
		// The directory's size and free space tell a /dev/shm that is
		// too small (a container's 64 MiB) from one that is full.
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) ||
			!strings.Contains(err.Error(), "reserve 1.0MiB (1052672 bytes)") || !strings.Contains(err.Error(), "; "+dir+" has 256KiB free of 256KiB: ") {
			t.Fatalf("Create on a full tmpfs: %v, want no space left naming %s, the size and %s's free space", err, path, dir)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("failed Create left %d files", len(ents))
		}
		t.Logf("create: %v", err)
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
	cmd := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size=256k none "$1" && exec "$2" -test.run='^TestCreatePreallocFullDisk$' -test.count=1 -test.v`, "sh", mnt, os.Args[0])
	cmd.Env = append(os.Environ(), shmFullDiskEnv+"="+mnt)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "create: shm: create") {
		t.Fatalf("run on a full tmpfs: %v\n%s", err, out)
	}
}
