package shm

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestTruncatedRing: a ring file truncated under its mappings (by a
// trainer, which maps it read-write, or anyone in the rings group) is
// ErrCorrupt, naming the ring and its size now, from every call of the
// producer, the consumer and the ring, and from Guard around a view: it
// was a SIGBUS that ended the process, the node serving every other
// trainer among them. The producer's heartbeat faults too, and ends
// without taking the process with it.
func TestTruncatedRing(t *testing.T) {
	for _, c := range []struct {
		name string
		size func(r *Ring) int64
	}{
		{"to nothing", func(*Ring) int64 { return 0 }},
		{"to its control blocks", func(r *Ring) int64 { return r.hdr.DataOffset }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRing(t, 2, 64<<10)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p, err := r.Producer(0)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := p.Write(ctx, make([]byte, 1000)); err != nil {
					t.Fatal(err)
				}
			}
			cr, err := Open(r.Path()) // the trainer's own mapping
			if err != nil {
				t.Fatal(err)
			}
			defer cr.Close()
			cons, err := cr.Consumer()
			if err != nil {
				t.Fatal(err)
			}
			rec, err := cons.Next(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			size := c.size(r)
			if err := os.Truncate(r.Path(), size); err != nil {
				t.Fatal(err)
			}
			corrupt := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), r.Path()) || !strings.Contains(err.Error(), "another process truncated it") {
					t.Errorf("%s after the truncation: %v, want ErrCorrupt naming the ring", what, err)
				}
			}
			corrupt("reading a record's view", cr.Guard(func() error {
				copy(make([]byte, len(rec)), rec)
				return nil
			}))
			if err := r.Guard(func() error { return nil }); err != nil {
				t.Errorf("Guard of code that touches nothing: %v", err)
			}
			corrupt("Write", p.Write(ctx, make([]byte, 1000)))
			if size == 0 {
				// The control blocks are gone too: every call faults.
				corrupt("Release", cons.Release(0))
				_, err := cons.Next(ctx, 1)
				corrupt("Next", err)
				if n := r.Used(0); n != 0 {
					t.Errorf("Used after the truncation: %d, want 0", n)
				}
				_, err = r.Producer(1)
				corrupt("Producer", err)
				_, err = cr.Consumer()
				corrupt("a second Consumer", err)
			} else {
				// The control blocks stay: only the records fault.
				if err := cons.Release(0); err != nil {
					t.Errorf("Release with the control blocks there: %v", err)
				}
				_, err := cons.Next(ctx, 0)
				corrupt("Next of the second record", err)
			}
			time.Sleep(3 * HeartbeatEvery) // the heartbeat faults meanwhile, or beats
			p.Close()
			cons.Close()
			if _, err := Open(r.Path()); err == nil {
				t.Error("Open of the truncated file succeeded")
			}
		})
	}
}
