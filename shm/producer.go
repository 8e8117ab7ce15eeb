package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Producer writes records into one sub-ring. It is not safe for
// concurrent use: one goroutine (in one process) produces per sub-ring.
type Producer struct {
	r        *Ring
	w        int
	area     []byte
	capacity int64

	write, read, heartbeat            *uint64
	dataSeq, dataWaiter               *uint32
	spaceSeq, spaceWaiter             *uint32
	state, consumerState, consumerPID *uint32
	consumerNS                        *uint64 // the consumer's pid namespace, 0 unknown
	ownNS                             uint64  // this process's pid namespace

	wc        uint64      // next write position; only this producer moves it
	published uint64      // last value stored to the shared write counter
	rc        uint64      // last read counter seen
	reserved  int64       // payload bytes reserved, -1 when none
	resPos    int64       // offset of the reserved record in area
	closed    atomic.Bool // set by Close, or by the Ring's Close

	stopOnce sync.Once
	stop     chan struct{}
	stopped  chan struct{}
}

// Producer attaches this process as the producer of sub-ring w: it claims
// the sub-ring (ErrBusy if another producer ever did), records its pid
// and pid namespace and starts the heartbeat. Call Close when done.
func (r *Ring) Producer(w int) (_ *Producer, err error) {
	if err := r.checkSub(w); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.catch(&err, debug.SetPanicOnFault(true))
	if r.mu.closed {
		return nil, fmt.Errorf("shm: ring %s: Producer after Close: %w", r.path, ErrOrder)
	}
	p := &Producer{
		r: r, w: w, area: r.area(w), capacity: r.hdr.Capacity,
		write: r.u64(w, ctlWrite), read: r.u64(w, ctlRead), heartbeat: r.u64(w, ctlHeartbeat),
		dataSeq: r.u32(w, ctlDataSeq), dataWaiter: r.u32(w, ctlDataWaiter),
		spaceSeq: r.u32(w, ctlSpaceSeq), spaceWaiter: r.u32(w, ctlSpaceWaiter),
		state: r.u32(w, ctlProdState), consumerState: r.u32(w, ctlConsState), consumerPID: r.u32(w, ctlConsPID),
		consumerNS: r.u64(w, ctlConsPIDNS), ownNS: pidNamespace(),
		reserved: -1,
		stop:     make(chan struct{}), stopped: make(chan struct{}),
	}
	if !atomic.CompareAndSwapUint32(p.state, StateNone, StateOpen) {
		return nil, fmt.Errorf("shm: ring %s sub-ring %d: producer pid %d attached before (state %d): %w",
			r.path, w, atomic.LoadUint32(r.u32(w, ctlProdPID)), atomic.LoadUint32(p.state), ErrBusy)
	}
	// The namespace first: a consumer that reads the pid may judge it
	// by the namespace stored beside it.
	atomic.StoreUint64(r.u64(w, ctlProdPIDNS), p.ownNS)
	atomic.StoreUint32(r.u32(w, ctlProdPID), uint32(os.Getpid()))
	atomic.AddUint64(p.heartbeat, 1)
	p.wc, p.rc = atomic.LoadUint64(p.write), atomic.LoadUint64(p.read)
	p.published = p.wc
	if err := r.checkCounters(w, p.wc, p.rc); err != nil {
		// Give the claim back: left open, with no heartbeat, it would
		// read as a dead producer instead of a corrupt sub-ring.
		atomic.StoreUint32(r.u32(w, ctlProdPID), 0)
		atomic.StoreUint64(r.u64(w, ctlProdPIDNS), 0)
		atomic.StoreUint32(p.state, StateNone)
		return nil, err
	}
	go p.beat()
	r.mu.producers = append(r.mu.producers, p)
	return p, nil
}

// beat advances the heartbeat until stopped, so the consumer can tell a
// producer that is busy (sampling a large batch) from one that is dead.
func (p *Producer) beat() {
	defer close(p.stopped)
	// A fault ends the heartbeat, and the consumer reads the producer as
	// dead; the producer's own next call reports the truncated file.
	var err error
	defer p.r.catch(&err, debug.SetPanicOnFault(true))
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			atomic.AddUint64(p.heartbeat, 1)
		}
	}
}

