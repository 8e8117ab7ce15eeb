"""python/examples/train_sage.py end to end: GraphSAGE trained with DDP
(gloo, two trainer processes) on Cora's Planetoid-sized split, batches from
real `node run` processes built from this repository. The test accuracy
at the best validation epoch must reach MIN_ACC.

Two topologies, chosen by PARTS:
  - 1 part:  one `node run` serves the whole graph; two trainers (rank 0
    and 1 of 2) read from it, each a half of every split.
  - 2 parts: two `node run` processes, one per partition, joined by the
    mesh on loopback (QUIC, certificates from `node cert init`); one
    trainer per node (rank i of 2). Either way rank r of 2 reads the r-th
    half of the whole split.
A third run (test_train_sage_ddp_server_client) puts both trainers of the
2-part cluster on a client node (node.role = "client", server-client
mode): the nodes of part 0 and 1 sample their loaders and stream them to
it.
PARTS is 2 when node.toml.example documents a [mesh] table (the mesh is
wired into `node run`), else 1; the environment variable
GRAPHNODE_EXAMPLE_PARTS overrides it.

Needs the Go toolchain and the LINQS Cora files in $GRAPHNODE_DATA/cora,
or in ../shared/data/cora (relative to the repository) when it is unset,
as the Go tests find them (internal/datasets). Without the data the test skips; without
go it skips, except when the environment variable CI is set (then it
fails). Every process it starts (nodes, their samplers, trainers) is
stopped, and every socket, ring and temporary file removed; the ring
directory must be empty once the nodes have stopped.

Run as a script to measure accuracy over several split/model seeds:

    /usr/bin/python3 python/tests/test_example.py --seeds 1,2,3,4,5 [--parts 2]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def data_dir():
    """$GRAPHNODE_DATA, or ../shared/data beside the checkout: where
    internal/datasets finds the real datasets for the Go tests."""
    return os.environ.get("GRAPHNODE_DATA") or os.path.join(REPO, "..", "shared", "data")


CORA = os.path.normpath(os.path.abspath(os.path.join(data_dir(), "cora")))
EXAMPLE = os.path.join(REPO, "python", "examples", "train_sage.py")
MIN_ACC = 0.77
SEED = 1  # split and model seed of the unit test

# The settings of python/examples/README.md. Rank shares: 140 training
# seeds over 2 trainers, 70 each, one full batch per rank and epoch.
FLAGS = ["--batch-size", "70", "--fanouts", "25,10", "--eval-fanouts=-1,-1", "--hidden", "256", "--layers", "2",
         "--dropout", "0.7", "--input-dropout", "0.8", "--lr", "0.005", "--weight-decay", "5e-4",
         "--epochs", "100", "--row-normalize", "--workers", "1", "--ring-size", "64MB", "--threads", "1"]
TRAINER_TIMEOUT = 300


def mesh_documented():
    try:
        with open(os.path.join(REPO, "node.toml.example")) as f:
            return any(line.strip() == "[mesh]" for line in f)
    except OSError:
        return False


def default_parts():
    v = os.environ.get("GRAPHNODE_EXAMPLE_PARTS")
    if v:
        return int(v)
    return 2 if mesh_documented() else 1


def _run(args, **kw):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(args), p.returncode, p.stdout[-4000:]))
    return p.stdout


def free_port(kind=socket.SOCK_STREAM):
    return free_ports(1, kind)[0]


def free_ports(n, kind=socket.SOCK_STREAM):
    """n distinct free loopback ports: each socket is held until all are
    chosen, since a port released may be handed out again at once."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, kind)
            socks.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def build_node(tmp):
    """The node binary built from this checkout into tmp; skips (or, with
    CI set, fails) without go."""
    go = shutil.which("go")
    if go is None:
        if os.environ.get("CI"):
            raise RuntimeError("test_example: the Go toolchain is not on PATH (CI is set, so this is an error)")
        raise unittest.SkipTest("test_example: needs the Go toolchain (go) on PATH to build ./cmd/node")
    path = os.path.join(tmp, "node")
    _run([go, "build", "-o", path, "./cmd/node"], cwd=REPO, env=dict(os.environ, CGO_ENABLED="0"))
    return path


