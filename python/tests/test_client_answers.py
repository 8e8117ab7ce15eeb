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


class FakeConn:
    """A control connection that answers every exchange with answer."""

    def __init__(self, answer):
        self.answer = answer

    def exchange(self, body, op, timeout=None):
        return bytearray(self.answer)

    def close(self):
        pass


def kv_with(answer):
    k = KV.__new__(KV)
    k._conn = FakeConn(answer)
    return k


def nd_with(answer):
    d = NodeData.__new__(NodeData)
    d._conn = FakeConn(answer)
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

        class RecKV:
            def __init__(self):
                self.pushed = []

            def pull(self, name, ids):
                return torch.zeros(len(ids), 2)

            def push(self, name, ids, grads):
                self.pushed.append((np.asarray(ids).tolist(), grads[:, 0].tolist()))

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
        self.assertEqual(kv.pushed[0], (sorted(want), [float(want[i]) for i in sorted(want)]))


class EmbeddingUnderNoGrad(unittest.TestCase):
    """Evaluation calls an Embedding under torch.no_grad() for many
    batches without a step(): those calls have nothing to push and must
    not be traced, or every evaluated batch's rows stay in memory until
    the next training step (DGL's DistEmbedding traces only while autograd
    records)."""

    def test_no_grad_calls_not_traced(self):
        class RecKV:
            def __init__(self):
                self.pushed = []

            def pull(self, name, ids):
                return torch.ones(len(ids), 2)

            def push(self, name, ids, grads):
                self.pushed.append((ids.tolist(), grads.tolist()))

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
    the calls, as torch's optimisers and DGL's SparseAdagrad (which
    merges the traced ids) do: pushed call by call, a row looked up twice
    in a step took an Adagrad or Adam step per call."""

    class RecKV:
        def __init__(self):
            self.pushed = []

        def pull(self, name, ids):
            return torch.ones(len(ids), 2)

        def push(self, name, ids, grads):
            self.pushed.append((np.asarray(ids).tolist(), torch.as_tensor(grads).tolist()))

    def test_calls_merged(self):
        kv = self.RecKV()
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
        kv = self.RecKV()
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


class LabelDimZero(unittest.TestCase):
    def test_labels_dim_zero_refused_like_go(self):
        # Go's DecodeLabelResponse refuses dim 0 ("dim: 0").
        ans = bytes([0x23, 1, 0, 0]) + struct.pack("<II", 0, 2)
        d = nd_with(ans)
        with self.assertRaises(LoaderError):
            d.labels([1, 2])
