package kv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sessions of the trainer processes of the tests: a job's, its rerun's,
// and a second process started with a rank already taken.
const (
	sessA0, sessA1 = 0xa0, 0xa1
	sessB0, sessB1 = 0xb0, 0xb1
	sessDup        = 0xd0
)

// pushAsync runs a session push in the background; its error comes on
// the channel.
func pushAsync(s *Store, step uint64, trainer, world int, session uint64) chan error {
	errc := make(chan error, 1)
	go func() {
		errc <- s.PushSyncSession(context.Background(), "w", step, trainer, world, session, grad(4, trainer, step))
	}()
	return errc
}

// stepTogether runs one step of world 2 with sessions s0 and s1.
func stepTogether(t *testing.T, s *Store, step uint64, s0, s1 uint64) {
	t.Helper()
	e0 := pushAsync(s, step, 0, 2, s0)
	waitPushed(t, s, "w", 1)
	if err := s.PushSyncSession(context.Background(), "w", step, 1, 2, s1, grad(4, 1, step)); err != nil {
		t.Fatalf("step %d, trainer 1: %v", step, err)
	}
	if err := <-e0; err != nil {
		t.Fatalf("step %d, trainer 0: %v", step, err)
	}
}

func wantLeft(t *testing.T, what string, err error, k int) {
	t.Helper()
	if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), fmt.Sprintf("trainer %d left", k)) {
		t.Fatalf("%s: %v, want a failed step naming trainer %d", what, err, k)
	}
}

func wantDuplicate(t *testing.T, what string, err error) {
	t.Helper()
	const want = "two trainers push as rank 0 (sessions 00000000000000a0 and 00000000000000d0): give each trainer its own --rank"
	if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: %v, want %q", what, err, want)
	}
}

// TestSyncSessionRerun: job A's trainer 0 is interrupted mid-job, and
// its trainer 1's departure never reached this shard (its node died with
// it) or did. The rerun (new sessions) trains whichever rank pushes
// first. Before, a rerun whose trainer 1 pushed first failed at once
// ("trainer 0 left; missing trainers [0]"), and its trainer 0 then waited
// out the sync timeout for a trainer 1 that had gone.
func TestSyncSessionRerun(t *testing.T) {
	for _, c := range []struct {
		first    int
		a1Leaves bool
	}{{1, false}, {1, true}, {0, false}, {0, true}} {
		t.Run(fmt.Sprintf("first=%d/a1_leaves=%v", c.first, c.a1Leaves), func(t *testing.T) {
			s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
			ctx := context.Background()
			stepTogether(t, s, 0, sessA0, sessA1)
			// Trainer 1 waits in step 1; trainer 0 is interrupted.
			e1 := pushAsync(s, 1, 1, 2, sessA1)
			waitPushed(t, s, "w", 1)
			s.LeaveTableSession("w", 0, sessA0)
			wantLeft(t, "job A, trainer 1", <-e1, 0)
			if c.a1Leaves {
				s.LeaveTableSession("w", 1, sessA1)
			}

			sess := [2]uint64{sessB0, sessB1}
			first := pushAsync(s, 1, c.first, 2, sess[c.first])
			waitPushed(t, s, "w", 1)
			if err := s.PushSyncSession(ctx, "w", 1, 1-c.first, 2, sess[1-c.first], grad(4, 1-c.first, 1)); err != nil {
				t.Fatalf("rerun, trainer %d: %v", 1-c.first, err)
			}
			if err := <-first; err != nil {
				t.Fatalf("rerun, trainer %d: %v", c.first, err)
			}
			// Step 0 added -(1+2)/2, step 1 -(2+4)/2.
			got, v, err := s.PullVersion(ctx, "w", 2, allIDs(2), nil)
			if err != nil || v != 2 || !slices.Equal(got, f32(-4.5, -4.5, -4.5, -4.5)) {
				t.Fatalf("after the rerun's step: rows %v version %d, %v; want -4.5 at version 2", got, v, err)
			}
		})
	}
}

