package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"graphnode/node/client"
)

// TestNoPositionalArgs: the commands that take only flags refuse an
// argument, with exit 2, before they read or connect to anything. They
// used to drop it without a word: "--eval false" trained with --eval
// true, "fetch -c node.toml all" fetched this host's files only.
func TestNoPositionalArgs(t *testing.T) {
	dir := t.TempDir()
	cfg, sock := filepath.Join(dir, "none.toml"), filepath.Join(dir, "none.sock")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--socket", sock, "--eval", "false"}, `node train: unexpected argument "false" (a boolean flag takes its value as --flag=false)`},
		{[]string{"kge", "--socket", sock, "--parts", dir, "--eval-filter", "false"}, `node kge: unexpected argument "false"`},
		{[]string{"demo", "--keep", "false", "--parts", "1"}, `node demo: unexpected argument "false"`},
		{[]string{"fetch", "-c", cfg, "all"}, `node fetch: unexpected argument "all"`},
		{[]string{"run", "-c", cfg, "extra"}, `node run: unexpected argument "extra"`},
		{[]string{"config", "check", "-c", cfg, "extra"}, `node config check: unexpected argument "extra"`},
		{[]string{"sampler", "extra"}, `node sampler: unexpected argument "extra"`},
	} {
		code, _, stderr := runNode(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, want 2 and %q; stderr:\n%s", tc.args, code, tc.want, stderr)
		}
	}
}

// startKVNode starts `node run` of bin on a 20-node ring in one part,
// with the async kv table "emb" (a row per node) and a checkpoint
// directory, and waits until it is ready. It returns the process, the
// channel of its exit (see startChild), its socket, its checkpoint
// directory and its log.
func startKVNode(t *testing.T, bin string) (cmd *exec.Cmd, exited chan error, sock, ckpt string, logb *syncBuffer) {
	t.Helper()
	cmd, exited, dir, sock, logb := startRun(t, bin, `[kv]
checkpoint_dir = "$DIR/kv"
[[kv.tables]]
name = "emb"
rows = "nodes"
dim = 4
optimizer = "sgd"
lr = 0.1
mode = "async"
`, "kv")
	return cmd, exited, sock, filepath.Join(dir, "kv"), logb
}

// startRun starts `node run` of bin on a 20-node ring in one part, with
// node.toml's [node] and [control] and the sections of more ($DIR: its
// directory, where dirs are made first), and waits until it is ready. It
// returns the process, the channel of its exit (see startChild), the
// directory, the socket and the log, which may be read while it runs.
func startRun(t *testing.T, bin, more string, dirs ...string) (cmd *exec.Cmd, exited chan error, dir, sock string, logb *syncBuffer) {
	t.Helper()
	dir, cfg, sock := writeRunConfig(t, bin, more, dirs...)
	logb = &syncBuffer{}
	cmd = exec.Command(bin, "run", "-c", cfg)
	cmd.Stdout, cmd.Stderr = logb, logb
	exited = startChild(t, cmd)
	awaitReady(t, sock, exited, logb)
	return cmd, exited, dir, sock, logb
}

// writeRunConfig writes the node.toml of startRun in a new directory and
// returns the directory, the file and the node's socket.
func writeRunConfig(t *testing.T, bin, more string, dirs ...string) (dir, cfg, sock string) {
	t.Helper()
	dir = t.TempDir()
	parts := onePart(t, bin, dir)
	sock = filepath.Join(dir, "node.sock")
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg = filepath.Join(dir, "node.toml")
	body := fmt.Sprintf("version = 1\n[node]\nparts = %q\n[control]\nsocket = %q\n", parts, sock) + strings.ReplaceAll(more, "$DIR", dir)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, cfg, sock
}

