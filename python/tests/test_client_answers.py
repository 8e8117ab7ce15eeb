"""The kv and node-data clients against malformed answers (every error a
LoaderError, the same answers refused as by the Go client's decoders), and
Embedding's ids outliving the ring record they came from."""

import collections
import shutil
import struct
import tempfile
import time
import unittest

import numpy as np
import torch

import graphnode
from graphnode.errors import LoaderError
from graphnode.kv import KV, Embedding
from graphnode.nodedata import NodeData

from .fakenode import FakeNode



class RecKV:
    """A KV that answers every pull with rows of ones (dim 2) and records
    each push as (ids, gradient rows) lists."""

    def __init__(self):
        self.pushed = []

    def pull(self, name, ids):
        return torch.ones(len(ids), 2)

    def push(self, name, ids, grads):
        self.pushed.append((np.asarray(ids).tolist(), torch.as_tensor(grads).tolist()))

    def _check_push(self, name):
        pass  # an async table

class FakeConn:
    """A control connection that answers every exchange with answer."""

    def __init__(self, answer):
        self.answer = answer

    def exchange(self, body, op, timeout=None):
        return bytearray(self.answer)

    def close(self):
        pass


class JSONConn:
    """A control connection that answers every JSON request with answer."""

    def __init__(self, answer):
        self.answer = answer
        self.requests = []

    def request(self, req):
        self.requests.append(req)
        return self.answer


class DropAnswers(unittest.TestCase):
    def test_drop_counts_peers(self):
        """KV.drop is True when a peer held the table though the node asked
        did not (a client node), False only when no node held it."""
        cases = [
            ({"kv_drop": {"name": "t", "dropped": True}}, True),
            ({"kv_drop": {"name": "t", "dropped": False, "dropped_parts": [1]}}, True),
            ({"kv_drop": {"name": "t", "dropped": False, "unknown_parts": [1]}}, False),
            ({"kv_drop": {"name": "t", "dropped": False}}, False),
            ({}, False),
        ]
        for answer, want in cases:
            k = KV.__new__(KV)
            k._conn = JSONConn(answer)
            k._dims = {"t": 2}
            self.assertIs(k.drop("t"), want, answer)
            self.assertEqual(k._conn.requests, [{"op": "kv_drop", "name": "t"}])
            self.assertNotIn("t", k._dims)


def kv_with(answer):
    k = KV.__new__(KV)
    k._conn = FakeConn(answer)
    k._dims = {}
    k._timeout = 120.0
    return k


def nd_with(answer):
    d = NodeData.__new__(NodeData)
    d._conn = FakeConn(answer)
    d._row_bytes = {}
    return d


class MalformedAnswers(unittest.TestCase):
    """errors.py: every exception raised on purpose is a LoaderError. The
    Go client (node/control's DecodeFeatResponse and DecodeLabelResponse)
    refuses these answers as protocol errors."""

    def test_features_short_answer_is_loader_error(self):
        # A FeatResponse head saying 2 rows of dim 3 (f32) with only 4 value bytes.
        ans = bytes([0x22, 1, 1, 0, 0, 0]) + struct.pack("<II", 3, 2) + bytes(4)
        d = nd_with(ans)
        with self.assertRaises(LoaderError):
            d.features([5, 6])

    def test_features_trailing_bytes_refused(self):
        # Go's DecodeFeatResponse refuses any byte past n*dim values.
        ans = bytes([0x22, 1, 1, 0, 0, 0]) + struct.pack("<II", 1, 2) + struct.pack("<2f", 1, 2) + bytes(8)
        d = nd_with(ans)
        with self.assertRaises(LoaderError):
            d.features([5, 6])

    def test_kv_short_error_answer_is_loader_error(self):
        k = kv_with(bytes([7, 1, 6]))
        with self.assertRaises(LoaderError):
            k.pull("emb", [1])

    def test_kv_push_shapes(self):
        """push takes a row per id, (n, dim) or flat, and refuses a (dim, n)
        matrix of as many values (grads.t()) before sending; push_sync
        takes a sync table's rows in any shape, row-major (a conv
        weight's gradient)."""
        k = kv_with(struct.pack("<BBQ", 6, 1, 1))  # Ack, version 1
        k.push("emb", [1, 2, 3], torch.ones(3, 2))
        k.push("emb", [1, 2, 3], torch.ones(6))
        with self.assertRaisesRegex(ValueError, r"gradient of shape \(2, 3\) for 3 ids"):
            k.push("emb", [1, 2, 3], torch.ones(2, 3))
        with self.assertRaisesRegex(ValueError, r"gradient of shape \(3, 2, 1\)"):
            k.push("emb", [1, 2, 3], torch.ones(3, 2, 1))
        self.assertEqual(k.push_sync("w", 0, 0, 1, torch.ones(4, 3, 3, 3)), 1)

    def test_kv_pull_dim_zero_refused_like_go(self):
        # Go's KV.PullVersion refuses dim 0 (control.ErrProtocol): no table has it.
        k = kv_with(struct.pack("<BBQII", 2, 1, 0, 0, 1))
        with self.assertRaisesRegex(LoaderError, "rows of 0"):
            k.pull("emb", [1])

    def test_nodedata_short_error_answer_is_loader_error(self):
        d = nd_with(bytes([0x24, 1]))
        with self.assertRaises(LoaderError):
            d.labels([1])


