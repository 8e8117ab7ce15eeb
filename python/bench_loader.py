#!/usr/bin/python3
"""Batches per second of the Python client (graphnode.Loader).

Against a running node:

    /usr/bin/python3 python/bench_loader.py --socket /run/graphnode/node.sock

or on a partition directory of one part (`node partition --parts 1`),
with a temporary `node run` started and stopped here (socket and rings in
a temporary directory; a cluster's parts need their peers: run the nodes
and use --socket):

    go build -o /tmp/node ./cmd/node
    /usr/bin/python3 python/bench_loader.py --node /tmp/node --parts parts/

Each epoch prints batches/s, seeds/s and sampled edges/s; the summary
line averages the epochs after --warmup. With --touch every batch's x is
summed (reads every feature byte, as a model would), else only metadata
is touched and the number is the client's own ceiling.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import graphnode  # noqa: E402


def num_parts(parts):
    """graph.toml's top-level parts (None when it cannot be read)."""
    try:
        with open(os.path.join(parts, "graph.toml")) as f:
            for line in f:
                if line.lstrip().startswith("["):
                    break
                k, _, v = line.partition("=")
                if k.strip() == "parts":
                    return int(v.split("#")[0].strip())
    except (OSError, ValueError):
        return None
    return None


def start_node(binary, parts, ring_size, workers, concurrency):
    d = tempfile.mkdtemp(prefix="graphnode-bench-")
    sock, rings = os.path.join(d, "node.sock"), os.path.join(d, "rings")
    os.mkdir(rings)
    cfg = os.path.join(d, "node.toml")
    with open(cfg, "w") as f:
        f.write('version = 1\n[node]\nparts = "%s"\npart = %d\nname = "bench"\n[control]\nsocket = "%s"\n'
                '[rings]\ndir = "%s"\nsize = "%s"\n[samplers]\nworkers = %d\nconcurrency = %d\n'
                '[log]\nlevel = "warn"\nformat = "text"\n'
                % (os.path.abspath(parts), 0, sock, rings, ring_size, workers, concurrency))
    proc = subprocess.Popen([binary, "run", "-c", cfg])
    deadline = time.monotonic() + 60
    while not os.path.exists(sock):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            shutil.rmtree(d, ignore_errors=True)
            sys.exit("bench_loader: node run did not start")
        time.sleep(0.05)
    return proc, sock, d


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--socket", help="control socket of a running node")
    ap.add_argument("--node", help="node binary to start on --parts (instead of --socket)")
    ap.add_argument("--parts", help="partition directory for --node")
    ap.add_argument("--split", default="train")
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="epochs left out of the summary")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--ring-size", default="1GB")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--copy", action="store_true", help="Loader(copy=True)")
    ap.add_argument("--touch", action="store_true", help="sum every batch's x")
    ap.add_argument("--prefill", action="store_true",
                    help="wait until the samplers have written every batch (or filled the ring) before timing: "
                         "measures the client alone, not the samplers")
    a = ap.parse_args()
    if bool(a.socket) == bool(a.node):
        ap.error("give --socket, or --node with --parts")
    proc, tmp, sock = None, None, a.socket
    if a.node:
        if not a.parts:
            ap.error("--node needs --parts")
        if (n := num_parts(a.parts)) is not None and n != 1:
            ap.error("--parts %s holds %d parts: --node runs a single node, which needs a one-part directory; "
                     "start the cluster's nodes and use --socket" % (a.parts, n))
        proc, sock, tmp = start_node(a.node, a.parts, a.ring_size, a.workers, a.concurrency)
    try:
        run(a, sock)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            shutil.rmtree(tmp, ignore_errors=True)


def run(a, sock):
    fanouts = [int(f) for f in a.fanouts.split(",")]
    t_open = time.perf_counter()
    with graphnode.Loader(sock, split=a.split, fanouts=fanouts, batch_size=a.batch_size, epochs=a.epochs,
                          seed=a.seed, workers=a.workers, concurrency=a.concurrency, ring_size=a.ring_size,
                          copy=a.copy) as lo:
        print("loader %d: %d batches/epoch, %d seeds, %d workers, open %.3fs"
              % (lo.loader_id, len(lo), lo.info["num_seeds"], lo.info["sub_rings"], time.perf_counter() - t_open))
        if a.prefill:
            wait_prefill(lo, len(lo) * a.epochs)
        rates = []
        for epoch in range(a.epochs):
            n = seeds = edges = 0
            t0 = time.perf_counter()
            for b in lo:
                n += 1
                seeds += b.batch_size
                edges += b.num_edges
                if a.touch and b.x is not None:
                    float(b.x.sum())
            dt = time.perf_counter() - t0
            print("epoch %d: %d batches in %.3fs: %.1f batches/s, %.0f seeds/s, %.3g edges/s"
                  % (epoch, n, dt, n / dt, seeds / dt, edges / dt))
            if epoch >= a.warmup:
                rates.append(n / dt)
        if rates:
            print("python client: %.1f batches/s (mean of %d epochs after %d warm-up; fanouts %s, batch %d)"
                  % (sum(rates) / len(rates), len(rates), a.warmup, a.fanouts, a.batch_size))


def wait_prefill(lo, total):
    """Wait until the loader's batch count (stats) reaches total or stops
    growing for a second (the ring is full)."""
    last, since = -1, time.monotonic()
    while True:
        st = lo.stats()
        n = sum(x.get("batches", 0) for x in st.get("loaders", []) if x.get("loader_id") == lo.loader_id)
        if n >= total:
            break
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > 1.0:
            break
        time.sleep(0.1)
    print("prefilled: %d of %d batches written before timing" % (max(n, 0), total))


if __name__ == "__main__":
    main()
