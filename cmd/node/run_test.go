package main

import (
	"errors"
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

// TestRunStderrClosed: `node run 2>&1 | cat` whose cat has gone (the
// pipeline stopped by Ctrl-C, or cat killed alone) drains on SIGTERM as
// it does with its log read: it exits 0, its samplers end the stream
// (the trainer reads ErrStopped, not a dead sampler) and its ring and
// socket are removed. Go ends a program by SIGPIPE at a failed write to
// fd 1 or 2 unless SIGPIPE is handled: the node died at the first log
// line of its drain and its samplers at theirs, leaving the ring behind.
func TestRunStderrClosed(t *testing.T) {
	bin := nodeBinary(t)
	dir, cfg, sock := writeRunConfig(t, bin, `[rings]
dir = "$DIR/rings"
size = "1MB"
[samplers]
workers = 2
`, "rings")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(bin, "run", "-c", cfg)
	cmd.Stdout, cmd.Stderr = w, w // 2>&1 | cat
	exited := startChild(t, cmd)
	w.Close() // the node's (and its samplers') copy is the only writer
	logb := &syncBuffer{}
	copied := make(chan struct{})
	go func() {
		io.Copy(logb, r) // ends when r is closed below
		close(copied)
	}()
	awaitReady(t, sock, exited, logb)

	o := client.DefaultOptions()
	o.SeedIDs, o.BatchSize, o.Epochs, o.Fanouts = []uint64{0, 1, 2, 3}, 1, 1<<20, []int{-1}
	l, err := client.OpenLoader(t.Context(), sock, o)
	if err != nil {
		t.Fatal(err)
	}
	// The trainer reads until the stream ends; the first batch says
	// that both samplers run.
	first, ended := make(chan struct{}), make(chan error, 1)
	go func() {
		defer l.Close()
		for n := 0; ; {
			_, err := l.Next(t.Context())
			switch {
			case errors.Is(err, client.ErrEndOfEpoch):
				continue
			case err != nil:
				ended <- err
				return
			}
			if n++; n == 2 {
				close(first)
			}
		}
	}()
	safety := time.After(time.Minute) // a safety net, not a timing
	select {
	case <-first:
	case err := <-ended:
		t.Fatalf("the trainer before any stop: %v; log:\n%s", err, logb)
	case <-safety:
		t.Fatalf("no batch in a minute; log:\n%s", logb)
	}
	if !strings.Contains(logb.String(), "serving") {
		t.Fatalf("the node's log does not go to the pipe:\n%s", logb)
	}

	r.Close() // cat is gone
	<-copied
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
				t.Fatalf("node run with its stderr closed died of %v at SIGTERM, want a drain and exit 0; log until the close:\n%s", ws.Signal(), logb)
			}
		}
		if err != nil {
			t.Fatalf("node run with its stderr closed, after SIGTERM: %v, want exit 0; log until the close:\n%s", err, logb)
		}
	case <-safety:
		t.Fatalf("node run with its stderr closed still runs a minute after SIGTERM; log until the close:\n%s", logb)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, client.ErrStopped) {
			t.Errorf("the trainer at the drain: %v, want %v (each sampler's end-of-stream)", err, client.ErrStopped)
		}
	case <-safety:
		t.Errorf("the trainer reads on a minute after the node stopped")
	}
	if got, _ := filepath.Glob(filepath.Join(dir, "rings", "*")); len(got) != 0 {
		t.Errorf("left in rings.dir after the drain: %v", got)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket %s left after the drain (%v)", sock, err)
	}
}
