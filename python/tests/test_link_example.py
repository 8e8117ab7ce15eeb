"""python/examples/link_sage.py end to end: GraphSAGE link prediction on
Cora from link batches of a real `node run`. Cora's citations are split
85/5/10 into training, validation and test edges; the node serves a
partition of the training edges only, and the test ROC AUC at the best
validation epoch must reach MIN_AUC.

Needs the Go toolchain and Cora ($GRAPHNODE_DATA/cora, else
../shared/data/cora), as test_example (it skips without the data). Run as a script for the figures of the README:

    /usr/bin/python3 python/tests/test_link_example.py --epochs 20
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_example import CORA, REPO, Cluster, _run, build_node  # noqa: E402

EXAMPLE = os.path.join(REPO, "python", "examples", "link_sage.py")
MIN_AUC = 0.80


def split_cites(out, seed=0):
    """Cora's citations as undirected pairs, shuffled with seed, into
    out/{train,val,test}_edges.txt (85/5/10); out/cora holds cora.content
    and the training citations alone."""
    pairs = set()
    with open(os.path.join(CORA, "cora.cites")) as f:
        for line in f:
            u, v = line.split()
            if u != v:
                pairs.add((min(u, v), max(u, v)))
    pairs = sorted(pairs)
    random.Random(seed).shuffle(pairs)
    n_val, n_test = len(pairs) // 20, len(pairs) // 10
    split = {"val": pairs[:n_val], "test": pairs[n_val:n_val + n_test], "train": pairs[n_val + n_test:]}
    for name, ps in split.items():
        with open(os.path.join(out, name + "_edges.txt"), "w") as f:
            f.writelines("%s %s\n" % p for p in ps)
    graph = os.path.join(out, "cora")
    os.mkdir(graph)
    os.symlink(os.path.join(CORA, "cora.content"), os.path.join(graph, "cora.content"))
    with open(os.path.join(graph, "cora.cites"), "w") as f:
        f.writelines("%s\t%s\n" % p for p in split["train"])
    return graph, {k: len(v) for k, v in split.items()}


def run_example(tmp, epochs, seed=0):
    node = build_node(tmp)
    graph, sizes = split_cites(tmp, seed)
    parts = os.path.join(tmp, "parts")
    _run([node, "partition", "--input", graph, "--format", "linqs", "--undirected",
          "--split", "per-class:20,500,1000", "--parts", "1", "-o", parts])
    cluster = Cluster(node, parts, 1, tmp)
    try:
        args = [sys.executable, EXAMPLE, "--socket", cluster.sockets[0], "--parts", parts,
                "--train", os.path.join(tmp, "train_edges.txt"), "--val", os.path.join(tmp, "val_edges.txt"),
                "--test", os.path.join(tmp, "test_edges.txt"), "--row-normalize", "--epochs", str(epochs),
                "--seed", str(seed)]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError("link_sage.py failed (%d):\n%s" % (p.returncode, p.stdout[-4000:]))
        lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        return lines, sizes
    finally:
        cluster.close()


class LinkExampleTest(unittest.TestCase):
    def test_link_sage(self):
        if not os.path.exists(os.path.join(CORA, "cora.cites")):
            self.skipTest("needs Cora (LINQS) at %s" % CORA)
        with tempfile.TemporaryDirectory() as tmp:
            lines, sizes = run_example(tmp, epochs=10)
        final = lines[-1]
        print("\ntest_link_example: %s" % json.dumps(final))
        self.assertEqual((final["train_edges"], final["val_edges"], final["test_edges"]),
                         (sizes["train"], sizes["val"], sizes["test"]))
        self.assertEqual(len(lines), 11, lines)
        self.assertLess(lines[-2]["loss"], lines[0]["loss"], "the loss did not fall")
        self.assertGreaterEqual(final["test_auc"], MIN_AUC, final)

    def test_script_without_cora(self):
        # the script says where it looked, before building anything, rather than a traceback
        env = dict(os.environ, GRAPHNODE_DATA="/nonexistent-graphnode-data")
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--epochs", "1"], env=env,
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertEqual(out.stderr.strip(), "Cora (LINQS) not found at /nonexistent-graphnode-data/cora")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(CORA, "cora.cites")):
        sys.exit("Cora (LINQS) not found at %s" % CORA)
    with tempfile.TemporaryDirectory() as tmp:
        lines, _ = run_example(tmp, a.epochs, a.seed)
    for line in lines:
        print(json.dumps(line))
