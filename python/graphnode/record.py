"""The batch record layout (sample/doc.go, "Record layout") and its
validating decoder, without torch: decode_record() checks a record exactly
as the Go decoder (sample.Decode) does and returns a Record naming where
each section lies. batch.py turns a Record into torch tensors.

    offset  width  field
         0      4  magic "GNBR"
         4      2  major version 1 (others refused)   6  2  minor (any)
         8      4  kind: 1 batch, 2 end of epoch, 3 error, 4 end of stream
        12      4  hops H
        16      8  record length (multiple of 64)
        24..63     epoch, batch index, batch_size B, num nodes N, num edges E
        64..79     feat dim D, x dtype (0 f32, 1 f16), label dim L, pairs P
                   (minor 1: a link batch's scored pairs; reserved 0 in minor 0)
        80    144  section table: 9 x (offset u64, length u64) (minor 0: 7,
                   the last two entries reserved 0)
       252      4  CRC-32C of bytes [0, 252)
       256         sections, 64-byte aligned
"""

import struct

import numpy as np

from .errors import CorruptError, LoaderError, VersionError

MAGIC = b"GNBR"
MAJOR_VERSION = 1
HEADER_SIZE = 256
ALIGN = 64
MAX_MESSAGE = 4096
MAX_HOPS = 32
MAX_FEAT_DIM = 1 << 20
MAX_LABEL_DIM = 1 << 16
OFF_CRC = HEADER_SIZE - 4

KIND_BATCH, KIND_END_OF_EPOCH, KIND_ERROR, KIND_END_OF_STREAM = 1, 2, 3, 4
KIND_NAMES = {1: "batch", 2: "end of epoch", 3: "error", 4: "end of stream"}

(SEC_NID, SEC_EDGE_INDEX, SEC_NUM_SAMPLED_NODES, SEC_NUM_SAMPLED_EDGES, SEC_X, SEC_Y, SEC_MESSAGE,
 SEC_EDGE_LABEL_INDEX, SEC_EDGE_LABEL) = range(9)
NUM_SECTIONS = 9
SECTIONS_MINOR_0 = 7
SECTION_NAMES = ("n_id", "edge_index", "num_sampled_nodes", "num_sampled_edges", "x", "y", "message",
                 "edge_label_index", "edge_label")

X_F32, X_F16 = 0, 1
_X_SIZE = {X_F32: 4, X_F16: 2}

_HEAD = struct.Struct("<4sHHIIQQQQQQIIII" + "Q" * (2 * NUM_SECTIONS))


def _crc32c_table():
    poly = 0x82F63B78  # Castagnoli, reflected
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        t.append(c)
    return t


