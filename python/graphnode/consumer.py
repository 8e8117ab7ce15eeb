"""The consumer of a ring file: reads each sub-ring's records in place.

Protocol and memory ordering: see ring.py and shm/doc.go. Per sub-ring
the caller alternates next(w) and release(w); the payload a next(w)
returns is valid until release(w) (the producer may overwrite it after).
"""

import os
import time

from . import _sys
from .errors import CorruptError, EndOfStream, LoaderError, ProducerDeadError
from .ring import (CTL_CONS_PID, CTL_CONS_PID_NS, CTL_CONS_STATE, CTL_DATA_SEQ, CTL_DATA_WAITER, CTL_HEARTBEAT,
                   CTL_PROD_PID, CTL_PROD_PID_NS, CTL_PROD_STATE, CTL_READ, CTL_SPACE_SEQ, CTL_SPACE_WAITER, CTL_WRITE, DEAD_AFTER, GONE_AFTER,
                   LINE_SIZE, RECORD_HEADER_SIZE, SPIN_FOR, STATE_CLOSED, STATE_NONE, STATE_OPEN, WAIT_SLICE,
                   WRAP_MARKER)

_MASK64 = (1 << 64) - 1


def footprint(n):
    """Bytes a record of n payload bytes takes in a record area."""
    return RECORD_HEADER_SIZE + (n + LINE_SIZE - 1) // LINE_SIZE * LINE_SIZE


def check_record(word, pos, capacity, avail):
    """Validate a length word read at pos of a record area, with avail
    published bytes from pos on (shm's checkRecord). Returns (n, skip):
    n = -1 for a wrap marker. Raises CorruptError."""
    if word == WRAP_MARKER:
        if pos == 0:
            raise CorruptError("offset 0: wrap marker at the start of the record area")
        if avail < capacity - pos:
            raise CorruptError("offset %d: wrap marker skips %d bytes, only %d published" % (pos, capacity - pos, avail))
        return -1, capacity - pos
    if word > capacity - pos - RECORD_HEADER_SIZE:
        raise CorruptError("offset %d: record length %d runs past the end of the %d-byte record area" % (pos, word, capacity))
    f = footprint(word)
    if f > avail:
        raise CorruptError("offset %d: record of %d bytes needs %d, only %d published" % (pos, word, f, avail))
    return word, f


class _Sub:
    """The consumer's state for one sub-ring; indices are into the ring's
    u64 / u32 views."""
    __slots__ = ("write", "read", "heartbeat", "data_seq", "data_waiter", "space_seq", "space_waiter",
                 "state", "pid", "pid_ns", "cons_state", "cons_pid", "cons_pid_ns", "area", "rc", "wc", "held", "next",
                 "hb_seen", "hb_changed")


