"""graphnode.Loader against a stand-in node (fakenode.py): epochs, order,
view lifetime, copies, and every way a stream can fail."""

import gc
import os
import pathlib
import shutil
import signal
import socket
import tempfile
import time
import unittest

import torch

import graphnode

from .fakenode import FakeNode, script
from .records import encode_control, toy_batch


def expected(epoch, index):
    return graphnode.decode_batch(bytearray(toy_batch(epoch, index)), copy=True)


class LoaderTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="graphnode-loader-")
        self.nodes = []

    def tearDown(self):
        for n in self.nodes:
            n.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def node(self, **kw):
        n = FakeNode(self.dir, **kw)
        self.nodes.append(n)
        return n

    def assertSameBatch(self, got, want):
        self.assertEqual((got.epoch, got.index, got.batch_size), (want.epoch, want.index, want.batch_size))
        for k in ("x", "edge_index", "y", "n_id"):
            self.assertTrue(torch.equal(getattr(got, k), getattr(want, k)), k)
        self.assertEqual(got.num_sampled_nodes, want.num_sampled_nodes)
        self.assertEqual(got.num_sampled_edges, want.num_sampled_edges)


class IterateTest(LoaderTestCase):
    def test_epochs_in_order(self):
        n = self.node(workers=2, per_epoch=5)
        with graphnode.Loader(n.sock_path, fanouts=[2, 2], batch_size=3, epochs=2, seed=7) as lo:
            req = n.requests[0]
            self.assertEqual(req, {"op": "open_loader", "split": "train", "fanouts": [2, 2], "batch_size": 3,
                                   "shuffle": True, "drop_last": False, "epochs": 2, "seed": 7, "rank": 0,
                                   "world_size": 1, "features": True, "labels": True})
            self.assertEqual(len(lo), 5)
            for epoch in range(2):
                self.assertEqual(lo.epoch, epoch)
                seen = []
                for b in lo:
                    self.assertSameBatch(b, expected(epoch, b.index))
                    self.assertEqual(b.x.dtype, torch.float32)
                    seen.append(b.index)
                self.assertEqual(seen, list(range(5)))
            with self.assertRaisesRegex(graphnode.LoaderError, "all 2 epochs were read"):
                next(iter(lo))
        self.assertTrue(n.disconnected.wait(2))

    def test_new_iter_skips_rest_of_epoch(self):
        n = self.node(workers=3, per_epoch=7)
        with graphnode.Loader(n.sock_path, fanouts=[2, 2], epochs=3) as lo:
            it = iter(lo)
            self.assertEqual(next(it).index, 0)
            self.assertEqual(next(it).index, 1)
            second = [b.index for b in lo]  # drains epoch 0, then reads epoch 1
            self.assertEqual(second, list(range(7)))
            self.assertEqual(lo.epoch, 2)
            with self.assertRaisesRegex(graphnode.LoaderError, "superseded"):
                next(it)
            b = next(iter(lo))
            self.assertEqual((b.epoch, b.index), (2, 0))

    def test_views_and_copies(self):
        # A 4096-byte sub-ring holds about four of these records: the ring
        # reuses memory quickly, so a view kept past its turn changes while
        # a copy does not.
        n = self.node(workers=1, per_epoch=12, capacity=4096)
        with graphnode.Loader(n.sock_path, fanouts=[2, 2], epochs=1) as lo:
            kept_views, kept_copies = [], []
            for b in lo:
                kept_views.append(b)
                kept_copies.append(b.copy())
                time.sleep(0.01)  # let the sampler refill the room just released
        for i, c in enumerate(kept_copies):
            self.assertSameBatch(c, expected(0, i))
        stale = [i for i, v in enumerate(kept_views) if v.n_id.tolist()[:1] != [10 * i]]
        self.assertTrue(stale, "no view was overwritten: the test shows nothing")

    def test_copy_mode(self):
        n = self.node(workers=2, per_epoch=6, capacity=4096)
        with graphnode.Loader(n.sock_path, fanouts=[2, 2], copy=True) as lo:
            got = list(lo)
        for i, b in enumerate(got):
            self.assertSameBatch(b, expected(0, i))

    def test_seed_ids_and_sizes(self):
        n = self.node(workers=2, per_epoch=2)
        with graphnode.Loader(n.sock_path, seed_ids=torch.tensor([5, 3, 9]), fanouts=[-1], workers=2,
                              concurrency=8, ring_size=1 << 20, shuffle=False, features=False) as lo:
            req = n.requests[0]
            self.assertEqual((req["seed_ids"], req["workers"], req["concurrency"], req["ring_size"]),
                             ([5, 3, 9], 2, 8, "1048576B"))
            self.assertNotIn("split", req)
            self.assertEqual(lo.stats()["loaders"][0]["loader_id"], 1)
        with self.assertRaisesRegex(ValueError, "split or seed_ids"):
            graphnode.Loader(n.sock_path, split="val", seed_ids=[1])

    def test_seed_arguments_misread(self):
        # What int() would take silently: a PyG-style boolean mask (ids 0
        # and 1), float ids (truncated), an (M, 2) edge list (its first two
        # rows read as sources and destinations).
        n = self.node(workers=1, per_epoch=1)
        for kw, msg in ((dict(seed_ids=torch.tensor([False, True, True, False])), "seed_ids is a boolean mask"),
                        (dict(seed_ids=[1.5, 2.0]), "seed_ids of dtype float64: want integer ids"),
                        (dict(seed_ids=torch.tensor([[1, 2]])), "seed_ids of shape \\(1, 2\\)"),
                        (dict(seed_ids=[3, -1]), "seed_ids holds -1"),
                        (dict(seed_edges=torch.tensor([[0, 1], [2, 3], [4, 5]])), "shape \\(3, 2\\): want \\(2, M\\)"),
                        (dict(seed_edges=([0, 1], [2, 3], [4, 5])), "holds 3 sequences"),
                        (dict(seed_edges=(torch.tensor([0.5]), [1])), "seed_edges sources of dtype"),
                        # PyG's neg_sampling_ratio=0.5 would become no negatives
                        (dict(seed_edges=([0], [1]), neg_ratio=0.5), "neg_ratio 0.5: want a whole number"),
                        (dict(seed_edges=([0], [1]), neg_ratio=torch.tensor(1.5)), "neg_ratio 1.5"),
                        # int() made 2.7 seeds per batch 2
                        (dict(split="train", batch_size=2.7), "batch_size 2.7: want a whole number of seeds per batch"),
                        (dict(split="train", batch_size=None), "batch_size None: want a whole number of seeds per batch"),
                        (dict(split="train", batch_size=True), "batch_size True: .* not a boolean"),
                        # int() made fanouts [2.7, 0.5] reach the node as [2, 0]
                        (dict(split="train", fanouts=[2.7, 1]), "fanouts\\[0\\] 2.7: want a whole number of neighbours"),
                        (dict(split="train", fanouts=[1, 0.5]), "fanouts\\[1\\] 0.5"),
                        (dict(split="train", fanouts=5), "fanouts 5: want one number of neighbours per hop"),
                        (dict(split="train", fanouts=None), "fanouts None: want one number"),
                        (dict(split="train", epochs=2.5), "epochs 2.5: want a whole number of passes"),
                        (dict(split="train", rank=1.5), "rank 1.5: want a whole number"),
                        (dict(split="train", world_size=2.9), "world_size 2.9: want a whole number of trainers"),
                        (dict(split="train", seed="x"), "seed 'x': want a whole number"),
                        # settimeout(0) made every request fail with EAGAIN
                        (dict(split="train", timeout=0), "timeout 0: want seconds"),
                        (dict(split="train", timeout=-1), "timeout -1: want seconds"),
                        # the node refuses them without seed_edges; they were left out of the request
                        (dict(split="train", neg_ratio=1), "need seed_edges"),
                        (dict(seed_ids=[1], exclude_seed_edges=True), "need seed_edges")):
            with self.assertRaisesRegex(ValueError, msg):
                graphnode.Loader(n.sock_path, **{"fanouts": [2], **kw})
        self.assertEqual(n.requests, [])
        for i, edges in enumerate((torch.tensor([[0, 1, 2], [3, 4, 5]]), ([0, 1, 2], (3, 4, 5)))):
            if i:
                n.close()
                shutil.rmtree(self.dir)
                os.mkdir(self.dir)
                n = self.node(workers=1, per_epoch=1)  # one loader per stand-in node
            with graphnode.Loader(n.sock_path, fanouts=[2], seed_edges=edges, neg_ratio=(1, 2.0)[i]):
                pass
            self.assertEqual(n.requests[-1]["seed_edges"], {"src": [0, 1, 2], "dst": [3, 4, 5]})
            self.assertEqual(n.requests[-1]["neg_ratio"], 1 + i)


