package shm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFullBlocks: a full sub-ring blocks Write until the consumer
// releases a record, then the write proceeds.
func TestFullBlocks(t *testing.T) {
	r := newTestRing(t, 1, PageSize)
	c, _ := r.Consumer()
	p, err := r.Producer(0)
	if err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, 1984) // 2048 bytes with its header: two fill the ring
	ctx := testCtx(t)
	for range 2 {
		if err := p.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if r.Used(0) != PageSize {
		t.Fatalf("Used %d, want %d", r.Used(0), PageSize)
	}
	done := make(chan error, 1)
	go func() { done <- p.Write(ctx, rec[:10]) }()
	select {
	case err := <-done:
		t.Fatalf("Write into a full ring returned %v, want it to block", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := c.Next(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(0); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Write still blocked 2s after Release")
	}
	if want := int64(2048 + 128); r.Used(0) != want {
		t.Fatalf("Used %d, want %d", r.Used(0), want)
	}
}

func TestTooLarge(t *testing.T) {
	const sub = 64 << 10
	r := newTestRing(t, 4, sub)
	p, err := r.Producer(3)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for _, tc := range []struct {
		n   int
		err error
	}{
		{sub - 64, nil},
		{sub - 63, ErrTooLarge},
		{70000, ErrTooLarge},
		{-1, ErrInvalid},
	} {
		buf, err := p.Reserve(ctx, tc.n)
		if !errors.Is(err, tc.err) {
			t.Fatalf("Reserve(%d): %v, want %v", tc.n, err, tc.err)
		}
		if err != nil {
			if tc.err == ErrTooLarge {
				want := fmt.Sprintf("shm: record of %d bytes does not fit ring %s sub-ring 3 of %d bytes", tc.n, r.Path(), sub)
				if !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("Reserve(%d): %q, want it to start %q", tc.n, err, want)
				}
			}
			continue
		}
		if len(buf) != tc.n || cap(buf) != tc.n {
			t.Fatalf("Reserve(%d): view of len %d cap %d", tc.n, len(buf), cap(buf))
		}
		if err := p.Commit(tc.n); err != nil {
			t.Fatal(err)
		}
	}
	if r.Used(3) != sub {
		t.Fatalf("Used %d after the largest record, want %d", r.Used(3), sub)
	}
}

func TestCancel(t *testing.T) {
	r := newTestRing(t, 2, PageSize)
	c, _ := r.Consumer()
	p, _ := r.Producer(0)
	if err := p.Write(context.Background(), make([]byte, PageSize-64)); err != nil {
		t.Fatal(err)
	}
	_, _ = r.Producer(1) // attached and alive, never writes
	for _, tc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Reserve", func(ctx context.Context) error { _, err := p.Reserve(ctx, 1); return err }},
		{"Next", func(ctx context.Context) error { _, err := c.Next(ctx, 1); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			// start before the timer: a test goroutine descheduled past
			// the cancel would otherwise measure from after it.
			start := time.Now()
			time.AfterFunc(30*time.Millisecond, cancel)
			err := tc.call(ctx)
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), r.Path()) {
				t.Fatalf("%v, want context.Canceled naming the ring", err)
			}
			if d := time.Since(start); d < 30*time.Millisecond || d > time.Second {
				t.Fatalf("returned after %v, want soon after the 30ms cancel", d)
			}
		})
	}
}

func TestProducerOrder(t *testing.T) {
	r := newTestRing(t, 1, PageSize)
	p, _ := r.Producer(0)
	ctx := testCtx(t)
	if err := p.Commit(0); !errors.Is(err, ErrOrder) {
		t.Fatalf("Commit without Reserve: %v, want ErrOrder", err)
	}
	if _, err := p.Reserve(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Reserve(ctx, 100); !errors.Is(err, ErrOrder) {
		t.Fatalf("Reserve before Commit: %v, want ErrOrder", err)
	}
	if err := p.Commit(101); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Commit of more than reserved: %v, want ErrInvalid", err)
	}
	if err := p.Commit(7); err != nil { // less than reserved is fine
		t.Fatal(err)
	}
	p.Close()
	p.Close()
	if err := p.Write(ctx, nil); !errors.Is(err, ErrOrder) {
		t.Fatalf("Write after Close: %v, want ErrOrder", err)
	}
	c, _ := r.Consumer()
	rec, err := c.Next(ctx, 0)
	if err != nil || len(rec) != 7 {
		t.Fatalf("Next: %d bytes, %v; want the 7 committed", len(rec), err)
	}
}