def partition(node, out, seed, parts):
    _run([node, "partition", "--input", CORA, "--format", "linqs", "--undirected",
          "--split", "per-class:20,500,1000", "--seed", str(seed), "--parts", str(parts), "-o", out])


def _children(pid):
    """Pids whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _alive(pid, exe):
    """Whether pid runs (not a zombie) the program exe: a pid the kernel
    gave to another program since is not ours."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        return os.readlink("/proc/%d/exe" % pid) == os.path.realpath(exe)
    except OSError:
        return False


class Cluster:
    """parts `node run` processes on loopback over the partition set at
    parts_dir (part i served by node i), and the trainers that read from
    them; with client, one more `node run` with node.role = "client" (the
    last of procs and sockets) on which every trainer opens its loader.
    close() stops everything it started."""

    def __init__(self, node, parts_dir, parts, tmp, client=False):
        self.node, self.parts_dir, self.parts, self.client = node, parts_dir, parts, client
        self.dir = tempfile.mkdtemp(prefix="cluster-", dir=tmp)
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.rings = tempfile.mkdtemp(prefix="graphnode-example-", dir=shm)  # a tmpfs where there is one
        self.procs, self.logs, self.sockets = [], [], []
        self.samplers = set()  # children of the nodes seen while they ran
        self.trainers = []
        names = ["host%d" % i for i in range(parts)]
        mesh = ""
        if parts > 1 or client:
            certs = os.path.join(self.dir, "certs")
            _run([node, "cert", "init", "--cluster", "cora", "--nodes", ",".join(names + ["trainer0"]), "-o", certs])
            ports = free_ports(len(names), socket.SOCK_DGRAM)
            peers = "".join('[[mesh.peers]]\npart = %d\nname = "%s"\naddr = "127.0.0.1:%d"\n\n'
                            % (i, n, ports[i]) for i, n in enumerate(names))
            mesh = '[mesh]\ncerts = "%s"\ncluster = "cora"\ntimeout = "10s"\n\n%s' % (certs, peers)
        try:
            for i, name in enumerate(names):
                sock = os.path.join(self.dir, "node%d.sock" % i)
                cfg = os.path.join(self.dir, "node%d.toml" % i)
                with open(cfg, "w") as f:
                    f.write('version = 1\n\n[node]\nparts = "%s"\npart = %d\nname = "%s"\n\n'
                            '[control]\nsocket = "%s"\n\n'
                            '[rings]\ndir = "%s"\nsize = "64MB"\n\n[samplers]\nworkers = 1\ndrain_timeout = "3s"\n\n'
                            '%s[log]\nlevel = "info"\nformat = "text"\n'
                            % (parts_dir, i, name, sock, self.rings, mesh))
                log = open(os.path.join(self.dir, "node%d.log" % i), "w+")
                self.logs.append(log)
                self.sockets.append(sock)
                self.procs.append(subprocess.Popen([node, "run", "-c", cfg], stdout=log, stderr=subprocess.STDOUT))
            if client:
                self._start_client(mesh)
            self._wait_ready(60)
        except BaseException:
            self.close()
            raise

    def _start_client(self, mesh):
        """The client node: graph.toml alone, the same [mesh] peers, no listen."""
        manifest = os.path.join(self.dir, "client-parts")
        os.mkdir(manifest)
        shutil.copy(os.path.join(self.parts_dir, "graph.toml"), manifest)
        sock = os.path.join(self.dir, "client.sock")
        cfg = os.path.join(self.dir, "client.toml")
        with open(cfg, "w") as f:
            f.write('version = 1\n\n[node]\nrole = "client"\nparts = "%s"\nname = "trainer0"\n\n'
                    '[control]\nsocket = "%s"\n\n[rings]\ndir = "%s"\nsize = "64MB"\n\n'
                    '%s[log]\nlevel = "info"\nformat = "text"\n' % (manifest, sock, self.rings, mesh))
        log = open(os.path.join(self.dir, "client.log"), "w+")
        self.logs.append(log)
        self.sockets.append(sock)
        self.procs.append(subprocess.Popen([self.node, "run", "-c", cfg], stdout=log, stderr=subprocess.STDOUT))

    def _wait_ready(self, limit):
        deadline = time.monotonic() + limit
        for i, p in enumerate(self.procs):
            while 'msg="node ready"' not in self.log(i) or not os.path.exists(self.sockets[i]):
                if p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("node %d did not come up:\n%s" % (i, self.log(i)))
                time.sleep(0.05)

    def log(self, i):
        self.logs[i].flush()
        with open(self.logs[i].name) as f:
            return f.read()[-4000:]

    def note_samplers(self):
        for p in self.procs:
            self.samplers.update(_children(p.pid))

    def train(self, seed, flags):
        """Run the trainers (2 on one node, or one per node) to the end and
        return rank 0's final JSON object and every trainer's output."""
        port = free_port()
        # (node, rank): rank r of W reads the r-th share of the whole split
        places = [(0, 0), (0, 1)] if self.parts == 1 else [(i, i) for i in range(self.parts)]
        if self.client:
            places = [(len(self.procs) - 1, r) for r in range(max(self.parts, 2))]
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), OMP_NUM_THREADS="1")
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(k, None)
        outs = []
        for node_i, rank in places:
            out = open(os.path.join(self.dir, "trainer%d.log" % rank), "w+")
            outs.append(out)
            cmd = [sys.executable, EXAMPLE, "--socket", self.sockets[node_i], "--seed", str(seed),
                   "--rank", str(rank), "--world-size", str(len(places)), "--master-addr", "127.0.0.1",
                   "--master-port", str(port)]
            self.trainers.append(subprocess.Popen(cmd + flags, stdout=out, stderr=subprocess.STDOUT, env=env))
        deadline = time.monotonic() + TRAINER_TIMEOUT
        while any(t.poll() is None for t in self.trainers):
            self.note_samplers()
            if any(t.poll() not in (None, 0) for t in self.trainers) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        texts = []
        for out in outs:
            out.flush()
            out.seek(0)
            texts.append(out.read())
            out.close()
        codes = [t.poll() for t in self.trainers]
        self.stop_trainers()
        if codes != [0] * len(codes):
            outputs = "\n".join("--- rank %d\n%s" % (r, t[-3000:]) for r, t in enumerate(texts))
            raise RuntimeError("trainers exited %s (None: still running after %ds or when another failed):\n%s\n"
                               "--- node 0\n%s" % (codes, TRAINER_TIMEOUT, outputs, self.log(0)))
        last = [ln for ln in texts[0].splitlines() if ln.startswith("{")]
        if not last:
            raise RuntimeError("rank 0 printed no JSON line:\n" + texts[0][-3000:])
        return json.loads(last[-1]), texts

    def stop_trainers(self):
        for t in self.trainers:
            if t.poll() is None:
                t.kill()
            t.wait()
        self.trainers = []

    def stop(self, timeout=15):
        """SIGTERM every node and wait; the exit codes (None: had to be
        killed)."""
        codes = []
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                codes.append(p.wait(timeout))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                codes.append(None)
        return codes

    def leftovers(self):
        """Samplers still alive, and files left in the ring directory."""
        return [pid for pid in self.samplers if _alive(pid, self.node)], sorted(os.listdir(self.rings))

    def close(self):
        self.stop_trainers()
        self.stop(5)
        for pid in self.samplers:  # children the nodes should have stopped
            if _alive(pid, self.node):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for log in self.logs:
            log.close()
        shutil.rmtree(self.rings, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)


class ExampleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.isdir(CORA):
            raise unittest.SkipTest("test_example: Cora (LINQS) not found at %s" % CORA)
        cls.tmp = tempfile.mkdtemp(prefix="graphnode-example-")
        try:
            cls.node = build_node(cls.tmp)
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_train_sage_ddp(self):
        self.train_and_check(default_parts(), client=False)

    def test_train_sage_ddp_server_client(self):
        if not mesh_documented():
            self.skipTest("no mesh in this build")
        c = self.train_and_check(2, client=True)
        for part in (0, 1):
            self.assertIn("server_part=%d" % part, c.logged[-1], "client node log")

    def train_and_check(self, parts, client):
        pdir = os.path.join(self.tmp, "parts-%d" % parts)
        if not os.path.isdir(pdir):
            partition(self.node, pdir, SEED, parts)
        t0 = time.monotonic()
        c = Cluster(self.node, pdir, parts, self.tmp, client)
        try:
            res, texts = c.train(SEED, FLAGS)
            c.logged = [c.log(i) for i in range(len(c.procs))]
            codes = c.stop()
            self.assertEqual(codes, [0] * len(c.procs), "\n".join(c.log(i) for i in range(len(c.procs))))
            alive, rings = c.leftovers()
            self.assertEqual(alive, [], "samplers outlived their node")
            self.assertEqual(rings, [], "ring files left in %s" % c.rings)
            for s in c.sockets:
                self.assertFalse(os.path.exists(s), "socket %s left behind" % s)
        finally:
            c.close()
        self.assertFalse(os.path.exists(c.rings))
        self.assertEqual(res["world_size"], 2)
        self.assertEqual(res["epochs"], 100)
        # every seed of val and test evaluated once, the train split cut in equal shares
        self.assertEqual((res["train_seeds"], res["val_seeds"], res["test_seeds"]), (140, 500, 1000), res)
        self.assertGreaterEqual(res["test"], MIN_ACC, "test accuracy below %.2f; rank 0:\n%s"
                                % (MIN_ACC, texts[0][-3000:]))
        self.assertGreater(res["best_val"], 0.7, res)
        sys.stderr.write("\ntest_example: %d part(s)%s, test %.4f at best val %.4f (epoch %d), loader wait %.1f%%, "
                         "%.1f s\n" % (parts, ", trainers on a client node" if client else "", res["test"],
                                       res["best_val"], res["epoch"], 100 * res["loader_wait"], time.monotonic() - t0))
        return c


