package shm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// testCtx bounds a test's waits, so a bug fails the test instead of
// hanging it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// produce writes records of the given sizes to sub-ring w in a goroutine
// and closes the producer; the returned channel yields its error.
func produce(t *testing.T, r *Ring, w int, sizes []int) <-chan error {
	t.Helper()
	p, err := r.Producer(w)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		defer p.Close() // on error too, so the consumer reads io.EOF, not a hang
		for i, n := range sizes {
			buf, err := p.Reserve(context.Background(), n)
			if err != nil {
				done <- err
				return
			}
			gen(buf, w, i)
			if err := p.Commit(n); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// TestRoundTripEdges walks one 4096-byte sub-ring through an exact fit at
// the end, a wrap marker, the largest record, an empty record and
// payloads around one line, checking where each payload lands.
func TestRoundTripEdges(t *testing.T) {
	r := newTestRing(t, 1, PageSize)
	sizes := []int{1000, 2944, 100, 4032, 0, 63, 64, 65}
	// Payload offsets in the record area: 2944 ends exactly at 4096;
	// 4032 (= C-64) does not fit at 192, so a marker sends it to 0.
	offsets := []int64{64, 1152, 64, 64, -1, 128, 256, 384}
	c, err := r.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	done := produce(t, r, 0, sizes)
	ctx := testCtx(t)
	for i, n := range sizes {
		rec, err := c.Next(ctx, 0)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		checkRec(t, rec, 0, i, n)
		if offsets[i] >= 0 {
			if got := offsetIn(r, 0, rec); got != offsets[i] {
				t.Errorf("record %d of %d bytes at offset %d, want %d", i, n, got, offsets[i])
			}
			if addr := uintptr(unsafe.Pointer(&rec[0])); addr%LineSize != 0 {
				t.Errorf("record %d payload at %#x, not 64-byte aligned", i, addr)
			}
		}
		if err := c.Release(0); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(ctx, 0); err != io.EOF {
		t.Fatalf("Next after close: %v, want io.EOF", err)
	}
	const final = 3*4096 + 64 + 128 + 128 + 192
	if wc, rc := atomic.LoadUint64(r.u64(0, ctlWrite)), atomic.LoadUint64(r.u64(0, ctlRead)); wc != final || rc != final {
		t.Fatalf("counters write %d read %d, want both %d", wc, rc, final)
	}
	if r.Used(0) != 0 {
		t.Fatalf("Used %d after draining, want 0", r.Used(0))
	}
}

// TestRoundTripMany streams thousands of random-size records through a
// small sub-ring, so it wraps hundreds of times.
func TestRoundTripMany(t *testing.T) {
	r := newTestRing(t, 1, 4*PageSize)
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int, 5000)
	for i := range sizes {
		sizes[i] = rng.IntN(6000)
	}
	c, err := r.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	done := produce(t, r, 0, sizes)
	wraps, last := 0, int64(-1)
	for i, n := range sizes {
		rec, err := c.Next(testCtx(t), 0)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		checkRec(t, rec, 0, i, n)
		off := offsetIn(r, 0, rec)
		if n > 0 {
			if off%LineSize != 0 {
				t.Fatalf("record %d at offset %d, not 64-byte aligned", i, off)
			}
			if off < last {
				wraps++
			}
			last = off
		}
		c.Release(0)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(testCtx(t), 0); err != io.EOF {
		t.Fatalf("Next after close: %v, want io.EOF", err)
	}
	if wraps < 500 {
		t.Fatalf("%d wraps in %d records, want at least 500", wraps, len(sizes))
	}
}

// TestSubRingsIndependent: a full sub-ring and an idle one do not hold up
// a third.
func TestSubRingsIndependent(t *testing.T) {
	r := newTestRing(t, 3, PageSize)
	c, err := r.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	full := produce(t, r, 0, []int{1984, 1984, 1984}) // third waits for room
	busy := make([]int, 50)
	for i := range busy {
		busy[i] = 80 * i // up to 3920, below the largest record (4032)
	}
	other := produce(t, r, 2, busy)
	for i, n := range busy {
		rec, err := c.Next(testCtx(t), 2)
		if err != nil {
			t.Fatalf("sub-ring 2 record %d: %v", i, err)
		}
		checkRec(t, rec, 2, i, n)
		c.Release(2)
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Next(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("idle sub-ring 1: %v, want deadline exceeded", err)
	}
	for i := range 3 {
		rec, err := c.Next(testCtx(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		checkRec(t, rec, 0, i, 1984)
		c.Release(0)
	}
	if err := <-full; err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{0, 2} {
		if _, err := c.Next(testCtx(t), w); err != io.EOF {
			t.Fatalf("sub-ring %d after close: %v, want io.EOF", w, err)
		}
	}
}

func TestConsumerOrder(t *testing.T) {
	r := newTestRing(t, 1, PageSize)
	c, _ := r.Consumer()
	if err := c.Release(0); !errors.Is(err, ErrOrder) {
		t.Fatalf("Release without Next: %v, want ErrOrder", err)
	}
	<-produce(t, r, 0, []int{10, 20})
	if _, err := c.Next(testCtx(t), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(testCtx(t), 0); !errors.Is(err, ErrOrder) {
		t.Fatalf("Next before Release: %v, want ErrOrder", err)
	}
	if _, err := c.Next(testCtx(t), 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Next(1) of 1 sub-ring: %v, want ErrInvalid", err)
	}
	c.Release(0)
	c.Close()
	if _, err := c.Next(testCtx(t), 0); !errors.Is(err, ErrOrder) {
		t.Fatalf("Next after Close: %v, want ErrOrder", err)
	}
}

// TestHeartbeatStops: a producer whose heartbeat stops is reported dead
// after DeadAfter even though its pid (ours) lives.
func TestHeartbeatStops(t *testing.T) {
	r := newTestRing(t, 2, PageSize)
	c, _ := r.Consumer()
	p, err := r.Producer(1)
	if err != nil {
		t.Fatal(err)
	}
	p.stopHeartbeat()
	start := time.Now()
	_, err = c.Next(testCtx(t), 1)
	elapsed := time.Since(start)
	if !errors.Is(err, ErrProducerDead) || !strings.Contains(err.Error(), "sub-ring 1: producer pid") {
		t.Fatalf("Next: %v, want ErrProducerDead naming sub-ring 1 and the pid", err)
	}
	if elapsed < DeadAfter || elapsed > DeadAfter+time.Second {
		t.Fatalf("dead after %v, want between %v and %v", elapsed, DeadAfter, DeadAfter+time.Second)
	}
}

// TestLastRecordBeforeDeath: a record the producer published between
// Next's poll and its verdict that the producer is dead is read before
// the death is reported: Next reported ErrProducerDead with it unread,
// which doc.go promises never to do.
func TestLastRecordBeforeDeath(t *testing.T) {
	r := newTestRing(t, 1, PageSize)
	c, _ := r.Consumer()
	p, err := r.Producer(0)
	if err != nil {
		t.Fatal(err)
	}
	p.stopHeartbeat()
	stopped := time.Now()
	published := false
	beforeVerdict = func() {
		// Close to DeadAfter of silence, this wait outlasts it, and the
		// producer's last record lands after the poll, before a verdict
		// that it is dead.
		if !published && time.Since(stopped) > DeadAfter-4*waitSlice {
			published = true
			time.Sleep(8 * waitSlice)
			if err := p.Write(context.Background(), []byte("last")); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { beforeVerdict = nil }()
	rec, err := c.Next(testCtx(t), 0)
	if err != nil || string(rec) != "last" {
		t.Fatalf("Next: %q, %v; want the producer's last record before its death", rec, err)
	}
	c.Release(0)
	if _, err := c.Next(testCtx(t), 0); !errors.Is(err, ErrProducerDead) {
		t.Fatalf("Next after the last record: %v, want ErrProducerDead", err)
	}
}

// TestProducerPIDNamespace: the consumer judges a silent producer's pid
// only when the producer recorded its pid namespace and it is the
// consumer's own; otherwise the heartbeat alone decides (DeadAfter), not
// a pid that names another process here, or none.
func TestProducerPIDNamespace(t *testing.T) {
	own := pidNamespace()
	if own == 0 {
		t.Skipf("no pid namespace to read at %s", pidNSPath)
	}
	dead := deadPID(t)
	for _, tc := range []struct {
		name string
		ns   uint64 // the producer's recorded namespace
		dead bool   // reported dead well before DeadAfter
	}{
		{"same namespace", own, true},
		{"other namespace", own + 1, false},
		{"namespace not recorded", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRing(t, 1, PageSize)
			c, _ := r.Consumer()
			p, err := r.Producer(0)
			if err != nil {
				t.Fatal(err)
			}
			if got := atomic.LoadUint64(r.u64(0, ctlProdPIDNS)); got != own {
				t.Fatalf("producer recorded pid namespace %d, want this process's %d", got, own)
			}
			p.stopHeartbeat()
			atomic.StoreUint64(r.u64(0, ctlProdPIDNS), tc.ns)
			atomic.StoreUint32(r.u32(0, ctlProdPID), uint32(dead))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err = c.Next(ctx, 0)
			if tc.dead {
				if want := fmt.Sprintf("producer pid %d is gone", dead); !errors.Is(err, ErrProducerDead) || !strings.Contains(err.Error(), want) {
					t.Fatalf("Next: %v, want ErrProducerDead saying %q", err, want)
				}
				return
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Next: %v, want it to wait out its ctx (heartbeat still for 1s < DeadAfter)", err)
			}
		})
	}
}

// TestCreatorGone: no producer ever attached and the creator died.
func TestCreatorGone(t *testing.T) {
	dead, live := deadPID(t), os.Getppid()
	next := func(t *testing.T, path string, d time.Duration) error {
		t.Helper()
		r2, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r2.Close()
		c, _ := r2.Consumer()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err = c.Next(ctx, 0)
		return err
	}
	check := func(t *testing.T, err error, start time.Time) {
		t.Helper()
		if !errors.Is(err, ErrProducerDead) || !strings.Contains(err.Error(), "creator pid") || time.Since(start) > time.Second {
			t.Fatalf("Next: %v after %v, want ErrProducerDead naming the creator pid at once", err, time.Since(start))
		}
	}
	// The creator closed its ring (or died): its lock is gone, though its
	// pid, here another live process's, still exists.
	t.Run("lock", func(t *testing.T) {
		r := newTestRing(t, 1, PageSize)
		putCreator(r, live)
		r.Close()
		start := time.Now()
		check(t, next(t, r.Path(), 20*time.Second), start)
	})
	// The creator holds its lock, though its pid means nothing here (it
	// lives in another pid namespace): the consumer keeps waiting.
	t.Run("lock held", func(t *testing.T) {
		r := newTestRing(t, 1, PageSize)
		putCreator(r, dead)
		if err := next(t, r.Path(), 300*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next: %v, want the deadline: the creator holds its lock", err)
		}
	})
	// A format 1.0 file has only the creator pid.
	t.Run("pid", func(t *testing.T) {
		r := newTestRing(t, 1, PageSize)
		putCreator(r, dead)
		putFlags(r, 0)
		start := time.Now()
		check(t, next(t, r.Path(), 20*time.Second), start)
	})
}
