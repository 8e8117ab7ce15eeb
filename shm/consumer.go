package shm

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Consumer reads the records of every sub-ring of one ring, in place. One
// Consumer per ring (one trainer); it is not safe for concurrent use,
// except that different goroutines may each own different sub-rings.
type Consumer struct {
	r      *Ring
	subs   []consumerSub
	closed atomic.Bool
	ownNS  uint64 // this process's pid namespace, 0 unknown
}

// consumerSub is the consumer's view of one sub-ring.
type consumerSub struct {
	area     []byte
	capacity int64

	write, read, heartbeat *uint64
	dataSeq, dataWaiter    *uint32
	spaceSeq, spaceWaiter  *uint32
	state, pid, consumerSt *uint32
	pidNS                  *uint64 // the producer's pid namespace, 0 unknown

	rc   uint64 // next unread position; the shared read counter lags while a record is held
	wc   uint64 // last write counter seen
	held bool   // a record is handed out and not released
	next uint64 // rc after the held record
	live liveness
}

// Consumer attaches this process as the ring's consumer: it marks every
// sub-ring consumer-open with its pid and pid namespace (ErrBusy if a
// consumer attached before). Call Close when done.
func (r *Ring) Consumer() (_ *Consumer, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.catch(&err, debug.SetPanicOnFault(true))
	if r.mu.closed {
		return nil, fmt.Errorf("shm: ring %s: Consumer after Close: %w", r.path, ErrOrder)
	}
	c := &Consumer{r: r, subs: make([]consumerSub, r.hdr.SubRings), ownNS: pidNamespace()}
	for w := range c.subs {
		s := &c.subs[w]
		*s = consumerSub{
			area: r.area(w), capacity: r.hdr.Capacity,
			write: r.u64(w, ctlWrite), read: r.u64(w, ctlRead), heartbeat: r.u64(w, ctlHeartbeat),
			dataSeq: r.u32(w, ctlDataSeq), dataWaiter: r.u32(w, ctlDataWaiter),
			spaceSeq: r.u32(w, ctlSpaceSeq), spaceWaiter: r.u32(w, ctlSpaceWaiter),
			state: r.u32(w, ctlProdState), pid: r.u32(w, ctlProdPID), consumerSt: r.u32(w, ctlConsState),
			pidNS: r.u64(w, ctlProdPIDNS),
		}
		if !atomic.CompareAndSwapUint32(s.consumerSt, StateNone, StateOpen) {
			c.unclaim(w)
			return nil, fmt.Errorf("shm: ring %s sub-ring %d: consumer pid %d attached before (state %d): %w",
				r.path, w, atomic.LoadUint32(r.u32(w, ctlConsPID)), atomic.LoadUint32(s.consumerSt), ErrBusy)
		}
		// The namespace first: a producer that reads the pid judges it
		// by the namespace stored beside it (Producer.consumerPIDGone).
		atomic.StoreUint64(r.u64(w, ctlConsPIDNS), c.ownNS)
		atomic.StoreUint32(r.u32(w, ctlConsPID), uint32(os.Getpid()))
		s.rc, s.wc = atomic.LoadUint64(s.read), atomic.LoadUint64(s.write)
		if err := r.checkCounters(w, s.wc, s.rc); err != nil {
			c.unclaim(w + 1)
			return nil, err
		}
	}
	r.mu.consumers = append(r.mu.consumers, c)
	return c, nil
}

// unclaim gives back the claims of the first n sub-rings of an attach
// that failed, so that producers do not wait on a consumer that never
// reads and a later attach is not refused as busy.
func (c *Consumer) unclaim(n int) {
	for i := range n {
		atomic.StoreUint32(c.r.u32(i, ctlConsPID), 0)
		atomic.StoreUint64(c.r.u64(i, ctlConsPIDNS), 0)
		atomic.StoreUint32(c.subs[i].consumerSt, StateNone)
	}
}

// Next returns the next record of sub-ring w, waiting for it. The view
// points into the shared mapping (no copy) and is valid until Release(w)
// or the Ring's Close; call Release(w) before the next Next(ctx, w).
//
// Next returns io.EOF when the producer closed and every record was
// read; ErrProducerDead, naming the sub-ring and pid, when the producer
// died with nothing pending (within about a second of its death); the
// ctx's error when ctx is done; ErrCorrupt when a length word is out of
// bounds. A record already published is returned even when ctx is done.
func (c *Consumer) Next(ctx context.Context, w int) (_ []byte, err error) {
	if err := c.r.checkSub(w); err != nil {
		return nil, err
	}
	defer c.r.catch(&err, debug.SetPanicOnFault(true))
	s := &c.subs[w]
	if c.closed.Load() || s.held {
		return nil, fmt.Errorf("shm: ring %s sub-ring %d: Next after Close or before Release: %w", c.r.path, w, ErrOrder)
	}
	rec, ok, err := c.poll(w)
	if ok || err != nil {
		return rec, err
	}
	if spin(func() bool { rec, ok, err = c.poll(w); return ok || err != nil }) {
		return rec, err
	}
	defer atomic.StoreUint32(s.dataWaiter, 0)
	for {
		atomic.StoreUint32(s.dataWaiter, 1)
		seq := atomic.LoadUint32(s.dataSeq)
		if rec, ok, err = c.poll(w); ok || err != nil {
			return rec, err
		}
		if beforeVerdict != nil {
			beforeVerdict()
		}
		if err := c.producerGone(w, time.Now()); err != nil {
			// A record published between the poll above and the verdict
			// (the producer's last, just before it died) is read first:
			// its death is reported once every record it published was.
			if rec, ok, perr := c.poll(w); ok || perr != nil {
				return rec, perr
			}
			// A producer that met a truncated file ends early (its
			// last record faults too): say what happened to the file.
			if terr := c.r.truncated(); terr != nil {
				return nil, terr
			}
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("shm: ring %s sub-ring %d: waiting for a record: %w", c.r.path, w, err)
		}
		futexSleep(s.dataSeq, seq, waitSlice)
	}
}