// awaitReady waits until the node run on sock is ready; it fails the test
// if the node exits first (exited: see startChild), with its log.
func awaitReady(t *testing.T, sock string, exited chan error, logb *syncBuffer) {
	t.Helper()
	for {
		st, err := client.Stats(t.Context(), sock)
		if err == nil && st.Ready {
			return
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("node run exited at start: %v\n%s", err, logb)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestRunStopsOnHangup: `node run` whose terminal goes away (SIGHUP, an
// ssh session dropped) stops as on SIGTERM: it checkpoints its kv tables,
// removes its socket and exits 0. SIGHUP's default action killed it
// without a checkpoint, leaving the socket behind.
func TestRunStopsOnHangup(t *testing.T) {
	bin := nodeBinary(t)
	cmd, exited, sock, ckpt, logb := startKVNode(t, bin)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("node run after SIGHUP: %v, want exit 0; log:\n%s", err, logb)
		}
	case <-time.After(time.Minute): // a safety net, not a timing
		t.Fatalf("node run still runs a minute after SIGHUP; log:\n%s", logb)
	}
	// The exit save, beside the node's part of the last kv_save (none here).
	if _, err := os.Stat(filepath.Join(ckpt, "emb.part0.exit.kvt")); err != nil {
		t.Errorf("no checkpoint after SIGHUP: %v; log:\n%s", err, logb)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket %s left after SIGHUP (%v)", sock, err)
	}
}

// TestSecondSignalEnds: a command stuck where it does not look at its
// context (node partition opening a FIFO that nobody writes) stops at the
// second Ctrl-C, by the signal's default action. It ignored every signal
// after the first: the handler stayed installed.
func TestSecondSignalEnds(t *testing.T) {
	bin := nodeBinary(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "edges.txt")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "partition", "--input", fifo, "--format", "edgelist", "-o", filepath.Join(dir, "parts"))
	exited := startChild(t, cmd)
	// Ctrl-C until it goes: the first is taken by the handler, so at
	// least two are needed, and when the first was handled is not seen
	// from here.
	safety := time.After(time.Minute) // a safety net, not a timing
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for sent := 0; ; {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("node partition after %d SIGINTs: %v, want killed by SIGINT", sent, err)
			}
			if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT || sent < 2 {
				t.Fatalf("node partition after %d SIGINTs: %v, want killed by the second or a later SIGINT", sent, err)
			}
			return
		case <-tick.C:
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			sent++
		case <-safety:
			t.Fatalf("node partition, stuck opening a FIFO, still runs after %d SIGINTs", sent)
		}
	}
}

// TestSecondSignalDuringDrain: a second SIGTERM while node run drains a
// loader whose trainer reads nothing ends the process by SIGTERM at once,
// but not before it removes its rings and its socket, and says so. The
// default action had left each ring (rings.size of tmpfs) and the socket
// until the next start, with nothing in the log.
func TestSecondSignalDuringDrain(t *testing.T) {
	bin := nodeBinary(t)
	cmd, exited, dir, sock, logb := startRun(t, bin, `[rings]
dir = "$DIR/rings"
size = "1MB"
[samplers]
workers = 1
drain_timeout = "5m"
`, "rings")
	rings := filepath.Join(dir, "rings")
	// A loader whose ring fills and is never read: its samplers block,
	// and the drain waits for them up to drain_timeout.
	o := client.DefaultOptions()
	o.SeedIDs, o.BatchSize, o.Epochs, o.Fanouts = []uint64{0, 1, 2, 3}, 1, 1<<20, []int{-1}
	l, err := client.OpenLoader(t.Context(), sock, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The ring is full when the batches written stop growing.
	for last := uint64(0); ; {
		time.Sleep(200 * time.Millisecond)
		st, err := client.Stats(t.Context(), sock)
		if err != nil {
			t.Fatal(err)
		}
		if st.Batches > 0 && st.Batches == last {
			break
		}
		last = st.Batches
	}
	ringFiles := func() []string {
		names, _ := filepath.Glob(filepath.Join(rings, "*.ring"))
		return names
	}
	if got := ringFiles(); len(got) != 1 {
		t.Fatalf("rings before the stop: %v, want one", got)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	safety := time.After(time.Minute) // a safety net, not a timing
	for !strings.Contains(logb.String(), "draining") {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("node run ended before a second signal: %v\n%s", err, logb)
		case <-safety:
			t.Fatalf("no drain a minute after SIGTERM; log:\n%s", logb)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Fatalf("node run after a second SIGTERM: %v, want killed by SIGTERM; log:\n%s", err, logb)
		}
	case <-safety:
		t.Fatalf("node run still runs after a second SIGTERM; log:\n%s", logb)
	}
	if got := ringFiles(); len(got) != 0 {
		t.Errorf("rings left after a second SIGTERM: %v; log:\n%s", got, logb)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket %s left after a second SIGTERM (%v)", sock, err)
	}
	if !strings.Contains(logb.String(), "second stop signal: exiting without draining") {
		t.Errorf("no word of the second signal in the log:\n%s", logb)
	}
}

// TestSecondSignalEndsNotSampler: a sampler keeps its handler for every
// signal: the Ctrl-C that stops a node run in a terminal reaches its
// samplers too, and the node's SIGTERM that follows must let them finish
// the batch in hand.
func TestSecondSignalEndsNotSampler(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, true}, {[]string{"run", "-c", "x"}, true}, {[]string{"partition"}, true}, {[]string{"sampler"}, false},
	} {
		if got := secondSignalEnds(c.args); got != c.want {
			t.Errorf("%v: %v, want %v", c.args, got, c.want)
		}
	}
}

