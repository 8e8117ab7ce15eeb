"""The batch record decoder against the Go encoder's golden record, and
its rejection of truncated and corrupt records."""

import json
import os
import random
import struct
import unittest

import torch

import graphnode
from graphnode.record import KIND_END_OF_EPOCH, KIND_END_OF_STREAM, KIND_ERROR, crc32c, header_crc

from .records import X_F16, encode_batch, encode_control, fix_crc, toy_batch

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTDATA = os.path.join(REPO, "sample", "testdata")


def golden(name="batch_v1"):
    """The Go encoder's record testdata/<name>.bin and its content."""
    with open(os.path.join(TESTDATA, name + ".bin"), "rb") as f:
        raw = f.read()
    with open(os.path.join(TESTDATA, name + ".json")) as f:
        want = json.load(f)
    return raw, want


class GoldenTest(unittest.TestCase):
    """sample/testdata/batch_v1.bin is written by the Go encoder
    (go test ./sample -run Golden -update); batch_v1.json is its content.
    batch_link_v1 is a link batch; batch_v1_0 a record of minor version 0
    (before the link sections), which still decodes."""

    def test_every_field(self):
        for name in ("batch_v1", "batch_link_v1", "batch_v1_0"):
            with self.subTest(name):
                self.check_golden(*golden(name))

    def check_golden(self, raw, want):
        rec = graphnode.decode_record(raw)
        self.assertEqual(raw[:4].decode(), want["magic"])
        self.assertEqual((1, rec.minor), (want["major"], want["minor"]))
        self.assertEqual(rec.kind, want["kind"])
        self.assertEqual(rec.size, want["record_len"])
        self.assertEqual(rec.size, len(raw))
        self.assertEqual(rec.epoch, want["epoch"])
        self.assertEqual(rec.index, want["batch"])
        self.assertEqual(rec.batch_size, want["batch_size"])
        self.assertEqual(rec.num_nodes, want["num_nodes"])
        self.assertEqual(rec.num_edges, want["num_edges"])
        self.assertEqual(rec.hops, want["hops"])
        self.assertEqual(rec.feat_dim, want["feat_dim"])
        self.assertEqual(rec.x_dtype, want["x_dtype"])
        self.assertEqual(rec.label_dim, want["label_dim"])
        names = graphnode.record.SECTION_NAMES
        self.assertEqual({names[i]: list(s) for i, s in enumerate(rec.sections) if names[i] in want["sections"]},
                         want["sections"])
        self.assertEqual(len(want["sections"]), 7 if rec.minor == 0 else 9)
        self.assertEqual(rec.num_sampled_nodes, want["num_sampled_nodes"])
        self.assertEqual(rec.num_sampled_edges, want["num_sampled_edges"])

        b = graphnode.decode_batch(bytearray(raw))
        self.assertEqual((b.epoch, b.index, b.batch_size), (want["epoch"], want["batch"], want["batch_size"]))
        self.assertEqual(b.n_id.dtype, torch.int64)
        self.assertEqual(b.n_id.tolist(), want["n_id"])
        self.assertEqual(b.edge_index.dtype, torch.int64)
        self.assertEqual(tuple(b.edge_index.shape), (2, want["num_edges"]))
        self.assertEqual(b.edge_index.tolist(), want["edge_index"])
        self.assertEqual(b.x.dtype, torch.float32)
        self.assertEqual(b.x.tolist(), want["x"])
        self.assertEqual(b.y.dtype, torch.int64)
        # label dim 1: y is (B,) as PyG's node classification expects.
        self.assertEqual(b.y.tolist(), [r[0] for r in want["y"]])
        self.assertEqual(b.num_sampled_nodes, want["num_sampled_nodes"])
        self.assertEqual(b.num_sampled_edges, want["num_sampled_edges"])
        if "pairs" in want:
            self.assertEqual(rec.pairs, want["pairs"])
            self.assertEqual(b.edge_label_index.dtype, torch.int64)
            self.assertEqual(b.edge_label_index.tolist(), want["edge_label_index"])
            self.assertEqual(b.edge_label.dtype, torch.float32)
            self.assertEqual(b.edge_label.tolist(), want["edge_label"])
            c = b.copy()
            self.assertEqual(c.edge_label_index.tolist(), want["edge_label_index"])
            self.assertIn(", edge_label_index=[2, %d], edge_label=[%d])" % (rec.pairs, rec.pairs), repr(b))
        else:
            self.assertNotIn("edge_label", repr(b))
            self.assertEqual(rec.pairs, 0)
            self.assertIsNone(b.edge_label_index)
            self.assertIsNone(b.edge_label)

    def test_crc(self):
        raw, _ = golden()
        stored = struct.unpack_from("<I", raw, 252)[0]
        self.assertEqual(crc32c(raw[:252]), stored)
        self.assertEqual(header_crc(raw), stored)
        self.assertEqual(crc32c(b"123456789"), 0xE3069283)  # the CRC-32C check value

    def test_encoder_matches_golden(self):
        # The tests' encoder, from which the ring and loader tests build
        # their records, writes the Go encoder's bytes.
        raw, want = golden()
        y = [v for row in want["y"] for v in row]
        got = encode_batch(want["epoch"], want["batch"], want["n_id"], want["edge_index"][0], want["edge_index"][1],
                           want["num_sampled_nodes"], want["num_sampled_edges"], want["x"], y, label_dim=1)
        self.assertEqual(got, raw)
        raw, want = golden("batch_link_v1")
        y = [v for row in want["y"] for v in row]
        got = encode_batch(want["epoch"], want["batch"], want["n_id"], want["edge_index"][0], want["edge_index"][1],
                           want["num_sampled_nodes"], want["num_sampled_edges"], want["x"], y, label_dim=1,
                           edge_label_index=want["edge_label_index"], edge_label=want["edge_label"])
        self.assertEqual(got, raw)