class EmbeddingKeepsRingViews(unittest.TestCase):
    """With the Loader's default copy=False, batch.n_id views the ring,
    which the sampler overwrites once the next batch is requested; step()
    after several batches (gradient accumulation) must push the ids each
    call was given, not what that ring memory holds by then."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="graphnode-zz-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_embedding_step_after_next_batch_pushes_right_ids(self):
        node = FakeNode(self.dir, workers=1, per_epoch=12, capacity=4096)
        self.addCleanup(node.close)
        kv = RecKV()
        emb = Embedding(kv, "emb")
        want = collections.Counter()
        with graphnode.Loader(node.sock_path, fanouts=[2, 2], epochs=1) as lo:
            for b in lo:
                want.update(b.n_id.tolist())
                h = emb(b.n_id)
                h.sum().backward()
                time.sleep(0.01)  # let the sampler refill the room released by the next request
            emb.step()  # accumulate over the epoch, step once
        # One push: each id once, with the gradient 1 of every call it was in.
        self.assertEqual(len(kv.pushed), 1)
        ids, grads = kv.pushed[0]
        self.assertEqual((ids, [g[0] for g in grads]), (sorted(want), [float(want[i]) for i in sorted(want)]))


class EmbeddingUnderNoGrad(unittest.TestCase):
    """Evaluation calls an Embedding under torch.no_grad() for many
    batches without a step(): those calls have nothing to push and must
    not be traced, or every evaluated batch's rows stay in memory until
    the next training step (DGL's DistEmbedding traces only while autograd
    records)."""

    def test_no_grad_calls_not_traced(self):
        kv = RecKV()
        emb = Embedding(kv, "emb")
        with torch.no_grad():
            for i in range(3):
                h = emb(torch.arange(i, i + 4))
        self.assertFalse(h.requires_grad)
        self.assertEqual(emb._calls, [])
        h = emb(torch.tensor([7, 9]))  # training again: traced and pushed
        self.assertTrue(h.requires_grad)
        (2 * h).sum().backward()
        emb.step()
        self.assertEqual(kv.pushed, [([7, 9], [[2.0, 2.0], [2.0, 2.0]])])


class EmbeddingOneUpdatePerRow(unittest.TestCase):
    """step() gives each row one update with its gradients summed over
    the calls, as torch's optimisers do (DGL's SparseAdagrad merges the
    traced ids too, averaging them): pushed call by call, a row looked up
    twice in a step took an Adagrad or Adam step per call."""

    def test_calls_merged(self):
        kv = RecKV()
        emb = Embedding(kv, "emb")
        a = emb(torch.tensor([3, 5]))
        b = emb(torch.tensor([5, 1]))
        emb(torch.tensor([9]))  # no gradient: skipped
        emb(torch.tensor([], dtype=torch.int64)).sum().backward()
        (a.sum() + 2 * b.sum()).backward()
        emb.step()
        self.assertEqual(kv.pushed, [([1, 3, 5], [[2.0, 2.0], [1.0, 1.0], [3.0, 3.0]])])
        self.assertEqual(emb._calls, [])

    def test_split_at_frame_limit(self):
        # Each push fits a frame, and every row is in one push only.
        kv = RecKV()
        emb = Embedding(kv, "emb")
        h = emb(torch.tensor([4, 2, 7, 2, 0]))
        h.sum().backward()
        old = graphnode.kv.MAX_FRAME
        graphnode.kv.MAX_FRAME = graphnode.kv._PUSH_HEAD + 2 * (8 + 4 * 2)  # two rows of dim 2
        try:
            emb.step()
        finally:
            graphnode.kv.MAX_FRAME = old
        self.assertEqual(kv.pushed, [([0, 2], [[1.0, 1.0], [2.0, 2.0]]), ([4, 7], [[1.0, 1.0], [1.0, 1.0]])])


class EmbeddingOnSyncTable(unittest.TestCase):
    """A sync table takes only push_sync, a gradient for each of its rows
    from every trainer; an Embedding of one used to fail at its first
    step(), after the forward and backward pass. It asks the node when it
    is made, with a push of no ids (a no-op on an async table)."""

    def answering(self, answer):
        k = kv_with(answer)
        sent = []
        exchange = k._conn.exchange
        k._conn.exchange = lambda body, op, timeout=None: sent.append(bytes(body)) or exchange(body, op, timeout)
        return k, sent

    def test_refused_when_made(self):
        text = b'kv: table "avg": push to a sync table, use PushSync: wrong mode for this table'
        k, sent = self.answering(struct.pack("<BBHH", 7, 1, 4, len(text)) + text)
        with self.assertRaises(graphnode.KVError) as cm:
            Embedding(k, "avg")
        self.assertEqual(cm.exception.code, 4)
        msg = str(cm.exception)
        for want in ('table "avg" is a sync table', 'mode="async"', "push_sync"):
            self.assertIn(want, msg)
        # One push of no ids (dim 0, n 0) of table "avg".
        self.assertEqual(sent, [struct.pack("<BBB", 3, 1, 3) + b"avg" + struct.pack("<II", 0, 0)])

    def test_async_and_unknown_tables_made(self):
        """An async table acks the push of nothing (as a node of an earlier
        build does for any table: step() refuses a sync one there); a
        table not created yet is left to the calls, as before."""
        text = b'node: kv: table "later" (create it with kv_create or [[kv.tables]]): unknown table'
        for answer in (struct.pack("<BBQ", 6, 1, 0), struct.pack("<BBHH", 7, 1, 1, len(text)) + text):
            k, sent = self.answering(answer)
            emb = Embedding(k, "later")
            self.assertEqual(len(sent), 1)
            self.assertEqual(emb._calls, [])

    def test_other_errors_raised(self):
        text = b"kv: malformed"
        k, _ = self.answering(struct.pack("<BBHH", 7, 1, 7, len(text)) + text)
        with self.assertRaises(graphnode.KVError) as cm:
            Embedding(k, "e")
        self.assertEqual(cm.exception.code, 7)


class PushShape(unittest.TestCase):
    """KV.push of gradients that are not a whole row per id is a
    ValueError before anything is sent, as the Go client's kv.ErrShape:
    values without ids were dropped without a word, ids without values
    went out as a push of dim 0."""

    def test_refused_before_sending(self):
        for ids, grads in (([], [1.0, 2.0]), ([1], []), ([1, 2], [1.0, 2.0, 3.0])):
            sent = []
            k = kv_with(bytes([6, 1]) + struct.pack("<Q", 0))
            k._conn.exchange = lambda body, op, timeout=None: sent.append(body)
            with self.assertRaises(ValueError, msg="%d ids, %d values" % (len(ids), len(grads))):
                k.push("e", ids, grads)
            self.assertEqual(sent, [])

    def test_whole_rows_sent(self):
        k = kv_with(bytes([6, 1]) + struct.pack("<Q", 0))
        k.push("e", [], [])  # nothing to push: nothing sent, no error
        k.push("e", [1, 2], [1.0, 2.0, 3.0, 4.0])

    def test_bfloat16_gradients_sent_as_float32(self):
        """A bfloat16 gradient (a model trained in bf16, or under
        torch.autocast) goes out as float32, as float16 and float64 do:
        numpy has no bfloat16, and the push was a TypeError "Got
        unsupported ScalarType BFloat16"."""
        sent = []
        k = kv_with(bytes([6, 1]) + struct.pack("<Q", 3))
        k._conn.exchange = lambda body, op, timeout=None: sent.append(bytes(body)) or bytearray(k._conn.answer)
        g = torch.tensor([[1.5, -2.0], [0.25, 3.0]], dtype=torch.bfloat16)
        k.push("e", [1, 2], g)
        self.assertEqual(sent[-1][-16:], struct.pack("<4f", 1.5, -2.0, 0.25, 3.0))
        self.assertEqual(k.push_sync("w", 2, 0, 1, g), 3)
        self.assertEqual(sent[-1][-16:], struct.pack("<4f", 1.5, -2.0, 0.25, 3.0))


