"""Features and labels of any node of the partition set, by global id,
through this host's node (docs/control.md, "Node data"): what DGL's
DistGraph.ndata and GLT's DistFeature give. The node answers from its
partition, its cache section and, for the rest, one pull per peer.

    data = graphnode.NodeData("/run/graphnode/node.sock")
    x = data.features(ids)     # torch.float32 (or float16) [len(ids), feat_dim], a copy
    y = data.labels(ids)       # torch.int64 [len(ids)] (or [len(ids), label_dim]); -1 = missing

Ids are relabelled global ids (those of batches; OrigIds maps them back).
"""

import struct

import numpy as np
import torch

from .control import MAX_FRAME, Session
from .errors import LoaderError
from .kv import _ids

VERSION = 1
KIND_FEAT = 0x20
KIND_LABEL = 0x21
KIND_FEAT_RESPONSE = 0x22
KIND_LABEL_RESPONSE = 0x23
KIND_ERROR = 0x24
DTYPES = {1: ("<f4", torch.float32), 2: ("<f2", torch.float16)}
# Bytes of a request besides its ids, and of the answers besides their rows.
_REQUEST_HEAD = 6
_HEADS = {KIND_FEAT: 14, KIND_LABEL: 12}


class NodeDataError(LoaderError):
    """The node refused a request: an id that is not a node, a set
    without features or labels, too many ids for one answer, a peer that
    could not be reached. The message is the node's."""


class NodeData(Session):
    """A connection for node-data requests. Not safe for concurrent use:
    open one per thread."""

    def __init__(self, socket, timeout=60.0):
        super().__init__(socket, timeout)
        self._row_bytes = {}  # request kind -> bytes per id in its answers

    def _split(self, kind, ids, once):
        """once(a) over the uint64 ids a, in as many requests as the
        answers need: one answer must fit a 64 MiB frame (the node refuses
        more; the features of 200k ids at dim 128 take two). The bytes per
        id are learnt once per connection from a request of node 0 (the
        node's partition set does not change); an error of a request of
        several names the ids it held (ids[lo:hi]), as the node's indexes
        then count from lo."""
        a = _ids(ids, "node data")
        rb = self._row_bytes.get(kind)
        if rb is None and a.size > 1:
            rb = self._row_bytes[kind] = once(np.zeros(1, dtype="<u8"))[1]
        per = a.size if rb is None else max(1, min((MAX_FRAME - _HEADS[kind]) // rb,
                                                   (MAX_FRAME - _REQUEST_HEAD) // 8))
        if a.size <= per:
            t, rb = once(a)
            if a.size:
                self._row_bytes[kind] = rb
            return t
        parts = []
        for lo in range(0, a.size, per):
            hi = min(a.size, lo + per)
            try:
                parts.append(once(a[lo:hi])[0])
            except NodeDataError as e:
                raise NodeDataError("%s (ids[%d:%d] of %d, asked in requests of %d)" % (e, lo, hi, a.size, per)) from None
        return torch.cat(parts)

    def _call(self, kind, ids, op):
        a = _ids(ids, "node data")
        body = struct.pack("<BBI", kind, VERSION, a.size) + a.tobytes()
        ans = self._conn.exchange(body, op)
        if len(ans) < 2 or ans[1] != VERSION:
            raise LoaderError("node data: %s: answer of %d bytes is not a version %d message" % (op, len(ans), VERSION))
        if ans[0] == KIND_ERROR:
            if len(ans) < 4:
                raise LoaderError("node data: %s: error answer of %d bytes, want at least 4" % (op, len(ans)))
            n, = struct.unpack_from("<H", ans, 2)
            raise NodeDataError(bytes(ans[4:4 + n]).decode("utf-8", "replace"))
        return a.size, ans

    def features(self, ids):
        """The feature rows of ids, in their order: a tensor [len(ids), dim]
        of the partition's dtype (float32, or float16)."""
        return self._split(KIND_FEAT, ids, self._features)

    def _features(self, ids):
        n, ans = self._call(KIND_FEAT, ids, "features")
        if ans[0] != KIND_FEAT_RESPONSE or len(ans) < 14:
            raise LoaderError("node data: features: unexpected answer kind %#x" % ans[0])
        dtype, dim, count = ans[2], *struct.unpack_from("<II", ans, 6)
        if dtype not in DTYPES or count != n or any(ans[3:6]):
            raise LoaderError("node data: features: answer of dtype %d and %d rows for %d ids" % (dtype, count, n))
        np_type, _ = DTYPES[dtype]
        if len(ans) != 14 + count * dim * np.dtype(np_type).itemsize:
            raise LoaderError("node data: features: answer of %d bytes for %d rows of %d values of dtype %d"
                              % (len(ans), count, dim, dtype))
        rows = np.frombuffer(ans, np_type, count * dim, 14).reshape(count, dim)
        return torch.from_numpy(rows.copy()), dim * np.dtype(np_type).itemsize

    def labels(self, ids):
        """The labels of ids, in their order: int64 [len(ids)] when the set
        has one label per node, [len(ids), dim] otherwise; -1 = missing."""
        return self._split(KIND_LABEL, ids, self._labels)

    def _labels(self, ids):
        n, ans = self._call(KIND_LABEL, ids, "labels")
        if ans[0] != KIND_LABEL_RESPONSE or len(ans) < 12:
            raise LoaderError("node data: labels: unexpected answer kind %#x" % ans[0])
        dim, count = struct.unpack_from("<II", ans, 4)
        if count != n or dim == 0 or any(ans[2:4]) or len(ans) != 12 + 4 * count * dim:
            raise LoaderError("node data: labels: answer of %d ids of dim %d for %d ids" % (count, dim, n))
        y = torch.from_numpy(np.frombuffer(ans, "<i4", count * dim, 12).astype(np.int64))
        return (y if dim == 1 else y.reshape(count, dim)), 4 * dim
