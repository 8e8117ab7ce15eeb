package kv

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// syncState is the step barrier of one Sync table shard.
//
// Sessions. A push may say which process it comes from (session, a
// nonce of the trainer's connection; 0: not said, an older sender). The
// table counts, per rank, the session whose push it took last as that
// rank (ranks); a push of a session it has not taken for the rank is a
// new process, of a new job (a rerun) or restarted. Departures are
// numbered on the same counter (seq) as the sessions' first pushes, so a
// departure fails the steps of the sessions that were there when it came
// (its job's) and of none that came after it: a rerun's trainers, in any
// order, do not fail for the departures of the job before, and the job's
// own trainers still fail at once. A departure before a job mate's first
// push cannot be told from an earlier job's: that step waits for the
// departed rank's new process (the sync timeout, at worst). Two sessions
// pushing one rank's step are two live processes with one rank: both are
// told so (duplicateError), unless the first belongs to a running job
// (heldLocked): then the newcomer alone is refused (heldError), a second
// job on the table or a late second process of the rank.
type syncState struct {
	mu struct {
		sync.Mutex
		round *round // the step being gathered; nil between steps
		// left: the last departure of each trainer. Pushes without a
		// session are failed by every one that is not inert until one
		// of them pushes again (which forgets them all); pushes with one
		// by those after their session began (see Sessions).
		left map[int]departure
		// timedOut: trainers whose last push was in a step that timed out
		// waiting for the others. One that leaves then is remembered only
		// to tell a rerun (its push forgets the departures); its leaving
		// fails nobody's step, since the trainers it waited for never
		// came: a rerun's are no job mates of it.
		timedOut map[int]struct{}
		// ranks: the session each rank pushed under last (Sessions).
		ranks map[int]*rankSession
		seq   uint64        // numbers sessions' first pushes and departures
		verCh chan struct{} // closed (and replaced) at every version bump
		avg   []float32     // reused averaging buffer
		// dropped: the table left its store (Store.Drop); every step and
		// version wait fails from then on.
		dropped bool
	}
}

// departure is a trainer's leaving.
type departure struct {
	seq   uint64 // syncState.mu.seq when it came
	inert bool   // its last step had timed out (see timedOut)
}

// rankSession is the process a rank's pushes came from last.
type rankSession struct {
	session uint64
	since   uint64    // syncState.mu.seq of the session's first push taken
	first   uint64    // the step of its first push taken
	step    uint64    // the step of its last push taken
	world   int       // the world its pushes said
	last    time.Time // when its last push was taken (for messages)
	ended   bool      // a round it pushed to failed, or it said kv_done: its job is over
	// dup: another session that pushed a step this one had pushed, told
	// so then; this one's next push is told so too (duplicateError).
	dup uint64
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
	sess   []uint64 // sess[k]: the session of trainer k's push (0: none)
	pushed int
	done   chan struct{}
	err    error // set before done closes
	timer  *time.Timer
}

func newSyncState() *syncState {
	s := &syncState{}
	s.mu.left = make(map[int]departure)
	s.mu.timedOut = make(map[int]struct{})
	s.mu.ranks = make(map[int]*rankSession)
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
	for k, sess := range r.sess {
		if rs := ss.mu.ranks[k]; sess != 0 && rs != nil && rs.session == sess {
			rs.ended = true
		}
	}
}

// heldLocked reports whether rs, the session the table counts as a rank,
// holds the rank against another session: it is a running job's, having
// pushed steps that completed (its first push is behind the version),
// not pushed to a round that failed nor said it is done (kv_done), and no
// trainer of its world has left since it began (a departure fails its
// job's next step: the job is over, and a rerun after a crash must not
// wait). No time ends a hold: a job pushes to its sync table as seldom
// as it likes (node kge once an epoch, which may take hours), and a
// hold that lapsed let a second job step the table mid-epoch. A job
// whose end reached no shard of the table (its node died with its only
// trainer) holds it until `node kv drop` (heldError says so). ss.mu must
// be held.
func (ss *syncState) heldLocked(rs *rankSession, version uint64) bool {
	if rs == nil || rs.ended || rs.first >= version {
		return false
	}
	for k, d := range ss.mu.left {
		if k < rs.world && !d.inert && d.seq > rs.since {
			return false
		}
	}
	return true
}

