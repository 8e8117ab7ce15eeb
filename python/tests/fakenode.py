"""A stand-in for `node run` in unit tests of the Loader: it answers the
control protocol (docs/control.md) on a Unix socket in a thread, creates
the ring file, and plays W samplers as producer threads writing scripted
records (records.py) into their sub-rings."""

import json
import os
import socket
import struct
import threading

from .records import encode_control, toy_batch
from .ringwriter import Producer, create


def script(worker, workers, epochs, per_epoch):
    """The records sampler `worker` writes for a well-behaved loader."""
    out = []
    for e in range(epochs):
        for i in range(worker, per_epoch, workers):
            out.append(toy_batch(e, i))
        out.append(encode_control(2, e, per_epoch))
    out.append(encode_control(4, epochs, 0))
    return out


class FakeNode:
    """Serves one open_loader per connection. ``scripts(w, W, epochs,
    per_epoch)`` gives each worker's records; ``on_worker(w, producer)``
    runs after them (default: close the producer)."""

    def __init__(self, dirpath, workers=2, per_epoch=5, capacity=8192, scripts=script, on_worker=None,
                 error=None):
        self.dir = dirpath
        self.sock_path = os.path.join(dirpath, "node.sock")
        self.workers, self.per_epoch, self.capacity = workers, per_epoch, capacity
        self.scripts, self.on_worker, self.error = scripts, on_worker, error
        self.requests = []
        self.conns = []
        self.disconnected = threading.Event()
        self.producers = []
        self.threads = []
        self.sampler_status = ""
        self._lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._lsock.bind(self.sock_path)
        self._lsock.listen(4)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._serve, daemon=True)
        self._t.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn):
        self.conns.append(conn)
        with conn:
            while True:
                try:
                    head = _recv(conn, 4)
                except OSError:  # closed by die()
                    head = None
                if head is None:
                    self.disconnected.set()
                    return
                req = json.loads(_recv(conn, struct.unpack("<I", head)[0]))
                self.requests.append(req)
                body = json.dumps(self._answer(req)).encode()
                conn.sendall(struct.pack("<I", len(body)) + body)

    def _answer(self, req):
        if req["op"] == "stats":
            return {"stats": {"pid": os.getpid(), "loaders": [{"loader_id": 1, "samplers": [
                {"worker": w, "pid": 4000 + w, "state": "failed" if self.sampler_status else "running",
                 "status": self.sampler_status} for w in range(self.workers)]}]}}
        if self.error:
            return {"error": self.error[0], "key": self.error[1]}
        epochs = req.get("epochs", 1)
        ring = os.path.join(self.dir, "graphnode-%d-1.ring" % os.getpid())
        create(ring, self.workers, self.capacity)
        for w in range(self.workers):
            p = Producer(ring, w)
            self.producers.append(p)
            recs = self.scripts(w, self.workers, epochs, self.per_epoch)
            t = threading.Thread(target=self._sampler, args=(w, p, recs), daemon=True)
            self.threads.append(t)
            t.start()
        return {"loader": {"loader_id": 1, "ring": ring, "sub_rings": self.workers,
                           "ring_size": self.workers * self.capacity, "sub_ring_size": self.capacity,
                           "max_record": 4096, "num_seeds": 3 * self.per_epoch,
                           "batches_per_epoch": self.per_epoch, "epochs": epochs,
                           "batch_size": req.get("batch_size", 512), "fanouts": req["fanouts"],
                           "concurrency": 4, "feat_dim": 3, "x_dtype": "float32", "label_dim": 1,
                           "num_classes": 5, "part": 0, "num_parts": 1}}

    def _sampler(self, w, p, recs):
        try:
            for r in recs:
                p.write(r)
            if self.on_worker:
                self.on_worker(w, p)
            else:
                p.close()
        except RuntimeError:  # consumer gone
            pass

    def die(self):
        """Stop answering as a killed node does: the socket is gone and
        every connection is reset."""
        self._stop.set()
        self._lsock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self._stop.set()
        self._lsock.close()
        for t in self.threads:
            t.join(5)
        for p in self.producers:
            p.release()


def _recv(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf
