"""The node's parameter server from PyTorch (docs/control.md, "The
parameter server (kv)"): tables of rows × dim float32 sharded over the
cluster's nodes, reached through this host's node. JSON requests declare,
drop and checkpoint tables; binary kv frames pull rows and push gradients,
which the owning node applies with the table's optimiser (SGD, DGL-KE's
sparse Adagrad, Adam; "average" for synchronous all-reduce tables).

    kv = graphnode.KV("/run/graphnode/node.sock")
    kv.create("emb", rows="nodes", dim=64, optimizer="adagrad", lr=0.1, mode="async",
              init="uniform", init_scale=0.1)
    rows = kv.pull("emb", batch.n_id)           # torch.float32 [len(ids), 64], a copy
    kv.push("emb", batch.n_id, rows_grad)       # applied by the owners

Embedding wraps an async table as a sparse embedding layer with
autograd, as DGL's DistEmbedding with its sparse optimiser does.
"""

import struct

import numpy as np
import torch

from .control import MAX_FRAME, Session, check_timeout
from .errors import LoaderError

WIRE_VERSION = 1
KIND_PULL = 1
KIND_PULL_RESPONSE = 2
KIND_PUSH = 3
KIND_PUSH_SYNC = 4
KIND_ACK = 6
KIND_ERROR = 7

# A push's bytes besides ids and gradients: kind, version, name (at most
# 1 + 64 bytes), dim, n.
_PUSH_HEAD = 2 + 65 + 8
# A pull request's bytes besides its ids (kind, version, name, min_version,
# n), and its answer's besides the rows (kind, version, version, dim, n).
_PULL_REQUEST_HEAD = 2 + 65 + 12
_PULL_HEAD = 2 + 8 + 4 + 4
# The longest the node may take to answer a synchronous push or a pull
# that waits for a step: [kv] sync_timeout (at most 5 minutes) from the
# step's first push, the node's margin for its calls over the mesh (10 s),
# and slack. A connection that gave up sooner would break, which the node
# takes for the trainer leaving: the step would fail for every trainer.
_SYNC_WAIT = 5 * 60 + 10 + 20

# kv's error codes (docs/control.md): the sentinel errors of package kv.
CODES = {1: "unknown table", 2: "row not owned", 3: "shape", 4: "wrong mode", 5: "bad step", 6: "step failed",
         7: "malformed", 8: "cancelled", 9: "deadline exceeded", 10: "invalid spec", 11: "non-finite gradient",
         12: "checkpoint does not match the table"}


class KVError(LoaderError):
    """The node refused a kv message. ``code`` is kv's error code (see
    CODES: 1 unknown table, 6 a synchronous step failed, ...)."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def _name(table):
    b = table.encode()
    if not 1 <= len(b) <= 64:
        raise ValueError("kv: table name %r: want 1 to 64 bytes" % table)
    return struct.pack("<B", len(b)) + b


def _ids(ids, who="kv"):
    """ids (a tensor, array or sequence of non-negative ints) as uint64 LE;
    who prefixes the errors (the caller's module)."""
    if isinstance(ids, torch.Tensor):
        ids = ids.detach().cpu().numpy()
    a = np.asarray(ids)
    if a.ndim != 1:
        raise ValueError("%s: ids of shape %s: want one dimension" % (who, a.shape))
    if a.size and a.dtype.kind not in "iu":
        raise ValueError("%s: ids must be integers, got dtype %s" % (who, a.dtype))
    if a.size and a.min() < 0:
        i = int(np.argmax(a < 0))
        raise ValueError("%s: ids[%d] = %d: ids are non-negative" % (who, i, a[i]))
    return np.ascontiguousarray(a, dtype="<u8")


def _floats(x):
    if isinstance(x, torch.Tensor):
        # float32 before numpy, which has no bfloat16 (a model trained in
        # bf16 or under torch.autocast): .numpy() of one is a TypeError.
        x = x.detach().to("cpu", torch.float32).numpy()
    return np.ascontiguousarray(x, dtype="<f4").reshape(-1)


class KV(Session):
    """A connection to the node's parameter server. Not safe for
    concurrent use; one per trainer process is the rule (a connection that
    ends without done() counts as its synchronous trainers leaving).
    timeout bounds each call in seconds (None: no bound); push_sync and
    pull_version with a min_version wait at least 330 s, the most a node
    takes to end a synchronous step ([kv] sync_timeout is at most 5m)."""

    def __init__(self, socket, timeout=120.0):
        super().__init__(socket, timeout)
        self._timeout = check_timeout(timeout)
        self._dims = {}  # table -> dim, learnt from pulls

    # JSON requests.

    def create(self, name, rows, dim, optimizer, mode, **opts):
        """Declare a table on every node (kv_create); an equal spec is a
        no-op, another spec a ControlError naming the field. rows: a count,
        "nodes" (one row per graph node, sharded as the partition book)
        or "relations" (one row per relation of a knowledge graph, split
        evenly). opts: lr, eps, beta1, beta2, init ("zeros", "uniform",
        "normal"), init_scale, init_seed. Returns the table info dict
        (name, rows, dim, bounds, created, version). A create that fails
        part-way (a node unreachable) may leave the table on some nodes
        only, and save() refuses it until the same create runs again
        (which completes it, keeping the rows of the nodes that hold it)
        or drop() removes it."""
        spec = dict(name=name, rows=rows, dim=dim, optimizer=optimizer, mode=mode)
        for k, v in opts.items():
            if k not in ("lr", "eps", "beta1", "beta2", "init", "init_scale", "init_seed"):
                raise TypeError("kv: create: unknown option %r" % k)
            spec[k] = v
        return self._conn.request({"op": "kv_create", "table": spec}).get("kv_table") or {}

    def drop(self, name):
        """Remove a table from every node (kv_drop); True when some node
        held it: the node asked ("dropped") or a peer ("dropped_parts").
        A node asked may hold no part of a table that its peers do (a
        client node, or a table created on some nodes only)."""
        self._dims.pop(name, None)
        info = self._conn.request({"op": "kv_drop", "name": name}).get("kv_drop") or {}
        return bool(info.get("dropped")) or bool(info.get("dropped_parts"))

    def save(self):
        """Checkpoint every table on every node (kv_save): {"dir", "tables"}."""
        return self._conn.request({"op": "kv_save"}).get("kv_save") or {}

    def done(self):
        """Tell the node this trainer finished: closing afterwards is not
        leaving a synchronous job."""
        self._conn.request({"op": "kv_done"})

    # Binary kv frames.

    def _wait(self):
        """The timeout of a call that waits for a synchronous step."""
        return None if self._timeout is None else max(self._timeout, _SYNC_WAIT)

    def _call(self, body, op, timeout=None):
        ans = self._conn.exchange(body, op, timeout)
        if len(ans) < 2 or ans[1] != WIRE_VERSION:
            raise LoaderError("kv: %s: answer of %d bytes without kv version %d" % (op, len(ans), WIRE_VERSION))
        if ans[0] == KIND_ERROR:
            if len(ans) < 6:
                raise LoaderError("kv: %s: error answer of %d bytes, want at least 6" % (op, len(ans)))
            code, n = struct.unpack_from("<HH", ans, 2)
            text = bytes(ans[6:6 + n]).decode("utf-8", "replace")
            if text.startswith("kv: "):  # the node's own prefix: say kv once
                text = text[4:]
            raise KVError("kv: %s: %s" % (op, text), code)
        return ans

    def pull_version(self, table, ids, min_version=0):
        """The rows of ids (a torch.float32 tensor [len(ids), dim], its own
        memory) and the version they belong to; with min_version > 0 (sync
        tables) the node first waits until every shard involved applied
        that many steps.

        An answer must fit one 64 MiB frame (the node refuses a pull that
        would not), so ids go in as many requests as their rows need: a
        batch's n_id of 200k nodes at dim 128 takes two. The table's dim
        is learnt once per connection from a pull of row 0 (and again
        after a kv error or rows of another dim: a table made again); an
        error of a request of several names the ids it held (ids[lo:hi]),
        as the node's indexes then count from lo.

        Every request waits for min_version, so every row is of a version
        >= min_version, and the version returned is the lowest any request
        was answered with (as one request's is the lowest of its shards'):
        each row is of that version or a later one. A sync table steps
        only once every trainer of its job pushed, so a trainer of the job
        pulling between its own steps gets the rows of one version; a
        reader outside the job may get rows of two steps in one pull, as
        it may from two shards in one request."""
        a = _ids(ids)
        dim = self._dims.get(table)
        try:
            if dim is None and a.size > 1:
                dim = self._pull(table, np.zeros(1, dtype="<u8"), 0)[0].shape[1]
            per = a.size if dim is None else max(1, min((MAX_FRAME - _PULL_HEAD) // (4 * dim),
                                                        (MAX_FRAME - _PULL_REQUEST_HEAD) // 8))
            if a.size <= per:
                rows, version = self._pull(table, a, min_version)
                if a.size:
                    self._dims[table] = rows.shape[1]
                return torch.from_numpy(rows), version  # this call's own bytearray: no copy needed
            out, version = np.empty((a.size, dim), dtype="<f4"), None
            for lo in range(0, a.size, per):
                hi = min(a.size, lo + per)
                try:
                    rows, v = self._pull(table, a[lo:hi], min_version)
                except KVError as e:
                    raise KVError("%s (ids[%d:%d] of %d, pulled in requests of %d)" % (e, lo, hi, a.size, per),
                                  e.code) from None
                if rows.shape[1] != dim:
                    self._dims.pop(table, None)  # the next pull learns the new dim
                    raise LoaderError("kv: pull %s: rows of dim %d, then %d: the table changed between requests"
                                      " (ids[%d:%d] of %d)" % (table, dim, rows.shape[1], lo, hi, a.size))
                out[lo:hi] = rows
                version = v if version is None else min(version, v)
        except KVError:
            self._dims.pop(table, None)  # a table dropped and created again with another dim
            raise
        self._dims[table] = dim
        return torch.from_numpy(out), version

    def _pull(self, table, a, min_version):
        """One PullRequest for the uint64 ids a: its rows (n × dim, a
        numpy view of the answer) and version."""
        body = struct.pack("<BB", KIND_PULL, WIRE_VERSION) + _name(table) + struct.pack("<QI", min_version, a.size)
        ans = self._call(body + a.tobytes(), "pull " + table, self._wait() if min_version else None)
        if ans[0] != KIND_PULL_RESPONSE or len(ans) < 18:
            raise LoaderError("kv: pull %s: unexpected answer kind %d" % (table, ans[0]))
        version, dim, n = struct.unpack_from("<QII", ans, 2)
        if dim == 0 or n != a.size or len(ans) != 18 + 4 * n * dim:  # a table's dim is positive, as Go checks
            raise LoaderError("kv: pull %s: %d rows of %d in %d bytes for %d ids" % (table, n, dim, len(ans), a.size))
        return np.frombuffer(ans, "<f4", n * dim, 18).reshape(n, dim), version

    def pull(self, table, ids):
        """The rows of ids as a torch.float32 tensor [len(ids), dim]."""
        return self.pull_version(table, ids)[0]

    def push(self, table, ids, grads):
        """Hand gradients of the rows of ids (len(ids) × dim values) to
        the owners' optimiser (async tables; duplicate ids are summed)."""
        a = _ids(ids)
        shape = tuple(getattr(grads, "shape", ()))
        g = _floats(grads)
        # The message carries dim = values / ids: anything but a whole row
        # of at least one value per id would be lost (values without ids)
        # or malformed (as the Go client refuses it, kv.ErrShape).
        if a.size == 0 and g.size == 0:
            return
        if a.size == 0 or g.size == 0 or g.size % a.size:
            raise ValueError("kv: push %s: %d gradient values for %d ids: want a row of dim values per id"
                             % (table, g.size, a.size))
        # Rows, one per id: a (dim, n) matrix of as many values (grads.t())
        # went in, its rows scrambled across the ids.
        if len(shape) > 2 or len(shape) == 2 and shape[0] != a.size:
            raise ValueError("kv: push %s: gradient of shape %s for %d ids: want (%d, dim), a row per id"
                             % (table, shape, a.size, a.size))
        dim = g.size // a.size
        size = _PUSH_HEAD + 8 * a.size + 4 * g.size
        if size > MAX_FRAME:
            most = max(1, (MAX_FRAME - _PUSH_HEAD) // (8 + 4 * dim))
            raise LoaderError("kv: push %s: %d ids of dim %d make a %d-byte message, over the %d-byte frame: push at most "
                              "%d ids of dim %d per call (Embedding.step splits its pushes)" % (table, a.size, dim, size, MAX_FRAME, most, dim))
        body = struct.pack("<BB", KIND_PUSH, WIRE_VERSION) + _name(table) + struct.pack("<II", dim, a.size)
        self._ack(self._call(body + a.tobytes() + g.tobytes(), "push " + table), "push " + table)

    def push_sync(self, table, step, trainer, world, grads):
        """Trainer's gradient for every row of a sync table at step (the
        table's version); blocks until all world trainers pushed and
        returns the version after the step. A KVError with code 6 when the
        step failed for everyone (a trainer left or timed out)."""
        g = _floats(grads)  # any shape, in row-major order: a (64, 3, 3, 3) weight in a table of 64 × 27
        body = struct.pack("<BB", KIND_PUSH_SYNC, WIRE_VERSION) + _name(table)
        body += struct.pack("<QIII", step, trainer, world, g.size)
        return self._ack(self._call(body + g.tobytes(), "push_sync " + table, self._wait()), "push_sync " + table)

    def _check_push(self, table):
        """Ask the node whether table takes push: a push of no ids, which
        changes nothing. A sync table refuses it (KVError, code 4 wrong
        mode), a table that does not exist (yet) too (code 1); a node of an
        earlier build acks it for any table."""
        body = struct.pack("<BB", KIND_PUSH, WIRE_VERSION) + _name(table) + struct.pack("<II", 0, 0)
        self._ack(self._call(body, "push " + table), "push " + table)

    @staticmethod
    def _ack(ans, op):
        if ans[0] != KIND_ACK or len(ans) != 10:
            raise LoaderError("kv: %s: unexpected answer kind %d of %d bytes" % (op, ans[0], len(ans)))
        return struct.unpack_from("<Q", ans, 2)[0]


class Embedding:
    """A kv table as a sparse embedding layer: calling it pulls the rows
    of ids as a leaf tensor that requires grad (plain rows under
    torch.no_grad(), as DGL's does); step() pushes the
    gradients of every call since the last step to the table's owners,
    whose optimiser applies them (DGL's DistEmbedding with SparseAdagrad
    works the same way, but for the optimiser: the table's "adagrad" is
    DGL-KE's, one accumulator per row, where DGL's SparseAdagrad keeps one
    per element; see step() for repeated ids).

        emb = graphnode.Embedding(kv, "emb")
        h = emb(batch.n_id)                 # [len(ids), dim], requires_grad
        loss = model(h, batch).sum(); loss.backward()
        emb.step()                          # push, then forget the calls

    Asynchronous tables only (mode "async"): a sync table's optimiser
    steps once every trainer of the job has sent push_sync, a gradient
    for every row, and refuses a push of some rows. Made on a sync table,
    an Embedding raises KVError (code 4) at once, before any forward
    pass, as it asks the node with a push of no ids. A table not created
    yet is not checked then (nor on a node of an earlier build, which
    acks that push for any table: step() is refused there).
    """

    def __init__(self, kv, name):
        self.kv = kv
        self.name = name
        self._calls = []
        try:
            kv._check_push(name)
        except KVError as e:
            if e.code == 1:  # not created yet: nothing to check
                return
            if e.code != 4:
                raise
            raise KVError('kv: Embedding: table "%s" is a sync table, which takes only push_sync (every trainer\'s '
                          'gradient for all its rows, each step); an Embedding pushes the rows it looked up, which '
                          'only an async table takes: create its table with mode="async", or keep dense parameters '
                          'in a torch module and push_sync their gradient' % name, e.code) from None

    def __call__(self, ids):
        """The rows of ids. With autograd recording, a leaf that requires
        grad, traced for step(); under torch.no_grad() (evaluation) plain
        rows, not traced: nothing to push, and a trace kept until the next
        step() would hold every evaluated batch's rows."""
        # A copy of ids, kept for step(): a batch's n_id views ring memory
        # that the next batch reuses, and step() may come batches later.
        own = _ids(ids).copy()
        rows = self.kv.pull(self.name, own)
        if torch.is_grad_enabled():
            rows.requires_grad_(True)
            self._calls.append((own, rows))
        return rows

    def step(self):
        """Push the gradients of every call since the last step (rows
        without a gradient are skipped) and forget the calls. Each row
        gets one update with its gradients summed over the calls, as
        torch's optimisers give it (DGL's sparse ones merge the traced ids
        too, but average a row's gradients: lr acts on the sum here, on
        the mean there): pushed call by call, a row looked up twice
        (a link batch's sources and destinations, accumulated batches)
        would take an Adagrad or Adam step per call. The merged rows go in
        as few pushes as the frame limit allows, each row in one."""
        calls, self._calls = self._calls, []
        traced = [(ids, rows.grad) for ids, rows in calls if rows.grad is not None and ids.size]
        if not traced:
            return
        ids = np.concatenate([ids for ids, _ in traced])
        grads = torch.cat([g.detach().to("cpu", torch.float32) for _, g in traced])
        uniq, inv = np.unique(ids, return_inverse=True)
        summed = torch.zeros(uniq.size, grads.shape[1]).index_add_(0, torch.from_numpy(inv.reshape(-1)), grads)
        per = max(1, (MAX_FRAME - _PUSH_HEAD) // (8 + 4 * grads.shape[1]))
        for lo in range(0, uniq.size, per):
            self.kv.push(self.name, uniq[lo:lo + per], summed[lo:lo + per])

    def zero_grad(self):
        """Forget the calls since the last step without pushing."""
        self._calls = []