_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli) of data, as Go's crc32.Checksum(data,
    crc32.MakeTable(crc32.Castagnoli)). Pure Python: for tests and small
    inputs; the decoder uses the header-sized fast path below."""
    t = _TABLE
    c = crc ^ 0xFFFFFFFF
    for b in bytes(data):
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _position_tables(n):
    """CRC-32C is affine in its input: crc(d) = K ^ XOR_i T[i][d[i]] for
    inputs of exactly n bytes, where T[i][b] is byte b's contribution at
    position i (the table entry carried through the n-1-i zero bytes that
    follow it) and K the initial register carried through all n, then
    inverted. This turns the header CRC into one numpy gather and one XOR
    reduction instead of a 252-step Python loop."""
    table = np.array(_TABLE, dtype=np.uint32)
    rows = np.empty((n, 256), dtype=np.uint32)
    rows[n - 1] = table
    for i in range(n - 2, -1, -1):
        r = rows[i + 1]
        rows[i] = (r >> 8) ^ table[r & 0xFF]
    k = 0xFFFFFFFF
    for _ in range(n):
        k = _TABLE[k & 0xFF] ^ (k >> 8)
    return rows, np.arange(n), k ^ 0xFFFFFFFF


_POS_ROWS, _POS_IDX, _POS_K = _position_tables(OFF_CRC)


def header_crc(buf, offset=0):
    """CRC-32C of the 252 header bytes of the record at offset in buf."""
    d = np.frombuffer(buf, dtype=np.uint8, count=OFF_CRC, offset=offset)
    return int(np.bitwise_xor.reduce(_POS_ROWS[_POS_IDX, d])) ^ _POS_K


class Record:
    """A validated record: header fields, and each section's (offset,
    length) in bytes relative to the record start (``sections``). The
    ``num_sampled_nodes`` / ``num_sampled_edges`` lists and the error
    ``message`` are read out; the bulk sections are left in place."""

    __slots__ = ("kind", "minor", "hops", "size", "epoch", "index", "batch_size", "num_nodes", "num_edges",
                 "feat_dim", "x_dtype", "label_dim", "pairs", "sections", "num_sampled_nodes", "num_sampled_edges",
                 "message")

    @property
    def kind_name(self):
        return KIND_NAMES.get(self.kind, "kind %d" % self.kind)

    def __repr__(self):
        return "Record(%s, epoch=%d, index=%d, batch_size=%d, nodes=%d, edges=%d)" % (
            self.kind_name, self.epoch, self.index, self.batch_size, self.num_nodes, self.num_edges)


def _lengths(r, limit):
    """Exact section lengths the counts imply, or None when they cannot be
    a record's (sample.Header.lengths)."""
    big = 1 << 56
    xs = _X_SIZE.get(r.x_dtype, 0)
    msg_len = r.sections[SEC_MESSAGE][1]
    if (limit > 1 << 40 or r.num_nodes > limit or r.num_edges > limit or r.batch_size > limit or msg_len > limit
            or r.pairs > limit or r.feat_dim > MAX_FEAT_DIM or r.label_dim > MAX_LABEL_DIM or r.hops > MAX_HOPS
            or xs == 0):
        return None
    batch = r.kind == KIND_BATCH
    ls = [8 * r.num_nodes, 16 * r.num_edges, 8 * (r.hops + 1) if batch else 0, 8 * r.hops if batch else 0,
          r.num_nodes * r.feat_dim * xs, 8 * r.batch_size * r.label_dim, msg_len, 16 * r.pairs, 4 * r.pairs]
    if any(n > big for n in ls):
        return None
    return ls


def _corrupt(fmt, *args):
    return CorruptError("batch: decode: " + (fmt % args if args else fmt))