func (p *Producer) stopHeartbeat() {
	p.stopOnce.Do(func() {
		close(p.stop)
		<-p.stopped
	})
}

// Reserve returns a view of n bytes in the sub-ring to write a record
// into, blocking while the sub-ring is full. The view is 64-byte aligned
// and valid until Commit. A record that can never fit returns ErrTooLarge
// at once; a consumer that closed or died returns ErrConsumerGone; a done
// ctx returns its error.
func (p *Producer) Reserve(ctx context.Context, n int) (_ []byte, err error) {
	defer p.r.catch(&err, debug.SetPanicOnFault(true))
	return p.reserve(ctx, n)
}

// reserve is Reserve, unguarded.
func (p *Producer) reserve(ctx context.Context, n int) ([]byte, error) {
	if p.closed.Load() || p.reserved >= 0 {
		return nil, fmt.Errorf("shm: ring %s sub-ring %d: Reserve after Close or before Commit: %w", p.r.path, p.w, ErrOrder)
	}
	if n < 0 {
		return nil, fmt.Errorf("shm: ring %s sub-ring %d: Reserve of %d bytes: %w", p.r.path, p.w, n, ErrInvalid)
	}
	if int64(n) > p.capacity-RecordHeaderSize {
		return nil, fmt.Errorf("shm: record of %d bytes does not fit ring %s sub-ring %d of %d bytes (largest record %d bytes): %w",
			n, p.r.path, p.w, p.capacity, p.capacity-RecordHeaderSize, ErrTooLarge)
	}
	if atomic.LoadUint32(p.consumerState) == StateClosed {
		return nil, p.consumerGone("closed")
	}
	f := footprint(int64(n))
	pos := int64(p.wc % uint64(p.capacity))
	if tail := p.capacity - pos; tail < f {
		// The record does not fit before the end: mark the tail as
		// skipped and start again at offset 0. The marker is published
		// with the record, or before a wait for space.
		if err := p.waitSpace(ctx, tail); err != nil {
			return nil, err
		}
		binary.LittleEndian.PutUint64(p.area[pos:], WrapMarker)
		p.wc += uint64(tail)
		pos = 0
	}
	if err := p.waitSpace(ctx, f); err != nil {
		return nil, err
	}
	p.reserved, p.resPos = int64(n), pos
	start := pos + RecordHeaderSize
	return p.area[start : start+int64(n) : start+int64(n)], nil
}

// Commit publishes the first n bytes of the reserved view as one record
// (n may be less than reserved). The consumer sees the whole record or
// nothing.
func (p *Producer) Commit(n int) (err error) {
	defer func() {
		if errors.Is(err, ErrCorrupt) {
			p.Abandon() // the length word faulted: the next Reserve may write the error record
		}
	}()
	defer p.r.catch(&err, debug.SetPanicOnFault(true))
	return p.commit(n)
}

// commit is Commit, unguarded.
func (p *Producer) commit(n int) error {
	if p.closed.Load() {
		p.reserved = -1
		return fmt.Errorf("shm: ring %s sub-ring %d: Commit after Close: %w", p.r.path, p.w, ErrOrder)
	}
	if p.reserved < 0 {
		return fmt.Errorf("shm: ring %s sub-ring %d: Commit without Reserve: %w", p.r.path, p.w, ErrOrder)
	}
	if n < 0 || int64(n) > p.reserved {
		return fmt.Errorf("shm: ring %s sub-ring %d: Commit of %d bytes, %d reserved: %w", p.r.path, p.w, n, p.reserved, ErrInvalid)
	}
	hdr := p.area[p.resPos : p.resPos+RecordHeaderSize]
	binary.LittleEndian.PutUint64(hdr, uint64(n))
	clear(hdr[8:])
	p.wc += uint64(footprint(int64(n)))
	p.reserved = -1
	p.publish()
	return nil
}

// Abandon drops the reserved view without writing a record, so that the
// producer can write another (an error record, say) after it failed to
// fill the view. The space stays free for the next Reserve. Without a
// reservation it does nothing.
func (p *Producer) Abandon() { p.reserved = -1 }