// holderLocked is the running job's session that a push by session as
// trainer of world must not join: the one holding trainer's rank, or,
// for a push of another world, any that holds its rank (a second job of
// a larger world opened a round of its own between the running job's
// steps with a rank beyond them, and the running job's next push was
// refused for its world). nil when none. ss.mu must be held.
func (ss *syncState) holderLocked(trainer, world int, session, version uint64) *rankSession {
	if session == 0 {
		return nil
	}
	if rs := ss.mu.ranks[trainer]; rs != nil && rs.session != session && ss.heldLocked(rs, version) {
		return rs
	}
	for _, k := range slices.Sorted(maps.Keys(ss.mu.ranks)) {
		if rs := ss.mu.ranks[k]; rs.session != session && rs.world != world && ss.heldLocked(rs, version) {
			return rs
		}
	}
	return nil
}

// pushSync is Store.PushSync for table t: a push without a session.
func (t *table) pushSync(ctx context.Context, step uint64, trainer, world int, grads []float32, timeout time.Duration) error {
	return t.pushSyncSession(ctx, step, trainer, world, 0, grads, timeout)
}

// pushSyncSession is Store.PushSyncSession for table t (session 0: none
// said, the rules of an older sender; see syncState).
func (t *table) pushSyncSession(ctx context.Context, step uint64, trainer, world int, session uint64, grads []float32, timeout time.Duration) error {
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
	// rs is the session the table counts as trainer, if it is this one.
	rs := ss.mu.ranks[trainer]
	other := session != 0 && rs != nil && rs.session != session
	if session != 0 && !other && rs != nil && rs.dup != 0 {
		ss.mu.Unlock()
		return t.duplicateError(step, trainer, session, rs.dup)
	}
	// A second job on the table, or a second process of a rank of a
	// running job: the newcomer alone is refused. Told both, as two
	// processes starting together are, the running job failed with it;
	// and a push taken into the running job's round averaged another
	// job's vector into its step.
	holder := ss.holderLocked(trainer, world, session, t.version.Load())
	held := holder != nil
	if v := t.version.Load(); step != v {
		if other && step < v && rs.step >= step {
			// The session the table counts as trainer pushed this step:
			// two processes are trainer.
			err := t.duplicateError(step, trainer, rs.session, session)
			switch {
			case step+1 < v:
				// Far behind: a process started with the table steps ago
				// pushes from there, not this one; more likely a job that
				// took its base from another shard, at another version.
				err = t.behindError(step, v, trainer, rs, session)
			case held:
				err = t.heldError(step, trainer, world, holder, session)
			}
			if !held {
				ss.tellDuplicateLocked(trainer, rs, session, err)
			}
			ss.mu.Unlock()
			return err
		}
		ss.mu.Unlock()
		if step > v {
			return t.aheadError(step, v, trainer)
		}
		return fmt.Errorf("kv: table %q: trainer %d pushed step %d, shard is at version %d and expects step %d: %w", name, trainer, step, v, v, ErrStep)
	}
	if held {
		err := t.heldError(step, trainer, world, holder, session)
		ss.mu.Unlock()
		return err
	}
	r := ss.mu.round
	switch {
	case r == nil:
	case r.step != step:
		// Load ends the round when it changes the version, so the round
		// is always the version's step; never average two steps.
		ss.mu.Unlock()
		return fmt.Errorf("kv: table %q: trainer %d pushed step %d, the step being gathered is %d: %w", name, trainer, step, r.step, ErrStep)
	case r.world != world:
		ss.mu.Unlock()
		return fmt.Errorf("kv: table %q step %d: trainer %d says world %d, step started with world %d: %w", name, step, trainer, world, r.world, ErrStep)
	case r.grads[trainer] != nil && session != 0 && r.sess[trainer] != 0 && r.sess[trainer] != session:
		err := t.duplicateError(step, trainer, r.sess[trainer], session)
		ss.tellDuplicateLocked(trainer, rs, session, err)
		ss.mu.Unlock()
		return err
	case r.grads[trainer] != nil:
		ss.mu.Unlock()
		return fmt.Errorf("kv: table %q step %d: trainer %d pushed twice: %w", name, step, trainer, ErrStep)
	}
	if session != 0 {
		// A departure since this session began is of its job: the step
		// cannot complete. It is refused, not failed: the others in the
		// round may be a new job's (a rank restarted alone), which the
		// departure does not concern.
		since := ss.mu.seq + 1 // a new process: every departure came before it
		if !other && rs != nil {
			since = rs.since
		}
		for _, k := range slices.Sorted(maps.Keys(ss.mu.left)) {
			if d := ss.mu.left[k]; k != trainer && k < world && !d.inert && d.seq > since {
				ss.mu.Unlock()
				return fmt.Errorf("kv: table %q step %d: trainer %d left; missing trainers %v: %w", name, step, k, missingWith(r, world, trainer), ErrStepFailed)
			}
		}
	}
	if r == nil {
		r = &round{step: step, world: world, grads: make([][]float32, world), sess: make([]uint64, world), done: make(chan struct{})}
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
	if session == 0 {
		// Back: only a push the round takes says so. A trainer that left
		// and pushes again is a new process, of a new job (a rerun) or
		// restarted: the departures remembered until now are of the job
		// that ended, and kept they failed the new job's first step at
		// once; its trainers, leaving on that failure without kv_done,
		// were remembered in turn, so every rerun after a crash failed
		// the same way. (With a session, the session tells.)
		if _, back := ss.mu.left[trainer]; back {
			clear(ss.mu.left)
		}
	} else {
		if rs == nil || other {
			ss.mu.seq++
			rs = &rankSession{session: session, since: ss.mu.seq, first: step}
			ss.mu.ranks[trainer] = rs
		}
		rs.step, rs.world, rs.last = step, world, time.Now()
	}
	delete(ss.mu.timedOut, trainer)
	r.grads[trainer] = grads
	r.sess[trainer] = session
	r.pushed++
	if session == 0 {
		for k, d := range ss.mu.left {
			if !d.inert && k < world && r.grads[k] == nil {
				ss.failLocked(r, fmt.Errorf("kv: table %q step %d: trainer %d left; missing trainers %v: %w", name, step, k, r.missing(), ErrStepFailed))
				break
			}
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

// leave is leaveSession for a trainer of any session.
func (t *table) leave(trainer int) { t.leaveSession(trainer, 0) }

// leaveSession fails the current round if trainer belongs to it, and
// remembers the departure, so a later round that waits for it fails at
// once instead of timing out (see syncState for which). A trainer whose
// last step timed out waiting for the others fails no round: those it
// waited for never came, and the round now gathered is a rerun's. A
// session (not 0) other than the one the table counts as trainer is no
// departure: a process that was refused as a second trainer of its rank,
// or one that a new process of its rank replaced.
func (t *table) leaveSession(trainer int, session uint64) {
	ss := t.sync
	if trainer < 0 || trainer >= MaxWorld {
		return // in no step: remembering it would only grow the set
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if rs := ss.mu.ranks[trainer]; session != 0 && rs != nil && rs.session != session {
		return
	}
	_, inert := ss.mu.timedOut[trainer]
	delete(ss.mu.timedOut, trainer)
	ss.mu.seq++
	ss.mu.left[trainer] = departure{seq: ss.mu.seq, inert: inert}
	if inert {
		return
	}
	if r := ss.mu.round; r != nil && trainer < r.world {
		ss.failLocked(r, fmt.Errorf("kv: table %q step %d: trainer %d left; missing trainers %v: %w",
			t.spec.Name, r.step, trainer, r.missing(), ErrStepFailed))
	}
}

// duplicateError is the error of two sessions pushing as trainer.
func (t *table) duplicateError(step uint64, trainer int, first, second uint64) error {
	return fmt.Errorf("kv: table %q step %d: two trainers push as rank %d (sessions %016x and %016x): give each trainer its own --rank: %w",
		t.spec.Name, step, trainer, first, second, ErrStepFailed)
}

// heldError is the error of session pushing as trainer of world while
// rs, a running job's session, holds its rank (holderLocked).
func (t *table) heldError(step uint64, trainer, world int, rs *rankSession, session uint64) error {
	whose := fmt.Sprintf("rank %d belongs to a running job", trainer)
	if rs.world != world {
		whose = fmt.Sprintf("the table belongs to a running job of world %d, not %d", rs.world, world)
	}
	return fmt.Errorf("kv: table %q step %d: %s (session %016x, pushing since step %d, last at step %d %v ago), "+
		"and session %016x pushed as rank %d of world %d: a second job on the table needs its own (node train --table, node kge --table-prefix), "+
		"and each trainer of a job its own --rank; the running job goes on (if it ended without a word, its node dying with its trainer, "+
		"node kv drop --socket <a node's control socket> %s frees the table): %w",
		t.spec.Name, step, whose, rs.session, rs.first, rs.step, time.Since(rs.last).Round(time.Millisecond), session, trainer, world, t.spec.Name, ErrStepFailed)
}

// behindError is the error of a session pushing as trainer a step more
// than one behind the shard's version v, which rs (the session the table
// counts as trainer) pushed: a second process of that rank, or, more
// likely, a new job whose base version is another shard's. A node that
// restarted without the table's checkpoint holds it at version 0 while
// the others kept theirs, and each new job then took its base from the
// lowest; the error said only "give each trainer its own --rank".
func (t *table) behindError(step, v uint64, trainer int, rs *rankSession, session uint64) error {
	return fmt.Errorf("kv: table %q: rank %d (session %016x) pushed step %d, but this shard is at version %d and "+
		"session %016x of rank %d pushed up to step %d: two trainers of rank %d, or a job that began at another shard's version "+
		"(a node restarted without this table's checkpoint leaves its shards at different versions: node kv drop --socket <a node's control socket> %s starts them afresh): %w",
		t.spec.Name, trainer, session, step, v, rs.session, trainer, rs.step, trainer, t.spec.Name, ErrStepFailed)
}

// aheadError is the error of trainer pushing step, beyond the shard's
// version v. A trainer pushes each step to every shard and waits for all
// of them, so the job counts from another shard's version: its trainers
// read it there when they began (the shard of the table's first rows),
// and this one is behind it. A node restarted without the table's
// checkpoint holds its shard at version 0 while its peers kept theirs
// (or loaded an earlier checkpoint of it, or a step failed on it alone):
// every job on the table then failed so, told only which step the shard
// expected, until the table was dropped.
func (t *table) aheadError(step, v uint64, trainer int) error {
	return fmt.Errorf("kv: table %q: trainer %d pushed step %d, shard is at version %d and expects step %d: the job counts its steps from another shard's version, "+
		"and this one is behind it (a node restarted without this table's checkpoint leaves its shards at different versions: node kv drop --socket <a node's control socket> %s starts them afresh): %w",
		t.spec.Name, trainer, step, v, v, t.spec.Name, ErrStep)
}

// tellDuplicateLocked tells the session the table counts as trainer (rs;
// nil: none) that session pushes as trainer too, with err: the current
// round fails if it holds trainer's push (a process waiting in it), and
// rs's next push is refused (one between steps). ss.mu must be held.
func (ss *syncState) tellDuplicateLocked(trainer int, rs *rankSession, session uint64, err error) {
	if r := ss.mu.round; r != nil && trainer < r.world && r.grads[trainer] != nil {
		ss.failLocked(r, err)
	}
	if rs != nil && rs.session != session {
		rs.dup = session
	}
}

// missingWith lists the trainers of a world of world that have not pushed
// to r (nil: no push yet), pusher included.
func missingWith(r *round, world, pusher int) []int {
	var m []int
	for k := range world {
		if k == pusher || r == nil || r.grads[k] == nil {
			m = append(m, k)
		}
	}
	return m
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

// PushSyncSession is PushSync for a trainer that says which process it
// is: session, not 0, is a nonce of its connection (a new one for every
// process), and it makes the shard tell a new job's trainers from the
// departed ones of the job before (see syncState), and name two
// processes that push as one rank. Session 0 is PushSync.
func (s *Store) PushSyncSession(ctx context.Context, table string, step uint64, trainer, world int, session uint64, grads []float32) error {
	t, err := s.table(table)
	if err != nil {
		return err
	}
	if t.sync == nil {
		return fmt.Errorf("kv: table %q: sync push to an async table, use Push: %w", table, ErrMode)
	}
	return t.pushSyncSession(ctx, step, trainer, world, session, grads, s.syncTimeout)
}

// FinishTableSession tells table that the process of session finished
// its job as trainer cleanly (kv_done): no departure, which would fail
// the steps of the sessions there, but the rank is no longer held
// (heldLocked) against another session, a rerun's started at once.
func (s *Store) FinishTableSession(table string, trainer int, session uint64) {
	if t := s.set.Load().tables[table]; t != nil && t.sync != nil {
		ss := t.sync
		ss.mu.Lock()
		if rs := ss.mu.ranks[trainer]; rs != nil && rs.session == session {
			rs.ended = true
		}
		ss.mu.Unlock()
	}
}

// LeaveTableSession is LeaveTable for the process of session (0: any):
// it is no departure when the table counts another session as trainer.
func (s *Store) LeaveTableSession(table string, trainer int, session uint64) {
	if t := s.set.Load().tables[table]; t != nil && t.sync != nil {
		t.leaveSession(trainer, session)
	}
}
