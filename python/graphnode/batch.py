"""Mini-batches as PyTorch tensors viewing a decoded record in place.

Batch follows PyG's NeighborLoader output (torch_geometric.data.Data
with the sampler's extras): ``x`` (N, D) float32/float16, ``edge_index``
(2, E) int64 in local positions (row = neighbour, col = the node it was
sampled for), ``y`` int64 (B,) or (B, L), ``n_id`` (N,) int64 relabelled
global ids with the B seeds first, ``batch_size`` B, and
``num_sampled_nodes`` / ``num_sampled_edges`` as lists of ints per hop.
A link batch (a loader of seed_edges) also has ``edge_label_index`` (2, P)
int64, the pairs to score as positions in n_id (its seed edges, then
their negatives), and ``edge_label`` (P,) float32 (1, then 0), as PyG's
LinkNeighborLoader; both are None in a node batch.

Tensors made by from_record() are created with torch.frombuffer over the
buffer that holds the record: no copy. Each keeps the buffer (the ring's
mapping) alive, but the bytes are only the batch's until the loader
releases the record; copy() gives a Batch that owns its memory.
"""

import torch

from .errors import LoaderError
from .record import (SEC_EDGE_INDEX, SEC_EDGE_LABEL, SEC_EDGE_LABEL_INDEX, SEC_NID, SEC_X, SEC_Y, X_F16, X_F32,
                     decode_record)

_X_DTYPE = {X_F32: torch.float32, X_F16: torch.float16}

_TENSORS = ("x", "edge_index", "y", "n_id", "edge_label_index", "edge_label")