// Write copies rec into the sub-ring as one record: Reserve, copy, Commit.
func (p *Producer) Write(ctx context.Context, rec []byte) (err error) {
	defer func() {
		if err != nil && p.reserved >= 0 {
			p.Abandon() // the copy faulted
		}
	}()
	defer p.r.catch(&err, debug.SetPanicOnFault(true))
	buf, err := p.reserve(ctx, len(rec))
	if err != nil {
		return err
	}
	copy(buf, rec)
	return p.commit(len(rec))
}

// publish makes every record written so far visible: the release store
// of the write counter orders the bytes before it.
func (p *Producer) publish() {
	if p.wc == p.published {
		return
	}
	atomic.StoreUint64(p.write, p.wc)
	p.published = p.wc
	signal(p.dataWaiter, p.dataSeq)
}

// free reports whether need bytes past the write position are free,
// refreshing the read counter.
func (p *Producer) free(need int64) bool {
	p.rc = atomic.LoadUint64(p.read)
	used := p.wc - p.rc
	return used <= uint64(p.capacity) && p.capacity-int64(used) >= need
}

// waitSpace blocks until need bytes past the write position are free:
// spin, then sleep on the space futex with the waiter flag up.
func (p *Producer) waitSpace(ctx context.Context, need int64) error {
	if used := p.wc - p.rc; used <= uint64(p.capacity) && p.capacity-int64(used) >= need {
		return nil // enough room by the last read counter seen
	}
	if p.free(need) {
		return nil
	}
	p.publish() // a pending wrap marker must reach the consumer, or it never frees space
	if spin(func() bool { return p.free(need) }) {
		return nil
	}
	defer atomic.StoreUint32(p.spaceWaiter, 0)
	for {
		atomic.StoreUint32(p.spaceWaiter, 1)
		seq := atomic.LoadUint32(p.spaceSeq)
		if p.free(need) {
			return nil
		}
		if err := p.r.checkCounters(p.w, p.wc, p.rc); err != nil {
			return err
		}
		if atomic.LoadUint32(p.consumerState) == StateClosed {
			return p.consumerGone("closed")
		}
		if gone, pid := p.consumerPIDGone(); gone {
			return p.consumerGone(fmt.Sprintf("pid %d is gone", pid))
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("shm: ring %s sub-ring %d: waiting for %d free bytes: %w", p.r.path, p.w, need, err)
		}
		futexSleep(p.spaceSeq, seq, waitSlice)
	}
}

// consumerPIDGone reports whether the consumer's pid names no live
// process, judged only when the consumer recorded the pid namespace it
// lives in and that is this producer's. Otherwise the pid means nothing
// here (a trainer on the host, this sampler in a container's namespace:
// no such process, or another one), and the consumer keeps no
// heartbeat: its Close (state 2), or the end of the producer's ctx when
// whoever runs the producer sees the consumer go, ends the wait instead.
func (p *Producer) consumerPIDGone() (gone bool, pid int) {
	// The consumer stored its namespace before its pid.
	pid = int(atomic.LoadUint32(p.consumerPID))
	if !pidComparable(atomic.LoadUint64(p.consumerNS), p.ownNS) {
		return false, pid
	}
	return pidGone(pid), pid
}

func (p *Producer) consumerGone(why string) error {
	return fmt.Errorf("shm: ring %s sub-ring %d: consumer %s: %w", p.r.path, p.w, why, ErrConsumerGone)
}

// Close publishes what was committed, marks the sub-ring producer-closed
// (the consumer reads io.EOF once drained), wakes the consumer and stops
// the heartbeat. A pending reservation is dropped. Close is idempotent.
func (p *Producer) Close() (err error) {
	if p.closed.Swap(true) {
		return nil
	}
	p.reserved = -1
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if p.r.mu.closed {
		return nil // the ring is unmapped; its Close stopped the heartbeat
	}
	defer p.stopHeartbeat() // after a fault too
	defer p.r.catch(&err, debug.SetPanicOnFault(true))
	p.publish()
	atomic.StoreUint32(p.state, StateClosed)
	atomic.AddUint32(p.dataSeq, 1)
	futexWakeAll(p.dataSeq)
	return nil
}
