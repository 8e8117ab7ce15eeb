package node_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"graphnode/node/client"
)

// trainerEnv, set to a socket path, makes the test binary a trainer of
// another user (runTrainer) instead of running the tests.
const trainerEnv = "GRAPHNODE_TEST_TRAINER_SOCKET"

// runTrainer opens a loader on socket and reads one batch: what a trainer
// of the node's group does. It prints the error and returns 1 if it
// cannot.
func runTrainer(socket string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := client.OpenLoader(ctx, socket, baseOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	if _, err := l.Next(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("read a batch")
	return 0
}

// TestTrainerOfNodesGroupMapsRing: with [control] group left out, a
// trainer of another user in the node's group could connect (the socket
// is 0660 of the node's group) but not map its ring (0600): "shm: open
// …: permission denied", and the node logged only that the trainer
// disconnected. Rings now get the socket's group access. The node and
// the trainer run as two users of their own (root can run them so).
func TestTrainerOfNodesGroupMapsRing(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the node and the trainer as two other users")
	}
	bin, parts := setup(t)
	// Ids no account of this host is likely to have: numeric ids need
	// none.
	const nodeID, trainerID = 61701, 61702
	for _, tc := range []struct {
		mode     string // [control] mode
		ringMode os.FileMode
		connects bool
	}{
		{"0660", 0o660, true},
		// The group may not connect: nor map a ring.
		{"0600", 0o600, false},
	} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			// Not t.TempDir: its parent is root's alone (0700).
			dir, err := os.MkdirTemp("", "graphnode-test-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			own := func(path string, uid int, mode os.FileMode) {
				t.Helper()
				if err := os.Chown(path, uid, uid); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, mode); err != nil {
					t.Fatal(err)
				}
			}
			own(dir, 0, 0o755)
			// The fixture's files are root's alone: copies the two users
			// may read and run.
			for _, f := range [][2]string{{bin, "node"}, {os.Args[0], "node.test"}} {
				copyFile(t, f[0], filepath.Join(dir, f[1]), 0o755)
			}
			if out, err := exec.Command("cp", "-r", parts, filepath.Join(dir, "parts")).CombinedOutput(); err != nil {
				t.Fatalf("cp parts: %v\n%s", err, out)
			}
			if out, err := exec.Command("chmod", "-R", "a+rX", filepath.Join(dir, "parts")).CombinedOutput(); err != nil {
				t.Fatalf("chmod parts: %v\n%s", err, out)
			}
			run := filepath.Join(dir, "run")
			if err := os.Mkdir(run, 0o755); err != nil {
				t.Fatal(err)
			}
			own(run, nodeID, 0o755)
			rings, err := os.MkdirTemp("/dev/shm", "graphnode-test-")
			if err != nil {
				t.Skipf("no /dev/shm: %v", err)
			}
			t.Cleanup(func() { os.RemoveAll(rings) })
			own(rings, nodeID, 0o755)
			socket := filepath.Join(run, "node.sock")
			cfg := filepath.Join(dir, "node.toml")
			text := fmt.Sprintf("version = 1\n[node]\nparts = %q\nname = \"test\"\n[control]\nsocket = %q\nmode = %q\n[rings]\ndir = %q\nsize = \"16MiB\"\n"+
				"[samplers]\ndrain_timeout = \"5s\"\n[log]\nformat = \"json\"\n", filepath.Join(dir, "parts"), socket, tc.mode, rings)
			if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			daemon := exec.Command(filepath.Join(dir, "node"), "run", "-c", cfg)
			daemon.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nodeID, Gid: nodeID, Groups: []uint32{}}}
			d := startDaemonCmd(t, daemon, cfg, socket, rings)

			// The trainer: another user, in the node's group.
			trainer := exec.Command(filepath.Join(dir, "node.test"))
			trainer.Env = append(os.Environ(), trainerEnv+"="+socket)
			trainer.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: trainerID, Gid: trainerID, Groups: []uint32{nodeID}}}
			out, err := trainer.CombinedOutput()
			if !tc.connects {
				if err == nil || !strings.Contains(string(out), "connect: permission denied") {
					t.Fatalf("trainer with the socket's mode %s: %v, want connect refused\n%s", tc.mode, err, out)
				}
				return
			}
			if err != nil || strings.TrimSpace(string(out)) != "read a batch" {
				t.Fatalf("trainer of the node's group: %v\n%s\nnode log:\n%s", err, out, d.log)
			}
			// And the ring it mapped had the socket's group access.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := client.OpenLoader(ctx, socket, baseOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, path := range []string{socket, l.Info().Ring} {
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				sys := st.Sys().(*syscall.Stat_t)
				if want := map[string]os.FileMode{socket: 0o660, l.Info().Ring: tc.ringMode}[path]; st.Mode().Perm() != want || sys.Gid != nodeID {
					t.Errorf("%s: mode %v gid %d, want %v and the node's gid %d", path, st.Mode().Perm(), sys.Gid, want, nodeID)
				}
			}
		})
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
