package kv

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// syncState is the step barrier of one Sync table shard.
type syncState struct {
	mu struct {
		sync.Mutex
		round *round // the step being gathered; nil between steps
		// left: trainers that left, until one of them pushes again;
		// true for one that timed out before it left (see timedOut).
		left map[int]bool
		// timedOut: trainers whose last push was in a step that timed out
		// waiting for the others. One that leaves then is remembered only
		// to tell a rerun (its push forgets the departures); its leaving
		// fails nobody's step, since the trainers it waited for never
		// came: a rerun's are no job mates of it.
		timedOut map[int]struct{}
		verCh    chan struct{} // closed (and replaced) at every version bump
		avg      []float32     // reused averaging buffer
		// dropped: the table left its store (Store.Drop); every step and
		// version wait fails from then on.
		dropped bool
	}
}

// round gathers the pushes of one step.
type round struct {
	step  uint64
	world int
	// grads[k] is trainer k's gradient: the caller's own slice, not a
	// copy. INVARIANT: every PushSync call of the round is blocked until
	// done is closed, and the average is computed before done closes, so
	// no slice is read after its caller returned.
	grads  [][]float32
	pushed int
	done   chan struct{}
	err    error // set before done closes
	timer  *time.Timer
}

func newSyncState() *syncState {
	s := &syncState{}
	s.mu.left = make(map[int]bool)
	s.mu.timedOut = make(map[int]struct{})
	s.mu.verCh = make(chan struct{})
	return s
}

// missing lists the trainers of r that have not pushed.
func (r *round) missing() []int {
	var m []int
	for k, g := range r.grads {
		if g == nil {
			m = append(m, k)
		}
	}
	return m
}

// failLocked ends r with err if it is still the current round.
// ss.mu must be held.
func (ss *syncState) failLocked(r *round, err error) {
	if ss.mu.round != r {
		return
	}
	ss.mu.round = nil
	r.err = err
	r.timer.Stop()
	close(r.done)
}

// pushSync is Store.PushSync for table t.
func (t *table) pushSync(ctx context.Context, step uint64, trainer, world int, grads []float32, timeout time.Duration) error {
	name := t.spec.Name
	if world < 1 || world > MaxWorld || trainer < 0 || trainer >= world {
		return fmt.Errorf("kv: table %q step %d: trainer %d of world %d: %w", name, step, trainer, world, ErrStep)
	}
	if want := t.n * t.dim; len(grads) != want {
		return fmt.Errorf("kv: table %q step %d: trainer %d pushed %d values, shard holds %d: %w", name, step, trainer, len(grads), want, ErrShape)
	}
	if err := t.finite(grads, nil); err != nil {
		return fmt.Errorf("kv: step %d of trainer %d: %w", step, trainer, err)
	}
	ss := t.sync
	ss.mu.Lock()
	if ss.mu.dropped {
		ss.mu.Unlock()
		return t.droppedError()
	}
	if v := t.version.Load(); step != v {
		ss.mu.Unlock()
		return fmt.Errorf("kv: table %q: trainer %d pushed step %d, shard is at version %d and expects step %d: %w", name, trainer, step, v, v, ErrStep)
	}
	r := ss.mu.round
	if r != nil && r.step != step {
		// Load ends the round when it changes the version, so the round
		// is always the version's step; never average two steps.
		ss.mu.Unlock()
		return fmt.Errorf("kv: table %q: trainer %d pushed step %d, the step being gathered is %d: %w", name, trainer, step, r.step, ErrStep)
	}
	if r == nil {
		r = &round{step: step, world: world, grads: make([][]float32, world), done: make(chan struct{})}
		ss.mu.round = r
		r.timer = time.AfterFunc(timeout, func() {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			if ss.mu.round != r {
				return
			}
			for k, g := range r.grads {
				if g != nil {
					ss.mu.timedOut[k] = struct{}{}
				}
			}
			ss.failLocked(r, fmt.Errorf("kv: table %q step %d: timed out after %v waiting for trainers %v of world %d: %w",
				name, step, timeout, r.missing(), world, ErrStepFailed))
		})
	}
	switch {
	case r.world != world:
		ss.mu.Unlock()
		return fmt.Errorf("kv: table %q step %d: trainer %d says world %d, step started with world %d: %w", name, step, trainer, world, r.world, ErrStep)
	case r.grads[trainer] != nil:
		ss.mu.Unlock()
		return fmt.Errorf("kv: table %q step %d: trainer %d pushed twice: %w", name, step, trainer, ErrStep)
	}
	// Back: only a push the round takes says so. A trainer that left and
	// pushes again is a new process, of a new job (a rerun) or restarted:
	// the departures remembered until now are of the job that ended, and
	// kept they failed the new job's first step at once; its trainers,
	// leaving on that failure without kv_done, were remembered in turn,
	// so every rerun after a crash failed the same way.
	if _, back := ss.mu.left[trainer]; back {
		clear(ss.mu.left)
	}
	delete(ss.mu.timedOut, trainer)
	r.grads[trainer] = grads
	r.pushed++
	for k, inert := range ss.mu.left {
		if !inert && k < world && r.grads[k] == nil {
			ss.failLocked(r, fmt.Errorf("kv: table %q step %d: trainer %d left; missing trainers %v: %w", name, step, k, r.missing(), ErrStepFailed))
			break
		}
	}
	if ss.mu.round == r && r.pushed == world {
		t.applyRoundLocked(r)
	}
	ss.mu.Unlock()

	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.mu.round != r { // finished while we were giving up
		return r.err
	}
	err := fmt.Errorf("kv: table %q step %d: trainer %d gave up (%v); missing trainers %v: %w", name, step, trainer, ctx.Err(), r.missing(), ErrStepFailed)
	ss.failLocked(r, err)
	return err
}