// TestSyncSessionLeaveFailsJob: a departure fails the steps of the
// trainers that were there when it came, at once, whether they wait in
// the step or push after it: the rows stay.
func TestSyncSessionLeaveFailsJob(t *testing.T) {
	const world = 3
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
	ctx := context.Background()
	var wg sync.WaitGroup
	for k := range world {
		wg.Go(func() {
			if err := s.PushSyncSession(ctx, "w", 0, k, world, 0xa0+uint64(k), grad(4, k, 0)); err != nil {
				t.Errorf("step 0, trainer %d: %v", k, err)
			}
		})
	}
	wg.Wait()
	e0 := pushAsync(s, 1, 0, world, 0xa0)
	waitPushed(t, s, "w", 1)
	start := time.Now()
	s.LeaveTableSession("w", 2, 0xa2)
	wantLeft(t, "trainer 0, waiting", <-e0, 2)
	wantLeft(t, "trainer 1, pushing after", s.PushSyncSession(ctx, "w", 1, 1, world, 0xa1, grad(4, 1, 1)), 2)
	wantLeft(t, "trainer 0, again", s.PushSyncSession(ctx, "w", 1, 0, world, 0xa0, grad(4, 0, 1)), 2)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the steps took %v to fail", d)
	}
	if v, _ := s.Version("w"); v != 1 {
		t.Fatalf("version %d after the failed steps, want 1", v)
	}
}

// TestSyncSessionRestartAlone: trainer 0 of a running job is restarted
// alone. Trainer 1, there when trainer 0 left, fails at its next push,
// without failing the restarted trainer's step: the job it belongs to
// is over. Its departure then fails the restarted trainer's step (it
// was there when trainer 1 left), and once that trainer goes too, a
// rerun of both trains; a late leave of the first trainer 0 is no
// departure of the rerun's.
func TestSyncSessionRestartAlone(t *testing.T) {
	const sessC0 = 0xc0
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
	ctx := context.Background()
	stepTogether(t, s, 0, sessA0, sessA1)
	s.LeaveTableSession("w", 0, sessA0)
	b0 := pushAsync(s, 1, 0, 2, sessB0)
	waitPushed(t, s, "w", 1)
	wantLeft(t, "trainer 1 of the job", s.PushSyncSession(ctx, "w", 1, 1, 2, sessA1, grad(4, 1, 1)), 0)
	waitPushed(t, s, "w", 1) // the restarted trainer 0 still waits
	s.LeaveTableSession("w", 1, sessA1)
	wantLeft(t, "restarted trainer 0", <-b0, 1)
	wantLeft(t, "restarted trainer 0, again", s.PushSyncSession(ctx, "w", 1, 0, 2, sessB0, grad(4, 0, 1)), 1)
	s.LeaveTableSession("w", 0, sessB0)
	s.LeaveTableSession("w", 0, sessA0)
	stepTogether(t, s, 1, sessC0, sessB1)
	if v, _ := s.Version("w"); v != 2 {
		t.Fatalf("version %d, want 2", v)
	}
}

// TestSyncSessionDuplicateRank: two processes push as rank 0. Whichever
// way their pushes meet, both are told, in words, that two trainers share
// a rank; before, one read "trainer 0 pushed twice" and the other
// "trainer 0 left".
func TestSyncSessionDuplicateRank(t *testing.T) {
	t.Run("same step", func(t *testing.T) {
		s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
		e0 := pushAsync(s, 0, 0, 2, sessA0)
		waitPushed(t, s, "w", 1)
		wantDuplicate(t, "second rank 0", s.PushSyncSession(context.Background(), "w", 0, 0, 2, sessDup, grad(4, 0, 0)))
		wantDuplicate(t, "first rank 0", <-e0)
	})
	t.Run("behind", func(t *testing.T) {
		// The first rank 0 stepped with trainer 1 before the second
		// pushed: the second's push is of a step gone by, and the job
		// of the first, running, goes on.
		s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
		ctx := context.Background()
		stepTogether(t, s, 0, sessA0, sessA1)
		wantHeld(t, "second rank 0", s.PushSyncSession(ctx, "w", 0, 0, 2, sessDup, grad(4, 0, 0)), sessDup)
		// The second going fails nobody: it never was the table's rank 0.
		s.LeaveTableSession("w", 0, sessDup)
		stepTogether(t, s, 1, sessA0, sessA1)
	})
}

func wantHeld(t *testing.T, what string, err error, session uint64) {
	t.Helper()
	const want = "rank 0 belongs to a running job (session 00000000000000a0, pushing since step 0, last at step "
	also := fmt.Sprintf("and session %016x pushed as rank 0 of world 2: a second job on the table needs its own (node train --table, node kge --table-prefix)", session)
	if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), also) {
		t.Fatalf("%s: %v, want %q … %q", what, err, want, also)
	}
}

