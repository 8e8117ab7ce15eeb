#!/usr/bin/python3
"""Batches per second of the Python client (graphnode.Loader), measured
exactly as perf/onehost's Go client measures them, against a running node:

    /usr/bin/python3 perf/onehost/bench_python.py --socket /run/graphnode/node.sock --workers 2

One loader over the train split (shuffled, seed 1, one epoch); every batch
is touched as the Go driver touches it: the sums of n_id, edge_index and y,
and of x as numbers. Without --prefill the clock starts at the first batch
(the samplers' start-up is not timed) and the samplers produce while the
client reads; with --prefill the script waits until the samplers have
written the batches (or filled the ring) and times reading those alone:
the client's own ceiling.

The last line is "RESULT-JSON {...}": timed batches, their sampled edges,
the timed wall seconds, batches read, and this process's CPU seconds from
open to close (the interpreter's start-up left out).
"""

import argparse
import json
import os
import resource
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
sys.path.insert(0, ROOT)

import graphnode  # noqa: E402


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def touch(b):
    s = int(b.n_id.sum()) + int(b.edge_index.sum())
    if b.y is not None:
        s += int(b.y.sum())
    f = float(s)
    if b.x is not None:
        f += float(b.x.sum())
    return f


def batches_written(lo):
    st = lo.stats()
    for ls in st.get("loaders", []):
        if ls.get("loader_id") == lo.loader_id:
            return int(ls.get("batches", 0))
    return 0


def prefill(lo, want):
    """Wait until want batches are written or the count stops growing (the
    ring is full): no new batch for four times the mean time per batch so
    far, at least 2 s. Return how many are ready."""
    last, t0 = -1, time.monotonic()
    since = t0
    while True:
        n = batches_written(lo)
        if n >= want:
            return want
        now = time.monotonic()
        if n != last:
            last, since = n, now
        elif n > 0 and now - since > max(2.0, 4 * (now - t0) / n):
            return n
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--batches", type=int, default=0, help="batches to read (0: every batch of --epochs)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ring-size", default=None)
    ap.add_argument("--prefill", action="store_true")
    a = ap.parse_args()
    fanouts = [int(f) for f in a.fanouts.split(",")]
    cpu0 = cpu_seconds()
    lo = graphnode.Loader(a.socket, split="train", fanouts=fanouts, batch_size=a.batch_size, shuffle=True,
                          epochs=a.epochs, seed=a.seed, workers=a.workers, concurrency=a.concurrency,
                          ring_size=a.ring_size, features=True, labels=True)
    with lo:
        want = len(lo) * a.epochs
        if a.batches > 0:
            want = min(want, a.batches)
        if a.prefill:
            want = prefill(lo, want)
        total = timed = edges = 0
        sink = 0.0
        started = a.prefill
        t0, c0 = time.perf_counter(), cpu_seconds()
        for _ in range(a.epochs):
            for b in lo:
                sink += touch(b)
                total += 1
                if not started:
                    started, t0, c0 = True, time.perf_counter(), cpu_seconds()
                else:
                    timed += 1
                    edges += b.num_edges
                if total >= want:
                    break
            if total >= want:
                break
        wall, client_cpu = time.perf_counter() - t0, cpu_seconds() - c0
    cpu = cpu_seconds() - cpu0
    print("python client: %d batches timed (%d read) in %.3fs: %.1f batches/s (sink %.3g)"
          % (timed, total, wall, timed / wall if wall > 0 else 0, sink))
    print("RESULT-JSON " + json.dumps({"batches": timed, "edges": edges, "wall": wall, "total": total, "cpu": cpu,
                                        "client_cpu": client_cpu}))


if __name__ == "__main__":
    main()
