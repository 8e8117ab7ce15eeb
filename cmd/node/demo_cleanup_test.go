package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSweepDemoDirs: a later demo removes a demo directory whose lock no
// process holds, and leaves alone one whose lock is held (a live demo's),
// one without a lock file, one of another name and a link.
func TestSweepDemoDirs(t *testing.T) {
	parent := t.TempDir()
	live, lock, err := makeDemoDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	dead, deadLock, err := makeDemoDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dead, "node0.ring"), []byte("rings"), 0o600)
	deadLock.Close() // as the kernel does when its process dies
	unlocked, err := os.MkdirTemp(parent, demoDirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(parent, "graphnode-other")
	os.Mkdir(other, 0o700)
	os.WriteFile(filepath.Join(other, demoLockName), nil, 0o600)
	elsewhere, elsewhereLock, err := makeDemoDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	elsewhereLock.Close()
	link := filepath.Join(parent, demoDirPrefix+"link")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}

	removed, err := sweepDemoDirs(parent)
	if err != nil || !slices.Equal(removed, []string{dead}) {
		t.Errorf("sweep removed %q (%v), want %q alone", removed, err, dead)
	}
	for _, kept := range []string{live, unlocked, other, link, elsewhere} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s: %v, want it kept", kept, err)
		}
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: %v, want it removed", dead, err)
	}
}

// TestDemoKilledIsSwept: a demo killed outright (SIGKILL: no handler
// runs) leaves its ring directory in /dev/shm and its work directory,
// since its nodes die with it (Pdeathsig) before they drain; the next
// demo removes both, and says so. Nothing removed them: 1.5 GB of rings
// at --nodes 20000 stayed in /dev/shm.
func TestDemoKilledIsSwept(t *testing.T) {
	bin := nodeBinary(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the killed demo's work directory, and where the next one sweeps
	before := demoRings(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--nodes", "2000", "--epochs", "1000", "--batch-size", "64", "--ring-size", "16MB")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "training GraphSAGE") {
	}
	cmd.Process.Kill()
	cmd.Wait()
	var rings []string
	for p := range demoRings(t) {
		if !before[p] {
			rings = append(rings, p)
		}
	}
	work, _ := filepath.Glob(filepath.Join(tmp, demoDirPrefix+"*"))
	if len(rings) != 1 || len(work) != 1 {
		t.Fatalf("the killed demo left ring directories %q and work directories %q, want one of each", rings, work)
	}

	code, _, stderr := runNode(t, "demo", "--input", filepath.Join(tmp, "no-such-graph"))
	for _, dir := range []string{rings[0], work[0]} {
		if want := "node demo: removed " + dir + ", left by a demo that was killed"; code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("the next demo: exit %d, want 1 and %q in:\n%s", code, want, stderr)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want it removed", dir, err)
		}
	}
}

// TestDemoClosedStdout: node demo | head -5 stops the demo once head has
// gone, as Ctrl-C does: the nodes drain and remove their rings, the work
// directory goes, and stderr says why. The demo died of SIGPIPE at its
// next line, its nodes with it (Pdeathsig), and left both directories.
func TestDemoClosedStdout(t *testing.T) {
	cmd, out, stderr, before, work := trainingDemo(t)
	out.Close()
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		if errors.As(err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Fatalf("the demo died of %v\nstderr:\n%s", ws.Signal(), stderr.String())
			}
		}
		t.Fatalf("the demo after its stdout closed: %v, want exit 1\nstderr:\n%s", err, stderr.String())
	}
	if want := "node demo: output closed (write /dev/stdout: broken pipe): stopped the nodes and removed the demo's directories"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	demoCleanedUp(t, before, work)
}

