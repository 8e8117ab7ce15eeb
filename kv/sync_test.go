package kv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// grad is trainer k's gradient at step s: every value (k+1)·(s+1), so the
// average over W trainers is (W+1)/2·(s+1), exact in float32.
func grad(n, k int, s uint64) []float32 {
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(k+1) * float32(s+1)
	}
	return g
}

func TestSyncStepAveragesOnce(t *testing.T) {
	for _, world := range []int{2, 4} {
		t.Run(fmt.Sprintf("W=%d", world), func(t *testing.T) {
			const rows, dim, steps = 5, 3, 4
			s := newStore(t, 0, spec("w", rows, dim, SGD(1), Sync, 1))
			var wg sync.WaitGroup
			for k := range world {
				wg.Go(func() {
					for step := range uint64(steps) {
						if err := s.PushSync(context.Background(), "w", step, k, world, grad(rows*dim, k, step)); err != nil {
							t.Errorf("trainer %d step %d: %v", k, step, err)
							return
						}
						// After the step, every trainer sees its version.
						_, v, err := s.PullVersion(context.Background(), "w", step+1, []uint64{0}, nil)
						if err != nil || v < step+1 {
							t.Errorf("trainer %d: pull after step %d: version %d, %v", k, step, v, err)
							return
						}
					}
				})
			}
			wg.Wait()
			// Σ_s avg_s = (W+1)/2 · Σ_s (s+1) = (W+1)/2 · 10.
			want := -float32(world+1) / 2 * 10
			got, v, err := s.PullVersion(context.Background(), "w", 0, allIDs(rows), nil)
			if err != nil {
				t.Fatal(err)
			}
			if v != steps {
				t.Fatalf("version %d, want %d", v, steps)
			}
			for i, x := range got {
				if x != want {
					t.Fatalf("w[%d] = %v, want %v (one averaged update per step)", i, x, want)
				}
			}
		})
	}
}