class DataDirTest(unittest.TestCase):
    """CORA is found where the Go tests find the datasets: under
    $GRAPHNODE_DATA when set, else ../shared/data beside the checkout."""

    def cora(self, env):
        code = "import test_example; print(test_example.CORA)"
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=os.path.dirname(os.path.abspath(__file__)),
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def test_graphnode_data(self):
        env = dict(os.environ, GRAPHNODE_DATA="/srv/datasets")
        self.assertEqual(self.cora(env), "/srv/datasets/cora")

    def test_default(self):
        env = {k: v for k, v in os.environ.items() if k != "GRAPHNODE_DATA"}
        self.assertEqual(self.cora(env), os.path.normpath(os.path.join(REPO, "..", "shared", "data", "cora")))


def main():
    p = argparse.ArgumentParser(description="train_sage.py on Cora over several seeds")
    p.add_argument("--seeds", default="1,2,3,4,5")
    p.add_argument("--parts", type=int, default=default_parts())
    p.add_argument("extra", nargs="*", help="more train_sage.py flags (after --)")
    a = p.parse_args()
    if not os.path.isdir(CORA):
        sys.exit("Cora (LINQS) not found at %s" % CORA)
    tmp = tempfile.mkdtemp(prefix="graphnode-example-")
    try:
        node = build_node(tmp)
        accs, waits = [], []
        for seed in [int(s) for s in a.seeds.split(",")]:
            pdir = os.path.join(tmp, "parts-%d" % seed)
            partition(node, pdir, seed, a.parts)
            c = Cluster(node, pdir, a.parts, tmp)
            try:
                res, _ = c.train(seed, FLAGS + a.extra)
            finally:
                c.close()
            accs.append(res["test"])
            waits.append(res["loader_wait"])
            print(json.dumps(res), flush=True)
        sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
        print("test accuracy %.4f ± %.4f over seeds %s (min %.4f); loader wait %.1f%% mean" % (
            statistics.mean(accs), sd, a.seeds, min(accs), 100 * statistics.mean(waits)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