class FailureTest(LoaderTestCase):
    def test_error_response(self):
        n = self.node(error=("fanouts[1] = 0: each must be -1 (all) or positive", "fanouts"))
        with self.assertRaises(graphnode.ControlError) as cm:
            graphnode.Loader(n.sock_path, fanouts=[1, 0])
        self.assertEqual(cm.exception.key, "fanouts")
        self.assertEqual(str(cm.exception), "control: fanouts: fanouts[1] = 0: each must be -1 (all) or positive")

    def test_no_node(self):
        # A socket that is not there, or that no node listens on (left by
        # a node killed), says so, and how to fix it.
        stale = os.path.join(self.dir, "stale.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(stale)
        s.close()
        for path in (os.path.join(self.dir, "none.sock"), stale):
            with self.assertRaisesRegex(graphnode.LoaderError, "connect to node socket %s: .*[(]no node listens there: start node run" % path):
                graphnode.Loader(path)

    def test_not_socket(self):
        # A file or a directory at the path is named as such: "no node
        # listens there: start node run" sent the user to a node run that
        # refuses to start over it.
        path = os.path.join(self.dir, "node.sock")
        with open(path, "w") as f:
            f.write("x")
        for p, what in ((path, "a regular file"), (self.dir, "a directory")):
            for make in (graphnode.Loader, graphnode.KV, graphnode.NodeData):
                with self.assertRaises(graphnode.LoaderError) as cm:
                    make(p)
                self.assertIn("connect to node socket %s: " % p, str(cm.exception))
                self.assertIn("(%s is %s, not a socket: give the control.socket of the node's node.toml)" % (p, what), str(cm.exception))
                self.assertNotIn("start node run", str(cm.exception))

    def test_socket_argument(self):
        # A pathlib.Path is a path (it raised a bare TypeError and left the
        # socket open); a number is no path and is named as the socket.
        n = self.node(workers=1, per_epoch=1)
        with graphnode.Loader(pathlib.Path(n.sock_path), fanouts=[2]) as lo:
            self.assertEqual(lo.info["loader_id"], 1)
        def fds():
            return set(os.listdir("/proc/self/fd"))
        gc.collect()  # earlier tests' garbage may close fds of its own
        before = fds()
        with self.assertRaisesRegex(graphnode.LoaderError, "connect to node socket %s/none.sock" % self.dir):
            graphnode.Loader(pathlib.Path(self.dir, "none.sock"))
        for bad in (lambda: graphnode.Loader(3), lambda: graphnode.NodeData(3)):
            with self.assertRaisesRegex(ValueError, "socket 3: want a path"):
                bad()
        gc.collect()
        self.assertEqual(fds() - before, set())

    def test_error_record(self):
        def bad(w, workers, epochs, per_epoch):
            recs = script(w, workers, epochs, per_epoch)
            if w == 1:
                recs[1] = encode_control(3, 0, 0, "worker 1: sample: batch 3 hop 0: boom")
            return recs
        n = self.node(workers=2, per_epoch=6, scripts=bad)
        with graphnode.Loader(n.sock_path, fanouts=[2]) as lo:
            got = []
            with self.assertRaisesRegex(graphnode.LoaderError,
                                        "loader 1 worker 1: sampler failed: worker 1: sample: batch 3 hop 0: boom"):
                for b in lo:
                    got.append(b.index)
            self.assertEqual(got, [0, 1, 2])
            with self.assertRaisesRegex(graphnode.LoaderError, "boom"):  # sticky
                next(iter(lo))

    def test_early_end_of_stream(self):
        def stop(w, workers, epochs, per_epoch):
            return script(w, workers, epochs, per_epoch)[:1] + [encode_control(4, 0, 0)]
        n = self.node(workers=2, per_epoch=6, scripts=stop)
        with graphnode.Loader(n.sock_path, fanouts=[2], epochs=2) as lo:
            with self.assertRaisesRegex(graphnode.LoaderError, "ended the stream in epoch 0 at batch 2: stopped by the node"):
                list(lo)

    def test_failed_loader_freed_without_gc(self):
        # A loader that failed and is dropped without close() is freed at
        # once (its connection closed, the node stops its samplers), not
        # when the cyclic collector runs: the kept sticky error must not
        # hold the frames that hold the loader and the last batch.
        def bad(w, workers, epochs, per_epoch):
            recs = script(w, workers, epochs, per_epoch)
            if w == 1:
                recs[1] = encode_control(3, 0, 0, "boom")
            return recs
        n = self.node(workers=2, per_epoch=6, scripts=bad)

        def run():
            lo = graphnode.Loader(n.sock_path, fanouts=[2])
            errs = []
            for _ in range(2):  # the failure, then the sticky error
                try:
                    for b in lo:
                        pass
                except graphnode.LoaderError as e:
                    errs.append(str(e))
            return errs
        gc.collect()
        gc.disable()
        try:
            errs = run()
            self.assertTrue(n.disconnected.wait(2), "the failed loader lives until a garbage collection")
        finally:
            gc.enable()
        self.assertEqual(len(errs), 2)
        for e in errs:
            self.assertIn("sampler failed: boom", e)

    def test_unexpected_record(self):
        def swap(w, workers, epochs, per_epoch):
            recs = script(w, workers, epochs, per_epoch)
            recs[0], recs[1] = recs[1], recs[0]
            return recs
        n = self.node(workers=1, per_epoch=3, scripts=swap)
        with graphnode.Loader(n.sock_path, fanouts=[2]) as lo:
            with self.assertRaisesRegex(graphnode.LoaderError, "got batch record \\(epoch 0, index 1\\), want batch \\(epoch 0, index 0\\)"):
                list(lo)

    def test_dead_sampler(self):
        # Worker 0 stops beating and its pid is a dead process's: the loader
        # reports it, with the exit status the node gives, within 3 s.
        import subprocess
        import sys
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()

        def die(w, p):
            if w == 0:
                p.stop_heartbeat()
                p.u32[p.o["pid"] // 4] = gone.pid
            else:
                p.close()
        n = self.node(workers=2, per_epoch=6, on_worker=die,
                      scripts=lambda w, W, e, k: script(w, W, e, k)[:2])
        n.sampler_status = "signal: killed"
        with graphnode.Loader(n.sock_path, fanouts=[2]) as lo:
            it = iter(lo)
            self.assertEqual([next(it).index for _ in range(4)], [0, 1, 2, 3])
            t0 = time.monotonic()
            with self.assertRaises(graphnode.LoaderError) as cm:
                next(it)
            self.assertLess(time.monotonic() - t0, 3.0)
        self.assertRegex(str(cm.exception), "loader 1 worker 0 \\(pid 4000\\) died: signal: killed: .*sub-ring 0: "
                                            "producer pid %d" % gone.pid)

    def test_dead_node(self):
        # The node is killed: its samplers die with it (Pdeathsig). The
        # error says that the node is gone too, not only that a worker
        # died, which would send the user to the samplers' logs.
        import subprocess
        import sys
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()

        def die(w, p):
            p.stop_heartbeat()
            p.u32[p.o["pid"] // 4] = gone.pid
        n = self.node(workers=2, per_epoch=6, on_worker=die,
                      scripts=lambda w, W, e, k: script(w, W, e, k)[:2])
        with graphnode.Loader(n.sock_path, fanouts=[2]) as lo:
            it = iter(lo)
            self.assertEqual([next(it).index for _ in range(4)], [0, 1, 2, 3])
            n.die()
            with self.assertRaises(graphnode.LoaderError) as cm:
                next(it)
        self.assertRegex(str(cm.exception), "loader 1 worker 0 \\(pid %d\\) died; the node at %s does not answer "
                                            "either \\(control: stats: .*\\): .*sub-ring 0: producer pid %d"
                                            % (gone.pid, n.sock_path, gone.pid))

    def test_close(self):
        n = self.node(workers=2, per_epoch=4)
        lo = graphnode.Loader(n.sock_path, fanouts=[2])
        b = next(iter(lo))
        lo.close()
        lo.close()
        self.assertTrue(n.disconnected.wait(2))
        self.assertEqual(b.n_id.shape[0], b.num_nodes)  # the view still reads mapped memory
        self.assertEqual(int(b.n_id[0]), 0)
        with self.assertRaisesRegex(graphnode.LoaderError, "closed"):
            next(iter(lo))


class InterruptTest(LoaderTestCase):
    """Ctrl-C (KeyboardInterrupt) inside next() ends the for loop; a new
    iter(loader) then reads on, as after a break, instead of finding the
    records out of order and failing the loader for good."""

    def patch_from_record(self, fail):
        """from_record calls fail(n) after building its n-th batch."""
        real, calls = graphnode.loader.from_record, []

        def from_record(*a, **kw):
            b = real(*a, **kw)
            calls.append(b.index)
            fail(len(calls))
            return b
        graphnode.loader.from_record = from_record
        self.addCleanup(setattr, graphnode.loader, "from_record", real)
        return calls

    def test_sigint_during_copy(self):
        # copy=True spends most of next() copying the batch: Ctrl-C there
        # gives the record back, and the rest of the epoch is skipped
        # from it on.
        n = self.node(workers=2, per_epoch=6)
        with graphnode.Loader(n.sock_path, fanouts=[2], copy=True, epochs=2) as lo:
            calls = self.patch_from_record(lambda k: k == 2 and os.kill(os.getpid(), signal.SIGINT))
            it = iter(lo)
            self.assertEqual(next(it).index, 0)
            with self.assertRaises(KeyboardInterrupt):
                next(it)
            self.assertEqual(calls, [0, 1])
            self.assertEqual((lo.epoch, lo._index), (0, 1))
            self.assertEqual([(b.epoch, b.index) for b in lo], [(1, i) for i in range(6)])

    def test_failed_copy(self):
        # A batch that could not be built (out of memory) was not
        # delivered: its record is read again.
        n = self.node(workers=2, per_epoch=6)
        with graphnode.Loader(n.sock_path, fanouts=[2], copy=True, epochs=2) as lo:
            def fail(k):
                if k == 2:
                    raise MemoryError
            self.patch_from_record(fail)
            it = iter(lo)
            self.assertEqual(next(it).index, 0)
            with self.assertRaises(MemoryError):
                next(it)
            self.assertEqual((lo.epoch, lo._index), (0, 1))
            self.assertEqual([(b.epoch, b.index) for b in lo], [(1, i) for i in range(6)])

    def test_interrupted_release(self):
        # Ctrl-C inside the release of a counted record (its futex wake):
        # the next call releases it again instead of finding it held.
        n = self.node(workers=2, per_epoch=6)
        with graphnode.Loader(n.sock_path, fanouts=[2], copy=True, epochs=2) as lo:
            real, calls = lo._cons._publish_read, []

            def publish(sub):
                real(sub)
                calls.append(1)
                if len(calls) == 2:
                    raise KeyboardInterrupt
            lo._cons._publish_read = publish
            it = iter(lo)
            self.assertEqual(next(it).index, 0)
            with self.assertRaises(KeyboardInterrupt):
                next(it)
            self.assertEqual((lo.epoch, lo._index), (0, 2))
            self.assertEqual([(b.epoch, b.index) for b in lo], [(1, i) for i in range(6)])

    def test_interrupted_end_of_epoch(self):
        # The wait for the second sub-ring's end-of-epoch record is
        # interrupted (samplers slower than the trainer): the first one's
        # is read already and must not be asked for again.
        n = self.node(workers=2, per_epoch=6)
        with graphnode.Loader(n.sock_path, fanouts=[2], epochs=2) as lo:
            real, calls = lo._cons.next, []

            def nxt(w, timeout=None):
                calls.append(w)
                if len(calls) == 8:  # 6 batches, end of epoch of sub-ring 0, then 1
                    raise KeyboardInterrupt
                return real(w, timeout)
            lo._cons.next = nxt
            with self.assertRaises(KeyboardInterrupt):
                for b in lo:
                    pass
            self.assertEqual(b.index, 5)
            self.assertEqual([(b.epoch, b.index) for b in lo], [(1, i) for i in range(6)])


def in_child(fn):
    """fn() run in a forked child; its answer (or exception) as text."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into the test runner
        try:
            os.close(r)
            try:
                out = fn()
            except BaseException as e:
                out = "%s: %s" % (type(e).__name__, e)
            os.write(w, out.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    return out


class ForkTest(LoaderTestCase):
    def test_forked_child(self):
        # A DataLoader worker (a forked child) holding the parent's Loader:
        # reading there would hand out the parent's records a second time
        # and release bytes the parent still reads; closing or freeing it
        # there must leave the parent's stream alone. 40 records do not
        # fit the sub-rings, so the samplers still wait on the consumer.
        n = self.node(workers=2, per_epoch=40, capacity=4096)
        held = [graphnode.Loader(n.sock_path, fanouts=[2])]
        conn = graphnode.control.Connection(n.sock_path)
        self.addCleanup(conn.close)
        pid = os.getpid()
        got = in_child(lambda: "read batch %d" % next(iter(held[0])).index)
        self.assertRegex(got, "^LoaderError: loader: loader 1 was opened in pid %d, used in pid \\d+: a Loader "
                              "cannot be shared with a forked process" % pid)
        got = in_child(lambda: "stats %s" % conn.stats())
        self.assertRegex(got, "^LoaderError: control: stats: connection to .* was opened in pid %d" % pid)

        def drop():
            lo = held.pop()
            lo.close()
            del lo
            gc.collect()
            return "dropped"
        self.assertEqual(in_child(drop), "dropped")
        with held[0] as lo:
            ring = lo._ring
            states = [ring.u32[(ring.ctl(w) + graphnode.ring.CTL_CONS_STATE) // 4] for w in range(2)]
            self.assertEqual(states, [graphnode.ring.STATE_OPEN] * 2, "the child closed the parent's ring")
            self.assertEqual([b.index for b in lo], list(range(40)))
            self.assertEqual(conn.stats()["loaders"][0]["loader_id"], 1)


if __name__ == "__main__":
    unittest.main()
