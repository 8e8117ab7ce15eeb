package node

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"graphnode/node/client"
	"graphnode/node/control"
)

// socketNode is loaderNode with its control socket alone in a directory
// of its own (so that a test sees whatever else is put there), its log
// kept, and the socket looked at every every (time.Hour: only when the
// test calls checkSocket).
func socketNode(t *testing.T, every time.Duration) (n *Node, logs *syncBuffer) {
	t.Helper()
	n, _, _ = loaderNode(t)
	n.cfg.Control.Socket = filepath.Join(t.TempDir(), "node.sock")
	logs = &syncBuffer{}
	n.log = slog.New(slog.NewTextHandler(logs, nil))
	n.sockCheck = every
	return n, logs
}

// runNode runs n until the test ends or stop is called; stop returns
// Run's error. It returns once the socket accepts.
func runNode(t *testing.T, n *Node) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-ran:
			case <-time.After(10 * time.Second):
				err = errors.New("Run did not return within 10 s of its context's end")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	waitUntil(t, "the control socket accepting", func() bool {
		c, err := net.Dial("unix", n.cfg.Control.Socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return stop
}

// statsOn asks for stats over an open control connection.
func statsOn(c net.Conn) (*control.Stats, error) {
	if err := control.WriteFrame(c, control.Request{Op: control.OpStats}); err != nil {
		return nil, err
	}
	resp, err := control.ReadResponse(c)
	if err != nil {
		return nil, err
	}
	if resp.Stats == nil {
		return nil, errors.New("no stats in the answer")
	}
	return resp.Stats, nil
}

// answersStats reports whether a trainer that connects to socket now is
// answered by this process's node.
func answersStats(socket string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := client.Stats(ctx, socket)
	return err == nil && s.PID == os.Getpid()
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestRebindRemovedSocket: a node whose control socket file was removed
// (or moved away) while it ran binds it again at its next check, with
// the mode and group it had: trainers connect again, SocketLost is
// false, and the log says the socket was re-created. The listener of the
// old socket is closed, and a connection it accepted still answers. The
// stop removes the socket bound anew and nothing else. The node kept
// running without its socket, no trainer could connect, and only a
// restart, which drains, made it again.
func TestRebindRemovedSocket(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(path string) error
		left []string // in the socket's directory after the stop
	}{
		{"removed", os.Remove, nil},
		{"moved away", func(path string) error { return os.Rename(path, path+".old") }, []string{"node.sock.old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, logs := socketNode(t, 10*time.Millisecond)
			stop := runNode(t, n)
			socket := n.cfg.Control.Socket
			first, err := os.Lstat(socket)
			if err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := statsOn(c); err != nil {
				t.Fatal(err)
			}
			old := n.listener()

			if err := tc.lose(socket); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "a trainer connecting to the socket bound again", func() bool { return answersStats(socket) })
			if n.SocketLost() {
				t.Error("SocketLost once the socket is bound again")
			}
			if !strings.Contains(logs.String(), "re-created") || !strings.Contains(logs.String(), "socket="+socket) {
				t.Errorf("the log does not say that the socket at %s was re-created:\n%s", socket, logs)
			}
			now, err := os.Lstat(socket)
			if err != nil {
				t.Fatal(err)
			}
			if os.SameFile(first, now) {
				t.Fatal("the path holds the first socket")
			}
			if now.Mode() != first.Mode() || now.Sys().(*syscall.Stat_t).Gid != first.Sys().(*syscall.Stat_t).Gid {
				t.Errorf("socket bound again is %v of group %d, want %v of group %d as the first",
					now.Mode(), now.Sys().(*syscall.Stat_t).Gid, first.Mode(), first.Sys().(*syscall.Stat_t).Gid)
			}
			if err := old.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
				t.Errorf("the old socket's listener is not closed: SetDeadline: %v", err)
			}
			if s, err := statsOn(c); err != nil || s.PID != os.Getpid() {
				t.Errorf("a connection accepted on the old socket: stats %+v, %v", s, err)
			}
			c.Close()

			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := dirNames(t, filepath.Dir(socket)); !slices.Equal(got, tc.left) {
				t.Errorf("after the stop the socket's directory holds %q, want %q", got, tc.left)
			}
			if strings.Contains(logs.String(), "trainers could not connect since") || strings.Contains(logs.String(), "left as it is") {
				t.Errorf("the stop says the socket bound again was lost:\n%s", logs)
			}
		})
	}
}

// TestCheckSocketRace: checks beside each other bind one socket, once.
func TestCheckSocketRace(t *testing.T) {
	n, logs := socketNode(t, time.Hour)
	stop := runNode(t, n)
	socket := n.cfg.Control.Socket
	if err := os.Remove(socket); err != nil {
		t.Fatal(err)
	}
	var checks sync.WaitGroup
	for range 8 {
		checks.Go(n.checkSocket)
	}
	checks.Wait()
	if got := strings.Count(logs.String(), "re-created"); got != 1 {
		t.Errorf("%d sockets re-created by 8 checks, want 1:\n%s", got, logs)
	}
	if !answersStats(socket) {
		t.Error("no answer on the socket bound again")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after the stop: %v", err)
	}
}