// TestSyncAdamAppliedOnce: the averaged gradient goes through Adam once
// per step, as one push of the average would on an async table.
func TestSyncAdamAppliedOnce(t *testing.T) {
	opt := Adam(0.1, 0.9, 0.99, 1e-8)
	syn := newStore(t, 0, spec("w", 2, 2, opt, Sync, 1))
	ref := newStore(t, 0, spec("w", 2, 2, opt, Async, 1))
	g0, g1 := f32(1, -3, 0.5, 2), f32(3, 1, -0.5, 6)
	for step := range uint64(3) {
		var wg sync.WaitGroup
		for k, g := range [][]float32{g0, g1} {
			wg.Go(func() {
				if err := syn.PushSync(context.Background(), "w", step, k, 2, g); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if err := ref.Push("w", []uint64{0, 1}, f32(2, -1, 0, 4)); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := syn.Pull("w", allIDs(2), nil)
	b, _ := ref.Pull("w", allIDs(2), nil)
	if !slices.Equal(a, b) {
		t.Fatalf("sync adam %v, want %v", a, b)
	}
}

// TestSyncLeaveFailsStep: a trainer that leaves mid-step fails the step
// for the others at once, naming it; the rows do not change.
func TestSyncLeaveFailsStep(t *testing.T) {
	const world = 4
	s := newStore(t, 0, spec("w", 3, 2, SGD(1), Sync, 1))
	errs := make(chan error, world)
	for k := range world - 1 {
		go func() { errs <- s.PushSync(context.Background(), "w", 0, k, world, grad(6, k, 0)) }()
	}
	waitPushed(t, s, "w", world-1)
	start := time.Now()
	s.Leave(3)
	for range world - 1 {
		err := <-errs
		if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "trainer 3 left") || !strings.Contains(err.Error(), "missing trainers [3]") {
			t.Fatalf("err %v, want a failed step naming trainer 3", err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("waiters took %v to fail", d)
	}
	got, _ := s.Pull("w", allIDs(3), nil)
	if v, _ := s.Version("w"); v != 0 || !slices.Equal(got, make([]float32, 6)) {
		t.Fatalf("failed step changed the table: version %d rows %v", v, got)
	}
	// Trainer 3 is remembered as gone: a retry that needs it fails at once.
	err := s.PushSync(context.Background(), "w", 0, 0, world, grad(6, 0, 0))
	if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "trainer 3 left") {
		t.Fatalf("retry with a departed trainer: %v", err)
	}
	// The survivors go on as a world of 3.
	var wg sync.WaitGroup
	for k := range 3 {
		wg.Go(func() {
			if err := s.PushSync(context.Background(), "w", 0, k, 3, grad(6, k, 0)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, _ := s.Pull("w", []uint64{0}, nil); got[0] != -2 { // avg of 1,2,3
		t.Fatalf("w[0] = %v after world-3 step, want -2", got[0])
	}
}

// TestSyncLeaveTable: a trainer leaving one Sync table fails that
// table's step and no other: trainer 1 of a second job, numbered alike,
// is still there. Through the Handler too (a peer's LeaveRequest naming
// the table), and a LeaveRequest without a table still leaves them all.
func TestSyncLeaveTable(t *testing.T) {
	s := newStore(t, 0, spec("a", 3, 2, SGD(1), Sync, 1), spec("b", 3, 2, SGD(1), Sync, 1))
	h := NewHandler(s)
	for _, leave := range []func(){
		func() { s.LeaveTable("a", 1) },
		func() {
			var m Ack
			if err := DecodeAck(h.Handle(context.Background(), AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1, Table: "a"}), nil), &m); err != nil {
				t.Fatal(err)
			}
		},
	} {
		step, _ := s.Version("a")
		errs := make(map[string]chan error)
		for _, name := range []string{"a", "b"} {
			errs[name] = make(chan error, 1)
			v, _ := s.Version(name)
			go func() { errs[name] <- s.PushSync(context.Background(), name, v, 0, 2, grad(6, 0, 0)) }()
			waitPushed(t, s, name, 1)
		}
		leave()
		if err := <-errs["a"]; !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "trainer 1 left") {
			t.Fatalf("table a: %v, want its step failed by trainer 1 leaving", err)
		}
		// Table b's step still waits for its trainer 1, which completes it.
		vb, _ := s.Version("b")
		if err := s.PushSync(context.Background(), "b", vb, 1, 2, grad(6, 1, 0)); err != nil {
			t.Fatalf("table b, trainer 1: %v", err)
		}
		if err := <-errs["b"]; err != nil {
			t.Fatalf("table b, trainer 0: %v", err)
		}
		if v, _ := s.Version("a"); v != step {
			t.Fatalf("table a at version %d after a failed step, want %d", v, step)
		}
		// Table a's trainer 1 comes back (a rerun; it pushes first, since
		// a's step fails at once while it is remembered as gone): a's
		// steps go on.
		back := make(chan error, 1)
		go func() { back <- s.PushSync(context.Background(), "a", step, 1, 2, grad(6, 1, 0)) }()
		waitPushed(t, s, "a", 1)
		if err := s.PushSync(context.Background(), "a", step, 0, 2, grad(6, 0, 0)); err != nil {
			t.Fatalf("table a, rerun: %v", err)
		}
		if err := <-back; err != nil {
			t.Fatalf("table a, rerun of trainer 1: %v", err)
		}
	}
	// No table: trainer 1 leaves both.
	errs := make(chan error, 2)
	for _, name := range []string{"a", "b"} {
		v, _ := s.Version(name)
		go func() { errs <- s.PushSync(context.Background(), name, v, 0, 2, grad(6, 0, 0)) }()
		waitPushed(t, s, name, 1)
	}
	h.Handle(context.Background(), AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1}), nil)
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "trainer 1 left") {
			t.Fatalf("after a leave of every table: %v", err)
		}
	}
	// Leaving a table the store does not hold, or an async one, is no-op.
	s.LeaveTable("nope", 1)
}

func TestSyncTimeoutNamesMissingTrainers(t *testing.T) {
	s, err := New(Config{Part: 0, Tables: []Spec{spec("w", 2, 2, SGD(1), Sync, 1)}, SyncTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = s.PushSync(context.Background(), "w", 0, 1, 4, grad(4, 1, 0))
	if d := time.Since(start); d < 100*time.Millisecond || d > 2*time.Second {
		t.Fatalf("failed after %v, want about 100ms", d)
	}
	if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "trainers [0 2 3]") {
		t.Fatalf("err %v", err)
	}
}

// TestSyncCallerGivesUp: a waiter whose context ends (its connection
// dropped) fails the step for the others too.
func TestSyncCallerGivesUp(t *testing.T) {
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { errs <- s.PushSync(ctx, "w", 0, 0, 3, grad(4, 0, 0)) }()
	go func() { errs <- s.PushSync(context.Background(), "w", 0, 1, 3, grad(4, 1, 0)) }()
	waitPushed(t, s, "w", 2)
	cancel()
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "trainer 0 gave up") {
			t.Fatalf("err %v, want trainer 0 gave up", err)
		}
	}
}

