"""The ring consumer against a producer written from shm/doc.go (in this
process, and in a child process for futex wakes across processes and for
liveness)."""

import fcntl
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from graphnode import consumer as consumer_mod
from graphnode.errors import CorruptError, EndOfStream, LoaderError, ProducerDeadError, VersionError
from graphnode.ring import DEAD_AFTER, FLAG_CREATOR_LOCK, HEADER_SIZE, STATE_CLOSED, Ring, decode_header

from .ringwriter import Producer, create, payload

WRITER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ringwriter.py")


def read_all(cons, ring, w, n):
    out = []
    for _ in range(n):
        off, ln = cons.next(w, timeout=10)
        out.append(bytes(ring.mem[off:off + ln]))
        cons.release(w)
    return out


class RingTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="graphnode-ring-")
        self.path = os.path.join(self.dir, "t.ring")
        self.children = []
        self.cleanup = []

    def tearDown(self):
        for fn in reversed(self.cleanup):
            fn()
        for p in self.children:
            if p.poll() is None:
                p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def open(self):
        ring = Ring(self.path)
        self.cleanup.append(ring.close)
        return ring, ring.consumer()

    def producer(self, w, **kw):
        p = Producer(self.path, w, **kw)
        self.cleanup.append(p.release)
        return p

    def child(self, w, n, size, hold):
        p = subprocess.Popen([sys.executable, WRITER, self.path, str(w), str(n), str(size), str(hold)])
        self.children.append(p)
        return p


class HeaderTest(RingTestCase):
    def test_valid_and_invalid(self):
        create(self.path, 3, 8192)
        with open(self.path, "rb") as f:
            raw = f.read()
        h = decode_header(raw, len(raw))
        self.assertEqual((h["sub_rings"], h["capacity"], h["data_offset"], h["file_size"], h["creator_pid"]),
                         (3, 8192, 4096, 4096 + 3 * 8192, os.getpid()))

        def patched(off, fmt, v):
            b = bytearray(raw)
            struct.pack_into(fmt, b, off, v)
            return bytes(b)
        cases = [
            ("magic", patched(0, "<8s", b"GNSHRINX"), len(raw), CorruptError, "bad magic"),
            ("major", patched(8, "<H", 2), len(raw), VersionError, "major version 2"),
            ("header size", patched(12, "<I", 128), len(raw), CorruptError, "header size 128, want 256"),
            ("sub-rings", patched(16, "<I", 0), len(raw), CorruptError, "0 sub-rings"),
            ("capacity", patched(24, "<Q", 5000), len(raw), CorruptError, "capacity 5000 is not a multiple of 4096"),
            ("data offset", patched(32, "<Q", 8192), len(raw), CorruptError, "data offset 8192, want 4096"),
            ("file size", raw, len(raw) - 4096, CorruptError, "file is 24576 bytes, header says 28672"),
            ("truncated", raw[:100], 100, CorruptError, "truncated at 100 bytes"),
        ]
        for name, b, size, exc, text in cases:
            with self.subTest(name):
                with self.assertRaisesRegex(exc, text):
                    decode_header(b, size)

    def test_open_names_file(self):
        with open(self.path, "wb") as f:
            f.write(b"\0" * HEADER_SIZE)
        with self.assertRaisesRegex(CorruptError, "ring: %s: header: bad magic" % self.path):
            Ring(self.path)
        # A ring that is not there is a LoaderError too, naming the file.
        missing = os.path.join(self.dir, "gone.ring")
        with self.assertRaisesRegex(LoaderError, "ring: open %s: No such file or directory" % missing):
            Ring(missing)