// beforeVerdict, when set (tests), runs in Next between its poll of a
// sub-ring and its verdict on the producer.
var beforeVerdict func()

// poll returns the next record of sub-ring w if one is published, first
// skipping wrap markers. It validates the counters and every length word
// before it trusts them, so arbitrary ring bytes cannot make it panic.
func (c *Consumer) poll(w int) (rec []byte, ok bool, err error) {
	s := &c.subs[w]
	for {
		if s.wc == s.rc {
			s.wc = atomic.LoadUint64(s.write)
			if s.wc == s.rc {
				return nil, false, nil
			}
			if err := c.r.checkCounters(w, s.wc, s.rc); err != nil {
				return nil, false, err
			}
		}
		pos := int64(s.rc % uint64(s.capacity))
		word := binary.LittleEndian.Uint64(s.area[pos:])
		n, skip, err := checkRecord(word, pos, s.capacity, int64(s.wc-s.rc))
		if err != nil {
			return nil, false, fmt.Errorf("shm: ring %s sub-ring %d: %w", c.r.path, w, err)
		}
		if n < 0 { // wrap marker: nothing to hand out, free the tail now
			s.rc += uint64(skip)
			atomic.StoreUint64(s.read, s.rc)
			signal(s.spaceWaiter, s.spaceSeq)
			continue
		}
		s.held, s.next = true, s.rc+uint64(skip)
		start := pos + RecordHeaderSize
		return s.area[start : start+n : start+n], true, nil
	}
}

// producerGone returns io.EOF when the producer of sub-ring w closed and
// every record was read, ErrProducerDead when it died, else nil. The
// caller found no record pending.
func (c *Consumer) producerGone(w int, now time.Time) error {
	s := &c.subs[w]
	st := atomic.LoadUint32(s.state)
	if st == StateClosed {
		// The producer stored its last write counter before its state.
		if atomic.LoadUint64(s.write) == s.rc {
			return io.EOF
		}
		return nil
	}
	pid := int(atomic.LoadUint32(s.pid))
	if st == StateNone || pid == 0 {
		// No producer yet: the creator, who spawns it, vouches for it.
		if creator := c.r.hdr.CreatorPID; c.r.creatorGone() {
			return fmt.Errorf("shm: ring %s sub-ring %d: no producer attached and creator pid %d is gone: %w",
				c.r.path, w, creator, ErrProducerDead)
		}
		return nil
	}
	stale := s.live.observe(atomic.LoadUint64(s.heartbeat), now)
	switch {
	case stale > DeadAfter:
		return fmt.Errorf("shm: ring %s sub-ring %d: producer pid %d sent no heartbeat for %v: %w",
			c.r.path, w, pid, stale.Round(time.Millisecond), ErrProducerDead)
	case stale > goneAfter && pidComparable(atomic.LoadUint64(s.pidNS), c.ownNS) && pidGone(pid):
		return fmt.Errorf("shm: ring %s sub-ring %d: producer pid %d is gone (no heartbeat for %v): %w",
			c.r.path, w, pid, stale.Round(time.Millisecond), ErrProducerDead)
	}
	return nil
}

// Release hands the record last returned by Next(ctx, w) back to the
// producer; its view must not be used afterwards.
func (c *Consumer) Release(w int) (err error) {
	if err := c.r.checkSub(w); err != nil {
		return err
	}
	defer c.r.catch(&err, debug.SetPanicOnFault(true))
	s := &c.subs[w]
	if !s.held || c.closed.Load() {
		return fmt.Errorf("shm: ring %s sub-ring %d: Release without a record from Next: %w", c.r.path, w, ErrOrder)
	}
	s.held = false
	s.rc = s.next
	atomic.StoreUint64(s.read, s.rc)
	signal(s.spaceWaiter, s.spaceSeq)
	return nil
}

// Close marks every sub-ring consumer-closed and wakes their producers,
// whose blocked and later Reserve calls return ErrConsumerGone. Views of
// held records stay readable until the Ring's Close. Close is idempotent.
func (c *Consumer) Close() (err error) {
	if c.closed.Swap(true) {
		return nil
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if c.r.mu.closed {
		return nil
	}
	defer c.r.catch(&err, debug.SetPanicOnFault(true))
	for i := range c.subs {
		s := &c.subs[i]
		atomic.StoreUint32(s.consumerSt, StateClosed)
		atomic.AddUint32(s.spaceSeq, 1)
		futexWakeAll(s.spaceSeq)
	}
	return nil
}