class Consumer:
    """Reads every sub-ring of one Ring. Create it with Ring.consumer()."""

    def __init__(self, ring):
        self.ring = ring
        self.capacity = ring.capacity
        self._closed = False
        u64, u32 = ring.u64, ring.u32
        pid = self._pid = os.getpid()
        ns = self._pid_ns = _sys.pid_namespace()
        self._subs = []
        for w in range(ring.sub_rings):
            c = ring.ctl(w)
            s = _Sub()
            s.write, s.read, s.heartbeat = (c + CTL_WRITE) // 8, (c + CTL_READ) // 8, (c + CTL_HEARTBEAT) // 8
            s.data_seq, s.data_waiter = (c + CTL_DATA_SEQ) // 4, (c + CTL_DATA_WAITER) // 4
            s.space_seq, s.space_waiter = (c + CTL_SPACE_SEQ) // 4, (c + CTL_SPACE_WAITER) // 4
            s.state, s.pid = (c + CTL_PROD_STATE) // 4, (c + CTL_PROD_PID) // 4
            s.cons_state, s.cons_pid = (c + CTL_CONS_STATE) // 4, (c + CTL_CONS_PID) // 4
            s.pid_ns, s.cons_pid_ns = (c + CTL_PROD_PID_NS) // 8, (c + CTL_CONS_PID_NS) // 8
            s.area = ring.area(w)
            # Go attaches with a compare-and-swap; Python has none, so this
            # is a check then a store: two consumers racing to attach within
            # microseconds could both succeed. The node hands a ring to one
            # trainer, so only a misuse can race.
            if u32[s.cons_state] != STATE_NONE:
                self._unclaim(self._subs)
                raise LoaderError("ring: %s sub-ring %d: consumer pid %d attached before (state %d)"
                                  % (ring.path, w, u32[s.cons_pid], u32[s.cons_state]))
            u32[s.cons_state] = STATE_OPEN
            # The namespace first: a producer judges the pid by it.
            u64[s.cons_pid_ns] = ns
            u32[s.cons_pid] = pid
            s.rc, s.wc = u64[s.read], u64[s.write]
            try:
                self._check_counters(w, s.wc, s.rc)
            except CorruptError:
                self._unclaim(self._subs + [s])
                raise
            s.held, s.next = False, 0
            s.hb_seen, s.hb_changed = 0, None
            self._subs.append(s)

    def _unclaim(self, subs):
        """Gives back the claims of an attach that failed, as Go's
        Consumer does, so that producers do not wait on a consumer that
        never reads and a later attach is not refused as busy."""
        u32, u64 = self.ring.u32, self.ring.u64
        for t in subs:
            u32[t.cons_pid] = 0
            u64[t.cons_pid_ns] = 0
            u32[t.cons_state] = STATE_NONE

    def _check_counters(self, w, wc, rc):
        if wc % LINE_SIZE or rc % LINE_SIZE or (wc - rc) & _MASK64 > self.capacity:
            raise CorruptError("ring: %s: sub-ring %d: write counter %d, read counter %d (capacity %d)"
                               % (self.ring.path, w, wc, rc, self.capacity))

    def _forked(self):
        """Whether this is a child forked after the attach. Its copy of the
        read counters is private, so reading would hand out records twice
        and release bytes the attaching process still reads; closing would
        mark the ring consumer-closed for that process too."""
        return os.getpid() != self._pid

    def _sub(self, w):
        if self._forked():
            raise LoaderError("ring: %s sub-ring %d: consumer attached by pid %d, used in pid %d (a forked "
                              "child, such as a DataLoader worker): read a ring in the process that opened it"
                              % (self.ring.path, w, self._pid, os.getpid()))
        if self._closed or self.ring.closed:
            raise LoaderError("ring: %s sub-ring %d: consumer is closed" % (self.ring.path, w))
        if not 0 <= w < len(self._subs):
            raise LoaderError("ring: %s: sub-ring %d of %d" % (self.ring.path, w, len(self._subs)))
        self.ring.check_size()
        return self._subs[w]

    def next(self, w, timeout=None):
        """Wait for the next record of sub-ring w and return its payload's
        (offset, length) in ring.mem. Raises EndOfStream when the producer
        closed and every record was read, ProducerDeadError when it died
        with nothing pending (within about a second), CorruptError for bad
        ring bytes, TimeoutError after timeout seconds (None: no limit)."""
        s = self._sub(w)
        if s.held:
            raise LoaderError("ring: %s sub-ring %d: next before release" % (self.ring.path, w))
        rec = self._poll(w, s)
        if rec is not None:
            return rec
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < SPIN_FOR:
            rec = self._poll(w, s)
            if rec is not None:
                return rec
        u32 = self.ring.u32
        deadline = None if timeout is None else time.monotonic() + timeout
        addr = self.ring.base + 4 * s.data_seq
        try:
            while True:
                u32[s.data_waiter] = 1
                _sys.full_fence()  # the flag store must be visible before the counter load below
                seq = u32[s.data_seq]
                rec = self._poll(w, s)
                if rec is not None:
                    return rec
                now = time.monotonic()
                self.ring.check_size()  # truncated while this waited
                try:
                    self._producer_gone(w, s, now)
                except (EndOfStream, ProducerDeadError):
                    # A record published between the poll above and the
                    # verdict (the producer's last, just before it died)
                    # is read first, as the Go consumer does.
                    rec = self._poll(w, s)
                    if rec is not None:
                        return rec
                    raise
                slice_ = WAIT_SLICE
                if deadline is not None:
                    if now >= deadline:
                        raise TimeoutError("ring: %s sub-ring %d: no record within %.3gs" % (self.ring.path, w, timeout))
                    slice_ = min(slice_, deadline - now)
                _sys.futex_wait(addr, seq, slice_)
        finally:
            if not self.ring.closed and not self._truncated():
                u32[s.data_waiter] = 0

    def _truncated(self):
        try:
            self.ring.check_size()
        except CorruptError:
            return True
        return False

    def _poll(self, w, s):
        """The next published record of sub-ring w, skipping wrap markers,
        or None. Every counter and length word is validated before use."""
        u64 = self.ring.u64
        cap = self.capacity
        while True:
            if s.wc == s.rc:
                s.wc = u64[s.write]  # acquire: the records below it are complete
                if s.wc == s.rc:
                    return None
                self._check_counters(w, s.wc, s.rc)
            pos = s.rc % cap
            word = u64[(s.area + pos) // 8]
            try:
                n, skip = check_record(word, pos, cap, (s.wc - s.rc) & _MASK64)
            except CorruptError as e:
                raise CorruptError("ring: %s sub-ring %d: %s" % (self.ring.path, w, e)) from None
            if n < 0:  # wrap marker: nothing to hand out, free the tail now
                s.rc += skip
                self._publish_read(s)
                continue
            s.held, s.next = True, s.rc + skip
            return s.area + pos + RECORD_HEADER_SIZE, n

    def _publish_read(self, s):
        """Store the read counter (release) and wake a producer waiting for
        room, if its flag says it may sleep."""
        u32 = self.ring.u32
        self.ring.u64[s.read] = s.rc
        _sys.full_fence()  # the counter store must be visible before the flag load
        if u32[s.space_waiter]:
            u32[s.space_seq] = (u32[s.space_seq] + 1) & 0xFFFFFFFF  # only the consumer writes it
            _sys.futex_wake(self.ring.base + 4 * s.space_seq)

    def _producer_gone(self, w, s, now):
        """Raise EndOfStream or ProducerDeadError when sub-ring w's producer
        closed or died; the caller found no record pending."""
        u32 = self.ring.u32
        st = u32[s.state]
        if st == STATE_CLOSED:
            # The producer stored its last write counter before its state.
            if self.ring.u64[s.write] == s.rc:
                raise EndOfStream("ring: %s sub-ring %d: producer closed, every record read" % (self.ring.path, w))
            return
        pid = u32[s.pid]
        if st == STATE_NONE or pid == 0:
            creator = self.ring.creator_pid
            if self.ring.creator_gone():
                raise ProducerDeadError("ring: %s sub-ring %d: no producer attached and creator pid %d is gone"
                                        % (self.ring.path, w, creator), w, creator)
            return
        hb = self.ring.u64[s.heartbeat]
        if s.hb_changed is None or hb != s.hb_seen:
            s.hb_seen, s.hb_changed = hb, now
        stale = now - s.hb_changed
        if stale > DEAD_AFTER:
            raise ProducerDeadError("ring: %s sub-ring %d: producer pid %d sent no heartbeat for %dms"
                                    % (self.ring.path, w, pid, stale * 1000), w, pid)
        # The producer stored its namespace before its pid, read above.
        if stale > GONE_AFTER and _sys.pid_comparable(self.ring.u64[s.pid_ns], self._pid_ns) and _sys.pid_gone(pid):
            raise ProducerDeadError("ring: %s sub-ring %d: producer pid %d is gone (no heartbeat for %dms)"
                                    % (self.ring.path, w, pid, stale * 1000), w, pid)

    def release(self, w):
        """Hand the record last returned by next(w) back to the producer;
        its bytes must not be used afterwards."""
        s = self._sub(w)
        if not s.held:
            raise LoaderError("ring: %s sub-ring %d: release without a record from next" % (self.ring.path, w))
        # held drops last: a release cut short (KeyboardInterrupt) is still
        # held, and a second release repeats the same stores.
        s.rc = s.next
        self._publish_read(s)
        s.held = False

    def holds(self, w):
        """Whether a record of sub-ring w was returned by next and not
        released or given back yet."""
        return self._sub(w).held

    def unread(self, w):
        """Give the record last returned by next(w) back unread: the next
        next(w) returns it again (for a reader interrupted before it used
        the record)."""
        s = self._sub(w)
        if not s.held:
            raise LoaderError("ring: %s sub-ring %d: unread without a record from next" % (self.ring.path, w))
        s.held = False

    def close(self):
        """Mark every sub-ring consumer-closed and wake its producer, whose
        waits then end with ErrConsumerGone. Idempotent. In a forked child
        it only forgets the consumer: the ring stays open for the process
        that attached."""
        if self._closed or self.ring.closed or self._forked() or self._truncated():
            self._closed = True
            return
        self._closed = True
        u32 = self.ring.u32
        for s in self._subs:
            u32[s.cons_state] = STATE_CLOSED
            u32[s.space_seq] = (u32[s.space_seq] + 1) & 0xFFFFFFFF
            _sys.futex_wake(self.ring.base + 4 * s.space_seq)
