package node_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"graphnode/node/client"
	"graphnode/node/control"
)

// Failure and lifecycle tests against real `node run` processes.

// TestKilledSamplerIsAnError: SIGKILL to one sampler mid-epoch gives the
// trainer an error naming the worker within a couple of seconds, the
// node logs the exit status, and closing the loader stops the other
// sampler and removes the ring.
func TestKilledSamplerIsAnError(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	d := startDaemon(t, bin, cfg, socket, rings)
	o := baseOptions()
	o.Workers, o.Epochs, o.BatchSize, o.RingSize = 2, 1000, 16, "2MiB"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := openReading(t, ctx, socket, o, 5)
	st, err := l.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := st.Loaders[0].Samplers[1]
	if victim.Worker != 1 || victim.State != "running" {
		t.Fatalf("sampler 1: %+v", victim)
	}
	syscall.Kill(victim.PID, syscall.SIGKILL)
	killed := time.Now()
	for {
		_, err := l.Next(ctx)
		if err == nil || errors.Is(err, client.ErrEndOfEpoch) {
			continue
		}
		if !errors.Is(err, client.ErrSampler) || !strings.Contains(err.Error(), "worker 1") || !strings.Contains(err.Error(), "signal: killed") {
			t.Fatalf("err = %v, want ErrSampler naming worker 1 and its status", err)
		}
		break
	}
	if wait := time.Since(killed); wait > 3*time.Second {
		t.Errorf("error came %v after the kill, want within ~2s", wait)
	}
	eventually(t, 3*time.Second, "node logs the failure", func() bool {
		return d.logHas(`"msg":"sampler failed"`, `"worker":1`, `"status":"signal: killed"`, `"loader":1`)
	})
	// The trainer closes the failed loader: the node stops the sampler
	// that survived (blocked on its full sub-ring) and removes the ring.
	ring := l.Info().Ring
	l.Close()
	eventually(t, 5*time.Second, "surviving sampler exits", func() bool { return pidGone(st.Loaders[0].Samplers[0].PID) })
	eventually(t, 5*time.Second, "ring removed", func() bool {
		_, err := os.Stat(ring)
		return errors.Is(err, os.ErrNotExist)
	})
}

// TestAcceptOutOfDescriptors: trainers that open more connections than
// the node has file descriptors make accept fail (EMFILE) for a while;
// the node logs it, keeps serving the connections it holds, and accepts
// again once descriptors are free. It used to stop serving and exit 0,
// which a restart policy on failure does not bring back.
func TestAcceptOutOfDescriptors(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	// The limit leaves the node its start-up descriptors and a few more.
	cmd := exec.Command("/bin/sh", "-c", `ulimit -n 64 && exec "$0" run -c "$1"`, bin, cfg)
	d := startDaemonCmd(t, cmd, cfg, socket, rings)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 100 {
		c, err := net.Dial("unix", socket)
		if err != nil {
			break // the backlog is full: accept is failing
		}
		conns = append(conns, c)
	}
	eventually(t, 5*time.Second, "node logs the failed accept", func() bool {
		return d.logHas(`"msg":"accept failed, retrying"`, "too many open files")
	})
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	eventually(t, 10*time.Second, "node answers again", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := client.Stats(ctx, socket)
		return err == nil
	})
	select {
	case <-d.done:
		t.Fatalf("node run exited: %v\n%s", d.err, d.log)
	default:
	}
}

