#!/usr/bin/env python3
"""GraphSAGE node classification in plain PyTorch, trained with DDP over
mini-batches from graphnode.Loader.

One process per trainer. Every trainer reads its batches from the
`node run` of its own host (--socket); the trainers of all hosts form one
torch.distributed group (gloo) and DistributedDataParallel averages their
gradients. No PyG: SAGEConv below is a mean aggregation with index_add_.

    # one host, two trainers, one node serving a 1-part partition of Cora:
    torchrun --nproc_per_node 2 python/examples/train_sage.py \
        --socket /run/graphnode/node.sock --row-normalize --batch-size 70

    # or without torchrun:
    train_sage.py --rank 0 --world-size 2 --master-addr 127.0.0.1 --master-port 29500 ...
    train_sage.py --rank 1 --world-size 2 --master-addr 127.0.0.1 --master-port 29500 ...

Ranks: --rank/--world-size place the trainer in the DDP group of all hosts,
and the Loader takes the same rank and world size: rank r of W reads the
r-th contiguous share of the whole split (a node of a multi-part cluster
asks its peers for their seeds of the split). Ranks in host order keep
most seeds on the host that serves them.

Every rank must run the same number of training batches per epoch, or DDP
hangs: the Loader is opened with drop_last=True, and the batch counts of
all ranks are compared before training (an error when they differ).

Rank 0 prints one line per epoch (loss, train/val/test accuracy, batches/s,
the share of the epoch spent waiting on the loader) and at the end one JSON
line {"best_val": ..., "test": ..., ...}: the test accuracy at the epoch of
the best validation accuracy.
"""

import argparse
import json
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

try:
    import graphnode
except ImportError:  # run from a checkout: python/ is the package root
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import graphnode


# --- model -------------------------------------------------------------------


class SAGEConv(nn.Module):
    """GraphSAGE layer with mean aggregation and a root weight, as PyG's
    SAGEConv(aggr="mean", root_weight=True):

        out_i = W_l · mean_{j -> i} x_j + W_r · x_i + b

    edge_index is (2, E) in local positions, row = source (neighbour), col =
    target; the targets are the first num_dst rows of x. Mean is linear, so
    when the layer narrows (in > out) the neighbours are projected before
    they are gathered, which moves fewer bytes and gives the same result.
    A sparse x (bag-of-words features) is multiplied as a sparse matrix."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin_l = nn.Linear(in_channels, out_channels, bias=False)
        self.lin_r = nn.Linear(in_channels, out_channels, bias=True)
        self.project_first = in_channels > out_channels

    def forward(self, x, edge_index, num_dst):
        row, col = edge_index[0], edge_index[1]
        out = self.lin_l.out_features
        if x.is_sparse:  # both projections in one sparse product over all rows
            w = torch.cat([self.lin_l.weight, self.lin_r.weight], dim=0)
            hw = torch.sparse.mm(x, w.t())
            h, root = hw[:, :out], hw[:num_dst, out:] + self.lin_r.bias
        else:
            h = self.lin_l(x) if self.project_first else x
            root = self.lin_r(x[:num_dst])
        agg = h.new_zeros(num_dst, h.size(1)).index_add_(0, col, h.index_select(0, row))
        deg = h.new_zeros(num_dst).index_add_(0, col, h.new_ones(col.numel()))
        agg = agg / deg.clamp(min=1).unsqueeze(1)
        if not self.project_first and not x.is_sparse:
            agg = self.lin_l(agg)
        return agg + root


class SAGE(nn.Module):
    """layers × SAGEConv, ReLU and dropout between them. With the sampled
    counts per hop (num_sampled_nodes, num_sampled_edges), layer i works on
    the hops that still matter only (PyG's trim_to_layer, through
    graphnode.layer_sizes): layer i of L reads the nodes of hops 0..L-i and
    the edges of hops 0..L-i-1, and writes the nodes of hops 0..L-i-1. The
    seeds' outputs are the same as without trimming."""

    def __init__(self, in_channels, hidden, out_channels, layers, dropout, input_dropout=0.0):
        super().__init__()
        self.input_dropout = input_dropout
        dims = [in_channels] + [hidden] * (layers - 1) + [out_channels]
        self.convs = nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, x, edge_index, num_sampled_nodes=None, num_sampled_edges=None):
        L = len(self.convs)
        trim = num_sampled_nodes is not None and num_sampled_edges is not None
        if self.training and self.input_dropout > 0:
            if x.is_sparse:
                x = x.coalesce()
                x = torch.sparse_coo_tensor(x.indices(), F.dropout(x.values(), self.input_dropout), x.shape)
            else:
                x = F.dropout(x, self.input_dropout)
        sizes = graphnode.layer_sizes(num_sampled_nodes, num_sampled_edges, L) if trim else None
        for i, conv in enumerate(self.convs):
            if trim:
                num_edges, n_in, num_dst = sizes[i]
                if n_in != x.size(0):
                    x = x[:n_in]
                ei = edge_index[:, :num_edges]
            else:
                ei, num_dst = edge_index, x.size(0)
            x = conv(x, ei, num_dst)
            if i < L - 1:
                x = F.dropout(F.relu(x), p=self.dropout, training=self.training)
        return x


