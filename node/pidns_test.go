package node_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"graphnode/node/client"
)

// startDaemonInPIDNS starts `node run -c cfg` as pid 1 of a pid namespace
// of its own, as a node in a container is, with the test (the trainer)
// outside it. The test skips where this process may not create one.
func startDaemonInPIDNS(t *testing.T, bin, cfg, socket, rings string) *daemon {
	t.Helper()
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	probe := exec.Command("/bin/true")
	probe.SysProcAttr = attr
	if err := probe.Run(); err != nil {
		t.Skipf("cannot start a process in a pid namespace of its own: %v", err)
	}
	cmd := exec.Command(bin, "run", "-c", cfg)
	cmd.SysProcAttr = attr
	d := startDaemonCmd(t, cmd, cfg, socket, rings)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := client.Stats(ctx, socket); err != nil || st.PID != 1 {
		t.Fatalf("stats of the node in its own pid namespace: %+v, %v; want pid 1", st, err)
	}
	return d
}

// TestNodeInPIDNamespace: a node in a pid namespace of its own and a
// trainer outside it, slower than the samplers (the ring full whenever it
// asks). A sampler waiting for room judged the trainer's pid in its own
// namespace, where no such process is, and every loader ended after a
// few batches: "closed its sub-ring without end of stream".
func TestNodeInPIDNamespace(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	d := startDaemonInPIDNS(t, bin, cfg, socket, rings)
	o := baseOptions()
	o.Workers, o.Epochs, o.RingSize = 2, 1000, "2MiB"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := openReading(t, ctx, socket, o, 1)
	time.Sleep(500 * time.Millisecond) // the samplers fill the ring and wait for room
	// 40 reads: past an epoch's end (24 batches).
	for i := range 40 {
		if _, err := l.Next(ctx); err != nil && !errors.Is(err, client.ErrEndOfEpoch) {
			t.Fatalf("read %d from a node in another pid namespace: %v\n%s", i+2, err, d.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d.logHas("consumer gone") {
		t.Fatalf("a sampler took the trainer for gone:\n%s", d.log)
	}
	closeAndWait(t, rings, l)
}

// TestNodesPID1ShareRingDir: two nodes, each pid 1 of its own pid
// namespace (two containers), sharing one ring directory (/dev/shm). The
// second named its first ring as the first had (graphnode-1-1.ring) and
// refused open_loader with "file exists"; its sweep at start must not
// remove the first's live ring either.
func TestNodesPID1ShareRingDir(t *testing.T) {
	bin, parts := setup(t)
	cfg1, socket1, rings := newConfig(t, parts, "")
	text, err := os.ReadFile(cfg1)
	if err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	socket2 := filepath.Join(dir2, "node.sock")
	cfg2 := filepath.Join(dir2, "node.toml")
	if err := os.WriteFile(cfg2, []byte(strings.Replace(string(text), socket1, socket2, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	startDaemonInPIDNS(t, bin, cfg1, socket1, rings)
	o := baseOptions()
	o.Workers, o.Epochs, o.RingSize = 2, 1000, "2MiB"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l1 := openReading(t, ctx, socket1, o, 1)
	startDaemonInPIDNS(t, bin, cfg2, socket2, rings)
	l2 := openReading(t, ctx, socket2, o, 3)
	r1, r2 := l1.Info().Ring, l2.Info().Ring
	if r1 == r2 {
		t.Fatalf("both nodes' loaders read ring %s", r1)
	}
	for _, r := range []string{r1, r2} {
		if _, err := os.Stat(r); err != nil {
			t.Errorf("ring %s: %v", r, err)
		}
	}
	for i := range 3 {
		if _, err := l1.Next(ctx); err != nil {
			t.Fatalf("the first node's loader, batch %d after the second node started: %v", i+2, err)
		}
	}
	closeAndWait(t, rings, l1, l2)
}

// closeAndWait closes the loaders and waits until the node has removed
// their rings from rings: a node's stop checks that its ring directory
// is empty, which another node's ring in it would fail.
func closeAndWait(t *testing.T, rings string, ls ...*client.Loader) {
	t.Helper()
	for _, l := range ls {
		l.Close()
	}
	eventually(t, 10*time.Second, "rings removed", func() bool { return len(ringFiles(t, rings)) == 0 })
}
