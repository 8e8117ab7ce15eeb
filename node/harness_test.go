package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"graphnode/csr"
	"graphnode/node"
	"graphnode/node/client"
	"graphnode/partition"
)

// The end-to-end tests build the real binary once, write a small
// partition once, and start `node run` processes against them.
var fixture struct {
	once  sync.Once
	bin   string // built cmd/node
	parts string // parts/ directory of one partition
	err   error
}

func setup(t *testing.T) (bin, parts string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test builds the binary; skipped with -short")
	}
	fixture.once.Do(func() {
		dir, err := os.MkdirTemp("", "graphnode-node-test-")
		if err != nil {
			fixture.err = err
			return
		}
		fixture.bin = filepath.Join(dir, "node")
		args := []string{"build", "-o", fixture.bin}
		if raceBuild {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "graphnode/cmd/node")...).CombinedOutput()
		if err != nil {
			fixture.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		fixture.parts = filepath.Join(dir, "parts")
		fixture.err = writeParts(fixture.parts)
	})
	if fixture.err != nil {
		t.Fatal(fixture.err)
	}
	return fixture.bin, fixture.parts
}

// TestMain removes the fixture's directory after all tests. Started with
// trainerEnv set, the test binary is a trainer instead (runTrainer), and
// with ringReaderEnv a reader of a ring (readRing).
func TestMain(m *testing.M) {
	if socket := os.Getenv(trainerEnv); socket != "" {
		os.Exit(runTrainer(socket)) // a trainer of another user
	}
	if ring := os.Getenv(ringReaderEnv); ring != "" {
		os.Exit(readRing(ring)) // a user who must not read a ring
	}
	if os.Getenv(node.CrashingSamplerEnv) != "" {
		node.CrashingSampler() // a sampler that panics
	}
	code := m.Run()
	if fixture.bin != "" {
		os.RemoveAll(filepath.Dir(fixture.bin))
	}
	os.Exit(code)
}

// writeParts writes a 3000-node stochastic block model graph with 16
// float32 features and class labels as one partition.
func writeParts(dir string) error {
	ctx := context.Background()
	g, err := partition.SBM(ctx, partition.SBMConfig{
		Nodes: 3000, Blocks: 4, AvgDegree: 12, FeatDim: 16, Seed: 7,
		TrainFrac: 0.5, ValFrac: 0.1, TestFrac: 0.1, Workers: 1,
	}, nil)
	if err != nil {
		return err
	}
	adj, err := partition.BuildAdj(ctx, g, csr.In, partition.CleanOptions{}, nil)
	if err != nil {
		return err
	}
	_, err = partition.Write(ctx, dir, g, adj, make([]uint32, g.NumNodes), partition.WriteOptions{Parts: 1, Method: "random"})
	return err
}

// lockedBuffer collects a process's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// daemon is one running `node run`.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	socket string
	rings  string // ring directory, under /dev/shm
	config string
	log    *lockedBuffer
	done   chan struct{}
	err    error // Wait's result, once done is closed
}

// newConfig writes a node.toml with its own socket and ring directory;
// samplers holds extra lines of its [samplers] table.
func newConfig(t *testing.T, parts, samplers string) (cfg, socket, rings string) {
	return newConfigGroup(t, parts, samplers, "")
}

// nodeDirs makes a node's directory (for its node.toml and socket) and
// its ring directory under /dev/shm, both removed after the test.
func nodeDirs(t *testing.T) (dir, rings string) {
	t.Helper()
	dir = t.TempDir()
	rings, err := os.MkdirTemp("/dev/shm", "graphnode-test-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(rings) })
	return dir, rings
}

// openReading opens a loader of o on socket, closed after the test, and
// reads its first n batches.
func openReading(t *testing.T, ctx context.Context, socket string, o client.Options, n int) *client.Loader {
	t.Helper()
	l, err := client.OpenLoader(ctx, socket, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for range n {
		if _, err := l.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// newConfigGroup is newConfig with a [control] group.
func newConfigGroup(t *testing.T, parts, samplers, group string) (cfg, socket, rings string) {
	t.Helper()
	dir, rings := nodeDirs(t)
	socket = filepath.Join(dir, "node.sock")
	text := fmt.Sprintf("version = 1\n[node]\nparts = %q\nname = \"test\"\n[control]\nsocket = %q\ngroup = %q\n[rings]\ndir = %q\nsize = \"16MiB\"\n"+
		"[samplers]\ndrain_timeout = \"5s\"\n%s[log]\nformat = \"json\"\nlevel = \"debug\"\n", parts, socket, group, rings, samplers)
	cfg = filepath.Join(dir, "node.toml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, socket, rings
}

// startDaemon starts `node run -c cfg` and waits until it answers.
func startDaemon(t *testing.T, bin, cfg, socket, rings string) *daemon {
	t.Helper()
	return startDaemonCmd(t, exec.Command(bin, "run", "-c", cfg), cfg, socket, rings)
}

// startDaemonCmd is startDaemon of cmd, a `node run -c cfg` (run through
// a shell that sets a limit, say).
func startDaemonCmd(t *testing.T, cmd *exec.Cmd, cfg, socket, rings string) *daemon {
	t.Helper()
	d := &daemon{t: t, socket: socket, rings: rings, config: cfg, log: &lockedBuffer{}, done: make(chan struct{})}
	d.cmd = cmd
	d.cmd.Stderr = d.log
	d.cmd.Stdout = d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(d.stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.Stats(ctx, socket)
		cancel()
		if err == nil {
			return d
		}
		select {
		case <-d.done:
			t.Fatalf("node run exited: %v\n%s", d.err, d.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("node run not ready after 10s: %v\n%s", err, d.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop terminates the daemon (SIGTERM, then SIGKILL) and checks that it
// left no ring file and no socket behind.
func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		d.t.Errorf("node run ignored SIGTERM for 15s\n%s", d.log)
	}
	if testing.Verbose() {
		d.t.Logf("node run log:\n%s", d.log)
	}
	if strings.Contains(d.log.String(), "DATA RACE") {
		d.t.Errorf("race detected in node run or a sampler:\n%s", d.log)
	}
	d.assertClean()
}

// assertClean fails if a ring file or the socket is left.
func (d *daemon) assertClean() {
	d.t.Helper()
	if left := ringFiles(d.t, d.rings); len(left) > 0 {
		d.t.Errorf("ring files left in %s: %v", d.rings, left)
	}
	if _, err := os.Stat(d.socket); !errors.Is(err, os.ErrNotExist) {
		d.t.Errorf("socket %s left behind (%v)", d.socket, err)
	}
}

func ringFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.ring"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pidGone reports whether no process has this pid (zombies of the node
// are reaped by it, so a pid that exists is a live sampler).
func pidGone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// logHas reports whether a JSON log line holds every fragment.
func (d *daemon) logHas(fragments ...string) bool {
	for _, line := range strings.Split(d.log.String(), "\n") {
		ok := true
		for _, f := range fragments {
			if !strings.Contains(line, f) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// mountTmpfs mounts a tmpfs of size ("8m") on a new directory, unmounted
// after the test; the test skips where this process may not mount.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