# --- distributed helpers -----------------------------------------------------


class Dist:
    """The trainer's place in the DDP group: rank of world."""

    def __init__(self, rank, world):
        self.rank, self.world = rank, world

    @property
    def on(self):
        return self.world > 1

    def sum(self, values):
        """values (a list of numbers) summed over all ranks, as floats."""
        t = torch.tensor(values, dtype=torch.float64)
        if self.on:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.tolist()

    def min_max(self, v):
        t = torch.tensor([v, -v], dtype=torch.int64)
        if self.on:
            dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return int(t[0]), int(-t[1])


def env_int(name, default):
    v = os.environ.get(name)
    return int(v) if v not in (None, "") else default


def setup_dist(a):
    rank = a.rank if a.rank is not None else env_int("RANK", 0)
    world = a.world_size if a.world_size is not None else env_int("WORLD_SIZE", 1)
    if not 0 <= rank < world:
        raise SystemExit("train_sage: rank %d outside [0, %d)" % (rank, world))
    if world > 1:
        # env:// as torchrun expects; the flags, when given, win over its variables
        os.environ["MASTER_ADDR"] = a.master_addr or os.environ.get("MASTER_ADDR") or "127.0.0.1"
        os.environ["MASTER_PORT"] = str(a.master_port or env_int("MASTER_PORT", 29500))
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                                timeout=timedelta(seconds=a.dist_timeout))
    return Dist(rank, world)


# --- loaders -----------------------------------------------------------------


def open_loader(a, d, split, fanouts, epochs, shuffle, drop_last):
    """A graphnode.Loader over this rank's share of split, or None when the
    node refuses the split for having no seed in it (a rank with nothing
    to evaluate still takes part in the all_reduce)."""
    try:
        return graphnode.Loader(socket=a.socket, split=split, fanouts=fanouts, batch_size=a.batch_size
                                if split == "train" else a.eval_batch_size, shuffle=shuffle, drop_last=drop_last,
                                epochs=epochs, seed=a.seed, rank=d.rank, world_size=d.world,
                                workers=a.workers, ring_size=a.ring_size, timeout=a.timeout)
    except graphnode.ControlError as e:
        if split != "train" and e.key == "split":
            print("train_sage: rank %d: no %s loader: %s" % (d.rank, split, e), file=sys.stderr)
            return None
        raise


class Timed:
    """Iterates over one epoch of a loader and adds the seconds spent inside
    next() (waiting on the samplers, decoding the record) to .wait."""

    def __init__(self, loader, limit=None):
        self.it = iter(loader)
        self.limit = len(loader) if limit is None else limit
        self.wait = 0.0

    def __iter__(self):
        for _ in range(self.limit):
            t0 = time.perf_counter()
            b = next(self.it)
            self.wait += time.perf_counter() - t0
            yield b


class Features:
    """x of a batch as the model's input: float32, L1-normalised per row
    with --row-normalize, and a sparse tensor when --sparse-x is on, or is
    auto and the first batch is under 10 % non-zero (Cora's bag-of-words
    is 1.3 %: the first layer's product is then tens of times cheaper)."""

    def __init__(self, row_normalize, sparse):
        self.row_normalize = row_normalize
        self.sparse = sparse  # "on", "off" or "auto" until the first batch

    def __call__(self, b):
        x = b.x.float()
        if self.row_normalize:  # as Planetoid's NormalizeFeatures
            x = x / x.sum(dim=1, keepdim=True).clamp(min=1e-12)
        if self.sparse == "auto":
            self.sparse = "on" if int(torch.count_nonzero(x)) < 0.1 * x.numel() else "off"
        return x.to_sparse() if self.sparse == "on" else x


# --- train / evaluate ----------------------------------------------------------


def train_epoch(model, opt, loader, limit, features):
    model.train()
    loss_sum = correct = seen = 0.0
    t0 = time.perf_counter()
    it = Timed(loader, limit)
    for b in it:
        opt.zero_grad(set_to_none=True)
        out = model(features(b), b.edge_index, b.num_sampled_nodes, b.num_sampled_edges)
        out = out[:b.batch_size]
        loss = F.cross_entropy(out, b.y)
        loss.backward()
        opt.step()
        # the batch's views of the ring are used up here: the next next()
        # hands the record back to its sampler
        loss_sum += float(loss) * b.batch_size
        correct += int((out.argmax(dim=1) == b.y).sum())
        seen += b.batch_size
    return loss_sum, correct, seen, it.wait, time.perf_counter() - t0


