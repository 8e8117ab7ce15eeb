"""graphnode.Loader against a real `node run`: the Go binary is built from
this repository, partitions a generated graph, and serves it on a socket
in a temporary directory. Needs the Go toolchain; without it the tests
skip, except when the environment variable CI is set (then they fail,
so CI can never skip them silently).

Every process started here (the node; its samplers, found through
stats) is stopped in tearDown, and every file removed."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import torch

import graphnode
from graphnode import control

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FANOUTS = [15, 10, 5]
FEAT_DIM = 16
CLASSES = 16
TRAIN = 1000  # 2000 nodes, --train-frac 0.5


def _run(args, **kw):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(args), p.returncode, p.stdout[-4000:]))
    return p.stdout


class NodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        go = shutil.which("go")
        if go is None:
            if os.environ.get("CI"):
                raise RuntimeError("test_node: the Go toolchain is not on PATH (CI is set, so this is an error)")
            raise unittest.SkipTest("test_node: needs the Go toolchain (go) on PATH to build ./cmd/node")
        cls.tmp = tempfile.mkdtemp(prefix="graphnode-node-")
        cls.bin = os.path.join(cls.tmp, "node")
        try:
            env = dict(os.environ, CGO_ENABLED="0")
            _run([go, "build", "-o", cls.bin, "./cmd/node"], cwd=REPO, env=env)
            _run([cls.bin, "gen", "sbm", "--nodes", "2000", "--feat-dim", str(FEAT_DIM), "--blocks", str(CLASSES),
                  "--train-frac", "0.5", "--seed", "3", "-o", os.path.join(cls.tmp, "g")])
            cls.parts = os.path.join(cls.tmp, "parts")
            _run([cls.bin, "partition", "--input", os.path.join(cls.tmp, "g"), "--format", "ogb", "--parts", "1",
                  "-o", cls.parts])
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="run-", dir=self.tmp)
        self.sock = os.path.join(self.dir, "node.sock")
        self.rings = os.path.join(self.dir, "rings")
        os.mkdir(self.rings)
        cfg = os.path.join(self.dir, "node.toml")
        with open(cfg, "w") as f:
            f.write('version = 1\n[node]\nparts = "%s"\nname = "pytest"\n[control]\nsocket = "%s"\n'
                    '[rings]\ndir = "%s"\nsize = "64MB"\n[samplers]\ndrain_timeout = "3s"\n'
                    '[log]\nlevel = "info"\nformat = "text"\n' % (self.parts, self.sock, self.rings))
        self.log = open(os.path.join(self.dir, "node.log"), "w+")
        self.node = subprocess.Popen([self.bin, "run", "-c", cfg], stdout=self.log, stderr=subprocess.STDOUT)
        self.samplers = set()
        self.loaders = []
        deadline = time.monotonic() + 15
        while not os.path.exists(self.sock):
            if self.node.poll() is not None or time.monotonic() > deadline:
                self.fail("node run did not come up:\n" + self.node_log())
            time.sleep(0.02)

    def tearDown(self):
        for lo in self.loaders:
            lo.close()
        if self.node.poll() is None:
            self.node.send_signal(signal.SIGTERM)
            try:
                self.node.wait(10)
            except subprocess.TimeoutExpired:
                self.node.kill()
                self.node.wait()
        for pid in self.samplers:  # children the node should have stopped
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def node_log(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-4000:]

    def loader(self, **kw):
        opts = dict(fanouts=FANOUTS, batch_size=64, ring_size="64MB", workers=2)
        opts.update(kw)
        lo = graphnode.Loader(self.sock, **opts)
        self.loaders.append(lo)
        self.note_samplers(lo)
        return lo

    def note_samplers(self, lo):
        st = lo.stats()
        for entry in st.get("loaders") or []:
            for s in entry.get("samplers") or []:
                if s.get("pid"):
                    self.samplers.add(s["pid"])
        return st

    def check_batch(self, b):
        n, e, bs = b.num_nodes, b.num_edges, b.batch_size
        self.assertEqual(b.n_id.dtype, torch.int64)
        self.assertEqual(b.edge_index.dtype, torch.int64)
        self.assertEqual(tuple(b.edge_index.shape), (2, e))
        self.assertEqual((b.x.dtype, tuple(b.x.shape)), (torch.float32, (n, FEAT_DIM)))
        self.assertEqual((b.y.dtype, tuple(b.y.shape)), (torch.int64, (bs,)))
        self.assertTrue(bool(((b.y >= 0) & (b.y < CLASSES)).all()))
        self.assertEqual(len(b.num_sampled_nodes), len(FANOUTS) + 1)
        self.assertEqual(len(b.num_sampled_edges), len(FANOUTS))
        self.assertEqual(b.num_sampled_nodes[0], bs)
        self.assertEqual(sum(b.num_sampled_nodes), n)
        self.assertEqual(sum(b.num_sampled_edges), e)
        self.assertEqual(b.n_id.unique().numel(), n, "n_id has duplicates")
        self.assertTrue(bool(((b.n_id >= 0) & (b.n_id < 2000)).all()))
        # Hop k's edges run from nodes known by hop k+1 to the nodes new at
        # hop k, at most fanout[k] per node.
        node_end = [sum(b.num_sampled_nodes[:k + 1]) for k in range(len(FANOUTS) + 1)]
        e0 = 0
        for k, ne in enumerate(b.num_sampled_edges):
            row, col = b.edge_index[0, e0:e0 + ne], b.edge_index[1, e0:e0 + ne]
            lo = node_end[k - 1] if k else 0
            if ne:
                self.assertGreaterEqual(int(col.min()), lo)
                self.assertLess(int(col.max()), node_end[k])
                self.assertGreaterEqual(int(row.min()), 0)
                self.assertLess(int(row.max()), node_end[k + 1])
                self.assertLessEqual(int(torch.bincount(col).max()), FANOUTS[k])
            e0 += ne
        # Batch.layers: each layer's edges are exactly those into its first
        # num_dst nodes, a prefix of edge_index, from its first num_src.
        layers = b.layers()
        self.assertEqual(len(layers), len(FANOUTS))
        self.assertEqual((layers[0][1], layers[-1][2]), (n, bs))
        for ei, ns, nd in layers:
            self.assertEqual(ei.shape[1], int((b.edge_index[1] < nd).sum()))
            if ei.numel():
                self.assertLess(int(ei[1].max()), nd)
                self.assertLess(int(ei[0].max()), ns)

    def test_two_epochs(self):
        lo = self.loader(epochs=2, shuffle=True, seed=11)
        self.assertEqual(len(lo), -(-TRAIN // 64))
        firsts = []
        for epoch in range(2):
            seeds, count = [], 0
            for b in lo:
                self.assertEqual((b.epoch, b.index), (epoch, count))
                self.check_batch(b)
                seeds += b.n_id[:b.batch_size].tolist()
                if count == 0:
                    firsts.append(b.copy())
                count += 1
            self.assertEqual(count, len(lo))
            self.assertEqual(len(seeds), TRAIN)
            self.assertEqual(len(set(seeds)), TRAIN, "an epoch repeats a seed")
        self.assertFalse(torch.equal(firsts[0].n_id, firsts[1].n_id), "shuffle gave both epochs the same order")

        # The same options with 3 workers give byte-identical batches.
        lo3 = self.loader(epochs=1, shuffle=True, seed=11, workers=3, copy=True)
        b = next(iter(lo3))
        for k in ("x", "edge_index", "y", "n_id"):
            self.assertTrue(torch.equal(getattr(b, k), getattr(firsts[0], k)), k)

        ids = graphnode.OrigIds(self.parts)
        self.assertEqual(len(ids), 2000)
        orig = ids[b.n_id]
        self.assertEqual(orig.dtype, torch.int64)
        self.assertEqual(orig.unique().numel(), b.num_nodes)

        for x in self.loaders:
            x.close()
        self.stop_node()

    def test_killed_sampler(self):
        # A small ring keeps the samplers blocked on room, so a killed
        # sampler leaves at most a record or two behind.
        lo = self.loader(epochs=1000, ring_size="2MB")
        it = iter(lo)
        # Batch 1 is worker 1's: it has attached to its sub-ring, whose
        # reader then sees its producer die. Killed before it attached
        # (a slow start on a loaded host), the node writes "failed before
        # producing" in its place instead.
        self.check_batch(next(it))
        self.check_batch(next(it))
        st = self.note_samplers(lo)
        pid = [s["pid"] for s in st["loaders"][0]["samplers"] if s["worker"] == 1][0]
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        with self.assertRaises(graphnode.LoaderError) as cm:
            read_epochs(it, lo, 100)
        self.assertLess(time.monotonic() - t0, 3.0)
        self.assertRegex(str(cm.exception), "worker 1 \\(pid %d\\) died" % pid)
        self.stop_node()

    def test_sigterm_ends_stream(self):
        lo = self.loader(epochs=1000, ring_size="2MB")
        it = iter(lo)
        next(it)
        self.node.send_signal(signal.SIGTERM)
        with self.assertRaisesRegex(graphnode.LoaderError, "stopped by the node"):
            read_epochs(it, lo, 100)
        self.stop_node(signalled=True)

    def test_close_loader_full_ring(self):
        """close_loader while the samplers wait for room in a full ring:
        the client closes its consumer before asking, so they see the
        trainer gone and exit at once, instead of spending the node's
        stop grace on batches nobody will read (it took 3 s)."""
        lo = self.loader(epochs=1000, ring_size="2MB")
        it = iter(lo)
        self.check_batch(next(it))
        deadline = time.monotonic() + 10
        while True:  # both sub-rings mostly full: the samplers wait for room
            st = self.note_samplers(lo)["loaders"][0]
            if all(2 * u > st["sub_ring_size"] for u in st["ring_used"]):
                break
            self.assertLess(time.monotonic(), deadline, "the samplers did not fill the ring: %s" % st)
            time.sleep(0.05)
        lo.close_loader()
        self.assertEqual(os.listdir(self.rings), [])
        log = self.node_log()
        self.assertEqual(log.count('msg="trainer gone, sampler exits"'), 2, log)
        self.assertNotIn('msg="sampler stopped"', log)
        self.assertIn('reason="closed by trainer"', log)
        self.stop_node()

    def test_kv(self):
        """graphnode.KV against the node's parameter server: the values of
        DGL-KE-style async tables, a sync all-reduce table, errors, drop,
        and Embedding's autograd round trip."""
        with graphnode.KV(self.sock) as kv:
            info = kv.create("emb", rows="nodes", dim=4, optimizer="sgd", lr=0.5, mode="async",
                             init="uniform", init_scale=0.1, init_seed=3)
            self.assertEqual((info["rows"], info["dim"], info["created"]), (2000, 4, True))
            self.assertFalse(kv.create("emb", rows="nodes", dim=4, optimizer="sgd", lr=0.5, mode="async",
                                       init="uniform", init_scale=0.1, init_seed=3)["created"])
            with self.assertRaises(graphnode.ControlError) as cm:
                kv.create("emb", rows="nodes", dim=8, optimizer="sgd", lr=0.5, mode="async")
            self.assertEqual((cm.exception.key, cm.exception.kv_code), ("table", 10))
            self.assertIn("dim 8 differs from the existing table's 4", str(cm.exception))
            # One row per relation: this graph has none.
            with self.assertRaises(graphnode.ControlError) as cm:
                kv.create("rel", rows="relations", dim=4, optimizer="sgd", lr=0.5, mode="async")
            self.assertEqual(cm.exception.key, "table.rows")
            self.assertIn('rows = "relations", but graph.toml lists no relations', str(cm.exception))

            ids = torch.tensor([0, 5, 1999])
            before = kv.pull("emb", ids)
            self.assertEqual((before.shape, before.dtype), ((3, 4), torch.float32))
            self.assertTrue(bool((before.abs() <= 0.1).all()), before)
            self.assertTrue(torch.equal(kv.pull("emb", [5]), before[1:2]))
            # Duplicate ids are summed: row 5 moves by 2 × lr × 1.
            kv.push("emb", [5, 5], torch.ones(2, 4))
            after = kv.pull("emb", ids)
            self.assertTrue(torch.allclose(after[1], before[1] - 1.0), (before[1], after[1]))
            self.assertTrue(torch.equal(after[0], before[0]) and torch.equal(after[2], before[2]))

            with self.assertRaises(graphnode.KVError) as cm:
                kv.pull("nope", [0])
            self.assertEqual(cm.exception.code, 1)
            self.assertIn('"nope"', str(cm.exception))
            with self.assertRaises(graphnode.KVError) as cm:
                kv.pull("emb", [2000])
            self.assertIn("2000", str(cm.exception))
            # "kv: " once: the shard's own prefix is not repeated.
            self.assertEqual(str(cm.exception).count("kv: "), 1, str(cm.exception))
            with self.assertRaises(ValueError):
                kv.push("emb", [1, 2], torch.ones(3))
            with self.assertRaises(ValueError):
                kv.pull("emb", [-1])

            # A sync table with the average optimiser is an all-reduce.
            kv.create("avg", rows=3, dim=2, optimizer="average", mode="sync")
            g = torch.arange(6, dtype=torch.float32)
            self.assertEqual(kv.push_sync("avg", 0, 0, 1, g), 1)
            rows, version = kv.pull_version("avg", [0, 1, 2], min_version=1)
            self.assertEqual(version, 1)
            self.assertTrue(torch.equal(rows.reshape(-1), g))
            with self.assertRaises(graphnode.KVError) as cm:
                kv.push_sync("avg", 0, 0, 1, g)  # step 0 again: the table is at 1
            self.assertEqual(cm.exception.code, 5)
            # An Embedding of it is refused when made, not at its first step;
            # the table is as it was.
            with self.assertRaises(graphnode.KVError) as cm:
                graphnode.Embedding(kv, "avg")
            self.assertEqual(cm.exception.code, 4)
            self.assertIn('table "avg" is a sync table', str(cm.exception))
            again, version = kv.pull_version("avg", [0, 1, 2])
            self.assertEqual(version, 1)
            self.assertTrue(torch.equal(again, rows))

            # Embedding: the gradient of sum() is 1 per element; SGD at lr 1.
            kv.create("e2", rows=10, dim=3, optimizer="sgd", lr=1.0, mode="async", init="uniform", init_scale=0.5)
            emb = graphnode.Embedding(kv, "e2")
            w0 = kv.pull("e2", [1, 2, 3])
            h = emb(torch.tensor([1, 2]))
            self.assertTrue(h.requires_grad)
            (h.sum() + emb(torch.tensor([2])).sum()).backward()
            emb.step()
            w1 = kv.pull("e2", [1, 2, 3])
            self.assertTrue(torch.allclose(w1[0], w0[0] - 1) and torch.allclose(w1[1], w0[1] - 2), (w0, w1))
            self.assertTrue(torch.equal(w1[2], w0[2]))

            self.assertTrue(kv.drop("emb"))
            self.assertFalse(kv.drop("emb"))
            with self.assertRaises(graphnode.KVError) as cm:
                kv.pull("emb", [0])
            self.assertEqual(cm.exception.code, 1)
            kv.done()
        self.stop_node()

    def test_split_refused(self):
        """A split that is not one of train, val, test is refused by the
        node, naming the field: the empty string too, which the client
        used to send as "train" (a split read from an unset config value
        trained on the train split without a word)."""
        for split in ("", "training"):
            with self.assertRaises(graphnode.ControlError) as cm:
                self.loader(split=split)
            self.assertEqual(cm.exception.key, "split", str(cm.exception))
        self.assertEqual(os.listdir(self.rings), [])

    def test_client_arguments(self):
        """What a trainer passes as numpy and torch take: numbers as
        np.int64 or one-element tensors; a timeout as a string; a bytes
        parts path. A gradient whose shape is not a row per id, or a push
        over the frame, is refused before it is sent, and pickling a
        client says to open one per process (a spawn-started DataLoader
        worker); OrigIds pickles as its path."""
        import pickle
        import numpy as np
        with graphnode.Loader(self.sock, split="train", fanouts=[3], batch_size=np.int64(50), epochs=np.int64(1),
                              workers=np.int64(2), concurrency=torch.tensor(2)) as lo:
            self.loaders.append(lo)
            self.assertEqual(len(lo), TRAIN // 50)
            with self.assertRaisesRegex(graphnode.LoaderError, "open one per process"):
                pickle.dumps(lo)
        with graphnode.KV(self.sock, timeout="5") as kv:
            info = kv.create("np", rows=np.int64(10), dim=np.int64(8), optimizer="sgd", lr=np.float32(0.5), mode="async")
            self.assertEqual((info["rows"], info["dim"]), (10, 8))
            ids = torch.tensor([1, 2, 3, 4])
            before = kv.pull("np", ids)
            g = torch.arange(32, dtype=torch.float32).view(4, 8)
            with self.assertRaisesRegex(ValueError, r"gradient of shape \(8, 4\) for 4 ids"):
                kv.push("np", ids, g.t())  # (dim, n): rows scrambled across the ids
            self.assertTrue(torch.equal(kv.pull("np", ids), before), "a refused push changed the rows")
            with self.assertRaisesRegex(graphnode.LoaderError, "push at most 254199 ids of dim 64 per call"):
                kv.push("np", torch.zeros(300000, dtype=torch.int64), torch.zeros(300000, 64))
            kv.create("s", rows=2, dim=1, optimizer="average", mode="sync")
            self.assertEqual(kv.push_sync("s", 0, 0, 1, torch.zeros(2)), 1)  # _wait compares the timeout
            with self.assertRaisesRegex(graphnode.LoaderError, "open one per process"):
                pickle.dumps(kv)
            kv.done()
        o = graphnode.OrigIds(os.fsencode(self.parts))
        self.assertEqual(len(o), 2000)
        p = pickle.dumps(o)
        self.assertLess(len(p), 1024, "the pickle carries the mapping, not the path")
        self.assertTrue(np.array_equal(pickle.loads(p)[np.arange(2000)], o[np.arange(2000)]))
        self.stop_node()

    def stop_node(self, signalled=False):
        """SIGTERM the node (unless the test did: a second signal ends it
        at once, without its drain); it must exit cleanly and leave no
        ring file."""
        if not signalled and self.node.poll() is None:
            self.node.send_signal(signal.SIGTERM)
        self.assertEqual(self.node.wait(15), 0, self.node_log())
        self.assertEqual(os.listdir(self.rings), [])
        for pid in self.samplers:
            self.assertFalse(os.path.exists("/proc/%d" % pid) and _is_child_alive(pid), "sampler %d outlived the node" % pid)
        with self.assertRaises(graphnode.LoaderError):
            control.stats(self.sock, timeout=1)


    def test_link_loader(self):
        """A link loader over edges of the graph (taken from a node
        batch): each batch scores its seed edges, then 2 negatives each
        with the same source, labels 1 then 0, and with
        exclude_seed_edges no sampled edge joins a seed edge's ends."""
        b = next(iter(self.loader(epochs=1, copy=True, shuffle=False)))
        src = b.n_id[b.edge_index[0]][:100]
        dst = b.n_id[b.edge_index[1]][:100]
        lo = self.loader(seed_edges=torch.stack([src, dst]), neg_ratio=2, exclude_seed_edges=True, batch_size=32,
                         shuffle=False, epochs=1)
        self.assertEqual(len(lo), 4)
        at = 0
        for lb in lo:
            p = min(32, 100 - at)
            self.assertEqual(tuple(lb.edge_label_index.shape), (2, 3 * p))
            self.assertEqual(lb.edge_label.tolist(), [1.0] * p + [0.0] * (2 * p))
            ends = lb.n_id[lb.edge_label_index]
            self.assertTrue(torch.equal(ends[0, :p], src[at:at + p]) and torch.equal(ends[1, :p], dst[at:at + p]))
            self.assertTrue(torch.equal(ends[0, p:], src[at:at + p].repeat_interleave(2)))
            self.assertTrue(bool((ends[1, p:] < 2000).all()))
            self.assertLess(int(lb.edge_label_index.max()), lb.batch_size)
            # PyG's triplet layout: each edge's source, destination and
            # its 2 negatives, which share the source.
            s_i, d_i, n_i = lb.triplets()
            self.assertEqual((tuple(s_i.shape), tuple(d_i.shape), tuple(n_i.shape)), ((p,), (p,), (p, 2)))
            self.assertTrue(torch.equal(lb.n_id[s_i], src[at:at + p]) and torch.equal(lb.n_id[d_i], dst[at:at + p]))
            self.assertTrue(torch.equal(n_i.reshape(-1), lb.edge_label_index[1, p:]))
            self.assertTrue(torch.equal(lb.edge_label_index[0, p:].view(p, 2), s_i.unsqueeze(1).expand(p, 2)))
            seed_pairs = {tuple(sorted(e)) for e in zip(src[at:at + p].tolist(), dst[at:at + p].tolist())}
            sampled = zip(lb.n_id[lb.edge_index[0]].tolist(), lb.n_id[lb.edge_index[1]].tolist())
            self.assertFalse(seed_pairs & {tuple(sorted(e)) for e in sampled}, "a seed edge was sampled")
            at += p
        self.assertEqual(at, 100)
        with self.assertRaises(graphnode.LoaderError):
            b.triplets()  # a node batch
        with self.assertRaises(graphnode.ControlError) as cm:
            self.loader(seed_edges=([1, 2], [3]))
        self.assertEqual(cm.exception.key, "seed_edges")

    def test_node_data(self):
        """graphnode.NodeData: the features of a batch's nodes and the
        labels of its seeds, asked by global id, equal the batch's; ids out
        of the graph are refused with the node's reason."""
        b = next(iter(self.loader(epochs=1, copy=True)))
        with graphnode.NodeData(self.sock) as data:
            x = data.features(b.n_id)
            self.assertEqual((x.shape, x.dtype), (b.x.shape, b.x.dtype))
            self.assertTrue(torch.equal(x, b.x))
            y = data.labels(b.n_id[:b.batch_size])
            self.assertEqual(y.dtype, torch.int64)
            self.assertTrue(torch.equal(y, b.y), (y, b.y))
            self.assertTrue(torch.equal(data.features([7, 7])[0], data.features(torch.tensor([7]))[0]))
            with self.assertRaises(graphnode.NodeDataError) as cm:
                data.features([1, 2000])
            self.assertIn("ids[1] = 2000 is not a node of the partition set", str(cm.exception))
            with self.assertRaisesRegex(ValueError, "^node data: ids\\[1\\] = -1: ids are non-negative$"):
                data.labels([3, -1])
            with self.assertRaisesRegex(ValueError, "^node data: ids must be integers, got dtype float32$"):
                data.features(torch.tensor([1.0]))
            self.assertEqual(data.features([]).shape, (0, b.x.shape[1]))


def read_epochs(it, lo, epochs):
    """Read the rest of it, then up to epochs more epochs of lo."""
    for _ in it:
        pass
    for _ in range(epochs):
        for _ in lo:
            pass


def _is_child_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


if __name__ == "__main__":
    unittest.main()