class ConsumeTest(RingTestCase):
    def test_records_in_order_across_wraps(self):
        # 4096-byte areas, records of 1000 bytes (1088 with header): a
        # wrap marker every few records. Sub-ring 1 gets other sizes.
        create(self.path, 2, 4096)
        ring, cons = self.open()
        p0, p1 = self.producer(0, heartbeat=False), self.producer(1, heartbeat=False)
        sizes = [1000, 0, 1, 63, 64, 65, 2000, 7]
        for i in range(20):
            p0.write(payload(i, 1000))
            p1.write(payload(i, sizes[i % len(sizes)]))
            self.assertEqual(read_all(cons, ring, 0, 1), [payload(i, 1000)])
            self.assertEqual(read_all(cons, ring, 1, 1), [payload(i, sizes[i % len(sizes)])])
        self.assertGreater(ring.u64[(HEADER_SIZE + 64) // 8], 5 * 4096)  # read counter went round several times
        p0.close()
        with self.assertRaises(EndOfStream):
            cons.next(0, timeout=1)

    def test_truncated_ring(self):
        """A ring file truncated under the mapping (by another process) is a
        CorruptError naming it from next, release and the wait for a
        record, not a SIGBUS that ends the trainer; close touches nothing
        then."""
        for size in (0, 4096):
            with self.subTest(size=size):
                create(self.path, 2, 4096)
                ring, cons = self.open()
                p = self.producer(0, heartbeat=False)
                p.write(payload(0, 100))
                p.write(payload(1, 100))
                off, n = cons.next(0, timeout=1)
                self.assertEqual(bytes(ring.mem[off:off + n]), payload(0, 100))
                os.truncate(self.path, size)
                for call in (lambda: cons.release(0), lambda: cons.next(1, timeout=0.2)):
                    with self.assertRaises(CorruptError) as cm:
                        call()
                    self.assertIn(self.path, str(cm.exception))
                    self.assertIn("truncated", str(cm.exception))
                cons.close()
                ring.close()
                os.unlink(self.path)

    def test_largest_record(self):
        create(self.path, 1, 4096)
        ring, cons = self.open()
        p = self.producer(0, heartbeat=False)
        with self.assertRaises(ValueError):
            p.write(b"x" * 4033)
        p.write(payload(7, 4032))  # 4096 - 64: the largest payload of a 4096-byte area
        self.assertEqual(read_all(cons, ring, 0, 1), [payload(7, 4032)])

    def test_order_errors(self):
        create(self.path, 1, 4096)
        ring, cons = self.open()
        p = self.producer(0, heartbeat=False)
        p.write(b"abc")
        with self.assertRaisesRegex(LoaderError, "release without a record"):
            cons.release(0)
        cons.next(0)
        with self.assertRaisesRegex(LoaderError, "next before release"):
            cons.next(0)
        with self.assertRaisesRegex(LoaderError, "sub-ring 3 of 1"):
            cons.next(3)
        with self.assertRaisesRegex(LoaderError, "consumer pid %d attached before" % os.getpid()):
            Ring(self.path).consumer()

    def test_unread(self):
        # A record given back unread comes again; the producer's space is
        # not freed until it is released.
        create(self.path, 1, 4096)
        ring, cons = self.open()
        p = self.producer(0, heartbeat=False)
        p.write(b"abc")
        p.write(b"defg")
        with self.assertRaisesRegex(LoaderError, "unread without a record"):
            cons.unread(0)
        self.assertFalse(cons.holds(0))
        first = cons.next(0)
        self.assertTrue(cons.holds(0))
        cons.unread(0)
        self.assertFalse(cons.holds(0))
        self.assertEqual(ring.u64[(ring.ctl(0) + consumer_mod.CTL_READ) // 8], 0)
        self.assertEqual(cons.next(0), first)
        off, n = first
        self.assertEqual(bytes(ring.mem[off:off + n]), b"abc")
        cons.release(0)
        off, n = cons.next(0)
        self.assertEqual(bytes(ring.mem[off:off + n]), b"defg")

    def test_timeout(self):
        create(self.path, 1, 4096)
        ring, cons = self.open()
        self.producer(0)
        t0 = time.monotonic()
        with self.assertRaisesRegex(TimeoutError, "sub-ring 0: no record within 0.2s"):
            cons.next(0, timeout=0.2)
        self.assertLess(time.monotonic() - t0, 1.0)

    def test_waiting_sleeps(self):
        # A consumer waiting on a live, idle producer sleeps on the futex:
        # a second of waiting costs this thread milliseconds of CPU.
        create(self.path, 1, 4096)
        ring, cons = self.open()
        self.producer(0)
        cpu0 = time.thread_time()
        with self.assertRaises(TimeoutError):
            cons.next(0, timeout=1.0)
        self.assertLess(time.thread_time() - cpu0, 0.1)

    def test_corrupt_ring(self):
        cases = [
            ("length past end", lambda p: (p.write(b"x"), p.u64.__setitem__(p.area // 8, 5000)),
             "record length 5000 runs past the end of the 4096-byte record area"),
            ("length past published", lambda p: (p.write(b"x" * 64, publish=False),
                                                 p.u64.__setitem__(p.o["write"] // 8, 64)),
             "record of 64 bytes needs 128, only 64 published"),
            ("marker at 0", lambda p: (p.write(b"x"), p.u64.__setitem__(p.area // 8, 2 ** 64 - 1)),
             "wrap marker at the start"),
            ("unaligned counter", lambda p: p.u64.__setitem__(p.o["write"] // 8, 65),
             "write counter 65, read counter 0"),
            ("counter ahead", lambda p: p.u64.__setitem__(p.o["write"] // 8, 8192),
             "write counter 8192, read counter 0 \\(capacity 4096\\)"),
        ]
        for name, corrupt, text in cases:
            with self.subTest(name):
                self.tearDown()
                self.setUp()
                create(self.path, 1, 4096)
                ring, cons = self.open()
                corrupt(self.producer(0, heartbeat=False))
                with self.assertRaisesRegex(CorruptError, text):
                    cons.next(0, timeout=1)

    def test_release_wakes_a_waiting_producer(self):
        create(self.path, 1, 4096)
        ring, cons = self.open()
        p = self.producer(0, heartbeat=False)
        p.write(b"a" * 2000)
        cons.next(0)
        seq = p.u32[p.o["space_seq"] // 4]
        p.u32[p.o["space_waiter"] // 4] = 1  # the producer says it may sleep on space
        cons.release(0)
        self.assertEqual(p.u32[p.o["space_seq"] // 4], seq + 1)
        # A producer blocked for room resumes after the release.
        p.u32[p.o["space_waiter"] // 4] = 0
        p.write(b"b" * 1900)
        cons.next(0)
        done = threading.Event()
        threading.Thread(target=lambda: (p.write(b"c" * 2100), done.set()), daemon=True).start()
        self.assertFalse(done.wait(0.1))
        cons.release(0)
        self.assertTrue(done.wait(2))

    def test_close_wakes_producers(self):
        create(self.path, 2, 4096)
        ring, cons = self.open()
        p = self.producer(1, heartbeat=False)
        seq = p.u32[p.o["space_seq"] // 4]
        ring.close()
        self.assertEqual(p.u32[p.o["cons_state"] // 4], STATE_CLOSED)
        self.assertEqual(p.u32[p.o["space_seq"] // 4], seq + 1)
        with self.assertRaisesRegex(LoaderError, "consumer is closed"):
            cons.next(0)
        ring.close()  # idempotent

    def test_views_survive_close(self):
        import torch
        create(self.path, 1, 4096)
        ring, cons = self.open()
        p = self.producer(0, heartbeat=False)
        p.write(struct.pack("<4q", 1, 2, 3, 4))
        off, _ = cons.next(0)
        t = torch.frombuffer(ring.mem, dtype=torch.int64, count=4, offset=off)
        ring.close()
        self.assertEqual(t.tolist(), [1, 2, 3, 4])  # mapping kept alive by the tensor


class CrossProcessTest(RingTestCase):
    def test_futex_wake_and_end_of_stream(self):
        # With a 5 s futex slice, only a real FUTEX_WAKE from the child can
        # deliver 300 records in time.
        create(self.path, 1, 16384)
        ring, cons = self.open()
        old = consumer_mod.WAIT_SLICE
        consumer_mod.WAIT_SLICE = 5.0
        self.cleanup.append(lambda: setattr(consumer_mod, "WAIT_SLICE", old))
        self.child(0, 300, 3000, 0.3)
        got = read_all(cons, ring, 0, 1)
        t0 = time.monotonic()  # the child is running (its imports take a while)
        got += read_all(cons, ring, 0, 299)
        self.assertEqual(got[0], payload(0, 3000))
        self.assertEqual(got[299], payload(299, 3000))
        with self.assertRaises(EndOfStream):
            cons.next(0, timeout=10)
        self.assertLess(time.monotonic() - t0, 4.0)

    def test_killed_producer(self):
        create(self.path, 2, 8192)
        ring, cons = self.open()
        p = self.child(1, 2, 100, -1)
        self.assertEqual(read_all(cons, ring, 1, 2), [payload(0, 100), payload(1, 100)])
        p.send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        with self.assertRaises(ProducerDeadError) as cm:
            cons.next(1)
        self.assertLess(time.monotonic() - t0, 1.5)
        self.assertEqual((cm.exception.sub_ring, cm.exception.pid), (1, p.pid))
        self.assertRegex(str(cm.exception), "sub-ring 1: producer pid %d" % p.pid)

    def test_hung_producer(self):
        # Alive but silent (pid exists, heartbeat stopped): dead after DEAD_AFTER.
        create(self.path, 1, 4096)
        ring, cons = self.open()
        self.producer(0, heartbeat=False)
        t0 = time.monotonic()
        with self.assertRaisesRegex(ProducerDeadError, "producer pid %d sent no heartbeat" % os.getpid()):
            cons.next(0)
        self.assertTrue(DEAD_AFTER <= time.monotonic() - t0 < DEAD_AFTER + 0.5)

    def test_last_record_before_death(self):
        """A record the producer published between next's poll and its
        verdict that the producer is dead is read before the death is
        reported: next raised ProducerDeadError with it unread."""
        create(self.path, 1, 4096)
        ring, cons = self.open()
        prod = self.producer(0, heartbeat=False)
        gone = cons._producer_gone
        calls = []

        def verdict(w, s, now):
            if not calls:  # the producer's last record, then its death
                prod.write(b"last")
                calls.append(now)
                raise ProducerDeadError("ring: %s sub-ring %d: producer pid %d sent no heartbeat" % (self.path, w, os.getpid()), w, os.getpid())
            return gone(w, s, now)

        cons._producer_gone = verdict
        off, n = cons.next(0, timeout=10)
        self.assertEqual(bytes(ring.mem[off:off + n]), b"last")

    def test_creator_gone_before_producer(self):
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        create(self.path, 1, 4096, creator_pid=gone.pid)
        ring, cons = self.open()
        with self.assertRaisesRegex(ProducerDeadError, "no producer attached and creator pid %d is gone" % gone.pid):
            cons.next(0, timeout=5)

    def test_creator_lock(self):
        # Format 1.1: the creator's shared flock decides, not its pid. A
        # creator holding it is alive though its pid is dead here (another
        # pid namespace); once it lets go the consumer says so at once,
        # though the pid in the header (this process's: a reused pid) lives.
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        for pid, held in ((dead.pid, True), (os.getpid(), False)):
            if os.path.exists(self.path):
                os.remove(self.path)
            create(self.path, 1, 4096, creator_pid=pid, flags=FLAG_CREATOR_LOCK)
            lock = os.open(self.path, os.O_RDONLY)
            fcntl.flock(lock, fcntl.LOCK_SH)
            ring = Ring(self.path)
            cons = ring.consumer()
            if held:
                with self.assertRaises(TimeoutError):
                    cons.next(0, timeout=0.3)
            os.close(lock)  # the creator ends
            t0 = time.monotonic()
            with self.assertRaisesRegex(ProducerDeadError, "no producer attached and creator pid %d is gone" % pid):
                cons.next(0, timeout=5)
            self.assertLess(time.monotonic() - t0, 1)
            ring.close()

    def test_pid_word_past_pid_max(self):
        # A pid word no process can have (above PID_MAX_LIMIT) is unknown,
        # as in Go's pidGone: next() waits and times out, it does not
        # raise OverflowError from os.kill.
        create(self.path, 1, 4096, creator_pid=0xFFFFFFFF)
        ring, cons = self.open()
        with self.assertRaises(TimeoutError):
            cons.next(0, timeout=0.2)

    def test_pid_namespace(self):
        # Format 1.2: the consumer records its pid namespace (for the
        # producer's judgement of its pid), and judges a silent producer's
        # pid only when the producer recorded its namespace and it is this
        # process's: a pid of another namespace (the node in a container)
        # names another process here, or none; the heartbeat decides.
        own = os.stat("/proc/self/ns/pid").st_ino
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        for ns, gone in ((own, True), (own + 1, False), (0, False)):
            if os.path.exists(self.path):
                os.remove(self.path)
            create(self.path, 1, 4096)
            ring, cons = self.open()
            p = self.producer(0, heartbeat=False)
            self.assertEqual(p.u64[p.o["cons_pid_ns"] // 8], own)
            p.u64[p.o["pid_ns"] // 8] = ns
            p.u32[p.o["pid"] // 4] = dead.pid
            if gone:
                with self.assertRaisesRegex(ProducerDeadError, "producer pid %d is gone" % dead.pid):
                    cons.next(0, timeout=1)
            else:
                with self.assertRaises(TimeoutError):
                    cons.next(0, timeout=1)
            ring.close()

    def test_failed_attach_gives_claims_back(self):
        # Sub-ring 1's counters are corrupt: the attach fails and gives
        # back the claim it made on sub-ring 0, so a repaired ring attaches.
        create(self.path, 2, 4096)
        ring = Ring(self.path)
        self.cleanup.append(ring.close)
        p1 = self.producer(1, heartbeat=False)
        p1.u64[p1.o["write"] // 8] = 65
        with self.assertRaisesRegex(CorruptError, "sub-ring 1: write counter 65"):
            ring.consumer()
        p0 = self.producer(0, heartbeat=False)
        self.assertEqual((p0.u32[p0.o["cons_state"] // 4], p0.u32[p0.o["cons_pid"] // 4]), (0, 0))
        p1.u64[p1.o["write"] // 8] = 0
        ring.consumer()


if __name__ == "__main__":
    unittest.main()
