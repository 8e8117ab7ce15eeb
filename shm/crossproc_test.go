package shm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Environment of a helper process: the test binary re-executed as a
// producer (or an echo peer) in another process.
const (
	envMode   = "GRAPHNODE_SHM_HELPER" // produce | hang | stream | echo
	envRing   = "GRAPHNODE_SHM_RING"
	envRing2  = "GRAPHNODE_SHM_RING2" // echo: the ring to answer on
	envSub    = "GRAPHNODE_SHM_SUB"
	envCount  = "GRAPHNODE_SHM_COUNT"
	envRecord = "GRAPHNODE_SHM_RECORD" // stream: record size
)

// helperSizes are the sizes of the records a "produce" helper writes to
// sub-ring w; the parent computes the same list to check them.
func helperSizes(w, count int) []int {
	rng := rand.New(rand.NewPCG(uint64(w), 99))
	s := make([]int, count)
	for i := range s {
		s[i] = rng.IntN(20000)
	}
	return s
}

// startHelper re-executes the test binary as a helper; the helper is
// killed and reaped when the test ends, if it has not ended before.
func startHelper(t testing.TB, env ...string) *exec.Cmd {
	t.Helper()
	return startHelperIn(t, 0, env...)
}

// startHelperIn is startHelper with clone(2) flags for the helper
// (syscall.CLONE_NEWPID: a pid namespace of its own); the test skips
// where this process may not create the namespaces asked for.
func startHelperIn(t testing.TB, cloneflags uintptr, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Cloneflags: cloneflags}
	if err := cmd.Start(); err != nil {
		if cloneflags != 0 {
			t.Skipf("cannot start a helper with clone flags %#x: %v", cloneflags, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// TestHelperProcess is not a test: it is the body of a helper process.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(envMode)
	if mode == "" {
		t.Skip("helper process body; runs only when re-executed by another test")
	}
	r, err := Open(os.Getenv(envRing))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, _ := strconv.Atoi(os.Getenv(envSub))
	count, _ := strconv.Atoi(os.Getenv(envCount))
	ctx := context.Background()
	if mode == "echo" {
		helperEcho(t, r, os.Getenv(envRing2))
		return
	}
	p, err := r.Producer(w)
	if err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "produce", "hang":
		for i, n := range helperSizes(w, count) {
			buf, err := p.Reserve(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			gen(buf, w, i)
			if err := p.Commit(n); err != nil {
				t.Fatal(err)
			}
		}
		if mode == "hang" {
			time.Sleep(time.Hour) // the parent kills us
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	case "stream":
		size, _ := strconv.Atoi(os.Getenv(envRecord))
		src := make([]byte, size)
		gen(src, w, 0)
		for i := uint64(0); ; i++ {
			buf, err := p.Reserve(ctx, size)
			if errors.Is(err, ErrConsumerGone) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			copy(buf, src)
			buf[0] = byte(i)
			p.Commit(size)
		}
	default:
		t.Fatalf("unknown helper mode %q", mode)
	}
}

// helperEcho consumes sub-ring 0 of r and writes every record back to
// sub-ring 0 of the ring at path2, until end of stream.
func helperEcho(t *testing.T, r *Ring, path2 string) {
	out, err := Open(path2)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	c, err := r.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	p, err := out.Producer(0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	for {
		rec, err := c.Next(ctx, 0)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		c.Release(0)
	}
}

// TestCrossProcessTransfer: two producer processes, one per sub-ring,
// write random-size records through small sub-rings; the consumer reads
// batch i from sub-ring i mod W, checks every byte, then reads io.EOF.
func TestCrossProcessTransfer(t *testing.T) {
	const w, count = 2, 1500
	r := newTestRing(t, w, 64<<10)
	c, err := r.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for sub := range w {
		cmds = append(cmds, startHelper(t, envMode+"=produce", envRing+"="+r.Path(),
			envSub+"="+strconv.Itoa(sub), envCount+"="+strconv.Itoa(count)))
	}
	sizes := [w][]int{helperSizes(0, count), helperSizes(1, count)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var bytes int64
	for i := range w * count {
		sub := i % w
		rec, err := c.Next(ctx, sub)
		if err != nil {
			t.Fatalf("batch %d (sub-ring %d): %v", i, sub, err)
		}
		checkRec(t, rec, sub, i/w, sizes[sub][i/w])
		bytes += int64(len(rec))
		c.Release(sub)
	}
	for sub := range w {
		if _, err := c.Next(ctx, sub); err != io.EOF {
			t.Fatalf("sub-ring %d after the last record: %v, want io.EOF", sub, err)
		}
		if err := cmds[sub].Wait(); err != nil {
			t.Fatalf("producer %d: %v", sub, err)
		}
	}
	if bytes < int64(count)*w*5000 {
		t.Fatalf("only %d bytes moved", bytes)
	}
}

// TestCrossProcessKill: a producer killed with SIGKILL after publishing
// five records; the consumer reads all five, then gets ErrProducerDead,
// naming the sub-ring and the pid, well within two seconds, whether the
// dead process was reaped (pid gone) or is a zombie (heartbeat stopped).
func TestCrossProcessKill(t *testing.T) {
	for _, reap := range []bool{true, false} {
		t.Run(fmt.Sprintf("reaped=%v", reap), func(t *testing.T) {
			const count = 5
			r := newTestRing(t, 2, 256<<10)
			c, err := r.Consumer()
			if err != nil {
				t.Fatal(err)
			}
			cmd := startHelper(t, envMode+"=hang", envRing+"="+r.Path(), envSub+"=1", envCount+"="+strconv.Itoa(count))
			sizes := helperSizes(1, count)
			var want int64
			for _, n := range sizes {
				want += footprint(int64(n))
			}
			for deadline := time.Now().Add(20 * time.Second); r.Used(1) != want; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("helper published %d bytes in 20s, want %d", r.Used(1), want)
				}
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if reap {
				cmd.Wait()
			}
			start := time.Now()
			for i, n := range sizes {
				rec, err := c.Next(testCtx(t), 1)
				if err != nil {
					t.Fatalf("record %d published before the kill: %v", i, err)
				}
				checkRec(t, rec, 1, i, n)
				c.Release(1)
			}
			_, err = c.Next(testCtx(t), 1)
			elapsed := time.Since(start)
			pid := fmt.Sprintf("pid %d", cmd.Process.Pid)
			if !errors.Is(err, ErrProducerDead) || !strings.Contains(err.Error(), "sub-ring 1") || !strings.Contains(err.Error(), pid) {
				t.Fatalf("Next after the kill: %v, want ErrProducerDead naming sub-ring 1 and %s", err, pid)
			}
			if elapsed > 2*time.Second {
				t.Fatalf("dead producer reported after %v, want < 2s", elapsed)
			}
			t.Logf("reported after %v: %v", elapsed, err)
			if !reap {
				cmd.Wait()
			}
		})
	}
}

// TestCrossProcessPIDNamespace: the producer in a pid namespace of its
// own (a node in a container), the consumer outside it (the trainer on
// the host) and slower than the producer. The consumer's pid names no
// process in the producer's namespace; a producer waiting for room took
// that for a dead consumer and gave up (ErrConsumerGone) as soon as the
// sub-ring was full, and the consumer got ErrProducerDead.
func TestCrossProcessPIDNamespace(t *testing.T) {
	const capacity, size, reads = 64 << 10, 4000, 100 // 16 records of 4096 bytes fill the sub-ring
	r := newTestRing(t, 1, capacity)
	c, err := r.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	cmd := startHelperIn(t, syscall.CLONE_NEWPID, envMode+"=stream", envRing+"="+r.Path(), envSub+"=0", envRecord+"="+strconv.Itoa(size))
	for deadline := time.Now().Add(20 * time.Second); r.Used(0) != capacity; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("helper published %d bytes in 20s, want %d", r.Used(0), capacity)
		}
	}
	if pid := atomic.LoadUint32(r.u32(0, ctlProdPID)); pid != 1 {
		t.Fatalf("producer pid %d, want 1: the helper is not in a pid namespace of its own", pid)
	}
	// The producer waits for room, judging the consumer once per slice.
	time.Sleep(10 * waitSlice)
	ctx := testCtx(t)
	want := make([]byte, size)
	gen(want, 0, 0)
	for i := range reads {
		rec, err := c.Next(ctx, 0)
		if err != nil {
			t.Fatalf("record %d of a producer in another pid namespace: %v", i, err)
		}
		if len(rec) != size || rec[0] != byte(i) || string(rec[1:]) != string(want[1:]) {
			t.Fatalf("record %d: %d bytes starting %d, want %d bytes of stream record %d", i, len(rec), rec[0], size, i)
		}
		c.Release(0)
		if i%16 == 15 {
			time.Sleep(2 * waitSlice) // slower than the producer: it waits again
		}
	}
	// The producer ends once the consumer closes (ErrConsumerGone), cleanly.
	c.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("producer after the consumer closed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("producer still running 10s after the consumer closed")
	}
}

// TestCrossProcessPingPong: records go to an echo process and come back
// unchanged, through two rings.
func TestCrossProcessPingPong(t *testing.T) {
	dir := testDir(t)
	to, err := Create(filepath.Join(dir, "to.ring"), Options{SubRings: 1, Capacity: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer to.Remove()
	from, err := Create(filepath.Join(dir, "from.ring"), Options{SubRings: 1, Capacity: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer from.Remove()
	cmd := startHelper(t, envMode+"=echo", envRing+"="+to.Path(), envRing2+"="+from.Path())
	p, _ := to.Producer(0)
	c, _ := from.Consumer()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 200 {
		msg := make([]byte, i*37)
		gen(msg, 0, i)
		if err := p.Write(ctx, msg); err != nil {
			t.Fatal(err)
		}
		rec, err := c.Next(ctx, 0)
		if err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
		checkRec(t, rec, 0, i, len(msg))
		c.Release(0)
	}
	p.Close()
	if _, err := c.Next(ctx, 0); err != io.EOF {
		t.Fatalf("after the echo closed: %v, want io.EOF", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := atomic.LoadUint64(from.u64(0, ctlRead)); n == 0 {
		t.Fatal("read counter did not move")
	}
}