// trainingDemo starts a demo of 1000 epochs with its work directory work
// and reads its stdout up to the first epoch's line: the cluster trains.
// before is the ring directories there were before it.
func trainingDemo(t *testing.T) (cmd *exec.Cmd, out io.ReadCloser, stderr *syncBuffer, before map[string]bool, work string) {
	t.Helper()
	bin := nodeBinary(t)
	before = demoRings(t)
	work = filepath.Join(t.TempDir(), "w")
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	t.Cleanup(cancel)
	cmd = exec.CommandContext(ctx, bin, "demo", "--nodes", "2000", "--epochs", "1000", "--batch-size", "64", "--ring-size", "16MB", "--workdir", work)
	stderr = &syncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for range 5 { // head -5: up to the first epoch's line
		sc.Scan()
	}
	return cmd, out, stderr, before, work
}

// demoCleanedUp checks that a stopped demo left no ring directory that
// was not there before it, and removed its work directory.
func demoCleanedUp(t *testing.T, before map[string]bool, work string) {
	t.Helper()
	for p := range demoRings(t) {
		if !before[p] {
			t.Errorf("ring directory %s left behind", p)
		}
	}
	if _, err := os.Stat(work); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the work directory: %v, want it removed", err)
	}
}

// TestDemoKeepIsNotSwept: a directory node demo --keep kept is not taken
// for a killed demo's by the next one. Its lock file, removed by the name
// it was made under, stayed, and the next demo removed the kept logs.
func TestDemoKeepIsNotSwept(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	code, stdout, stderr := runNode(t, "demo", "--nodes", "2000", "--epochs", "1", "--batch-size", "64", "--ring-size", "16MB", "--keep")
	if code != 0 {
		t.Fatalf("demo --keep: exit %d\n%s", code, stderr)
	}
	work, _ := filepath.Glob(filepath.Join(tmp, demoDirPrefix+"*"))
	if len(work) != 1 || !strings.Contains(stdout, "kept "+work[0]) {
		t.Fatalf("demo --keep: work directories %q, stdout:\n%s", work, stdout)
	}
	if removed, err := sweepDemoDirs(tmp); len(removed) > 0 || err != nil {
		t.Fatalf("the next demo's sweep removed %q (%v)", removed, err)
	}
	if _, err := os.Stat(work[0]); err != nil {
		t.Fatalf("kept directory: %v", err)
	}
}

// TestDemoWorkdirKeep: the work directory of node demo --keep holds no
// lock file from the start, so a demo killed outright with --keep leaves
// it (and its logs) to the user, not to the next demo's sweep; without
// --keep it is locked while the demo runs and swept once it is not.
func TestDemoWorkdirKeep(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	kept, created, lock, err := demoWorkdir("", true)
	if err != nil || !created || lock != nil {
		t.Fatalf("--keep: %s, created %v, lock %v, %v", kept, created, lock, err)
	}
	work, _, lock, err := demoWorkdir("", false)
	if err != nil || lock == nil {
		t.Fatalf("without --keep: lock %v, %v", lock, err)
	}
	if removed, err := sweepDemoDirs(tmp); len(removed) > 0 || err != nil {
		t.Fatalf("sweep while the demo runs: removed %q, %v", removed, err)
	}
	lock.Close() // the demo is killed
	removed, err := sweepDemoDirs(tmp)
	if err != nil || len(removed) != 1 || removed[0] != work {
		t.Fatalf("sweep after the demo was killed: removed %q, %v; want %s alone", removed, err, work)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("the kept directory: %v", err)
	}
}

// TestDemoInterrupted: a demo stopped by Ctrl-C while it trains says what
// stopped it and that it cleaned up, as one whose output closed does. It
// said "node demo: context canceled".
func TestDemoInterrupted(t *testing.T) {
	cmd, out, stderr, before, work := trainingDemo(t)
	cmd.Process.Signal(os.Interrupt)
	go io.Copy(io.Discard, out)
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the demo after Ctrl-C: %v, want exit 1\nstderr:\n%s", err, stderr.String())
	}
	if want := "node demo: interrupted by SIGINT (Ctrl-C): stopped the nodes and removed the demo's directories\n"; !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("stderr does not end in %q:\n%s", want, stderr.String())
	}
	demoCleanedUp(t, before, work)
}