// applyRoundLocked averages the gradients of a complete round in trainer
// order (avg = (g0 + g1 + … + g(W-1)) / W, summed left to right in
// float32), applies the optimiser once, bumps the version and releases the
// waiters. t.sync.mu must be held.
func (t *table) applyRoundLocked(r *round) {
	ss := t.sync
	avg := slices.Grow(ss.mu.avg[:0], t.n*t.dim)[:t.n*t.dim]
	copy(avg, r.grads[0])
	for _, g := range r.grads[1:] {
		for j, x := range g {
			avg[j] += x
		}
	}
	w := float32(r.world)
	for j := range avg {
		avg[j] /= w
	}
	ss.mu.avg = avg
	t.mu.Lock()
	t.applyLocked(avg)
	t.mu.Unlock()
	ss.mu.round = nil
	r.timer.Stop()
	close(r.done)
	ss.bumpWaitersLocked()
}

// leave fails the current round if trainer belongs to it, and remembers
// the trainer as gone until it pushes again, so a later round that waits
// for it fails at once instead of timing out. A trainer whose last step
// timed out waiting for the others fails no round: those it waited for
// never came, and the round now gathered is a rerun's.
func (t *table) leave(trainer int) {
	ss := t.sync
	if trainer < 0 || trainer >= MaxWorld {
		return // in no step: remembering it would only grow the set
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	_, inert := ss.mu.timedOut[trainer]
	delete(ss.mu.timedOut, trainer)
	ss.mu.left[trainer] = inert
	if inert {
		return
	}
	if r := ss.mu.round; r != nil && trainer < r.world {
		ss.failLocked(r, fmt.Errorf("kv: table %q step %d: trainer %d left; missing trainers %v: %w",
			t.spec.Name, r.step, trainer, r.missing(), ErrStepFailed))
	}
}

// drop fails the current round and every version wait: the table has
// left its store.
func (t *table) drop() {
	ss := t.sync
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.mu.dropped = true
	if r := ss.mu.round; r != nil {
		ss.failLocked(r, t.droppedError())
	}
	ss.bumpWaitersLocked()
}

func (t *table) droppedError() error {
	return fmt.Errorf("kv: table %q was dropped: %w", t.spec.Name, ErrUnknownTable)
}

// waitVersion blocks until the table's version is at least v.
func (t *table) waitVersion(ctx context.Context, v uint64) error {
	ss := t.sync
	for {
		ss.mu.Lock()
		cur, ch, dropped := t.version.Load(), ss.mu.verCh, ss.mu.dropped
		ss.mu.Unlock()
		if cur >= v {
			return nil
		}
		if dropped {
			return t.droppedError()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("kv: table %q: waiting for version %d (at %d): %w", t.spec.Name, v, cur, ctx.Err())
		}
	}
}

// bumpWaitersLocked wakes the version waiters. ss.mu must be held.
func (ss *syncState) bumpWaitersLocked() {
	close(ss.mu.verCh)
	ss.mu.verCh = make(chan struct{})
}