// TestSyncSessionSecondJob: a second job's trainers push to the table of
// a running job, before and after the running job's rank pushed the
// step. Each is refused alone; the running job's steps go on and average
// its own vectors only. Before, the running job failed with "two
// trainers push as rank 0", or took the second job's vector into its
// step. Once the running job has left, the second trains.
func TestSyncSessionSecondJob(t *testing.T) {
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
	ctx := context.Background()
	stepTogether(t, s, 0, sessA0, sessA1)
	// Step 1: job B's rank 0 pushes before job A's, its rank 1 after A's.
	wantHeld(t, "job B, rank 0, before A's", s.PushSyncSession(ctx, "w", 1, 0, 2, sessB0, grad(4, 7, 1)), sessB0)
	e0 := pushAsync(s, 1, 0, 2, sessA0)
	waitPushed(t, s, "w", 1)
	if err := s.PushSyncSession(ctx, "w", 1, 1, 2, sessB1, grad(4, 7, 1)); err == nil || !strings.Contains(err.Error(), "rank 1 belongs to a running job") {
		t.Fatalf("job B, rank 1, after A's rank 0: %v, want it refused", err)
	}
	if err := s.PushSyncSession(ctx, "w", 1, 1, 2, sessA1, grad(4, 1, 1)); err != nil {
		t.Fatalf("job A, rank 1: %v", err)
	}
	if err := <-e0; err != nil {
		t.Fatalf("job A, rank 0: %v", err)
	}
	// Step 0 added -(1+2)/2, step 1 -(2+4)/2: A's vectors alone.
	got, v, err := s.PullVersion(ctx, "w", 2, allIDs(2), nil)
	if err != nil || v != 2 || !slices.Equal(got, f32(-4.5, -4.5, -4.5, -4.5)) {
		t.Fatalf("after job A's step 1: rows %v version %d, %v; want -4.5 at version 2", got, v, err)
	}
	s.LeaveTableSession("w", 0, sessA0)
	s.LeaveTableSession("w", 1, sessA1)
	stepTogether(t, s, 2, sessB0, sessB1)
}

// TestSyncSessionFinishedJob: a job whose trainers said kv_done holds no
// rank: its rerun, started at once, trains. Through the Handler too (the
// leave a node sends its peers). A finished trainer is no departure: the
// steps of the others there are not failed.
func TestSyncSessionFinishedJob(t *testing.T) {
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
	ctx := context.Background()
	stepTogether(t, s, 0, sessA0, sessA1)
	s.FinishTableSession("w", 0, sessA0)
	var ack Ack
	if err := DecodeAck(NewHandler(s).Handle(ctx, AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1, Table: "w", Session: sessA1, Done: true}), nil), &ack); err != nil {
		t.Fatal(err)
	}
	stepTogether(t, s, 1, sessB0, sessB1)
	// B0 finishes; B1, still at work, steps with a new rank 0.
	s.FinishTableSession("w", 0, sessB0)
	stepTogether(t, s, 2, sessA0+0x100, sessB1)
	// A finish of a session the table does not count changes nothing:
	// rank 1 stays B1's.
	s.FinishTableSession("w", 1, sessA1)
	wantHeldBy(t, s.PushSyncSession(ctx, "w", 3, 1, 2, sessDup, grad(4, 1, 3)), 1, sessB1)
}

// TestSyncSessionRerunAfterCrash: job A's trainer 1 crashed between
// steps (its departure came) while trainer 0's went nowhere (its node
// died with it, say). A's job is over: a rerun's rank 0, pushing at
// once, trains, instead of being refused as a second job for the sync
// timeout after A's last push.
func TestSyncSessionRerunAfterCrash(t *testing.T) {
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
	ctx := context.Background()
	stepTogether(t, s, 0, sessA0, sessA1)
	s.LeaveTableSession("w", 1, sessA1)
	b0 := pushAsync(s, 1, 0, 2, sessB0)
	waitPushed(t, s, "w", 1)
	if err := s.PushSyncSession(ctx, "w", 1, 1, 2, sessB1, grad(4, 1, 1)); err != nil {
		t.Fatalf("rerun, rank 1: %v", err)
	}
	if err := <-b0; err != nil {
		t.Fatalf("rerun, rank 0: %v", err)
	}
}