func TestSyncBadSteps(t *testing.T) {
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1), spec("e", 2, 2, SGD(1), Async, 1))
	ctx := context.Background()
	cases := []struct {
		name           string
		table          string
		step           uint64
		trainer, world int
		n              int
		want           error
	}{
		{"future step", "w", 3, 0, 1, 4, ErrStep},
		{"trainer beyond world", "w", 0, 2, 2, 4, ErrStep},
		{"wrong length", "w", 0, 0, 1, 3, ErrShape},
		{"nan gradient", "w", 0, 0, 1, -1, ErrNonFinite},
		{"async table", "e", 0, 0, 1, 4, ErrMode},
		{"unknown table", "x", 0, 0, 1, 4, ErrUnknownTable},
	}
	for _, c := range cases {
		grads := make([]float32, max(c.n, 0))
		if c.n < 0 { // a whole shard's values, one of them NaN
			grads = f32(0, 0, float32(math.NaN()), 0)
		}
		if err := s.PushSync(ctx, c.table, c.step, c.trainer, c.world, grads); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A step beyond the shard's version: the job counts from another
	// shard's, this one made afresh since (its node restarted without
	// the checkpoint). The error says how to bring the shards together.
	err := s.PushSync(ctx, "w", 6, 1, 2, make([]float32, 4))
	const ahead = `kv: table "w": trainer 1 pushed step 6, shard is at version 0 and expects step 0: the job counts its steps from another shard's version, and this one is behind it ` +
		`(a node restarted without this table's checkpoint leaves its shards at different versions: node kv drop --socket <a node's control socket> w starts them afresh)`
	if !errors.Is(err, ErrStep) || !strings.Contains(err.Error(), ahead) {
		t.Errorf("step beyond the shard's version: %v, want %q", err, ahead)
	}
	if _, _, err := s.PullVersion(ctx, "e", 1, []uint64{0}, nil); !errors.Is(err, ErrMode) {
		t.Errorf("waiting for a version of an async table: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, _, err := s.PullVersion(short, "w", 1, []uint64{0}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for a version that never comes: %v", err)
	}
}

// waitPushed waits until the current round of table has n pushes.
func waitPushed(t *testing.T, s *Store, table string, n int) {
	t.Helper()
	ss := s.set.Load().tables[table].sync
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		ss.mu.Lock()
		r := ss.mu.round
		ok := r != nil && r.pushed == n
		ss.mu.Unlock()
		if ok {
			return
		}
	}
	t.Fatalf("round of %q never reached %d pushes", table, n)
}