class Batch:
    """One mini-batch. Attributes: x, edge_index, y, n_id (tensors; x is
    None without features, y None without labels), batch_size (int),
    num_sampled_nodes, num_sampled_edges (lists of int), epoch, index
    (the batch's place in its epoch); edge_label_index, edge_label (link
    batches; None otherwise)."""

    __slots__ = ("x", "edge_index", "y", "n_id", "batch_size", "num_sampled_nodes", "num_sampled_edges",
                 "epoch", "index", "edge_label_index", "edge_label")

    def __init__(self, x, edge_index, y, n_id, batch_size, num_sampled_nodes, num_sampled_edges, epoch=0, index=0,
                 edge_label_index=None, edge_label=None):
        self.x = x
        self.edge_index = edge_index
        self.y = y
        self.n_id = n_id
        self.batch_size = batch_size
        self.num_sampled_nodes = num_sampled_nodes
        self.num_sampled_edges = num_sampled_edges
        self.epoch = epoch
        self.index = index
        self.edge_label_index = edge_label_index
        self.edge_label = edge_label

    @property
    def num_nodes(self):
        return int(self.n_id.shape[0])

    @property
    def num_edges(self):
        return int(self.edge_index.shape[1])

    def _map(self, fn):
        t = {k: (None if getattr(self, k) is None else fn(getattr(self, k))) for k in _TENSORS}
        return Batch(t["x"], t["edge_index"], t["y"], t["n_id"], self.batch_size, list(self.num_sampled_nodes),
                     list(self.num_sampled_edges), self.epoch, self.index, t["edge_label_index"], t["edge_label"])

    def to(self, device, non_blocking=False):
        """A Batch with every tensor moved to device ("cuda:0", "cpu", a
        torch.device). As Tensor.to, a tensor already on device is not
        copied: batch.to("cpu") still views the ring; use copy() to keep
        a batch past the next one."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def copy(self):
        """A Batch whose tensors own their memory (valid forever)."""
        return self._map(lambda t: t.clone())

    def pin_memory(self):
        """A Batch copied into page-locked host memory (needs CUDA)."""
        return self._map(lambda t: t.pin_memory())

    def layers(self, num_layers=None):
        """The batch cut for each layer of a message-passing model, from
        the input layer to the output one: a list of (edge_index, num_src,
        num_dst), as PyG's trim_to_layer and DGL's message flow graphs
        (blocks). Layer i of L reads the first num_src rows of x (the
        nodes of hops 0..L-i), the edges sampled at hops 1..L-i (a prefix
        of edge_index: rows = sources, cols = destinations) and writes the
        first num_dst nodes (hops 0..L-i-1, which are also the first
        sources, as a DGL block wants); the last layer's num_dst is
        batch_size. For DGL: dgl.create_block((ei[0], ei[1]),
        num_src_nodes=ns, num_dst_nodes=nd). num_layers (default: the hops
        sampled) may be fewer than the hops: the outer ones are left out."""
        return [(self.edge_index[:, :e], ns, nd)
                for e, ns, nd in layer_sizes(self.num_sampled_nodes, self.num_sampled_edges, num_layers)]

    def triplets(self):
        """A link batch's pairs as PyG's LinkNeighborLoader gives them with
        neg_sampling="triplet": (src_index, dst_pos_index, dst_neg_index),
        positions in n_id of each seed edge's source (M,), its destination
        (M,) and its neg_ratio negatives (M, neg_ratio), for ranking losses
        (BPR and the like). They view edge_label_index, which holds the M
        seed edges, then neg_ratio negatives per edge sharing its source.
        A node batch raises LoaderError."""
        if self.edge_label_index is None or self.edge_label is None:
            raise LoaderError("batch: epoch %d batch %d: triplets of a node batch: open the loader with seed_edges"
                              % (self.epoch, self.index))
        p = int(self.edge_label_index.shape[1])
        m = int((self.edge_label == 1).sum())
        if m == 0 or p % m:
            raise LoaderError("batch: epoch %d batch %d: %d pairs with %d seed edges: not seed edges then as many "
                              "negatives each" % (self.epoch, self.index, p, m))
        eli = self.edge_label_index
        return eli[0, :m], eli[1, :m], eli[1, m:].view(m, p // m - 1)

    def check_edges(self):
        """Raise LoaderError unless every position in edge_index lies in
        [0, num_nodes) (O(E); sample.View.CheckEdges)."""
        if self.edge_index.numel() == 0:
            return
        lo, hi = int(self.edge_index.min()), int(self.edge_index.max())
        if lo < 0 or hi >= self.num_nodes:
            raise LoaderError("batch: epoch %d batch %d: edge_index holds %d..%d, outside [0, %d)"
                              % (self.epoch, self.index, lo, hi, self.num_nodes))

    def __repr__(self):
        def shape(t):
            return "None" if t is None else "[%s]" % ", ".join(str(d) for d in t.shape)
        link = ""
        if self.edge_label_index is not None:
            link = ", edge_label_index=%s, edge_label=%s" % (shape(self.edge_label_index), shape(self.edge_label))
        return "Batch(epoch=%d, index=%d, x=%s, edge_index=%s, y=%s, n_id=%s, batch_size=%d%s)" % (
            self.epoch, self.index, shape(self.x), shape(self.edge_index), shape(self.y), shape(self.n_id),
            self.batch_size, link)


def layer_sizes(num_sampled_nodes, num_sampled_edges, num_layers=None):
    """Batch.layers as counts, from the per-hop counts alone (for a
    model's forward that gets them, not the batch): a list of (num_edges,
    num_src, num_dst) per layer, the input layer first."""
    hops = len(num_sampled_edges)
    if len(num_sampled_nodes) != hops + 1:
        raise ValueError("layer_sizes: %d node counts for %d hops of edges: want one more (the seeds)"
                         % (len(num_sampled_nodes), hops))
    L = hops if num_layers is None else num_layers
    if not 1 <= L <= hops:
        raise ValueError("layer_sizes: %s layers of a batch of %d hops: want 1..%d" % (num_layers, hops, hops))
    out = []
    for i in range(L):
        k = L - i
        out.append((sum(num_sampled_edges[:k]), sum(num_sampled_nodes[:k + 1]), sum(num_sampled_nodes[:k])))
    return out


def _view(buf, offset, dtype, count):
    if count == 0:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(buf, dtype=dtype, count=count, offset=offset)


def from_record(buf, offset, rec, copy=False):
    """The Batch of a decoded batch Record at offset in buf (a writable
    buffer: the ring's memoryview, or a bytearray). With copy=False the
    tensors view buf; with copy=True they own their memory."""
    s = rec.sections
    n, e, b = rec.num_nodes, rec.num_edges, rec.batch_size
    n_id = _view(buf, offset + s[SEC_NID][0], torch.int64, n)
    edge_index = _view(buf, offset + s[SEC_EDGE_INDEX][0], torch.int64, 2 * e).view(2, e)
    x = y = None
    if rec.feat_dim:
        x = _view(buf, offset + s[SEC_X][0], _X_DTYPE[rec.x_dtype], n * rec.feat_dim).view(n, rec.feat_dim)
    if rec.label_dim:
        y = _view(buf, offset + s[SEC_Y][0], torch.int64, b * rec.label_dim)
        y = y.view(b) if rec.label_dim == 1 else y.view(b, rec.label_dim)
    eli = el = None
    if rec.pairs:
        p = rec.pairs
        eli = _view(buf, offset + s[SEC_EDGE_LABEL_INDEX][0], torch.int64, 2 * p).view(2, p)
        el = _view(buf, offset + s[SEC_EDGE_LABEL][0], torch.float32, p)
    bt = Batch(x, edge_index, y, n_id, b, rec.num_sampled_nodes, rec.num_sampled_edges, rec.epoch, rec.index, eli, el)
    return bt.copy() if copy else bt


def decode_batch(buf, offset=0, length=None, copy=False):
    """Decode and validate the batch record at offset in buf (see
    record.decode_record) and return it as a Batch. buf must be writable
    (bytearray, a read-write mapping) for the zero-copy views; with a
    read-only buffer pass copy=True."""
    rec = decode_record(buf, offset, length)
    if rec.kind != 1:
        raise LoaderError("batch: decode: %s record, not a batch" % rec.kind_name)
    if copy and memoryview(buf).readonly:
        buf = bytearray(buf)
    return from_record(buf, offset, rec, copy)