// TestTrainerDisconnectReclaimsLoader: a trainer that drops its control
// connection mid-epoch (as a crash would) gets its samplers stopped and
// its ring removed.
func TestTrainerDisconnectReclaimsLoader(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	d := startDaemon(t, bin, cfg, socket, rings)
	o := baseOptions()
	o.Workers, o.Epochs, o.RingSize = 3, 1000, "2MiB"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := client.OpenLoader(ctx, socket, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Next(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := l.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pids, ring := samplerPIDs(st), l.Info().Ring
	l.Close()
	for _, pid := range pids {
		eventually(t, 5*time.Second, fmt.Sprintf("sampler %d exits", pid), func() bool { return pidGone(pid) })
	}
	eventually(t, 5*time.Second, "ring removed", func() bool {
		_, err := os.Stat(ring)
		return errors.Is(err, os.ErrNotExist)
	})
	// The node forgets the loader just after it removes the ring.
	eventually(t, 5*time.Second, "loader forgotten", func() bool {
		st, err = client.Stats(ctx, socket)
		return err == nil && len(st.Loaders) == 0
	})
	if st.Opened != 1 {
		t.Fatalf("stats after disconnect: %+v; want 1 opened", st)
	}
	// A loader closed on purpose is no sampler's failure.
	if d.logHas(`"msg":"sampler failed"`) {
		t.Fatalf("a sampler failed because the trainer left:\n%s", d.log)
	}
}

// TestReopenAtMaxLoaders: a trainer that closes its loader and at once
// opens the next, with every samplers.max_loaders slot taken by its
// loaders (an evaluation loader per epoch, say), gets it each time, by
// Close (hang-up) or by close_loader. The node used to refuse about
// every second open with "node serves 1 loaders already", the old
// loader's samplers still stopping or its hang-up not yet read.
func TestReopenAtMaxLoaders(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "max_loaders = 1\n")
	startDaemon(t, bin, cfg, socket, rings)
	o := baseOptions()
	o.Workers, o.Epochs, o.RingSize = 2, 1000, "2MiB"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var refused []string
	for i := range 30 {
		l, err := client.OpenLoader(ctx, socket, o)
		if err != nil {
			refused = append(refused, fmt.Sprintf("open %d: %v", i, err))
			// The slot comes back once the old samplers have stopped.
			eventually(t, 10*time.Second, "loader slot given back", func() bool {
				st, err := client.Stats(ctx, socket)
				return err == nil && len(st.Loaders) == 0
			})
			continue
		}
		if _, err := l.Next(ctx); err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	if len(refused) > 0 {
		t.Errorf("%d of 30 opens after closing the only loader refused:\n%s", len(refused), strings.Join(refused, "\n"))
	}
	if st, err := client.Stats(ctx, socket); err != nil || st.Opened != uint64(30-len(refused)) {
		t.Errorf("stats %+v, %v: want %d opened", st, err, 30-len(refused))
	}
}

// TestRemoteReopenAtMaxLoaders: TestReopenAtMaxLoaders through a client
// node, whose sampling node (part 0, samplers.max_loaders = 1) closes
// the remote loader once the client node has hung up on it. Its
// trainer's next loader used to be refused about every second time by
// the sampling node ("node serves 1 loaders already").
func TestRemoteReopenAtMaxLoaders(t *testing.T) {
	c := startCluster(t, clusterParts(t, 2), 2, "10s")
	b, err := os.ReadFile(c.configs[0])
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "[samplers]\n", "[samplers]\nmax_loaders = 1\n", 1)
	if err := os.WriteFile(c.configs[0], []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	c.nodes[0].cmd.Process.Signal(syscall.SIGTERM)
	<-c.nodes[0].done
	c.restart(0)
	_, socket := c.startClient("10s")
	o := baseOptions()
	o.Workers, o.Epochs, o.RingSize = 2, 1000, "2MiB" // rank 0 of 1: part 0's node samples
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var refused []string
	for i := range 20 {
		l, err := client.OpenLoader(ctx, socket, o)
		if err != nil {
			refused = append(refused, fmt.Sprintf("open %d: %v", i, err))
			eventually(t, 10*time.Second, "sampling node's slot given back", func() bool {
				st, err := client.Stats(ctx, c.sockets[0])
				return err == nil && len(st.Loaders) == 0
			})
			continue
		}
		if _, err := l.Next(ctx); err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	if len(refused) > 0 {
		t.Errorf("%d of 20 opens after closing the only loader refused:\n%s", len(refused), strings.Join(refused, "\n"))
	}
}

// TestQuickCloseLogsNoWarning: a trainer that closes its loader before
// the samplers attach to their sub-rings (open, then close at once) is
// an ordinary close: every loader is closed, and the node logs no
// warning. It used to log "could not write the last record of a
// sampler on the ring" (consumer gone) for most of those samplers.
func TestQuickCloseLogsNoWarning(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	d := startDaemon(t, bin, cfg, socket, rings)
	o := baseOptions()
	o.Workers, o.Epochs, o.RingSize = 4, 1000, "4MiB"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const loaders = 20
	for range loaders {
		l, err := client.OpenLoader(ctx, socket, o)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	eventually(t, 30*time.Second, "every loader closed", func() bool {
		return strings.Count(d.log.String(), `"msg":"loader closed"`) == loaders
	})
	for _, line := range strings.Split(d.log.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("quick closes logged: %s", line)
		}
	}
}

// TestDrainOnSIGTERM: SIGTERM to node run with a loader mid-epoch ends the
// trainer's stream with ErrStopped, exits 0 and leaves no socket, ring or
// sampler behind.
func TestDrainOnSIGTERM(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	d := startDaemon(t, bin, cfg, socket, rings)
	o := baseOptions()
	o.Workers, o.Epochs, o.RingSize = 2, 1000, "2MiB"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := client.OpenLoader(ctx, socket, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Next(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ := l.Stats(ctx)
	pids := samplerPIDs(st)
	d.cmd.Process.Signal(syscall.SIGTERM)
	for {
		_, err := l.Next(ctx)
		if err == nil || errors.Is(err, client.ErrEndOfEpoch) {
			continue
		}
		if !errors.Is(err, client.ErrStopped) {
			t.Fatalf("err = %v, want ErrStopped", err)
		}
		break
	}
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("node run did not exit after SIGTERM\n%s", d.log)
	}
	if d.err != nil {
		t.Fatalf("node run exited with %v, want 0\n%s", d.err, d.log)
	}
	d.assertClean()
	for _, pid := range pids {
		if !pidGone(pid) {
			t.Errorf("sampler %d outlived the node", pid)
		}
	}
}

// TestDrainLoaderWithoutBatches: SIGTERM while the trainer reads a
// loader without batches (drop_last, fewer seeds than batch_size: each
// epoch is its end-of-epoch records alone) ends the stream at once with
// ErrStopped. Its samplers used to go on writing end-of-epoch records
// until stopGrace (2 s) cut them off, one of them failing to write its
// end of stream into a sub-ring nobody read any more.
func TestDrainLoaderWithoutBatches(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	d := startDaemon(t, bin, cfg, socket, rings)
	o := baseOptions()
	o.Split, o.SeedIDs = "", []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	// One worker: with two, the trainer stops at the first end of stream
	// it meets, and the other worker, which may have run thousands of
	// empty epochs ahead into a full sub-ring, cannot write its own.
	o.BatchSize, o.DropLast, o.Epochs, o.Workers, o.RingSize = 16, true, control.MaxEpochs, 1, "2MiB"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := client.OpenLoader(ctx, socket, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.BatchesPerEpoch() != 0 {
		t.Fatalf("%d batches per epoch, want 0", l.BatchesPerEpoch())
	}
	for range 3 {
		if _, err := l.Next(ctx); !errors.Is(err, client.ErrEndOfEpoch) {
			t.Fatalf("err = %v, want ErrEndOfEpoch", err)
		}
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	for {
		_, err := l.Next(ctx)
		if errors.Is(err, client.ErrEndOfEpoch) {
			continue
		}
		if !errors.Is(err, client.ErrStopped) {
			t.Fatalf("err = %v, want ErrStopped", err)
		}
		break
	}
	// Well under stopGrace: the samplers saw the stop themselves.
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("ErrStopped came %v after SIGTERM, want at once", took)
	}
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("node run did not exit after SIGTERM\n%s", d.log)
	}
	if d.err != nil || d.logHas(`"msg":"sampler failed"`) {
		t.Fatalf("node run exited with %v, or a sampler failed\n%s", d.err, d.log)
	}
}

// TestSamplersRunTheNodesBinary: samplers are started from the running
// node's own binary, not from the file now at its path: an upgrade that
// installs another build there while the node runs (here a script that
// fails) left every new loader's samplers failing until a restart.
func TestSamplersRunTheNodesBinary(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	exe := filepath.Join(t.TempDir(), "node")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	startDaemonCmd(t, exec.Command(exe, "run", "-c", cfg), cfg, socket, rings)
	// As a package manager installs: a new file renamed over the path.
	if err := os.WriteFile(exe+".new", []byte("#!/bin/sh\necho another build >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(exe+".new", exe); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := baseOptions()
	o.Workers = 2
	l := openReading(t, ctx, socket, o, 3)
	st, err := l.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ls := range st.Loaders {
		for _, s := range ls.Samplers {
			if s.State != "running" && s.State != "done" {
				t.Errorf("sampler %d: state %q (%s), want running or done", s.Worker, s.State, s.Status)
			}
		}
	}
}

// TestSecondNodeRefused: a node whose socket is served already fails.
func TestSecondNodeRefused(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	startDaemon(t, bin, cfg, socket, rings)
	out, err := exec.Command(bin, "run", "-c", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another node is serving socket "+socket) {
		t.Fatalf("second node: %v\n%s", err, out)
	}
}

// TestStaleRingRemovedAtStart: a ring file of a dead node is removed when
// a node starts; one of a live process is kept.
func TestStaleRingRemovedAtStart(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(rings, fmt.Sprintf("graphnode-%d-7.ring", dead.Process.Pid))
	live := filepath.Join(rings, fmt.Sprintf("graphnode-%d-7.ring", os.Getpid()))
	for _, p := range []string{stale, live} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, bin, cfg, socket, rings)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale ring %s still there (%v)", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("ring of a live process removed: %v", err)
	}
	os.Remove(live)
	if !d.logHas(`"msg":"removed stale ring"`, stale) {
		t.Errorf("removal not logged:\n%s", d.log)
	}
}

// TestRingDirTooSmall: a node whose rings.size (16MiB) is more than its
// rings.dir holds in all (an 8 MiB tmpfs, as a container's /dev/shm is
// 64 MiB against the default 1GB) says so at start; a loader of that
// size is refused with the sizes, leaves no file and takes no slot, and
// a loader that fits still runs.
func TestRingDirTooSmall(t *testing.T) {
	bin, parts := setup(t)
	shmDir := mountTmpfs(t, "8m")
	cfg, socket := configWithRingsDir(t, parts, shmDir)
	d := startDaemon(t, bin, cfg, socket, shmDir)
	eventually(t, 3*time.Second, "node warns of rings.size at start", func() bool {
		return d.logHas(`"level":"WARN"`, `rings.size`, `"size":"16MiB"`, `"dir":"`+shmDir+`"`, `"dir_size":"8MiB"`)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := baseOptions()
	o.Workers, o.Epochs = 2, 1
	_, err := client.OpenLoader(ctx, socket, o)
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Key != "ring_size" || !strings.Contains(ce.Msg, "reserve 16.0MiB") ||
		!strings.Contains(ce.Msg, shmDir+" has 8MiB free of 8MiB: no space left on device") {
		t.Fatalf("open_loader of 16MiB on an 8 MiB rings.dir: %v, want ring_size refused naming the sizes", err)
	}
	if left := ringFiles(t, shmDir); len(left) > 0 {
		t.Fatalf("refused loader left %v", left)
	}
	o.RingSize = "4MiB"
	l := openReading(t, ctx, socket, o, 3)
	st, err := l.Stats(ctx)
	if err != nil || len(st.Loaders) != 1 || st.Opened != 1 {
		t.Fatalf("stats: %+v, %v; want the one loader that fits", st, err)
	}
}

// configWithRingsDir is newConfig's file with rings.dir set to dir.
func configWithRingsDir(t *testing.T, parts, dir string) (cfg, socket string) {
	t.Helper()
	cfg, socket, _ = newConfig(t, parts, "")
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(text), "[rings]\ndir = ")
	old, _, _ := strings.Cut(after, "\n")
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(text), "dir = "+old, "dir = \""+dir+"\"", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, socket
}

// TestRingDirReadOnly: a rings.dir remounted read-only under a running
// node refuses open_loader naming rings.dir and why, with no key: it
// named ring_size ("control: ring_size: shm: create …: read-only file
// system"), and the trainer lowered ring_size in vain. The refusal
// leaves no file and takes no slot: once the directory is writable
// again, a loader opens. (A read-only rings.dir at start is refused by
// the configuration: TestRingsDirNotWritable.)
func TestRingDirReadOnly(t *testing.T) {
	bin, parts := setup(t)
	shmDir := mountTmpfs(t, "8m")
	cfg, socket := configWithRingsDir(t, parts, shmDir)
	startDaemon(t, bin, cfg, socket, shmDir) // its stop checks that nothing is left
	remount := func(mode string) {
		t.Helper()
		if out, err := exec.Command("mount", "-o", "remount,"+mode, shmDir).CombinedOutput(); err != nil {
			t.Fatalf("remount %s %s: %v: %s", mode, shmDir, err, out)
		}
	}
	remount("ro")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := baseOptions()
	o.Workers, o.Epochs, o.RingSize = 2, 1, "4MiB"
	_, err := client.OpenLoader(ctx, socket, o)
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Key != "" || !strings.HasPrefix(ce.Msg, "the node's rings.dir "+shmDir+": shm: create "+shmDir+"/") ||
		!strings.HasSuffix(ce.Msg, ": read-only file system") {
		t.Fatalf("open_loader on a read-only rings.dir: %v (key %q), want no key and the node's rings.dir %s named, read-only", err, keyOf(ce), shmDir)
	}
	remount("rw")
	if left := ringFiles(t, shmDir); len(left) > 0 {
		t.Fatalf("refused loader left %v", left)
	}
	l := openReading(t, ctx, socket, o, 3)
	st, err := l.Stats(ctx)
	if err != nil || len(st.Loaders) != 1 || st.Opened != 1 {
		t.Fatalf("stats: %+v, %v; want the one loader opened once rings.dir is writable again", st, err)
	}
}

// keyOf is e's Key, "" for nil.
func keyOf(e *control.Error) string {
	if e == nil {
		return ""
	}
	return e.Key
}
