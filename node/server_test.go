package node

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"graphnode/node/control"
)

// TestHangUpClosesLoadersAtOnce: a client that opened every
// samplers.max_loaders loader (never attaching) hangs up. Its loaders'
// samplers take a while to stop (1.5 s here; a real sampler's stop grace
// and last record take 3 s), one of them until the drain timeout kills
// it. The loaders used to close one after another, the last of 16 after
// 48 s, and an open_loader on a new connection waited for the whole
// release (or drain_timeout + 1 s), though a slot was free after the
// first close. Now they close together and each frees its slot as it
// ends: the new open gets one once the quick ones have stopped, while
// the stubborn one is still being waited for.
func TestHangUpClosesLoadersAtOnce(t *testing.T) {
	n, rings, pids := loaderNode(t)
	const loaders, quick = 4, 1500 * time.Millisecond
	n.cfg.Samplers.MaxLoaders = loaders
	n.cfg.Samplers.DrainTimeout = "5s"
	// The first sampler to start ignores SIGTERM (the drain timeout kills
	// it); the others stop 1.5 s after it. Each writes its pid once its
	// trap is set.
	dir := filepath.Dir(pids)
	script := filepath.Join(dir, "slow-sampler")
	body := "#!/bin/sh\n" +
		"if mkdir " + filepath.Join(dir, "stubborn") + " 2>/dev/null; then\n" +
		"\ttrap '' TERM\n\techo $$ >> " + pids + "\n\texec sleep 30\nfi\n" +
		"trap 'sleep 1.5; exit 0' TERM\necho $$ >> " + pids + "\n" +
		"while :; do sleep 0.05; done\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	n.Executable = script

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
		if left, _ := filepath.Glob(filepath.Join(rings, "*")); len(left) > 0 {
			t.Errorf("rings left: %v", left)
		}
	}()
	dial := func() net.Conn {
		var c net.Conn
		waitUntil(t, "the control socket accepting", func() bool {
			var err error
			c, err = net.Dial("unix", n.cfg.Control.Socket)
			return err == nil
		})
		return c
	}
	o, _, _, _ := smallLoader(t, n)
	o.Workers = 1
	open := func(c net.Conn) (uint64, error) {
		if err := control.WriteFrame(c, control.Request{Op: control.OpOpenLoader, LoaderOptions: o}); err != nil {
			return 0, err
		}
		body, err := control.ReadFrame(c)
		if err != nil {
			return 0, err
		}
		resp, err := control.DecodeResponse(body)
		if err != nil {
			return 0, err
		}
		return resp.Loader.LoaderID, nil
	}
	held := dial()
	old := map[uint64]bool{}
	for i := range loaders {
		id, err := open(held)
		if err != nil {
			t.Fatalf("open_loader %d of %d: %v", i+1, loaders, err)
		}
		old[id] = true
	}
	waitUntil(t, "every sampler's trap set", func() bool {
		b, _ := os.ReadFile(pids)
		return len(strings.Fields(string(b))) == loaders
	})
	oldLeft := func() (left int) {
		n.mu.Lock()
		defer n.mu.Unlock()
		for id := range n.mu.loaders {
			if old[id] {
				left++
			}
		}
		return left
	}

	start := time.Now()
	held.Close()
	c := dial()
	defer c.Close()
	id, err := open(c)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("open_loader after the holder hung up: %v", err)
	}
	if old[id] {
		t.Fatalf("open_loader answered with loader %d, one of the closed client's", id)
	}
	// The quick loaders stop together (one after another they took
	// 4.5 s), and the first to end gives its slot.
	bound := 2 * quick
	if took > bound {
		t.Errorf("open_loader got a slot %v after the holder hung up, want at most %v (its quick loaders stop in %v, together)", took, bound, quick)
	}
	waitUntil(t, "the quick loaders closed", func() bool { return oldLeft() <= 1 })
	if all := time.Since(start); all > bound {
		t.Errorf("the closed client's quick loaders closed within %v, want at most %v", all, bound)
	}
	if left := oldLeft(); left != 1 {
		t.Errorf("%d of the closed client's loaders open, want 1: the stubborn one, until the drain timeout", left)
	}
	waitUntil(t, "the stubborn loader closed", func() bool { return oldLeft() == 0 })
}
