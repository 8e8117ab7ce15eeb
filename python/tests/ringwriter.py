"""The creator and producer side of a ring file, written from shm/doc.go
for the consumer's tests (the Go producer is exercised by the node
integration test). Also runnable as a child process:

    python3 ringwriter.py PATH W N_RECORDS SIZE HOLD_S

attaches as the producer of sub-ring W, writes N records of SIZE bytes
(byte k of record i = (i + k) % 251), beats its heartbeat, then either
sleeps HOLD_S seconds and closes, or (HOLD_S < 0) sleeps forever (the
test kills it).
"""

import mmap
import os
import struct
import sys
import threading
import time

if __name__ == "__main__":
    # A child producer needs graphnode's ring constants, not torch: load the
    # package's modules without running its __init__ (which imports torch
    # and would cost the child seconds).
    import types
    _pkg = types.ModuleType("graphnode")
    _pkg.__path__ = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "graphnode")]
    sys.modules["graphnode"] = _pkg

from graphnode import _sys  # noqa: E402
from graphnode.ring import (CTL_CONS_PID, CTL_CONS_PID_NS, CTL_CONS_STATE, CTL_DATA_SEQ, CTL_DATA_WAITER, CTL_HEARTBEAT, CTL_PROD_PID,  # noqa: E402
                            CTL_PROD_PID_NS, CTL_PROD_STATE, CTL_READ, CTL_SPACE_SEQ, CTL_SPACE_WAITER, CTL_WRITE, CTL_SIZE,
                            HEADER_SIZE, MAGIC, RECORD_HEADER_SIZE, STATE_CLOSED, STATE_OPEN, WRAP_MARKER,
                            layout_for)


def create(path, w, capacity, creator_pid=None, flags=0):
    """Create a ring file of w sub-rings of capacity bytes each (a
    multiple of 4096), header written, as shm.Create does, except that
    flags are the caller's (0: liveness by the creator pid, as a 1.0 file;
    shm.Create sets FLAG_CREATOR_LOCK and holds the lock, which a test
    does itself)."""
    data, size = layout_for(w, capacity)
    hdr = bytearray(HEADER_SIZE)
    hdr[0:8] = MAGIC
    struct.pack_into("<HHIIIQQQII", hdr, 8, 1, 2, HEADER_SIZE, w, CTL_SIZE, capacity, data, size,
                     os.getpid() if creator_pid is None else creator_pid, RECORD_HEADER_SIZE)
    struct.pack_into("<QI", hdr, 56, time.time_ns(), flags)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, size)
        os.pwrite(fd, bytes(hdr), 0)
    finally:
        os.close(fd)
    return path


def payload(i, size):
    return bytes((i + k) % 251 for k in range(size))


class Producer:
    """Producer of sub-ring w of the ring file at path."""

    def __init__(self, path, w, heartbeat=True, attach=True):
        fd = os.open(path, os.O_RDWR)
        try:
            self.mm = mmap.mmap(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        mv = memoryview(self.mm)
        self.u64, self.u32 = mv.cast("Q"), mv.cast("I")
        self.base = _sys_base(self.mm)
        (_, _, capacity, data) = struct.unpack_from("<IIQQ", self.mm, 16)
        self.w, self.capacity = w, capacity
        self.area = data + w * capacity
        c = HEADER_SIZE + w * CTL_SIZE
        self.o = {k: c + v for k, v in dict(write=CTL_WRITE, data_seq=CTL_DATA_SEQ, space_waiter=CTL_SPACE_WAITER,
                                              state=CTL_PROD_STATE, pid=CTL_PROD_PID, pid_ns=CTL_PROD_PID_NS,
                                              hb=CTL_HEARTBEAT, read=CTL_READ,
                                              space_seq=CTL_SPACE_SEQ, data_waiter=CTL_DATA_WAITER,
                                              cons_state=CTL_CONS_STATE, cons_pid=CTL_CONS_PID,
                                              cons_pid_ns=CTL_CONS_PID_NS).items()}
        self.wc = self.u64[self.o["write"] // 8]
        self._stop = threading.Event()
        if attach:
            self.u64[self.o["pid_ns"] // 8] = _sys.pid_namespace()
            self.u32[self.o["pid"] // 4] = os.getpid()
            self.u32[self.o["state"] // 4] = STATE_OPEN
        if heartbeat:
            self._beat = threading.Thread(target=self._beats, daemon=True)
            self._beat.start()

    def _beats(self):
        while not self._stop.wait(0.05):
            i = self.o["hb"] // 8
            self.u64[i] = self.u64[i] + 1

    def _free(self):
        return self.capacity - (self.wc - self.u64[self.o["read"] // 8])

    def _wait_space(self, need, timeout=10.0):
        deadline = time.monotonic() + timeout
        while self._free() < need:
            if self.u32[self.o["cons_state"] // 4] == STATE_CLOSED:
                raise RuntimeError("consumer gone")
            if time.monotonic() > deadline:
                raise TimeoutError("no room for %d bytes" % need)
            self.u32[self.o["space_waiter"] // 4] = 1
            _sys.full_fence()
            seq = self.u32[self.o["space_seq"] // 4]
            if self._free() >= need:
                break
            _sys.futex_wait(self.base + self.o["space_seq"], seq, 0.05)
        self.u32[self.o["space_waiter"] // 4] = 0

    def write(self, data, publish=True):
        """Write one record (waiting for room), and publish it."""
        n = len(data)
        need = RECORD_HEADER_SIZE + (n + 63) // 64 * 64
        if need > self.capacity:
            raise ValueError("record of %d bytes never fits %d" % (n, self.capacity))
        pos = self.wc % self.capacity
        if pos + need > self.capacity:
            self._wait_space(self.capacity - pos)
            self.u64[(self.area + pos) // 8] = WRAP_MARKER
            self.wc += self.capacity - pos
            pos = 0
            self.u64[self.o["write"] // 8] = self.wc  # publish the marker: the consumer frees the tail
        self._wait_space(need)
        self.u64[(self.area + pos) // 8] = n
        start = self.area + pos + RECORD_HEADER_SIZE
        self.mm[start:start + n] = data
        self.wc += need
        if publish:
            self.publish()

    def publish(self):
        """Store the write counter (release), then wake a sleeping consumer."""
        self.u64[self.o["write"] // 8] = self.wc
        _sys.full_fence()
        if self.u32[self.o["data_waiter"] // 4]:
            i = self.o["data_seq"] // 4
            self.u32[i] = (self.u32[i] + 1) & 0xFFFFFFFF
            _sys.futex_wake(self.base + self.o["data_seq"])

    def close(self):
        self._stop.set()
        self.u32[self.o["state"] // 4] = STATE_CLOSED
        i = self.o["data_seq"] // 4
        self.u32[i] = (self.u32[i] + 1) & 0xFFFFFFFF
        _sys.futex_wake(self.base + self.o["data_seq"])

    def stop_heartbeat(self):
        self._stop.set()

    def release(self):
        """Stop beating and unmap (the test's end of this producer)."""
        self._stop.set()
        if hasattr(self, "_beat"):
            self._beat.join()
        self.u64.release()
        self.u32.release()
        self.mm.close()


def _sys_base(mm):
    import ctypes
    return ctypes.addressof(ctypes.c_char.from_buffer(mm))


def main(argv):
    path, w, n, size, hold = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), float(argv[4])
    p = Producer(path, w)
    for i in range(n):
        p.write(payload(i, size))
    if hold < 0:
        while True:
            time.sleep(3600)
    time.sleep(hold)
    p.close()


if __name__ == "__main__":
    main(sys.argv[1:])
