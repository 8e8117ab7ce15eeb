"""A batch record encoder for tests, written from sample/doc.go. The
golden test holds it to sample/testdata/batch_v1.bin byte for byte, so the
records other tests build with it are the Go encoder's records."""

import struct

import numpy as np

from graphnode.record import (ALIGN, HEADER_SIZE, KIND_BATCH, MAX_MESSAGE, NUM_SECTIONS, OFF_CRC, X_F16, X_F32,
                              crc32c)


def _align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _header(kind, hops, epoch, index, b, n, e, d, xt, ld, lengths, pairs=0):
    spans, off = [], HEADER_SIZE
    for ln in lengths:
        spans.append((off, ln))
        off = _align(off + ln)
    size = off
    hd = bytearray(HEADER_SIZE)
    struct.pack_into("<4sHHIIQQQQQQIIII", hd, 0, b"GNBR", 1, 1, kind, hops, size, epoch, index, b, n, e, d, xt, ld, pairs)
    for i, (o, ln) in enumerate(spans):
        struct.pack_into("<QQ", hd, 80 + 16 * i, o, ln)
    struct.pack_into("<I", hd, OFF_CRC, crc32c(hd[:OFF_CRC]))
    rec = bytearray(size)
    rec[:HEADER_SIZE] = hd
    return rec, spans


def encode_batch(epoch, index, n_id, row, col, num_sampled_nodes, num_sampled_edges, x=None, y=None,
                 x_dtype=X_F32, label_dim=1, edge_label_index=None, edge_label=None):
    """One batch record. x: (N, D) array-like or None; y: B*label_dim ints;
    a link batch's edge_label_index ((src positions, dst positions)) and
    edge_label (floats)."""
    n, e, hops = len(n_id), len(row), len(num_sampled_edges)
    b = num_sampled_nodes[0]
    xa = np.zeros((n, 0), dtype=np.float32) if x is None else np.asarray(x, dtype=np.float32 if x_dtype == X_F32 else np.float16)
    d = xa.shape[1]
    ya = np.asarray([] if y is None else y, dtype="<i8").reshape(-1)
    ld = 0 if y is None else label_dim
    eli = np.asarray([] if edge_label_index is None else edge_label_index, dtype="<i8").reshape(-1)
    el = np.asarray([] if edge_label is None else edge_label, dtype="<f4")
    lengths = [8 * n, 16 * e, 8 * (hops + 1), 8 * hops, xa.nbytes, 8 * ya.size, 0, eli.nbytes, el.nbytes]
    rec, spans = _header(KIND_BATCH, hops, epoch, index, b, n, e, d, x_dtype if d else X_F32, ld, lengths, el.size)
    parts = [np.asarray(n_id, dtype="<i8"), np.concatenate([np.asarray(row, dtype="<i8"), np.asarray(col, dtype="<i8")]),
             np.asarray(num_sampled_nodes, dtype="<i8"), np.asarray(num_sampled_edges, dtype="<i8"), xa, ya,
             np.zeros(0, dtype="u1"), eli, el]
    for (o, ln), arr in zip(spans, parts):
        rec[o:o + ln] = arr.tobytes()
    return bytes(rec)


def encode_control(kind, epoch, index, msg=""):
    """An end-of-epoch (2), error (3) or end-of-stream (4) record."""
    m = msg.encode()[:MAX_MESSAGE] if kind == 3 else b""
    rec, spans = _header(kind, 0, epoch, index, 0, 0, 0, 0, 0, 0, [0] * 6 + [len(m), 0, 0])
    o = spans[6][0]
    rec[o:o + len(m)] = m
    return bytes(rec)


def fix_crc(rec):
    """Recompute the header CRC of a (mutated) record in place."""
    struct.pack_into("<I", rec, OFF_CRC, crc32c(bytes(rec[:OFF_CRC])))
    return rec


def toy_batch(epoch, index, n_id_base=0, hops=2, feat_dim=3, x_dtype=X_F32, label_dim=1):
    """A small valid batch whose contents depend on (epoch, index)."""
    b = 2 + index % 3
    per_hop = [b] + [b + h for h in range(1, hops + 1)]
    n = sum(per_hop)
    n_id = [n_id_base + 1000 * epoch + 10 * index + i for i in range(n)]
    row, col, nse, start = [], [], [], 0
    for h in range(hops):
        end = start + per_hop[h]
        new = range(end, end + per_hop[h + 1])
        for j, r in enumerate(new):
            row.append(r)
            col.append(start + j % per_hop[h])
        nse.append(per_hop[h + 1])
        start = end
    x = [[float(v) + k / 4 for k in range(feat_dim)] for v in n_id]
    y = [(v * 7 + k) % 5 for v in n_id[:b] for k in range(label_dim)]
    return encode_batch(epoch, index, n_id, row, col, per_hop, nse, x if feat_dim else None, y if label_dim else None,
                        x_dtype, label_dim)


__all__ = ["encode_batch", "encode_control", "fix_crc", "toy_batch", "X_F16", "X_F32"]
