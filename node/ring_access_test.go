package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// ringReaderEnv, set to a ring path, makes the test binary a reader of
// that file as another user (readRing) instead of running the tests.
const ringReaderEnv = "GRAPHNODE_TEST_READ_RING"

// readRing reads the first page of the file at path: what anyone who may
// read a ring can see of every batch. It prints the error and returns 1
// if it cannot.
func readRing(path string) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	if _, err := io.ReadFull(f, make([]byte, 4096)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("read the ring")
	return 0
}

// TestTrainerOfNodesGroupMapsRing: with [control] group left out, a
// trainer of another user in the node's group could connect (the socket
// is 0660 of the node's group) but not map its ring (0600): "shm: open
// …: permission denied", and the node logged only that the trainer
// disconnected. Rings now get the socket's group access, and the
// socket's group: a ring 0660 of the node's group beside a socket that
// took another group from its setgid directory was open to a user of the
// node's group who could not connect, and closed to the trainers who
// could; with group "0" it kept the node's group (a gid was applied only
// when positive), as it did in a setgid rings.dir. The node, its
// trainer and that outsider run as users of their own (root can run
// them so, without accounts: numeric ids need none).
func TestTrainerOfNodesGroupMapsRing(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the node and the trainer as two other users")
	}
	bin, parts := setup(t)
	// Ids no account of this host is likely to have.
	const (
		nodeID, trainerID, outsiderID = 61701, 61702, 61799
		socketGroup, ringsGroup       = 61703, 61704 // of setgid directories
	)
	for _, tc := range []struct {
		name     string
		mode     string   // [control] mode
		group    string   // [control] group
		runGID   int      // group of the socket's directory, setgid; 0: the node's
		ringsGID int      // group of rings.dir, setgid; 0: the node's
		groups   []uint32 // the node's supplementary groups
		// The trainer's supplementary groups; with connects false it is
		// refused at the socket.
		trainer  []uint32
		connects bool
		// wantGID is the group of socket and ring; the ring is wantMode.
		wantGID  int
		wantMode os.FileMode
		// outsider, when not 0, is the group of a user who may neither
		// connect nor read a ring: the group a ring had before.
		outsider int
		// refused, when set, is in the error of a node that must not
		// start (exit 78).
		refused string
	}{
		{name: "mode=0660", mode: "0660", trainer: []uint32{nodeID}, connects: true,
			wantGID: nodeID, wantMode: 0o660},
		// The group may not connect: nor map a ring.
		{name: "mode=0600", mode: "0600", trainer: []uint32{nodeID},
			wantGID: nodeID, wantMode: 0o600},
		// The socket takes its directory's group; so must the ring,
		// which took the node's.
		{name: "setgid socket directory", mode: "0660", runGID: socketGroup, groups: []uint32{socketGroup},
			trainer: []uint32{socketGroup}, connects: true, wantGID: socketGroup, wantMode: 0o660, outsider: nodeID},
		// A ring took rings.dir's group, which may not connect.
		{name: "setgid rings.dir", mode: "0660", ringsGID: ringsGroup,
			trainer: []uint32{nodeID}, connects: true, wantGID: nodeID, wantMode: 0o660, outsider: ringsGroup},
		// Group 0 was no group for rings: they kept the node's.
		{name: "group=0", mode: "0660", group: "0", groups: []uint32{0},
			trainer: []uint32{0}, connects: true, wantGID: 0, wantMode: 0o660, outsider: nodeID},
		// A socket of a group the node is not in: its rings could not
		// have that group.
		{name: "setgid socket directory of another group", mode: "0660", runGID: socketGroup,
			refused: fmt.Sprintf("has group %d, given by its directory", socketGroup)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Not t.TempDir: its parent is root's alone (0700).
			dir, err := os.MkdirTemp("", "graphnode-test-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			// own gives path to uid and gid (setgid when gid is not
			// uid's own); gid 0 is uid's own.
			own := func(path string, uid, gid int, mode os.FileMode) {
				t.Helper()
				if gid == 0 {
					gid = uid
				}
				if gid != uid {
					mode |= os.ModeSetgid
				}
				if err := os.Chown(path, uid, gid); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, mode); err != nil {
					t.Fatal(err)
				}
			}
			own(dir, 0, 0, 0o755)
			// The fixture's files are root's alone: copies the users
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
			own(run, nodeID, tc.runGID, 0o775)
			rings, err := os.MkdirTemp("/dev/shm", "graphnode-test-")
			if err != nil {
				t.Skipf("no /dev/shm: %v", err)
			}
			t.Cleanup(func() { os.RemoveAll(rings) })
			own(rings, nodeID, tc.ringsGID, 0o775)
			socket := filepath.Join(run, "node.sock")
			cfg := filepath.Join(dir, "node.toml")
			text := fmt.Sprintf("version = 1\n[node]\nparts = %q\nname = \"test\"\n[control]\nsocket = %q\nmode = %q\ngroup = %q\n[rings]\ndir = %q\nsize = \"16MiB\"\n"+
				"[samplers]\ndrain_timeout = \"5s\"\n[log]\nformat = \"json\"\n", filepath.Join(dir, "parts"), socket, tc.mode, tc.group, rings)
			if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			daemon := exec.Command(filepath.Join(dir, "node"), "run", "-c", cfg)
			daemon.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nodeID, Gid: nodeID, Groups: append([]uint32{}, tc.groups...)}}
			if tc.refused != "" {
				out, err := runFor(daemon, 30*time.Second)
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 78 || !strings.Contains(out, tc.refused) {
					t.Fatalf("node run: %v, want exit 78 saying %q\n%s", err, tc.refused, out)
				}
				if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("socket %s left behind (%v)", socket, err)
				}
				// node config check, as the same user, warns of it.
				check := exec.Command(filepath.Join(dir, "node"), "config", "check", "-c", cfg)
				check.SysProcAttr = daemon.SysProcAttr
				out, err = runFor(check, 30*time.Second)
				if err != nil || !strings.Contains(out, "warning") || !strings.Contains(out, fmt.Sprintf("setgid to group %d, which this user (uid %d", socketGroup, nodeID)) {
					t.Errorf("node config check as the node's user: %v, want a warning of the setgid group\n%s", err, out)
				}
				return
			}
			d := startDaemonCmd(t, daemon, cfg, socket, rings)

			// as runs the test binary as user uid of group gid and
			// groups, with env set: a trainer or a reader of a ring.
			as := func(uid, gid int, groups []uint32, env string) (string, error) {
				cmd := exec.Command(filepath.Join(dir, "node.test"))
				cmd.Env = append(os.Environ(), env)
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: append([]uint32{}, groups...)}}
				return runFor(cmd, 60*time.Second)
			}
			out, err := as(trainerID, trainerID, tc.trainer, trainerEnv+"="+socket)
			switch {
			case !tc.connects:
				if err == nil || !strings.Contains(out, "connect: permission denied") {
					t.Errorf("trainer with the socket's mode %s: %v, want connect refused\n%s", tc.mode, err, out)
				}
			case err != nil || strings.TrimSpace(out) != "read a batch":
				t.Errorf("trainer of the socket's group: %v\n%s\nnode log:\n%s", err, out, d.log)
			}

			// The ring root opens has the socket's group, and its group
			// access.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := client.OpenLoader(ctx, socket, baseOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			socketMode, err := strconv.ParseUint(tc.mode, 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			ring := l.Info().Ring
			for _, f := range []struct {
				path string
				mode os.FileMode
			}{{socket, os.FileMode(socketMode)}, {ring, tc.wantMode}} {
				st, err := os.Stat(f.path)
				if err != nil {
					t.Fatal(err)
				}
				if sys := st.Sys().(*syscall.Stat_t); st.Mode().Perm() != f.mode || int(sys.Gid) != tc.wantGID {
					t.Errorf("%s: mode %v gid %d, want %v and gid %d", f.path, st.Mode().Perm(), sys.Gid, f.mode, tc.wantGID)
				}
			}
			if tc.outsider == 0 {
				return
			}
			// A user of the ring's former group may not connect, and
			// now may not read a batch from a ring either.
			if out, err := as(outsiderID, tc.outsider, nil, trainerEnv+"="+socket); err == nil || !strings.Contains(out, "connect: permission denied") {
				t.Errorf("user of group %d at the socket: %v, want connect refused\n%s", tc.outsider, err, out)
			}
			if out, err := as(outsiderID, tc.outsider, nil, ringReaderEnv+"="+ring); err == nil || !strings.Contains(out, "permission denied") {
				t.Errorf("user of group %d read ring %s: %v, want permission denied\n%s", tc.outsider, ring, err, out)
			}
		})
	}
}

// runFor runs cmd to its end, killed after timeout, and returns its
// output.
func runFor(cmd *exec.Cmd, timeout time.Duration) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	timer := time.AfterFunc(timeout, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	return out.String(), err
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