class DecodeTest(unittest.TestCase):
    def test_zero_copy(self):
        buf = bytearray(golden()[0])
        b = graphnode.decode_batch(buf)
        c = graphnode.decode_batch(buf, copy=True)
        off = graphnode.decode_record(buf).sections[0][0]
        struct.pack_into("<q", buf, off, 4242)
        self.assertEqual(int(b.n_id[0]), 4242)  # views the buffer
        self.assertEqual(int(c.n_id[0]), 2)     # owns its memory
        self.assertEqual(int(b.copy().n_id[0]), 4242)
        moved = b.to("cpu")
        self.assertEqual(moved.n_id.tolist(), b.n_id.tolist())
        self.assertEqual(moved.num_sampled_nodes, [3, 3, 2])

    def test_f16_and_multi_label(self):
        b = graphnode.decode_batch(bytearray(toy_batch(0, 4, feat_dim=5, x_dtype=X_F16, label_dim=3)))
        self.assertEqual(b.x.dtype, torch.float16)
        self.assertEqual(tuple(b.x.shape), (b.num_nodes, 5))
        want = torch.tensor([float(b.n_id[0]) + k / 4 for k in range(5)], dtype=torch.float16)
        self.assertEqual(b.x[0].tolist(), want.tolist())
        self.assertEqual(tuple(b.y.shape), (b.batch_size, 3))
        self.assertEqual(b.y[1].tolist(), [(int(b.n_id[1]) * 7 + k) % 5 for k in range(3)])
        b.check_edges()

    def test_no_features_no_labels(self):
        b = graphnode.decode_batch(bytearray(toy_batch(0, 0, feat_dim=0, label_dim=0)))
        self.assertIsNone(b.x)
        self.assertIsNone(b.y)
        self.assertEqual(b.n_id.shape[0], sum(b.num_sampled_nodes))

    def test_control_records(self):
        for kind, msg in ((KIND_END_OF_EPOCH, ""), (KIND_ERROR, "worker 1: sample: batch 17 hop 0: boom"),
                          (KIND_END_OF_STREAM, "")):
            rec = graphnode.decode_record(encode_control(kind, 3, 9, msg))
            self.assertEqual((rec.kind, rec.epoch, rec.index, rec.message), (kind, 3, 9, msg))
            with self.assertRaisesRegex(graphnode.LoaderError, "not a batch"):
                graphnode.decode_batch(bytearray(encode_control(kind, 3, 9, msg)))


def mutate(rec, off, fmt, value, crc=True):
    b = bytearray(rec)
    struct.pack_into(fmt, b, off, value)
    return fix_crc(b) if crc else b


