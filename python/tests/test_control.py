"""The control connection against a node that answers late: a request
that timed out must not let the next one read its answer."""

import json
import os
import shutil
import signal
import socket
import struct
import tempfile
import threading
import time
import unittest

from graphnode.control import Connection
from graphnode.errors import LoaderError


def read_frame(c):
    head = b""
    while len(head) < 4:
        k = c.recv(4 - len(head))
        if not k:
            return None
        head += k
    n = struct.unpack("<I", head)[0]
    body = b""
    while len(body) < n:
        k = c.recv(n - len(body))
        if not k:
            return None
        body += k
    return body


class LateNode:
    """Answers every request on a unix socket with its count in a stats
    object, holding the first answer back for delay seconds."""

    def __init__(self, path, delay):
        self.ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ln.bind(path)
        self.ln.listen(4)
        self.delay = delay
        self.closed = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        c, _ = self.ln.accept()
        with c:
            i = 0
            while True:
                try:
                    frame = read_frame(c)
                except OSError:  # reset: the client closed with our answer unread
                    frame = None
                if frame is None:
                    self.closed.set()
                    return
                if i == 0:
                    time.sleep(self.delay)
                i += 1
                body = json.dumps({"stats": {"node": "late", "answer": i}}).encode()
                try:
                    c.sendall(struct.pack("<I", len(body)) + body)
                except OSError:
                    self.closed.set()
                    return


class InterruptedRequestTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="graphnode-control-")
        self.path = os.path.join(self.dir, "node.sock")
        self.node = LateNode(self.path, 0.3)

    def tearDown(self):
        self.node.ln.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def interrupt(self, conn):
        with self.assertRaisesRegex(LoaderError, "stats: node at .* did not answer in time"):
            conn.stats(timeout=0.05)
        time.sleep(0.4)  # the late answer arrives
        with self.assertRaisesRegex(LoaderError, r"stats: connection to .* closed after an interrupted call \(timed out\)"):
            conn.stats()

    def test_session_closes(self):
        conn = Connection(self.path, 5.0)
        self.interrupt(conn)
        self.assertTrue(self.node.closed.wait(2), "the node did not see the connection close")
        conn.close()

    def test_loader_connection_stays_open(self):
        # A loader lives as long as its connection: it refuses further
        # requests but keeps the socket, and the loader, alive.
        conn = Connection(self.path, 5.0, close_on_break=False)
        self.interrupt(conn)
        self.assertFalse(self.node.closed.is_set())
        conn.close()
        self.assertTrue(self.node.closed.wait(2))

    def test_keyboard_interrupt_breaks(self):
        # Ctrl-C while a request waits for its answer (a notebook cell
        # interrupted in kv.pull) leaves that answer on its way: the next
        # request would read it as its own, rows of other ids.
        def interrupt(signum, frame):
            raise KeyboardInterrupt
        old = signal.signal(signal.SIGALRM, interrupt)
        conn = Connection(self.path, 5.0)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            with self.assertRaises(KeyboardInterrupt):
                conn.stats()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        time.sleep(0.4)  # the late answer arrives
        with self.assertRaisesRegex(LoaderError, r"stats: connection to .* closed after an interrupted call "
                                                 r"\(KeyboardInterrupt\)"):
            conn.stats()
        self.assertTrue(self.node.closed.wait(2), "the node did not see the connection close")
        conn.close()


if __name__ == "__main__":
    unittest.main()


class NonFiniteRequestTest(unittest.TestCase):
    """JSON has no NaN or infinity: json.dumps wrote them as NaN and
    Infinity, which the node refused as "bad JSON: invalid character 'N'",
    naming no key. The request is refused before it is sent, naming the
    value's key as the node names a bad field."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="graphnode-control-")
        self.path = os.path.join(self.dir, "node.sock")
        self.node = LateNode(self.path, 0)

    def tearDown(self):
        self.node.ln.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_refused_before_sending(self):
        import numpy as np
        conn = Connection(self.path, 5.0)
        self.addCleanup(conn.close)
        for v, text in ((float("nan"), "nan"), (float("inf"), "inf"), (-float("inf"), "-inf"), (np.float32("nan"), "nan")):
            with self.assertRaisesRegex(ValueError, r"^control: kv_create: table\.lr = %s: want a finite number \(JSON has no NaN or infinity\)$" % text):
                conn.request({"op": "kv_create", "table": {"name": "t", "lr": v}})
        with self.assertRaisesRegex(ValueError, r"^control: x: ids\[1\] = nan: want a finite number"):
            conn.request({"op": "x", "ids": [1.0, float("nan")]})
        # Nothing was sent: the next request gets the node's first answer.
        self.assertEqual(conn.stats()["answer"], 1)
