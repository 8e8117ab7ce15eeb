package kv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestSyncLoadEndsRound: LoadTable on a table whose step 0 is being
// gathered fails that step for its waiters, naming the load, so that a
// push for the loaded version starts a round of its own instead of being
// averaged with the old step's gradients; a load that fails (and resets
// the table to version 0) ends the round the same way.
func TestSyncLoadEndsRound(t *testing.T) {
	const rows, dim = 4, 2
	sp := spec("w", rows, dim, SGD(1), Sync, 1)
	ctx := context.Background()
	dir := t.TempDir()
	ref := newStore(t, 0, sp)
	for step := range uint64(3) {
		if err := ref.PushSync(ctx, "w", step, 0, 1, grad(rows*dim, 0, step)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ref.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName("w", 0))

	s := newStore(t, 0, sp)
	// startRound has trainer 0 of 2 push step and wait in its round.
	startRound := func(step uint64) <-chan error {
		done := make(chan error, 1)
		go func() { done <- s.PushSync(ctx, "w", step, 0, 2, grad(rows*dim, 0, step)) }()
		waitPushed(t, s, "w", 1)
		return done
	}
	wantLoaded := `kv: table "w" step %d: the table was loaded from ` + path + ` while the step was gathered; missing trainers [1]: ` + ErrStepFailed.Error()

	done := startRound(0)
	if err := s.LoadTable(dir, "w"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrStepFailed) || err.Error() != fmt.Sprintf(wantLoaded, 0) {
		t.Fatalf("step 0 waiter after the load: %v\nwant %s", err, fmt.Sprintf(wantLoaded, 0))
	}
	// Step 3 runs on the loaded rows alone: the same rows as the
	// reference store after the same step.
	var wg sync.WaitGroup
	for k := range 2 {
		for _, st := range []*Store{s, ref} {
			wg.Go(func() {
				if err := st.PushSync(ctx, "w", 3, k, 2, grad(rows*dim, k, 3)); err != nil {
					t.Errorf("trainer %d step 3: %v", k, err)
				}
			})
		}
	}
	wg.Wait()
	got, v, err := s.PullVersion(ctx, "w", 4, allIDs(rows), nil)
	want, _ := ref.Pull("w", allIDs(rows), nil)
	if err != nil || v != 4 || !slices.Equal(got, want) {
		t.Fatalf("after step 3 on the loaded table: version %d, %v, rows %v; want version 4, rows %v", v, err, got, want)
	}

	// A checkpoint whose body fails its CRC resets the table to version 0:
	// the round of step 4 ends too.
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	body := slices.Clone(good)
	body[ckHeaderLen+1] ^= 0x10
	if err := os.WriteFile(filepath.Join(bad, FileName("w", 0)), body, 0o644); err != nil {
		t.Fatal(err)
	}
	done = startRound(4)
	if err := s.LoadTable(bad, "w"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("load of a corrupt body: %v, want %v", err, ErrCorrupt)
	}
	badPath := filepath.Join(bad, FileName("w", 0))
	wantBad := `kv: table "w" step 4: the table was loaded from ` + badPath + ` while the step was gathered; missing trainers [1]: ` + ErrStepFailed.Error()
	if err := <-done; !errors.Is(err, ErrStepFailed) || err.Error() != wantBad {
		t.Fatalf("step 4 waiter after the failed load: %v\nwant %s", err, wantBad)
	}
	if v, _ := s.Version("w"); v != 0 {
		t.Fatalf("version after the failed load: %d, want 0", v)
	}
	if err := s.PushSync(ctx, "w", 0, 0, 1, grad(rows*dim, 0, 0)); err != nil {
		t.Fatalf("step 0 after the failed load: %v", err)
	}
}

// TestSyncPushForAnotherRoundRefused: a push whose step is the table's
// version but not the step of the round being gathered is refused
// (ErrStep); it never joins that round.
func TestSyncPushForAnotherRoundRefused(t *testing.T) {
	s := newStore(t, 0, spec("w", 2, 2, SGD(1), Sync, 1))
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- s.PushSync(ctx, "w", 0, 0, 2, grad(4, 0, 0)) }()
	waitPushed(t, s, "w", 1)
	// A version change that did not end the round.
	tb, _ := s.table("w")
	tb.version.Store(3)
	err := s.PushSync(ctx, "w", 3, 1, 2, grad(4, 1, 3))
	const want = `kv: table "w": trainer 1 pushed step 3, the step being gathered is 0: bad synchronous step`
	if !errors.Is(err, ErrStep) || err.Error() != want {
		t.Fatalf("push of step 3 into the round of step 0: %v\nwant %s", err, want)
	}
	tb.version.Store(0)
	if err := s.PushSync(ctx, "w", 0, 1, 2, grad(4, 1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Pull("w", allIDs(2), nil); !slices.Equal(got, f32(-1.5, -1.5, -1.5, -1.5)) {
		t.Fatalf("rows after step 0: %v, want the average of trainers 0 and 1 only", got)
	}
}

// TestPullVersionLoadBelowMin: a PullVersion(2) whose wait has ended,
// but whose rows are not read yet, when LoadTable sets the table back to
// version 1 waits again, as a pull that started after the load does: it
// never answers version 1 with the checkpoint's rows. Once step 1 is
// pushed anew it answers version 2 with that step's rows; when its
// context ends first, it fails naming the table and both versions.
func TestPullVersionLoadBelowMin(t *testing.T) {
	const rows, dim = 4, 2
	sp := spec("w", rows, dim, SGD(1), Sync, 1)
	s := newStore(t, 0, sp)
	step := func(st uint64) {
		t.Helper()
		if err := s.PushSync(context.Background(), "w", st, 0, 1, grad(rows*dim, 0, st)); err != nil {
			t.Fatal(err)
		}
	}
	step(0)
	dir := t.TempDir()
	if err := s.Save(dir); err != nil { // version 1
		t.Fatal(err)
	}
	atV1, _ := s.Pull("w", allIDs(rows), nil)
	step(1)
	atV2, _ := s.Pull("w", allIDs(rows), nil)
	if slices.Equal(atV1, atV2) {
		t.Fatalf("step 1 left the rows as they were: %v", atV1)
	}

	type result struct {
		rows []float32
		v    uint64
		err  error
	}
	// pull starts PullVersion(2) at version 2; its first wait ends at
	// once and the hook loads the version 1 checkpoint before the read.
	// The load's error is sent on loaded.
	pull := func(ctx context.Context) (loaded <-chan error, done <-chan result) {
		l, d := make(chan error, 1), make(chan result, 1)
		waits := 0
		s.pullWaited = func(string) { // runs on the pull's goroutine only
			if waits++; waits == 1 {
				l <- s.LoadTable(dir, "w")
			}
		}
		go func() {
			got, v, err := s.PullVersion(ctx, "w", 2, allIDs(rows), nil)
			d <- result{got, v, err}
		}()
		return l, d
	}

	// The pull's context ends during the load: it must not answer.
	ctx, cancel := context.WithCancel(context.Background())
	loaded, done := pull(ctx)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	cancel()
	r := <-done
	const want = `kv: table "w": waiting for version 2 (at 1): context canceled`
	if r.err == nil || r.err.Error() != want || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("PullVersion(2) across a load back to version 1, context ended: version %d, rows %v, %v\nwant %s",
			r.v, r.rows, r.err, want)
	}

	// Back at version 2, then loaded to 1 again: step 1 pushed anew
	// releases the pull with its rows.
	step(1)
	loaded, done = pull(context.Background())
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Version("w"); v != 1 {
		t.Fatalf("version after the load: %d, want 1", v)
	}
	step(1)
	r = <-done
	if r.err != nil || r.v != 2 || !slices.Equal(r.rows, atV2) {
		t.Fatalf("PullVersion(2) across a load back to version 1: version %d, %v, rows %v; want version 2, rows %v (version 1 rows: %v)",
			r.v, r.err, r.rows, atV2, atV1)
	}
}
