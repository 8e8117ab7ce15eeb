package node

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"graphnode/node/control"
)

// TestShutdownWithinDrainTimeout: a node whose samplers ignore SIGTERM
// (so the drain lasts samplers.drain_timeout, then kills them) and one of
// whose control clients pipelines requests without reading the answers
// stops within the drain timeout and answerGrace. The stuck answer's
// write deadline used to start when the drain ended, so such a client
// held the shutdown a whole drain timeout more (8 s here), eating into
// the time systemd leaves the kv checkpoint.
func TestShutdownWithinDrainTimeout(t *testing.T) {
	n, _, pids := loaderNode(t)
	const drain = 4 * time.Second
	n.cfg.Samplers.DrainTimeout = drain.String()
	stubborn := filepath.Join(t.TempDir(), "sampler")
	if err := os.WriteFile(stubborn, []byte("#!/bin/sh\ntrap '' TERM\necho $$ >> "+pids+"\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n.Executable = stubborn

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	var c net.Conn
	waitUntil(t, "the control socket accepting", func() bool {
		var err error
		c, err = net.Dial("unix", n.cfg.Control.Socket)
		return err == nil
	})
	defer c.Close()
	// This test starts its loader itself, outside Run's goroutines: bound
	// orders it after listen, which set the rings' access.
	waitUntil(t, "Run past listen", n.bound.Load)

	o, info, seeds, ringBytes := smallLoader(t, n)
	l, err := n.reserveLoader()
	if err != nil {
		t.Fatal(err)
	}
	err = n.startLoader(ctx, l, o, info, seeds, ringBytes)
	n.doneStarting(l, err)
	if err != nil {
		t.Fatal(err)
	}
	// Both samplers have set their trap once they wrote their pid.
	waitUntil(t, "both samplers writing their pid", func() bool {
		b, _ := os.ReadFile(pids)
		return len(strings.Fields(string(b))) == 2
	})

	// Stats requests, never read: the node's answers fill the socket, its
	// write blocks, and then so do the client's.
	var sent atomic.Int64
	go func() {
		for control.WriteFrame(c, control.Request{Op: control.OpStats}) == nil {
			sent.Add(1)
		}
	}()
	for last, still := int64(-1), 0; still < 5; time.Sleep(100 * time.Millisecond) {
		if s := sent.Load(); s == last && s > 0 {
			still++
		} else {
			last, still = s, 0
		}
	}

	start := time.Now()
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(4 * drain):
		t.Fatal("Run did not return after its context ended")
	}
	took := time.Since(start)
	if took < drain*9/10 {
		t.Errorf("Run returned %v after its context ended, before the samplers' drain timeout %v", took, drain)
	}
	if bound := drain + answerGrace + 1500*time.Millisecond; took > bound {
		t.Errorf("Run returned %v after its context ended, want at most %v (drain timeout %v and answerGrace %v, with 1.5 s to spare)",
			took, bound, drain, answerGrace)
	}
}