@torch.no_grad()
def evaluate(model, loader, features):
    """(correct, total, seconds waited, seconds) of one epoch of loader."""
    if loader is None:
        return 0, 0, 0.0, 0.0
    model.eval()
    correct = total = 0
    t0 = time.perf_counter()
    it = Timed(loader)
    for b in it:
        out = model(features(b), b.edge_index, b.num_sampled_nodes, b.num_sampled_edges)
        correct += int((out[:b.batch_size].argmax(dim=1) == b.y).sum())
        total += b.batch_size
    return correct, total, it.wait, time.perf_counter() - t0


def ratio(a, b):
    return a / b if b else float("nan")


def run(a, d):
    torch.manual_seed(a.seed)  # identical initial weights on every rank (DDP also broadcasts rank 0's)
    fanouts = parse_ints(a.fanouts, "fanouts")
    eval_fanouts = parse_ints(a.eval_fanouts, "eval-fanouts") if a.eval_fanouts else fanouts
    if len(fanouts) != a.layers or len(eval_fanouts) != a.layers:
        raise SystemExit("train_sage: --layers %d needs %d fanouts per hop, got --fanouts %s --eval-fanouts %s"
                         % (a.layers, a.layers, a.fanouts, a.eval_fanouts or a.fanouts))
    evals = [e for e in range(a.epochs) if (e + 1) % a.eval_every == 0 or e == a.epochs - 1]
    loaders = []
    try:
        train = open_loader(a, d, "train", fanouts, a.epochs, True, not a.keep_last)
        loaders.append(train)
        val = open_loader(a, d, "val", eval_fanouts, len(evals), False, False)
        test = open_loader(a, d, "test", eval_fanouts, len(evals), False, False)
        loaders += [val, test]

        nb, nb_max = d.min_max(len(train))
        if nb != nb_max:
            raise SystemExit("train_sage: rank %d has %d training batches per epoch, but the ranks have %d..%d: "
                             "DDP needs the same number on every rank (drop --keep-last)"
                             % (d.rank, len(train), nb, nb_max))
        if nb == 0:
            raise SystemExit("train_sage: rank %d: some rank has no full training batch (%d seeds here, "
                             "--batch-size %d); lower --batch-size" % (d.rank, train.info["num_seeds"],
                                                                        a.batch_size))
        info = train.info
        model = SAGE(int(info["feat_dim"]), a.hidden, int(info["num_classes"]), a.layers, a.dropout, a.input_dropout)
        torch.manual_seed(a.seed * 1000003 + d.rank + 1)  # dropout masks differ per rank
        ddp = DistributedDataParallel(model) if d.on else model
        opt = torch.optim.Adam(ddp.parameters(), lr=a.lr, weight_decay=a.weight_decay)
        feats = Features(a.row_normalize, a.sparse_x)
        if d.rank == 0:
            print("train_sage: world %d, %d train seeds and %d batches of %d per rank, fanouts %s, eval fanouts %s,"
                  " %d parameters" % (d.world, info["num_seeds"], nb, a.batch_size, fanouts, eval_fanouts,
                                      sum(p.numel() for p in model.parameters())), flush=True)

        best = {"best_val": -1.0, "test": float("nan"), "epoch": -1}
        seeds = {}  # seeds seen in one epoch by all ranks together
        tot = dict(train_wait=0.0, train_s=0.0, wait=0.0, time=0.0)
        t_start = time.perf_counter()
        for epoch in range(a.epochs):
            loss, correct, seen, wait, secs = train_epoch(ddp, opt, train, nb, feats)
            ev = epoch in evals
            vc, vt, vw, vs = evaluate(model, val, feats) if ev else (0, 0, 0.0, 0.0)
            tc, tt, tw, ts = evaluate(model, test, feats) if ev else (0, 0, 0.0, 0.0)
            # sums over ranks; seconds are then averaged per rank
            s = d.sum([loss, correct, seen, wait, secs, vc, vt, tc, tt, vw + tw, vs + ts])
            loss, correct, seen, wait, secs, vc, vt, tc, tt, ewait, esecs = s
            for k, v in (("train_wait", wait), ("train_s", secs), ("wait", wait + ewait), ("time", secs + esecs)):
                tot[k] += v / d.world
            line = "epoch %3d  loss %.4f  train %.4f" % (epoch, ratio(loss, seen), ratio(correct, seen))
            if ev:
                va, te = ratio(vc, vt), ratio(tc, tt)
                line += "  val %.4f  test %.4f" % (va, te)
                if va > best["best_val"]:
                    best.update(best_val=va, test=te, epoch=epoch)
                seeds.update(train_seeds=int(seen), val_seeds=int(vt), test_seeds=int(tt))
            else:
                line += " " * 26
            line += "  %6.1f batches/s  loader wait %4.1f%% (train %4.1f%%)" % (
                nb * d.world / (secs / d.world), 100 * ratio(wait + ewait, secs + esecs), 100 * ratio(wait, secs))
            if d.rank == 0:
                print(line, flush=True)
        wall = time.perf_counter() - t_start
        result = dict(best, **seeds, world_size=d.world, epochs=a.epochs, seed=a.seed, wall_s=round(wall, 3),
                      train_batches_per_s=round(nb * a.epochs * d.world / tot["train_s"], 2),
                      loader_wait_train=round(ratio(tot["train_wait"], tot["train_s"]), 4),
                      loader_wait=round(ratio(tot["wait"], tot["time"]), 4))
        if d.rank == 0:
            print(json.dumps(result), flush=True)
        return result
    finally:
        for loader in loaders:
            if loader is not None:
                loader.close()