class PullNode:
    """Answers kv pulls of one table (row id = 10·id + column), refusing,
    as the node does, a pull whose answer would pass the frame limit."""

    def __init__(self, limit, dim):
        self.limit, self.dim, self.sizes, self.asked = limit, dim, [], []
        self.mins = []  # min_version of each request
        self.step = 0  # added to the answers' version (5) per request

    def exchange(self, body, op, timeout=None):
        k = body[2]
        min_version, n = struct.unpack_from("<QI", body, 3 + k)
        ids = np.frombuffer(bytes(body), "<u8", n, 3 + k + 12)
        self.sizes.append(n)
        self.asked.append(ids.tolist())
        self.mins.append(min_version)
        if 18 + 4 * n * self.dim > self.limit:
            text = b"the answer would exceed the frame limit"
            return bytearray(struct.pack("<BBHH", 7, 1, 7, len(text)) + text)
        if ids.size and ids.max() >= 100:
            i = int(np.argmax(ids >= 100))
            text = b"ids[%d] = %d: no such row" % (i, ids[i])
            return bytearray(struct.pack("<BBHH", 7, 1, 2, len(text)) + text)
        rows = (ids[:, None] * 10 + np.arange(self.dim)).astype("<f4")
        version = 5 + self.step * (len(self.asked) - 1)
        return bytearray(struct.pack("<BBQII", 2, 1, version, self.dim, n) + rows.tobytes())

    def close(self):
        pass