// TestHelpCommand: node help CMD prints CMD's own help, as node CMD --help
// does (it printed the list of commands), with exit 0; node help CMD SUB
// that of the subcommand; an unknown CMD is named, with exit 2.
func TestHelpCommand(t *testing.T) {
	for name := range commands() {
		code, stdout, stderr := runNode(t, "help", name)
		wcode, wstdout, wstderr := runNode(t, name, "--help")
		if code != 0 || wcode != 0 || stdout != wstdout || stderr != wstderr || !strings.HasPrefix(stderr, "usage: node "+name) {
			t.Errorf("node help %s: exit %d, stdout %q, stderr:\n%s\nwant exit 0 and what node %s --help prints:\n%s", name, code, stdout, stderr, name, wstderr)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"help", "cert", "init"}, 0, "usage: node cert init --cluster NAME"},
		{[]string{"help", "config", "check"}, 0, "usage: node config check -c node.toml"},
		{[]string{"help"}, 0, "usage: node <command> [flags]"},
		{[]string{"help", "help"}, 0, "usage: node <command> [flags]"},
		{[]string{"help", "frob"}, 2, "node help: unknown command \"frob\"\n\nusage: node <command> [flags]"},
	} {
		code, _, stderr := runNode(t, tc.args...)
		if code != tc.code || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("node %v: exit %d, stderr:\n%s\nwant exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// startChild starts cmd, killed with the test (and with this process:
// Pdeathsig), and returns the channel its Wait result arrives on. A test
// that takes the result puts it back for the cleanup, which kills the
// child and waits for it.
func startChild(t *testing.T, cmd *exec.Cmd) chan error {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	return exited
}

// onePart partitions a 20-node ring into one part under dir with bin and
// returns the parts directory.
func onePart(t *testing.T, bin, dir string) string {
	t.Helper()
	parts := filepath.Join(dir, "parts")
	if out, err := exec.Command(bin, "partition", "--input", writeEdgeList(t, 20), "--format", "edgelist",
		"--parts", "1", "--method", "random", "-o", parts).CombinedOutput(); err != nil {
		t.Fatalf("partition: %v\n%s", err, out)
	}
	return parts
}

// syncBuffer is a bytes.Buffer that a child's output may be copied into
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAbortWithin: the functions a second signal runs are given a bound:
// one stuck (on a wedged disk, say) does not keep the process from
// ending, which is what the second signal is for.
func TestAbortWithin(t *testing.T) {
	a := newApp(io.Discard, io.Discard)
	var ran []int
	a.onAbort(func() { ran = append(ran, 1) })
	a.onAbort(func() { ran = append(ran, 2) })
	if !a.abortWithin(time.Minute) || !slices.Equal(ran, []int{2, 1}) {
		t.Fatalf("quick functions: ran %v, want [2 1] (last registered first) and done", ran)
	}
	stuck := make(chan struct{})
	defer close(stuck)
	b := newApp(io.Discard, io.Discard)
	b.onAbort(func() { <-stuck })
	if b.abortWithin(50 * time.Millisecond) {
		t.Fatal("a function that never returns was reported done")
	}
}