// TestSyncSessionSecondJobOtherWorld: a second job of a larger world
// pushes between the running job's steps with a rank beyond them, and
// with a rank it holds; each push is refused, and the refused rank's
// going (a departure of a rank the running job does not have) does not
// end the hold. Before, the first opened a round of world 3, and the
// running job's next push was refused for its world.
func TestSyncSessionSecondJobOtherWorld(t *testing.T) {
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
	ctx := context.Background()
	stepTogether(t, s, 0, sessA0, sessA1)
	stepTogether(t, s, 1, sessA0, sessA1)
	want := "the table belongs to a running job of world 2, not 3 (session 00000000000000a"
	for _, k := range []int{2, 0} {
		err := s.PushSyncSession(ctx, "w", 2, k, 3, sessB0+uint64(k), grad(4, k, 2))
		if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), want) {
			t.Fatalf("job B, rank %d of world 3: %v, want %q", k, err, want)
		}
		s.LeaveTableSession("w", k, sessB0+uint64(k))
	}
	if _, ok := s.set.Load().tables["w"].sync.mu.ranks[2]; ok {
		t.Fatal("the refused rank 2 is counted as a rank of the table")
	}
	stepTogether(t, s, 2, sessA0, sessA1)
}

// TestSyncSessionHoldOutlivesEvaluation: a running job's ranks push
// nothing while they evaluate (node kge pushes once an epoch), for far
// longer than the sync timeout; a second job's push meanwhile is
// refused, and the running job goes on. Its kv_done frees the table.
// Before, the hold ended at a time, and the second job stepped the
// running job's table.
func TestSyncSessionHoldOutlivesEvaluation(t *testing.T) {
	const timeout = 100 * time.Millisecond
	s, err := New(Config{Tables: []Spec{spec("w", 2, 2, SGD(1), Sync, 1)}, SyncTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stepTogether(t, s, 0, sessA0, sessA1)
	time.Sleep(8 * timeout) // job A evaluates
	wantHeldBy(t, s.PushSyncSession(ctx, "w", 1, 0, 2, sessB0, grad(4, 0, 1)), 0, sessA0)
	stepTogether(t, s, 1, sessA0, sessA1)
	s.FinishTableSession("w", 0, sessA0)
	s.FinishTableSession("w", 1, sessA1)
	stepTogether(t, s, 2, sessB0, sessB1)
}

func wantHeldBy(t *testing.T, err error, rank int, session uint64) {
	t.Helper()
	want := fmt.Sprintf("rank %d belongs to a running job (session %016x,", rank, session)
	if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v, want %q", err, want)
	}
}

// TestSyncSessionFarBehind: a new session pushes, as a rank the table
// counts, a step far behind the shard's version: a job that took its
// base from another shard (one that restarted without the checkpoint).
// It is refused, naming the versions and the way out, not only as "two
// trainers push as rank 0 ... give each trainer its own --rank".
func TestSyncSessionFarBehind(t *testing.T) {
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
	for step := range uint64(4) {
		stepTogether(t, s, step, sessA0, sessA1)
	}
	err := s.PushSyncSession(context.Background(), "w", 0, 0, 2, sessB0, grad(4, 0, 0))
	const want = `rank 0 (session 00000000000000b0) pushed step 0, but this shard is at version 4 and session 00000000000000a0 of rank 0 pushed up to step 3: ` +
		`two trainers of rank 0, or a job that began at another shard's version (a node restarted without this table's checkpoint leaves its shards at different versions: node kv drop --socket <a node's control socket> w starts them afresh)`
	if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), want) {
		t.Fatalf("push far behind: %v, want %q", err, want)
	}
}

// TestHandleSession: Handle gives the shard the sessions the
// messages carry (a peer's pushes of two rank-0 processes are named as
// such), and a leave of a session the table does not count is none.
func TestHandleSession(t *testing.T) {
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
	h := NewHandler(s)
	ctx := context.Background()
	answer := func(b []byte) error {
		if k, _ := PeekKind(b); k != KindError {
			var a Ack
			return DecodeAck(b, &a)
		}
		var m ErrorMsg
		if err := DecodeErrorMsg(b, &m); err != nil {
			return err
		}
		return &RemoteError{Code: m.Code, Text: m.Text}
	}
	push := func(session uint64) []byte {
		return AppendPushSyncRequest(nil, &PushSyncRequest{Table: "w", World: 2, Grads: grad(4, 0, 0), Session: session})
	}
	first := make(chan error, 1)
	go func() { first <- answer(h.Handle(ctx, push(sessA0), nil)) }()
	waitPushed(t, s, "w", 1)
	// A leave of the second process before it pushed: not the table's
	// rank 0, so the first one's step goes on.
	if err := answer(h.Handle(ctx, AppendLeaveRequest(nil, &LeaveRequest{Trainer: 0, Table: "w", Session: sessDup}), nil)); err != nil {
		t.Fatal(err)
	}
	waitPushed(t, s, "w", 1)
	wantDuplicate(t, "second rank 0", answer(h.Handle(ctx, push(sessDup), nil)))
	wantDuplicate(t, "first rank 0", <-first)
}