// TestAbandon: an abandoned reservation publishes nothing and lets the
// producer reserve again; the consumer reads only the records committed,
// including one that wraps around the space the abandoned one had.
func TestAbandon(t *testing.T) {
	r := newTestRing(t, 1, PageSize)
	p, _ := r.Producer(0)
	ctx := testCtx(t)
	p.Abandon() // nothing reserved: no effect
	buf, err := p.Reserve(ctx, 3000)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "abandoned")
	p.Abandon()
	if err := p.Write(ctx, []byte("error record")); err != nil {
		t.Fatalf("Write after Abandon: %v", err)
	}
	big := bytes.Repeat([]byte{7}, PageSize-2*RecordHeaderSize-64)
	c, _ := r.Consumer()
	if rec, err := c.Next(ctx, 0); err != nil || string(rec) != "error record" {
		t.Fatalf("Next: %q, %v; want the record written after Abandon", rec, err)
	}
	c.Release(0)
	if err := p.Write(ctx, big); err != nil {
		t.Fatal(err)
	}
	if rec, err := c.Next(ctx, 0); err != nil || !bytes.Equal(rec, big) {
		t.Fatalf("Next: %d bytes, %v; want the %d-byte record", len(rec), err, len(big))
	}
}

// TestConsumerGone: closing the consumer unblocks a producer waiting for
// room, and later writes fail at once.
func TestConsumerGone(t *testing.T) {
	r := newTestRing(t, 1, PageSize)
	c, _ := r.Consumer()
	p, _ := r.Producer(0)
	ctx := testCtx(t)
	if err := p.Write(ctx, make([]byte, PageSize-64)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Write(ctx, []byte("x")) }()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrConsumerGone) || !strings.Contains(err.Error(), "sub-ring 0: consumer closed") {
			t.Fatalf("blocked Write: %v, want ErrConsumerGone", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Write still blocked 2s after the consumer closed")
	}
	if err := p.Write(ctx, nil); !errors.Is(err, ErrConsumerGone) {
		t.Fatalf("Write after consumer Close: %v, want ErrConsumerGone", err)
	}
}

// TestConsumerPIDNamespace: a producer waiting for room judges the
// consumer's pid only when the consumer recorded its pid namespace and
// it is the producer's own. A trainer on the host and samplers in a
// container's namespace: the trainer's pid names no process in the
// samplers' namespace, and every loader died once its ring filled.
func TestConsumerPIDNamespace(t *testing.T) {
	own := pidNamespace()
	if own == 0 {
		t.Skipf("no pid namespace to read at %s", pidNSPath)
	}
	dead := deadPID(t)
	for _, tc := range []struct {
		name string
		ns   uint64 // the consumer's recorded namespace
		gone bool   // the producer gives up
	}{
		{"same namespace", own, true},
		{"other namespace", own + 1, false},
		{"namespace not recorded", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRing(t, 1, PageSize)
			if _, err := r.Consumer(); err != nil {
				t.Fatal(err)
			}
			if got := atomic.LoadUint64(r.u64(0, ctlConsPIDNS)); got != own {
				t.Fatalf("consumer recorded pid namespace %d, want this process's %d", got, own)
			}
			// The consumer's pid is dead as this process sees it.
			atomic.StoreUint64(r.u64(0, ctlConsPIDNS), tc.ns)
			atomic.StoreUint32(r.u32(0, ctlConsPID), uint32(dead))
			p, err := r.Producer(0)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Write(testCtx(t), make([]byte, PageSize-RecordHeaderSize)); err != nil {
				t.Fatal(err)
			}
			// Several futex slices: the producer checks the consumer on each.
			ctx, cancel := context.WithTimeout(context.Background(), 6*waitSlice)
			defer cancel()
			err = p.Write(ctx, []byte("x"))
			if tc.gone {
				if want := fmt.Sprintf("consumer pid %d is gone", dead); !errors.Is(err, ErrConsumerGone) || !strings.Contains(err.Error(), want) {
					t.Fatalf("Write into a full ring: %v, want ErrConsumerGone saying %q", err, want)
				}
				return
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Write into a full ring: %v, want it to wait until its ctx ends", err)
			}
		})
	}
}