// TestSocketPathTaken: a node whose socket's path holds another file now
// (an operator's file or directory, another node's socket) leaves it as
// it is, at each check and at its stop; its socket stays lost, and the
// log says why it is not bound again, once for two checks.
func TestSocketPathTaken(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		kind string // fileKind
	}{
		{"regular file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("an operator's file\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "a regular file"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "a directory"},
		{"another socket", func(t *testing.T, path string) {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			t.Cleanup(func() { ln.Close() })
		}, "a socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, logs := socketNode(t, time.Hour)
			stop := runNode(t, n)
			socket := n.cfg.Control.Socket
			if err := os.Remove(socket); err != nil {
				t.Fatal(err)
			}
			tc.make(t, socket)
			before, err := os.Lstat(socket)
			if err != nil {
				t.Fatal(err)
			}
			n.checkSocket()
			n.checkSocket()
			after, err := os.Lstat(socket)
			if err != nil || !os.SameFile(before, after) || after.Mode() != before.Mode() {
				t.Fatalf("%s at control.socket changed by the check: %v", tc.name, err)
			}
			if !n.SocketLost() {
				t.Error("SocketLost is false with another file at the path")
			}
			const why = "the path holds a file that is not this node's to replace, so the socket is not bound again"
			if got := strings.Count(logs.String(), why); got != 1 || !strings.Contains(logs.String(), `file="`+tc.kind) || !strings.Contains(logs.String(), "socket="+socket) {
				t.Errorf("the log says %d times %q (want once, with file=%q and the socket's path):\n%s", got, why, tc.kind, logs)
			}
			if strings.Contains(logs.String(), "re-created") {
				t.Errorf("the log says the socket was re-created:\n%s", logs)
			}
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if after, err := os.Lstat(socket); err != nil || !os.SameFile(before, after) {
				t.Errorf("%s at control.socket removed or replaced by the stop: %v", tc.name, err)
			}
			if stopped := "left as it is\" socket=" + socket + ` file="` + tc.kind + `"`; !strings.Contains(logs.String(), stopped) {
				t.Errorf("the stop's log does not say %q:\n%s", stopped, logs)
			}
		})
	}
}

// runNodeInDir runs a socketNode (checked only when the test asks) whose
// socket is in a directory of its own, dir, that the test may remove.
func runNodeInDir(t *testing.T) (n *Node, logs *syncBuffer, dir, socket string, stop func() error) {
	t.Helper()
	n, logs = socketNode(t, time.Hour)
	dir = filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.cfg.Control.Socket = filepath.Join(dir, "node.sock")
	return n, logs, dir, n.cfg.Control.Socket, runNode(t, n)
}

// TestRebindDirectoryGone: a node whose socket's directory was removed
// does not make it; the log names the socket and says that its
// directory is gone, and the socket stays lost. Once the directory is
// made again, the next check binds the socket there.
func TestRebindDirectoryGone(t *testing.T) {
	n, logs, dir, socket, stop := runNodeInDir(t)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	n.checkSocket()
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the check made the socket's directory %s: %v", dir, err)
	}
	if !n.SocketLost() {
		t.Error("SocketLost is false with its directory gone")
	}
	if log := logs.String(); !strings.Contains(log, "binding it again failed") || !strings.Contains(log, "its directory "+dir+" is gone") ||
		!strings.Contains(log, "socket="+socket) {
		t.Errorf("the log does not say that the socket %s could not be bound for its directory is gone:\n%s", socket, log)
	}

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.checkSocket()
	if n.SocketLost() || !answersStats(socket) {
		t.Fatalf("the socket is not bound again once its directory is back:\n%s", logs)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := dirNames(t, dir); len(got) != 0 {
		t.Errorf("after the stop the socket's directory holds %q", got)
	}
}

// TestRebindDirectoryReadOnly: a socket directory that is read-only to
// the node by now, as /run/graphnode made again by hand is to a node of
// the unit (ProtectSystem=strict leaves writable only the directory
// systemd made at the start), gets an error that says so and that a
// restart is what binds the socket again. The node said that making the
// directory again was enough, and logged "read-only file system" once a
// minute after it was. A read-only tmpfs mounted over the directory
// stands for it: root only.
func TestRebindDirectoryReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a read-only tmpfs needs root")
	}
	n, logs, dir, socket, stop := runNodeInDir(t)
	if err := os.Remove(socket); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_RDONLY, "size=64k"); err != nil {
		t.Skipf("mount a read-only tmpfs on %s: %v", dir, err)
	}
	mounted := true
	unmount := func() {
		if mounted {
			if err := syscall.Unmount(dir, 0); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
			mounted = false
		}
	}
	t.Cleanup(unmount)
	n.checkSocket()
	if !n.SocketLost() {
		t.Error("SocketLost is false with its directory read-only")
	}
	if log := logs.String(); !strings.Contains(log, "its directory "+dir+" is read-only to the node") || !strings.Contains(log, "restart the node") {
		t.Errorf("the log does not say that the socket's directory %s is read-only and that a restart binds it:\n%s", dir, log)
	}
	unmount()
	n.checkSocket()
	if n.SocketLost() || !answersStats(socket) {
		t.Fatalf("the socket is not bound again once its directory is writable:\n%s", logs)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
