"""Consumer side of a shared-memory ring file, as shm/doc.go specifies it.

A ring file holds W single-producer single-consumer sub-rings of
variable-size records. This module maps it read-write (the consumer
stores its read counter, state, pid and futex words in its own cache
line of each control block), validates the header exactly as shm's
decodeHeader does, and hands out records in place: Consumer.next(w)
returns the payload's offset and length in the mapping, Consumer.release(w)
gives the bytes back to the producer.

Memory ordering. Counters are little-endian uint64 and futex words uint32
at fixed, aligned offsets; they are read and written through
memoryview.cast("Q") / cast("I") element access, which CPython compiles
to one aligned 8- (4-) byte load or store (a fixed-size memcpy). On
x86-64 such a load is single-copy atomic and has acquire semantics, and
such a store has release semantics (TSO), so:

  * loading the write counter, then reading the record bytes below it in
    later, separate C calls sees the complete record (acquire);
  * reading the record, then storing the read counter, never lets the
    producer overwrite bytes still being read (release).

The one reordering TSO allows, a load passing an earlier store, matters
only for the waiter-flag handshake; _sys.full_fence() is issued there (see
_sys). Only little-endian 64-bit hosts are supported; Ring checks.

Liveness follows shm/doc.go: with no record pending, a producer that
closed is end of stream (EndOfStream); one whose heartbeat stood still
for DEAD_AFTER, or whose pid is gone and heartbeat stood still for
GONE_AFTER, is dead (ProducerDeadError naming the sub-ring and pid);
before any producer attached, only the creator's end counts: in a file
with FLAG_CREATOR_LOCK (format 1.1) the creator holds a shared flock(2) on
it while it lives, so the creator is gone when an exclusive lock can be
taken (neither a reused pid nor another pid namespace fools that); in a
1.0 file, when its pid is gone. A pid is judged only when the producer
recorded its pid namespace (format 1.2) and it is this process's: a pid of
another namespace (the node in a container, the trainer on the host)
names another process here, or none, so there the heartbeat alone
decides. The consumer records its own namespace before its pid, for the
producer's judgement of it.

A Ring and its Consumer are not safe for concurrent use from several
threads, except that different threads may each own different sub-rings.
"""

import ctypes
import fcntl
import mmap
import os
import struct
import sys

from . import _sys
from .errors import CorruptError, LoaderError, VersionError

# Format constants (shm/layout.go).
MAGIC = b"GNSHRING"
MAJOR_VERSION = 1
LINE_SIZE = 64
PAGE_SIZE = 4096
HEADER_SIZE = 256
CTL_SIZE = 256
RECORD_HEADER_SIZE = 64
WRAP_MARKER = 0xFFFFFFFFFFFFFFFF
MAX_SUB_RINGS = 4096
MIN_CAPACITY = PAGE_SIZE
_MAX_INT64 = (1 << 63) - 1

# Control block offsets (relative to the block).
CTL_WRITE, CTL_DATA_SEQ, CTL_SPACE_WAITER, CTL_PROD_STATE, CTL_PROD_PID, CTL_HEARTBEAT = 0, 8, 12, 16, 20, 24
CTL_READ, CTL_SPACE_SEQ, CTL_DATA_WAITER, CTL_CONS_STATE, CTL_CONS_PID = 64, 72, 76, 80, 84
# Pid namespaces (format 1.2; zero before, or when unknown): the uint64
# inode number of /proc/self/ns/pid of the producer and of the consumer.
CTL_PROD_PID_NS, CTL_CONS_PID_NS = 32, 88
STATE_NONE, STATE_OPEN, STATE_CLOSED = 0, 1, 2

# Header flags (the uint32 at offset 64, format 1.1): the creator holds a
# shared flock on the file while it lives.
FLAG_CREATOR_LOCK = 1

# Waiting and liveness (shm/wait_linux.go).
SPIN_FOR = 20e-6     # poll this long before sleeping (Python polls cost ~1 us)
WAIT_SLICE = 0.05    # one futex sleep: the cadence of liveness checks
DEAD_AFTER = 5.0     # heartbeat still this long: dead, whatever the pid says
GONE_AFTER = 0.25    # pid gone and heartbeat still this long: dead

_HEADER = struct.Struct("<8sHHIIIQQQII")  # through the record header size field