def decode_record(buf, offset=0, length=None, check_crc=True, address=None):
    """Validate the record at offset in buf (any buffer: bytes, bytearray,
    memoryview of the ring) of length bytes (default: to the end of buf)
    and return a Record. Checks, as sample.Decode: size, header CRC-32C,
    8-byte alignment of the record start (``address`` of buf[offset] when
    known, else taken from buf), magic, major version, record length,
    kind and its counts, each section's length against the counts and its
    place against the record and alignment, and that the per-hop counts
    add up. Raises CorruptError / VersionError naming the field."""
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    if length is None:
        length = len(mv) - offset
    if offset < 0 or length < 0 or offset + length > len(mv):
        raise LoaderError("batch: decode: record [%d, +%d) outside a %d-byte buffer" % (offset, length, len(mv)))
    if length < HEADER_SIZE:
        raise _corrupt("record of %d bytes, header needs %d", length, HEADER_SIZE)
    if check_crc:
        stored = struct.unpack_from("<I", mv, offset + OFF_CRC)[0]
        got = header_crc(mv, offset)
        if got != stored:
            raise _corrupt("header CRC-32C %08x, stored %08x", got, stored)
    if address is None:
        address = np.frombuffer(mv, dtype=np.uint8, count=1, offset=offset).ctypes.data
    if address % 8:
        raise LoaderError("batch: decode: record not 8-byte aligned")
    f = _HEAD.unpack_from(mv, offset)
    magic, major, minor = f[0], f[1], f[2]
    if magic != MAGIC:
        raise _corrupt("magic %r, want %r", magic, MAGIC)
    if major != MAJOR_VERSION:
        raise VersionError("batch: decode: major version %d, this client reads %d" % (major, MAJOR_VERSION))
    r = Record()
    r.minor = minor
    (r.kind, r.hops, size, r.epoch, r.index, r.batch_size, r.num_nodes, r.num_edges,
     r.feat_dim, r.x_dtype, r.label_dim, r.pairs) = f[3:15]
    t = f[15:]
    r.sections = [(t[2 * i], t[2 * i + 1]) for i in range(NUM_SECTIONS)]
    sections = NUM_SECTIONS
    if minor == 0:
        # No link sections: the pair count and their table entries were
        # reserved bytes, zero.
        if r.pairs or any(t[2 * SECTIONS_MINOR_0:]):
            raise _corrupt("minor version 0 with reserved bytes set")
        sections = SECTIONS_MINOR_0
    r.num_sampled_nodes = r.num_sampled_edges = None
    r.message = ""
    msg_len = r.sections[SEC_MESSAGE][1]
    if size < HEADER_SIZE or size % ALIGN or size > length:
        raise _corrupt("record length %d: want a multiple of %d in [%d, %d]", size, ALIGN, HEADER_SIZE, length)
    r.size = size
    if r.kind == KIND_BATCH:
        if r.hops == 0 or r.batch_size == 0 or r.batch_size > r.num_nodes or msg_len != 0:
            raise _corrupt("batch with %d hops, %d seeds, %d nodes, %d message bytes",
                           r.hops, r.batch_size, r.num_nodes, msg_len)
    elif r.kind in (KIND_END_OF_EPOCH, KIND_ERROR, KIND_END_OF_STREAM):
        if r.hops | r.feat_dim | r.label_dim | r.x_dtype or r.batch_size | r.num_nodes | r.num_edges | r.pairs:
            raise _corrupt("%s record with batch counts", r.kind_name)
        if (r.kind != KIND_ERROR and msg_len != 0) or msg_len > MAX_MESSAGE:
            raise _corrupt("%s record with a %d-byte message", r.kind_name, msg_len)
    else:
        raise _corrupt("kind %d unknown", r.kind)
    want = _lengths(r, size)
    if want is None:
        raise _corrupt("counts (%d nodes, %d edges, %d seeds, feat dim %d x dtype %d, label dim %d, %d hops) do not fit %d bytes",
                       r.num_nodes, r.num_edges, r.batch_size, r.feat_dim, r.x_dtype, r.label_dim, r.hops, size)
    prev = HEADER_SIZE
    for i, (off, ln) in enumerate(r.sections[:sections]):
        if ln != want[i]:
            raise _corrupt("section %d (%s) is %d bytes, counts say %d", i, SECTION_NAMES[i], ln, want[i])
        if off % ALIGN or off < prev or off > size or ln > size - off:
            raise _corrupt("section %d (%s) at [%d, +%d) outside [%d, %d) or misaligned",
                           i, SECTION_NAMES[i], off, ln, prev, size)
        prev = off + ln
    if r.kind == KIND_BATCH:
        off = offset + r.sections[SEC_NUM_SAMPLED_NODES][0]
        r.num_sampled_nodes = list(struct.unpack_from("<%dq" % (r.hops + 1), mv, off))
        off = offset + r.sections[SEC_NUM_SAMPLED_EDGES][0]
        r.num_sampled_edges = list(struct.unpack_from("<%dq" % r.hops, mv, off))
        if r.num_sampled_nodes[0] != r.batch_size:
            raise _corrupt("num_sampled_nodes[0] = %d, batch size %d", r.num_sampled_nodes[0], r.batch_size)
        _check_counts(r)
        if r.pairs:
            off = offset + r.sections[SEC_EDGE_LABEL_INDEX][0]
            pos = np.frombuffer(mv, dtype="<i8", count=2 * r.pairs, offset=off)
            if pos.min() < 0 or pos.max() >= r.num_nodes:
                raise _corrupt("edge_label_index entry outside [0, %d)", r.num_nodes)
    elif r.kind == KIND_ERROR:
        off = offset + r.sections[SEC_MESSAGE][0]
        r.message = bytes(mv[off:off + msg_len]).decode("utf-8", "replace")
    return r


def _check_counts(r):
    """The per-hop counts are non-negative and add up (sample.checkCounts)."""
    for c in r.num_sampled_nodes:
        if c < 0:
            raise _corrupt("negative node count %d", c)
    for c in r.num_sampled_edges:
        if c < 0:
            raise _corrupt("negative edge count %d", c)
    sn, se = sum(r.num_sampled_nodes), sum(r.num_sampled_edges)
    if sn != r.num_nodes or se != r.num_edges:
        raise _corrupt("counts add up to %d nodes, %d edges; batch has %d, %d", sn, se, r.num_nodes, r.num_edges)