def parse_ints(s, name):
    try:
        return [int(v) for v in s.split(",") if v.strip()]
    except ValueError:
        raise SystemExit("train_sage: --%s %r: want comma-separated integers (-1 = all neighbours)" % (name, s))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="GraphSAGE with DDP over graphnode.Loader",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group("data")
    g.add_argument("--socket", default="/run/graphnode/node.sock", help="control socket of this host's node")
    g.add_argument("--fanouts", default="25,10", help="neighbours per hop for training, -1 = all")
    g.add_argument("--eval-fanouts", default="", help="neighbours per hop for val/test; empty: --fanouts")
    g.add_argument("--batch-size", type=int, default=512, help="seeds per training batch and rank")
    g.add_argument("--eval-batch-size", type=int, default=1024, help="seeds per val/test batch")
    g.add_argument("--keep-last", action="store_true",
                   help="keep each rank's short final batch (drop_last=False); ranks may then differ by a batch")
    g.add_argument("--workers", type=int, default=None, help="sampler processes per loader (node default)")
    g.add_argument("--ring-size", default=None, help="ring size per loader, e.g. 256MB (node default)")
    g.add_argument("--row-normalize", action="store_true", help="L1-normalise each feature row (Planetoid)")
    g.add_argument("--sparse-x", choices=("auto", "on", "off"), default="auto",
                   help="multiply the first layer with x as a sparse matrix (auto: when under 10%% non-zero)")
    g.add_argument("--timeout", type=float, default=60.0, help="seconds per control request")
    m = p.add_argument_group("model")
    m.add_argument("--hidden", type=int, default=256, help="hidden channels")
    m.add_argument("--layers", type=int, default=2, help="SAGEConv layers (one fanout per layer)")
    m.add_argument("--dropout", type=float, default=0.5, help="dropout between layers")
    m.add_argument("--input-dropout", type=float, default=0.0, help="dropout on the input features (as GCN)")
    m.add_argument("--lr", type=float, default=0.01, help="Adam learning rate")
    m.add_argument("--weight-decay", type=float, default=5e-4, help="Adam weight decay")
    m.add_argument("--epochs", type=int, default=100, help="training epochs")
    m.add_argument("--eval-every", type=int, default=1, help="evaluate val/test every N epochs (and the last)")
    m.add_argument("--seed", type=int, default=0, help="model and loader seed")
    m.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    d = p.add_argument_group("distributed (default: torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)")
    d.add_argument("--rank", type=int, default=None, help="this trainer's rank (RANK, else 0)")
    d.add_argument("--world-size", type=int, default=None, help="trainers on all hosts (WORLD_SIZE, else 1)")
    d.add_argument("--master-addr", default=None, help="rank 0's host (MASTER_ADDR, else 127.0.0.1)")
    d.add_argument("--master-port", type=int, default=None, help="rank 0's TCP port (MASTER_PORT, else 29500)")
    d.add_argument("--dist-timeout", type=float, default=120.0, help="seconds a collective may wait")
    a = p.parse_args(argv)
    if a.eval_every < 1 or a.epochs < 1 or a.batch_size < 1:
        p.error("--epochs, --batch-size and --eval-every must be positive")
    return a


def main(argv=None):
    a = parse_args(argv)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    d = setup_dist(a)
    try:
        run(a, d)
    finally:
        if d.on:
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