class PullSplit(unittest.TestCase):
    """A pull whose answer would pass the 64 MiB frame (an Embedding of a
    batch's n_id: 200k nodes at dim 128) is refused by the node; KV.pull
    sends such ids in as many requests as their rows need, learning the
    table's dim from a first pull of row 0."""

    DIM = 64
    LIMIT = 18 + 4 * DIM * 3  # three rows per answer

    def setUp(self):
        self.old = graphnode.kv.MAX_FRAME
        graphnode.kv.MAX_FRAME = self.LIMIT
        self.addCleanup(setattr, graphnode.kv, "MAX_FRAME", self.old)
        self.kv = kv_with(b"")
        self.node = self.kv._conn = PullNode(self.LIMIT, self.DIM)

    def want(self, ids, dim=DIM):
        return torch.tensor([[10.0 * i + c for c in range(dim)] for i in ids])

    def test_split_in_order(self):
        ids = [9, 1, 4, 4, 7, 0, 2, 8]
        rows, v = self.kv.pull_version("emb", torch.tensor(ids))
        self.assertTrue(torch.equal(rows, self.want(ids)), rows)
        self.assertEqual(v, 5)
        self.assertEqual(self.node.asked, [[0], ids[:3], ids[3:6], ids[6:]])
        self.node.sizes = []
        rows = self.kv.pull("emb", ids[:5])  # dim known: no probe
        self.assertTrue(torch.equal(rows, self.want(ids[:5])), rows)
        self.assertEqual(self.node.sizes, [3, 2])
        self.node.sizes = []
        self.assertTrue(torch.equal(self.kv.pull("emb", [6, 3]), self.want([6, 3])))
        self.assertEqual(self.node.sizes, [2])

    def test_errors_name_the_request(self):
        # One request: the node's index is the caller's (no probe of a
        # user's id shifts it). Several: the error says which ids it held.
        with self.assertRaisesRegex(graphnode.KVError, r"ids\[1\] = 200: no such row$"):
            self.kv.pull("emb", [1, 200])
        with self.assertRaisesRegex(graphnode.KVError, r"ids\[0\] = 300: no such row \(ids\[3:6\] of 7") as cm:
            self.kv.pull("emb", [1, 2, 3, 300, 4, 5, 6])
        self.assertEqual(cm.exception.code, 2)

    def test_table_made_wider(self):
        self.kv.pull("emb", [1, 2])
        self.node.dim = 2 * self.DIM  # dropped and created again, wider
        with self.assertRaises(graphnode.KVError):
            self.kv.pull("emb", [1, 2, 3])
        self.assertTrue(torch.equal(self.kv.pull("emb", [1, 2, 3]), self.want([1, 2, 3], 2 * self.DIM)))

    def test_table_made_narrower(self):
        # The node answers rows of the new dim, which the pull refuses
        # once; the dim it learnt must go with it, or every later pull of
        # more ids than one request holds fails the same way.
        ids = [5, 4, 3, 2, 1, 0, 9]
        self.kv.pull("emb", [1, 2])
        self.node.dim = self.DIM // 2  # dropped and created again, narrower
        with self.assertRaisesRegex(LoaderError, "rows of dim 64, then 32: the table changed between requests"):
            self.kv.pull("emb", ids)
        self.node.asked = []
        self.assertTrue(torch.equal(self.kv.pull("emb", ids), self.want(ids, self.DIM // 2)))
        self.assertEqual(self.node.asked, [[0], ids[:6], ids[6:]])  # learnt again: six rows of 32 an answer

    def test_pull_version_split(self):
        # Every request of rows waits for min_version; the version is the
        # lowest answered (each row is of it or a later one).
        self.node.step = 1
        ids = [9, 1, 4, 4, 7, 0, 2, 8]
        rows, v = self.kv.pull_version("emb", ids, min_version=3)
        self.assertTrue(torch.equal(rows, self.want(ids)), rows)
        self.assertEqual(self.node.asked, [[0], ids[:3], ids[3:6], ids[6:]])
        self.assertEqual(self.node.mins, [0, 3, 3, 3])
        self.assertEqual(v, 6)


class DataNode:
    """Answers node-data requests (feature row of id: 10·id + column;
    label: id), refusing, as the node does, an answer that would pass the
    frame limit."""

    def __init__(self, limit, dim):
        self.limit, self.dim, self.sizes, self.asked = limit, dim, [], []

    def exchange(self, body, op, timeout=None):
        kind, _, n = struct.unpack_from("<BBI", body)
        ids = np.frombuffer(bytes(body), "<u8", n, 6)
        self.sizes.append(n)
        self.asked.append(ids.tolist())
        if (14 + 4 * n * self.dim if kind == 0x20 else 12 + 4 * n) > self.limit:
            text = b"the answer would exceed the frame limit"
            return bytearray(struct.pack("<BBH", 0x24, 1, len(text)) + text)
        if ids.size and ids.max() >= 1000:
            i = int(np.argmax(ids >= 1000))
            text = b"ids[%d] = %d is not a node" % (i, ids[i])
            return bytearray(struct.pack("<BBH", 0x24, 1, len(text)) + text)
        if kind == 0x20:
            rows = (ids[:, None] * 10 + np.arange(self.dim)).astype("<f4")
            return bytearray(struct.pack("<BBBBHII", 0x22, 1, 1, 0, 0, self.dim, n) + rows.tobytes())
        return bytearray(struct.pack("<BBHII", 0x23, 1, 0, 1, n) + ids.astype("<i4").tobytes())


class NodeDataSplit(unittest.TestCase):
    """NodeData asks for the rows of many ids (DGL's ndata[ids], such as
    every node for full-graph inference) in as many requests as one 64
    MiB answer each allows; one request asking for all was refused by the
    node past 167k feature rows of dim 100."""

    DIM = 64
    LIMIT = 14 + 4 * DIM * 3  # three feature rows per answer

    def setUp(self):
        old = graphnode.nodedata.MAX_FRAME
        graphnode.nodedata.MAX_FRAME = self.LIMIT
        self.addCleanup(setattr, graphnode.nodedata, "MAX_FRAME", old)
        self.data = nd_with(b"")
        self.node = self.data._conn = DataNode(self.LIMIT, self.DIM)

    def test_features(self):
        ids = [9, 1, 4, 4, 7, 0, 2, 8]
        want = torch.tensor([[10.0 * i + c for c in range(self.DIM)] for i in ids])
        self.assertTrue(torch.equal(self.data.features(torch.tensor(ids)), want))
        self.assertEqual(self.node.asked, [[0], ids[:3], ids[3:6], ids[6:]])  # node 0 tells the row size
        self.node.sizes = []
        self.assertTrue(torch.equal(self.data.features(ids[:3]), want[:3]))
        self.assertEqual(self.node.sizes, [3])
        self.assertEqual(tuple(self.data.features([]).shape), (0, self.DIM))

    def test_labels(self):
        ids = list(range(200))
        self.assertEqual(self.data.labels(ids).tolist(), ids)
        per = (self.LIMIT - 6) // 8  # the request, 8 bytes an id, is the larger here
        self.assertEqual(self.node.sizes, [1, per, per, 200 - 2 * per])

    def test_errors_name_the_request(self):
        with self.assertRaisesRegex(graphnode.NodeDataError, r"^ids\[1\] = 2000 is not a node$"):
            self.data.features([1, 2000])
        with self.assertRaisesRegex(graphnode.NodeDataError,
                                    r"^ids\[1\] = 3000 is not a node \(ids\[3:6\] of 7, asked in requests of 3\)$"):
            self.data.features([1, 2, 3, 4, 3000, 5, 6])


class TimeoutConn:
    """Answers pulls (one row of dim 1) and pushes, recording the timeout
    of each exchange."""

    def __init__(self):
        self.timeouts = []

    def exchange(self, body, op, timeout=None):
        self.timeouts.append(timeout)
        if body[0] == 1:
            return bytearray(struct.pack("<BBQIIf", 2, 1, 4, 1, 1, 0.5))
        return bytearray(struct.pack("<BBQ", 6, 1, 4))


class SyncWait(unittest.TestCase):
    """A synchronous push waits for every trainer of its step, a pull
    with min_version for the step: the node answers within [kv]
    sync_timeout (at most 5 minutes) and its margin. A shorter socket
    timeout (KV's 120 s) broke the connection first, which the node takes
    for the trainer leaving: the step failed for every trainer."""

    def test_waits_outlast_sync_timeout(self):
        for timeout, waits in ((120.0, 330.0), (600.0, 600.0), (None, None)):
            k = KV.__new__(KV)
            k._conn, k._dims, k._timeout = TimeoutConn(), {}, timeout
            k.push_sync("avg", 3, 0, 2, [1.0])
            k.pull_version("avg", [0], min_version=4)
            k.pull_version("avg", [0])
            k.push("emb", [0], [1.0])
            self.assertEqual(k._conn.timeouts, [waits, waits, None, None], timeout)


class LabelDimZero(unittest.TestCase):
    def test_labels_dim_zero_refused_like_go(self):
        # Go's DecodeLabelResponse refuses dim 0 ("dim: 0").
        ans = bytes([0x23, 1, 0, 0]) + struct.pack("<II", 0, 2)
        d = nd_with(ans)
        with self.assertRaises(LoaderError):
            d.labels([1, 2])