def layout_for(w, capacity):
    """(data offset, file size) of a ring of w sub-rings of capacity bytes."""
    data = -(-(HEADER_SIZE + w * CTL_SIZE) // PAGE_SIZE) * PAGE_SIZE
    return data, data + w * capacity


def decode_header(b, file_size):
    """Validate the first bytes b of a ring file of file_size bytes, as
    shm's decodeHeader does, and return a dict of its fields. Raises
    CorruptError (every problem joined) or VersionError."""
    b = bytes(b[:HEADER_SIZE])
    if len(b) < len(MAGIC) or b[:len(MAGIC)] != MAGIC:
        raise CorruptError("header: bad magic %r, want %r" % (b[:len(MAGIC)], MAGIC))
    if len(b) < HEADER_SIZE:
        raise CorruptError("header: truncated at %d bytes, want %d" % (len(b), HEADER_SIZE))
    (_, major, minor, hsize, w, ctl, capacity, data, size, creator, rec_hdr) = _HEADER.unpack_from(b)
    created_ns, flags = struct.unpack_from("<QI", b, 56)
    if major != MAJOR_VERSION:
        raise VersionError("header: major version %d (minor %d), this client reads %d" % (major, minor, MAJOR_VERSION))
    bad = []
    if hsize != HEADER_SIZE:
        bad.append("header size %d, want %d" % (hsize, HEADER_SIZE))
    if ctl != CTL_SIZE:
        bad.append("control block size %d, want %d" % (ctl, CTL_SIZE))
    if rec_hdr != RECORD_HEADER_SIZE:
        bad.append("record header size %d, want %d" % (rec_hdr, RECORD_HEADER_SIZE))
    if w == 0 or w > MAX_SUB_RINGS:
        bad.append("%d sub-rings, want 1..%d" % (w, MAX_SUB_RINGS))
    cap_max = _MAX_INT64 // MAX_SUB_RINGS
    if capacity < MIN_CAPACITY or capacity % PAGE_SIZE or capacity > cap_max:
        bad.append("sub-ring capacity %d is not a multiple of %d in [%d, %d]" % (capacity, PAGE_SIZE, MIN_CAPACITY, cap_max))
    if not bad:
        want_data, want_size = layout_for(w, capacity)
        if data != want_data:
            bad.append("data offset %d, want %d for %d sub-rings" % (data, want_data, w))
        if size != want_size:
            bad.append("file size field %d, want %d" % (size, want_size))
        if file_size != want_size:
            bad.append("file is %d bytes, header says %d" % (file_size, want_size))
    if bad:
        raise CorruptError("header: " + "; ".join(bad))
    return dict(major=major, minor=minor, sub_rings=w, capacity=capacity, data_offset=data,
                file_size=size, creator_pid=creator, created_ns=created_ns, flags=flags)


class Ring:
    """One mapped ring file. ``mem`` is a writable memoryview of the whole
    file: torch.frombuffer(ring.mem, offset=..., count=...) views records
    without a copy, and every such tensor keeps the mapping alive."""

    def __init__(self, path):
        if sys.byteorder != "little" or struct.calcsize("P") != 8:
            raise LoaderError("ring: %s: needs a little-endian 64-bit host" % path)
        self.path = path
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as e:
            raise LoaderError("ring: open %s: %s" % (path, e.strerror or e)) from e
        try:
            size = os.fstat(fd).st_size
            if size < HEADER_SIZE:
                raise CorruptError("ring: %s: header: truncated at %d bytes, want %d" % (path, size, HEADER_SIZE))
            mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        try:
            hdr = decode_header(mm[:HEADER_SIZE], size)
        except CorruptError as e:
            mm.close()
            os.close(fd)
            raise type(e)("ring: %s: %s" % (path, e)) from None
        # Kept open (not inherited by exec'd children) to probe the
        # creator's lock: see creator_gone.
        self._fd = fd
        self.header = hdr
        self.sub_rings = hdr["sub_rings"]
        self.capacity = hdr["capacity"]
        self.data_offset = hdr["data_offset"]
        self.creator_pid = hdr["creator_pid"]
        self._mm = mm
        self.mem = memoryview(mm)
        self.u64 = self.mem.cast("Q")
        self.u32 = self.mem.cast("I")
        # The mapping's address, for futex calls. The ctypes object holds a
        # buffer export only for this line; the address stays valid while
        # the mapping does (until close()).
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        self._consumer = None

    def creator_gone(self):
        """Whether the ring's creator has ended, as shm's creatorGone: with
        FLAG_CREATOR_LOCK, whether an exclusive flock can be taken (and it
        is dropped again at once), that is, nobody holds the creator's
        shared lock; in a 1.0 file, whether the creator pid is gone."""
        if not self.header["flags"] & FLAG_CREATOR_LOCK or self._fd is None:
            return _sys.pid_gone(self.creator_pid)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # held (or unknown): not known to be gone
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        return True

    def check_size(self):
        """Raise CorruptError when the file is shorter than the mapping:
        another process (any in the rings group maps it read-write)
        truncated it, and touching the pages past its end would end this
        process with SIGBUS. The consumer checks before it touches the
        ring; a truncation within microseconds of an access still faults,
        as it does in any process mapping the file."""
        if self._fd is None or self._mm is None:
            return
        size = os.fstat(self._fd).st_size
        if size < len(self._mm):
            raise CorruptError("ring: %s: the file is now %d bytes, shorter than its %d-byte mapping: another process truncated it"
                               % (self.path, size, len(self._mm)))

    def ctl(self, w):
        """Byte offset of sub-ring w's control block."""
        return HEADER_SIZE + w * CTL_SIZE

    def area(self, w):
        """Byte offset of sub-ring w's record area."""
        return self.data_offset + w * self.capacity

    def consumer(self):
        """Attach this process as the ring's consumer (once per ring)."""
        if self._consumer is not None:
            raise LoaderError("ring: %s: consumer attached twice" % self.path)
        from .consumer import Consumer
        self._consumer = Consumer(self)
        return self._consumer

    @property
    def closed(self):
        return self._mm is None

    def close(self):
        """Close the consumer (waking blocked producers) and unmap. Tensors
        still viewing the ring keep the mapping alive (mmap refuses to
        unmap while they exist) and it is unmapped when the last one is
        freed, so a stale view reads old bytes, never unmapped memory.
        Idempotent."""
        if self._mm is None:
            return
        if self._consumer is not None:
            self._consumer.close()
        mm = self._mm
        self._mm = None
        for v in (self.u64, self.u32):
            v.release()
        self.u64 = self.u32 = None
        self.mem = None  # tensors may still reference it: not released, only dropped
        fd, self._fd = self._fd, None
        os.close(fd)
        try:
            mm.close()
        except BufferError:
            pass  # exported to live tensors: unmapped when they are freed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

