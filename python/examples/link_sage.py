#!/usr/bin/env python3
"""GraphSAGE link prediction in plain PyTorch over link batches of
graphnode.Loader (seed_edges; PyG's LinkNeighborLoader, DGL's
as_edge_prediction_sampler).

The edges to learn from and to predict are given in the input graph's
ids (text lines "u v", as LINQS's cites); graph.toml's orig_ids.bin and
names.txt map them to the node's relabelled ids. The graph the node serves
should hold the training edges only (partition the input without the
validation and test edges), so that no message passes along an edge that
is to be predicted; with --exclude the training batches also leave out
their own seed edges.

    train_edges.txt, val_edges.txt, test_edges.txt: "u v" per line
    link_sage.py --socket /run/graphnode/node.sock --parts parts/ \\
        --train train_edges.txt --val val_edges.txt --test test_edges.txt

Every epoch trains on every training edge with --neg-ratio uniform
negatives per edge (binary cross-entropy of the dot product of the two
ends' embeddings), then scores the validation edges against as many
negatives and prints the ROC AUC; at the end one JSON line
{"best_val_auc": ..., "test_auc": ..., ...}: the test AUC at the epoch of
the best validation AUC. One trainer (rank 0 of 1).
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import graphnode
except ImportError:  # run from a checkout: python/ is the package root
    sys.path.insert(0, os.path.join(HERE, ".."))
    import graphnode
from train_sage import SAGE, Features  # noqa: E402  the same model as node classification


def read_edges(path, index):
    """The edges of path ("u v" lines of input ids) as a (2, M) tensor of
    relabelled ids; index maps an input id (its text) to a relabelled id."""
    src, dst = [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 2 or fields[0] not in index or fields[1] not in index:
                raise ValueError("%s:%d: %r is not an edge between two nodes of the graph" % (path, n, line.strip()))
            src.append(index[fields[0]])
            dst.append(index[fields[1]])
    return torch.tensor([src, dst], dtype=torch.int64)


def id_index(parts):
    """Input id (text) -> relabelled id, for every node of the set."""
    ids = graphnode.OrigIds(parts)
    every = torch.arange(len(ids))
    try:
        names = ids.names(every)
    except (FileNotFoundError, OSError):
        names = [str(v) for v in ids[every].tolist()]
    return {name: i for i, name in enumerate(names)}


def auc(scores, labels):
    """ROC AUC of scores for binary labels (ties get their mean rank)."""
    order = torch.argsort(scores)
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=scores.dtype)
    s = scores[order]
    i = 0
    while i < len(s):  # mean ranks over ties
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        if j > i:
            ranks[order[i:j + 1]] = (i + j + 2) / 2.0
        i = j + 1
    pos = labels > 0.5
    p, n = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - p * (p + 1) / 2) / (p * n))


def pair_logits(model, b, features):
    h = model(features(b), b.edge_index, b.num_sampled_nodes, b.num_sampled_edges)
    src, dst = b.edge_label_index
    return (h[src] * h[dst]).sum(-1)


def evaluate(a, model, edges, features, seed):
    """AUC of edges against one uniform negative each."""
    model.eval()
    scores, labels = [], []
    with torch.no_grad(), graphnode.Loader(socket=a.socket, seed_edges=edges, neg_ratio=1, fanouts=a.eval_fanouts,
                                           batch_size=a.eval_batch_size, epochs=1, seed=seed, workers=a.workers,
                                           ring_size=a.ring_size) as loader:
        for b in loader:
            scores.append(pair_logits(model, b, features))
            labels.append(b.edge_label.clone())
    return auc(torch.cat(scores), torch.cat(labels))


def run(a):
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    index = id_index(a.parts)
    train, val, test = (read_edges(p, index) for p in (a.train, a.val, a.test))
    info = graphnode.control.stats(a.socket)
    loader = graphnode.Loader(socket=a.socket, seed_edges=train, neg_ratio=a.neg_ratio, exclude_seed_edges=a.exclude,
                              fanouts=a.fanouts, batch_size=a.batch_size, shuffle=True, epochs=a.epochs,
                              seed=a.seed, workers=a.workers, ring_size=a.ring_size)
    in_dim = int(loader.info["feat_dim"])
    model = SAGE(in_dim, a.hidden, a.hidden, a.layers, a.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    features = Features(a.row_normalize, "auto")
    best = {"best_val_auc": -1.0}
    t0 = time.perf_counter()
    with loader:
        for epoch in range(a.epochs):
            model.train()
            loss_sum, pairs = 0.0, 0
            for b in loader:
                logits = pair_logits(model, b, features)
                loss = F.binary_cross_entropy_with_logits(logits, b.edge_label)
                opt.zero_grad()
                loss.backward()
                opt.step()
                loss_sum += float(loss) * logits.numel()
                pairs += logits.numel()
            val_auc = evaluate(a, model, val, features, 1)
            line = {"epoch": epoch, "loss": round(loss_sum / max(pairs, 1), 4), "val_auc": round(val_auc, 4)}
            if val_auc > best["best_val_auc"]:
                best = {"best_val_auc": val_auc, "test_auc": evaluate(a, model, test, features, 2), "epoch": epoch}
                line["test_auc"] = round(best["test_auc"], 4)
            print(json.dumps(line), flush=True)
    best.update(train_edges=train.size(1), val_edges=val.size(1), test_edges=test.size(1),
                nodes=info.get("nodes"), seconds=round(time.perf_counter() - t0, 1))
    print(json.dumps(best), flush=True)
    return best


def parse_ints(s):
    return [int(v) for v in s.split(",")]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--socket", required=True, help="control socket of this host's node")
    p.add_argument("--parts", required=True, help="the partition directory (orig_ids.bin, names.txt)")
    p.add_argument("--train", required=True, help="training edges, 'u v' lines of input ids")
    p.add_argument("--val", required=True, help="validation edges")
    p.add_argument("--test", required=True, help="test edges")
    p.add_argument("--fanouts", type=parse_ints, default=[10, 10])
    p.add_argument("--eval-fanouts", type=parse_ints, default=[-1, -1])
    p.add_argument("--batch-size", type=int, default=512, help="seed edges per batch")
    p.add_argument("--eval-batch-size", type=int, default=2048)
    p.add_argument("--neg-ratio", type=int, default=1)
    p.add_argument("--exclude", action=argparse.BooleanOptionalAction, default=True,
                   help="leave each batch's seed edges out of its sampled graph")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--row-normalize", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--ring-size", default="64MB")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    if len(a.eval_fanouts) != a.layers or len(a.fanouts) != a.layers:
        p.error("--fanouts and --eval-fanouts need one entry per layer (%d)" % a.layers)
    return a


if __name__ == "__main__":
    run(parse_args())