class RejectTest(unittest.TestCase):
    def test_corrupt(self):
        raw, _ = golden()
        sec = graphnode.decode_record(raw).sections
        err = encode_control(KIND_ERROR, 0, 0, "x")
        cases = [
            ("short header", raw[:255], graphnode.CorruptError, "record of 255 bytes, header needs 256"),
            ("truncated record", raw[:640], graphnode.CorruptError, "record length 704"),
            ("bad crc", mutate(raw, 40, "<Q", 4, crc=False), graphnode.CorruptError, "header CRC-32C"),
            ("magic", mutate(raw, 0, "<4s", b"GNBX"), graphnode.CorruptError, "magic"),
            ("major", mutate(raw, 4, "<H", 2), graphnode.VersionError, "major version 2"),
            ("kind", mutate(raw, 8, "<I", 9), graphnode.CorruptError, "kind 9 unknown"),
            ("zero hops", mutate(raw, 12, "<I", 0), graphnode.CorruptError, "batch with 0 hops"),
            ("length not aligned", mutate(raw, 16, "<Q", 700), graphnode.CorruptError, "record length 700"),
            ("seeds > nodes", mutate(raw, 40, "<Q", 9), graphnode.CorruptError, "9 seeds, 8 nodes"),
            ("x dtype", mutate(raw, 68, "<I", 7), graphnode.CorruptError, "do not fit"),
            ("huge feat dim", mutate(raw, 64, "<I", 1 << 21), graphnode.CorruptError, "do not fit"),
            ("nodes vs n_id", mutate(raw, 48, "<Q", 7), graphnode.CorruptError, "section 0 \\(n_id\\) is 64 bytes, counts say 56"),
            ("misaligned section", mutate(raw, 80 + 16, "<Q", sec[1][0] + 8), graphnode.CorruptError, "misaligned"),
            ("overlapping section", mutate(raw, 80 + 16, "<Q", 256), graphnode.CorruptError, "section 1 \\(edge_index\\)"),
            ("section past end", mutate(raw, 80 + 16 * 5, "<Q", 704), graphnode.CorruptError, "section 5 \\(y\\)"),
            ("seed count", mutate(raw, sec[2][0], "<q", 2, crc=False), graphnode.CorruptError, "num_sampled_nodes\\[0\\] = 2"),
            ("counts add up", mutate(raw, sec[3][0], "<q", 5, crc=False), graphnode.CorruptError, "counts add up to 8 nodes, 9 edges"),
            ("negative count", mutate(mutate(raw, sec[2][0] + 8, "<q", -1, crc=False), sec[2][0] + 16, "<q", 6, crc=False),
             graphnode.CorruptError, "negative node count -1"),
            ("control with counts", mutate(encode_control(KIND_END_OF_EPOCH, 0, 0), 48, "<Q", 1), graphnode.CorruptError,
             "end of epoch record with batch counts"),
            ("message in end of stream", mutate(mutate(err, 8, "<I", KIND_END_OF_STREAM), 0, "<4s", b"GNBR"),
             graphnode.CorruptError, "end of stream record with a 1-byte message"),
            ("pairs without sections", mutate(raw, 76, "<I", 1), graphnode.CorruptError, "section 7 \\(edge_label_index\\)"),
            ("minor 0 with pairs", mutate(mutate(raw, 6, "<H", 0), 76, "<I", 1), graphnode.CorruptError, "minor version 0 with reserved"),
        ]
        for name, rec, exc, text in cases:
            with self.subTest(name):
                with self.assertRaisesRegex(exc, text):
                    graphnode.decode_record(rec)
                with self.assertRaises(graphnode.LoaderError):
                    graphnode.decode_batch(bytearray(rec))

    def test_random_mutations_raise_only_loader_errors(self):
        # A cheap fuzz: any single byte change with the CRC recomputed either
        # decodes to something whose views lie inside the record or raises
        # a LoaderError; nothing else escapes.
        raw, _ = golden()
        rnd = random.Random(1)
        for _ in range(3000):
            b = bytearray(raw)
            i = rnd.randrange(256 if rnd.random() < 0.8 else len(b))
            b[i] = rnd.randrange(256)
            if i < 252:
                fix_crc(b)
            try:
                r = graphnode.decode_record(b)
            except graphnode.LoaderError:
                continue
            for off, ln in r.sections:
                self.assertLessEqual(off + ln, len(b))
            if r.kind == 1:
                graphnode.decode_batch(b)


if __name__ == "__main__":
    unittest.main()


class LayersTest(unittest.TestCase):
    """Batch.layers and layer_sizes cut a batch per model layer, the input
    layer first (PyG's trim_to_layer, DGL's blocks)."""

    def test_sizes(self):
        # Seeds 2, hop 1 adds 3 nodes over 3 edges, hop 2 4 nodes over 5.
        self.assertEqual(graphnode.layer_sizes([2, 3, 4], [3, 5]), [(8, 9, 5), (3, 5, 2)])
        self.assertEqual(graphnode.layer_sizes([2, 3, 4], [3, 5], 1), [(3, 5, 2)])
        self.assertEqual(graphnode.layer_sizes([4, 0], [0]), [(0, 4, 4)])
        for nodes, edges, layers in (([2, 3], [3, 5], None), ([2, 3, 4], [3, 5], 3), ([2, 3, 4], [3, 5], 0)):
            with self.assertRaises(ValueError):
                graphnode.layer_sizes(nodes, edges, layers)

    def test_batch_layers(self):
        raw, want = golden()
        b = graphnode.decode_batch(bytearray(raw))
        layers = b.layers()
        self.assertEqual(len(layers), want["hops"])
        for (ei, ns, nd), (e, ns2, nd2) in zip(layers, graphnode.layer_sizes(b.num_sampled_nodes, b.num_sampled_edges)):
            self.assertEqual((ei.shape[1], ns, nd), (e, ns2, nd2))
            self.assertTrue(torch.equal(ei, b.edge_index[:, :e]))
        self.assertEqual((layers[0][1], layers[-1][2]), (b.num_nodes, b.batch_size))