// TestPullVersionWaitsForStep: a pull for version 1 issued before the
// step returns once the step is applied, with its rows.
func TestPullVersionWaitsForStep(t *testing.T) {
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
	type result struct {
		rows []float32
		v    uint64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		rows, v, err := s.PullVersion(context.Background(), "w", 1, []uint64{1}, nil)
		done <- result{rows, v, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("pull returned before the step: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
	if err := s.PushSync(context.Background(), "w", 0, 0, 1, f32(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.v != 1 || !slices.Equal(r.rows, f32(-3, -4)) {
		t.Fatalf("pull after step: %+v", r)
	}
}

// TestSyncStressSaveLeaveDrop: rounds, min-version pulls, saves, leaves
// and a final drop run together for about 2 s; nothing races, deadlocks
// or hangs, and a pull for version v+1 never returns an older version.
func TestSyncStressSaveLeaveDrop(t *testing.T) {
	const rows, dim, world = 16, 4, 3
	sp := spec("w", rows, dim, Adam(0.01, 0.9, 0.999, 1e-8), Sync, 1)
	s := newStore(t, 0, sp)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan struct{})
	var fails [world]int
	for k := range world {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				v, err := s.Version("w")
				if err != nil {
					return
				}
				if err := s.PushSync(ctx, "w", v, k, world, grad(rows*dim, k, v)); err != nil {
					fails[k]++
					continue
				}
				if _, got, err := s.PullVersion(ctx, "w", v+1, []uint64{1}, nil); err == nil && got < v+1 {
					t.Errorf("pull min %d got %d", v+1, got)
				}
			}
		}()
	}
	go func() {
		defer func() { done <- struct{}{} }()
		for i := 0; ctx.Err() == nil; i++ {
			if err := s.Save(dir); err != nil {
				t.Error(err)
			}
			if i%5 == 0 {
				s.Leave(i % world)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(2 * time.Second)
	s.Drop("w")
	for range world + 1 {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("hung")
		}
	}
	t.Logf("fails %v", fails)
}

// TestSyncLeaveOutsideAnyWorld: a trainer id no step can hold (negative,
// or MaxWorld and above) is not remembered as gone: Leave with any u32 a
// peer sends grew the set without bound.
func TestSyncLeaveOutsideAnyWorld(t *testing.T) {
	s := newStore(t, 0, spec("w", 3, 2, SGD(1), Sync, 1))
	s.Leave(1)
	for _, k := range []int{-1, MaxWorld, MaxWorld + 7, 1<<32 - 1} {
		s.Leave(k)
	}
	tb, _ := s.table("w")
	tb.sync.mu.Lock()
	n := len(tb.sync.mu.left)
	tb.sync.mu.Unlock()
	if n != 1 {
		t.Errorf("%d trainers remembered as gone, want 1 (trainer 1)", n)
	}
}

// TestSyncRerunAfterCrash: a job whose trainer crashed ends with every
// trainer departed (the crashed one, and the others that left on the
// failed step without kv_done). A rerun of the job must train: the first
// departed trainer to push again forgets the old departures. Before, the
// rerun's first push failed at once for the departure of a trainer that
// was about to push, and its own leaving failed the next one: every
// rerun failed.
func TestSyncRerunAfterCrash(t *testing.T) {
	for _, first := range []int{0, 1} {
		t.Run(fmt.Sprintf("trainer %d first", first), func(t *testing.T) {
			const world = 2
			s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
			ctx := context.Background()
			var wg sync.WaitGroup
			for k := range world {
				wg.Go(func() {
					if err := s.PushSync(ctx, "w", 0, k, world, grad(4, k, 0)); err != nil {
						t.Errorf("job 1 step 0, trainer %d: %v", k, err)
					}
				})
			}
			wg.Wait()
			// Trainer 1 crashes between steps: trainer 0's next step fails
			// at once, naming it, and trainer 0 exits without kv_done.
			s.Leave(1)
			err := s.PushSync(ctx, "w", 1, 0, world, grad(4, 0, 1))
			if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "trainer 1 left") {
				t.Fatalf("job 1 step 1: %v, want a failed step naming trainer 1", err)
			}
			s.Leave(0)

			// The rerun goes on from version 1, its trainers pushing in turn.
			errs := make(chan error, world)
			go func() { errs <- s.PushSync(ctx, "w", 1, first, world, grad(4, first, 1)) }()
			waitPushed(t, s, "w", 1)
			if err := s.PushSync(ctx, "w", 1, 1-first, world, grad(4, 1-first, 1)); err != nil {
				t.Fatalf("rerun, trainer %d: %v", 1-first, err)
			}
			if err := <-errs; err != nil {
				t.Fatalf("rerun, trainer %d: %v", first, err)
			}
			// Step 0 added -(1+2)/2, step 1 -(2+4)/2.
			got, v, err := s.PullVersion(ctx, "w", 2, allIDs(2), nil)
			if err != nil || v != 2 || !slices.Equal(got, f32(-4.5, -4.5, -4.5, -4.5)) {
				t.Fatalf("after the rerun's step: rows %v version %d, %v; want -4.5 at version 2", got, v, err)
			}
		})
	}
}

// TestSyncRerunAfterTimeout: a trainer that started alone, waited out the
// sync timeout for the others (who never came) and went is no departure
// of the rerun's job. Before, the shard remembered it as gone: a rerun
// whose other trainer pushed first failed at once ("trainer 1 left"),
// while the returning trainer 1 waited out the timeout and went again,
// so every rerun in that order failed the same way.
func TestSyncRerunAfterTimeout(t *testing.T) {
	const world = 2
	s, err := New(Config{Part: 0, Tables: []Spec{spec("w", 2, 2, SGD(1), Sync, 1)}, SyncTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.PushSync(ctx, "w", 0, 1, world, grad(4, 1, 0)); !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("trainer 1 alone: %v, want a timed-out step", err)
	}
	s.Leave(1) // its connection closes without kv_done

	// The rerun: trainer 0 pushes first, then trainer 1.
	errs := make(chan error, 1)
	go func() { errs <- s.PushSync(ctx, "w", 0, 0, world, grad(4, 0, 0)) }()
	waitPushed(t, s, "w", 1)
	if err := s.PushSync(ctx, "w", 0, 1, world, grad(4, 1, 0)); err != nil {
		t.Fatalf("rerun, trainer 1: %v", err)
	}
	if err := <-errs; err != nil {
		t.Fatalf("rerun, trainer 0: %v", err)
	}
	got, v, err := s.PullVersion(ctx, "w", 1, allIDs(2), nil)
	if err != nil || v != 1 || !slices.Equal(got, f32(-1.5, -1.5, -1.5, -1.5)) {
		t.Fatalf("after the rerun's step: rows %v version %d, %v; want -1.5 at version 1", got, v, err)
	}

	// A trainer that left after a step that went through is a departure
	// of its job still: the other's next step fails at once, naming it.
	s.Leave(1)
	start := time.Now()
	err = s.PushSync(ctx, "w", 1, 0, world, grad(4, 0, 1))
	if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "trainer 1 left") || time.Since(start) > 50*time.Millisecond {
		t.Fatalf("step after trainer 1 left: %v after %v, want a failed step naming trainer 1 at once", err, time.Since(start))
	}
}
