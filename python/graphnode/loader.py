"""graphnode.Loader: PyTorch-style iteration over a node's loader.

    loader = graphnode.Loader(socket="/run/graphnode/node.sock", split="train",
                              fanouts=[15, 10, 5], batch_size=1024, epochs=10)
    with loader:
        for epoch in range(10):
            for batch in loader:          # one epoch per iter(loader)
                out = model(batch.x, batch.edge_index)[:batch.batch_size]

Order of calls: Loader(...) connects to the node, sends open_loader and
maps the ring the node names; each iter(loader) yields the batches of the
next epoch in order (batch i from sub-ring i mod W); close() (or leaving
the with block) closes the connection, upon which the node stops the
samplers and removes the ring. A Loader is not safe for concurrent use,
and belongs to the process that opened it: in a forked child (a
DataLoader worker) it raises LoaderError, and closing or freeing it there
leaves the parent's loader open.

Lifetime of batches: with copy=False (the default) a batch's tensors view
the ring. The record is released back to its sampler when the next batch
is requested (or the loop ends), after which the sampler may overwrite
those bytes: use a batch before asking for the next, or call
batch.copy() (or pass copy=True, which copies every batch and releases
it at once). A stale view never faults after close(): the mapping lives
as long as any tensor viewing it. Only a ring file that another process
truncates makes its pages fault (SIGBUS), as in any process mapping it;
the loader checks the file's size before it touches the ring and raises
CorruptError naming it.
"""

import copy as _copy  # the name copy is an argument of Loader
import operator
import os
import time

import numpy as np
import torch

from .batch import from_record
from .control import OP_CLOSE_LOADER, OP_OPEN_LOADER, Connection, not_picklable
from .errors import EndOfStream, LoaderError, ProducerDeadError
from .record import KIND_BATCH, KIND_END_OF_EPOCH, KIND_END_OF_STREAM, KIND_ERROR, KIND_NAMES, decode_record
from .ring import Ring

# How long a dead sampler's error waits for the node to report its exit
# status (stats), on top of the ring's detection (about a second).
STATUS_WAIT = 1.0

# _next's answer at the end of an epoch.
_END = object()


def _id_list(ids, what):
    """ids (a tensor, numpy array or sequence of ints) as a list of ints.
    Refuses what int() would silently misread: a boolean mask (PyG's
    input_nodes=train_mask) would become ids 0 and 1, floats would be
    truncated."""
    if isinstance(ids, torch.Tensor):
        ids = ids.detach().cpu().numpy()
    elif not isinstance(ids, np.ndarray):
        ids = list(ids)  # any iterable: a range, a set, a generator
    a = np.asarray(ids)
    if a.dtype == np.bool_:
        raise ValueError("loader: %s is a boolean mask: give relabelled global ids (as in batch.n_id)" % what)
    if a.ndim != 1:
        raise ValueError("loader: %s of shape %s: want one dimension of ids" % (what, a.shape))
    if a.size and a.dtype.kind not in "iu":
        raise ValueError("loader: %s of dtype %s: want integer ids" % (what, a.dtype))
    if a.size and a.min() < 0:
        raise ValueError("loader: %s holds %d: ids are non-negative" % (what, a.min()))
    return a.tolist()  # Python ints: the array is integer (or empty)


def _whole(v, name, what):
    """v (neg_ratio, batch_size, ...) as an int; what names its unit ("" for
    none). Refuses a fraction, which int()
    would truncate (PyG's neg_sampling_ratio=0.5 would become no
    negatives, a batch_size of 2.7 two seeds): the node takes a whole
    number of what."""
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        v = v.item()
    if isinstance(v, bool):
        raise ValueError("loader: %s %r: want a whole number%s, not a boolean" % (name, v, what and " of " + what))
    try:
        return operator.index(v)
    except TypeError:
        pass
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError("loader: %s %r: want a whole number%s" % (name, v, what and " of " + what)) from None
    if not f.is_integer():
        raise ValueError("loader: %s %r: want a whole number%s" % (name, v, what and " of " + what))
    return int(f)


def _fanouts(fanouts):
    """fanouts (one whole number per hop, -1 for all neighbours) as a list
    of ints; ValueError for a single number or a fraction, which int()
    would truncate (0.5 would reach the node as 0)."""
    if isinstance(fanouts, torch.Tensor):
        fanouts = fanouts.tolist()
    if isinstance(fanouts, (str, bytes)) or not hasattr(fanouts, "__iter__"):
        raise ValueError("loader: fanouts %r: want one number of neighbours per hop, e.g. (15, 10, 5)" % (fanouts,))
    return [_whole(f, "fanouts[%d]" % i, "neighbours (-1 for all)") for i, f in enumerate(fanouts)]


def _size_text(v):
    if v is None or isinstance(v, str):
        return v
    return "%dB" % int(v)


class Loader:
    """Batches of one loader of the node at ``socket``.

    split ("train", "val", "test"; default "train") or seed_ids (relabelled
    global ids owned by the node's partition: integers, not a boolean
    mask; ValueError otherwise), fanouts, batch_size,
    shuffle, drop_last, epochs, seed, rank, world_size are the open_loader
    fields of docs/control.md. workers, concurrency and ring_size ("1GB",
    "512MiB" or bytes) default to None: the node's configured defaults
    (2, 4 and "1GB" unless node.toml changes them). features / labels
    turn x / y off. copy=True yields batches that own their memory.
    timeout bounds each control request in seconds (opening a loader
    spawns its samplers): a positive number, or None for no bound.
    socket is a str, bytes or os.PathLike. Whole-number arguments
    (fanouts, batch_size, epochs, seed, rank, world_size, neg_ratio)
    refuse fractions with ValueError rather than truncate them.

    Link prediction (PyG's LinkNeighborLoader, DGL's
    as_edge_prediction_sampler): seed_edges, a (2, M) tensor or a pair of
    id sequences (sources, destinations), instead of split / seed_ids;
    batch_size seed edges per batch, neg_ratio negatives each (a whole
    number, ValueError for a fraction; the same source, a destination
    uniform over the graph), and with
    exclude_seed_edges=True the edges between a seed edge's ends are left
    out of the graph before neighbours are drawn (as DGL's exclude), so a
    seed still gets min(fanout, its other neighbours). Batches then carry
    edge_label_index and edge_label."""

    def __init__(self, socket="/run/graphnode/node.sock", split=None, seed_ids=None, fanouts=(15, 10, 5),
                 batch_size=1024, shuffle=True, drop_last=False, epochs=1, seed=0, rank=0, world_size=1,
                 workers=None, concurrency=None, ring_size=None, features=True, labels=True, copy=False,
                 timeout=60.0, seed_edges=None, neg_ratio=0, exclude_seed_edges=False):
        req = {"op": OP_OPEN_LOADER, "fanouts": _fanouts(fanouts), "batch_size": _whole(batch_size, "batch_size", "seeds per batch"),
               "shuffle": bool(shuffle), "drop_last": bool(drop_last), "epochs": _whole(epochs, "epochs", "passes"),
               "seed": _whole(seed, "seed", ""), "rank": _whole(rank, "rank", ""),
               "world_size": _whole(world_size, "world_size", "trainers"), "features": bool(features),
               "labels": bool(labels)}
        if seed_edges is not None:
            if split is not None or seed_ids is not None:
                raise ValueError("loader: give split, seed_ids or seed_edges, one of them")
            shape = tuple(getattr(seed_edges, "shape", ()))
            if shape and (len(shape) != 2 or shape[0] != 2):
                raise ValueError("loader: seed_edges of shape %s: want (2, M), sources then destinations "
                                 "(edge_index layout; an (M, 2) edge list needs .t())" % (shape,))
            if not shape and len(seed_edges) != 2:
                raise ValueError("loader: seed_edges holds %d sequences: want two, (sources, destinations)"
                                 % len(seed_edges))
            req["seed_edges"] = {"src": _id_list(seed_edges[0], "seed_edges sources"),
                                 "dst": _id_list(seed_edges[1], "seed_edges destinations")}
            req["neg_ratio"] = _whole(neg_ratio, "neg_ratio", "negatives per seed edge")
            req["exclude_seed_edges"] = bool(exclude_seed_edges)
        elif neg_ratio or exclude_seed_edges:
            raise ValueError("loader: neg_ratio and exclude_seed_edges need seed_edges (a link loader)")
        elif seed_ids is not None:
            if split is not None:
                raise ValueError("loader: give split or seed_ids, not both")
            req["seed_ids"] = _id_list(seed_ids, "seed_ids")
        else:
            # Only an absent split means "train": split="" (an unset
            # setting) goes to the node, which refuses it naming split.
            req["split"] = "train" if split is None else split
        for key, v, what in (("workers", workers, "sampler processes"), ("concurrency", concurrency, "batches in flight per worker")):
            if v is not None:
                req[key] = _whole(v, key, what)
        if ring_size is not None:
            req["ring_size"] = _size_text(ring_size)
        self.copy = bool(copy)
        self._pid = os.getpid()
        self._closed = False
        self._conn = None
        self._ring = None
        self._err = None
        self._conn = Connection(socket, timeout, close_on_break=False)
        try:
            info = self._conn.request(req).get("loader")
            if not info:
                raise LoaderError("loader: open_loader response without a loader")
            self.info = info
            self.loader_id = int(info["loader_id"])
            self._ring = Ring(info["ring"])
            self._cons = self._ring.consumer()
            if self._ring.sub_rings != int(info["sub_rings"]):
                raise LoaderError("loader: ring %s has %d sub-rings, node said %d"
                                  % (info["ring"], self._ring.sub_rings, info["sub_rings"]))
        except BaseException:
            self.close()
            raise
        self._w = self._ring.sub_rings
        self._per_epoch = int(info["batches_per_epoch"])
        self.epochs = int(info["epochs"])
        self._epoch = 0     # epoch of the next batch
        self._index = 0     # index of the next batch in its epoch
        self._held = -1     # sub-ring whose record is handed out
        self._eoe = 0       # sub-rings whose end-of-epoch record was read, at the epoch's end
        self._gen = 0       # the live iterator's number

    # --- PyTorch DataLoader surface -------------------------------------

    def __len__(self):
        """Batches per epoch for this rank (drop_last applied)."""
        return self._per_epoch

    def __iter__(self):
        """An iterator over the next epoch. A new iter() while an epoch is
        half read first skips that epoch's remaining batches, as a
        DataLoader starts a new epoch; the older iterator is then dead."""
        self._gen += 1
        return self._epoch_iter(self._gen)

    def _epoch_iter(self, gen):
        self._check()
        if self._index > 0:
            while self._next(build=False) is not _END:
                pass
        if self._epoch >= self.epochs:
            raise LoaderError("loader: loader %d: all %d epochs were read; open the Loader with epochs=N for more"
                              % (self.loader_id, self.epochs))
        while True:
            if gen != self._gen:
                raise LoaderError("loader: loader %d: iterator superseded by a newer iter(loader)" % self.loader_id)
            b = self._next(build=True)
            if b is _END:
                return
            yield b

    @property
    def epoch(self):
        """The epoch the next batch belongs to."""
        return self._epoch

    def stats(self, timeout=None):
        """The node's stats (docs/control.md), over this loader's connection."""
        self._check()
        return self._conn.stats(timeout)

    # --- reading ----------------------------------------------------------

    def _check(self):
        if os.getpid() != self._pid:
            raise LoaderError("loader: loader %d was opened in pid %d, used in pid %d: a Loader cannot be shared "
                              "with a forked process (a DataLoader worker); iterate it in the process that opened "
                              "it, or open one per process" % (self.loader_id, self._pid, os.getpid()))
        if self._err is not None:
            raise _copy.copy(self._err)  # a fresh one: raising the kept one would tie its traceback to it
        if self._closed:
            raise LoaderError("loader: loader is closed")

    def _fail(self, err):
        """Keep err for every later call (errors are sticky), as a copy
        without its traceback: the traceback's frames hold this loader and
        the last batch, a cycle that only the cyclic collector frees, so a
        failed loader that is dropped without close() would keep its
        connection, samplers and ring mapping until it runs."""
        self._err = _copy.copy(err)
        return err

    def _release(self):
        """Release the held record, which was counted. Safe to repeat
        after a KeyboardInterrupt cut it short."""
        w = self._held
        if w >= 0:
            if self._cons.holds(w):
                self._cons.release(w)
            self._held = -1

    def _next(self, build):
        """The next batch of the current epoch (None when not build), or
        _END after reading the epoch's end-of-epoch records (then the epoch
        advances).

        A KeyboardInterrupt (Ctrl-C) may land anywhere. Until a record is
        counted (self._index, self._eoe) it is given back unread when one
        is raised, and a counted one is released by the next call, so an
        interrupted next() leaves the loader where a break would: a new
        iter() reads on."""
        self._check()
        try:
            self._release()
            if self._index == self._per_epoch:
                while self._eoe < self._w:
                    w = self._eoe
                    try:
                        _, rec = self._read(w)
                    except LoaderError:
                        raise
                    except BaseException:
                        self._unread(w)
                        raise
                    if rec.kind != KIND_END_OF_EPOCH or rec.epoch != self._epoch:
                        raise self._unexpected(w, rec, "end of epoch")
                    self._eoe += 1
                    self._release()
                self._epoch, self._index, self._eoe = self._epoch + 1, 0, 0
                return _END
            w = self._index % self._w
            b = None
            try:
                off, rec = self._read(w)
                if rec.kind != KIND_BATCH or rec.epoch != self._epoch or rec.index != self._index:
                    raise self._unexpected(w, rec, "batch")
                if build:
                    b = from_record(self._ring.mem, off, rec, self.copy)
            except LoaderError:
                raise
            except BaseException:  # KeyboardInterrupt, or a copy=True copy out of memory
                self._unread(w)
                raise
            self._index += 1
            if self.copy:
                self._release()
            return b
        except LoaderError as e:
            if self._err is None:
                self._fail(e)
            raise

    def _unread(self, w):
        """Give sub-ring w's record back unread if it was taken: the next
        read returns it again."""
        if self._cons.holds(w):
            self._cons.unread(w)
        self._held = -1

    def _read(self, w):
        """The next record of sub-ring w, decoded, held until _release."""
        try:
            off, n = self._cons.next(w)
        except ProducerDeadError as e:
            raise self._sampler_error(w, e) from e
        except EndOfStream as e:
            raise LoaderError("loader: loader %d worker %d closed its sub-ring without end of stream: "
                              "stopped by the node" % (self.loader_id, w)) from e
        self._held = w
        try:
            rec = decode_record(self._ring.mem, off, n, address=self._ring.base + off)
        except LoaderError as e:
            raise LoaderError("loader: loader %d worker %d: %s" % (self.loader_id, w, e)) from e
        if rec.kind == KIND_ERROR:
            raise LoaderError("loader: loader %d worker %d: sampler failed: %s" % (self.loader_id, w, rec.message))
        if rec.kind == KIND_END_OF_STREAM and self._epoch < self.epochs:
            raise LoaderError("loader: loader %d worker %d ended the stream in epoch %d at batch %d: "
                              "stopped by the node" % (self.loader_id, w, self._epoch, self._index))
        return off, rec

    def _unexpected(self, w, rec, want):
        return LoaderError("loader: loader %d worker %d: got %s record (epoch %d, index %d), want %s "
                           "(epoch %d, index %d)" % (self.loader_id, w, KIND_NAMES.get(rec.kind, rec.kind),
                                                     rec.epoch, rec.index, want, self._epoch, self._index))

    def _sampler_error(self, w, cause):
        """A LoaderError for the death of worker w's sampler, with its exit
        status as the node saw it when the node tells in time, or saying
        that the node does not answer either: a killed node takes its
        samplers with it, and the user should look at the node."""
        detail = "(pid %d) died" % cause.pid
        deadline = time.monotonic() + STATUS_WAIT
        asked = self._conn._broken is None  # else stats fails whatever the node does
        while asked and time.monotonic() < deadline:
            try:
                st = self._conn.stats(timeout=max(deadline - time.monotonic(), 0.01))
            except LoaderError as e:
                detail += "; the node at %s does not answer either (%s)" % (self._conn.path, e)
                break
            s = _find_sampler(st, self.loader_id, w)
            if s is not None:
                detail = "(pid %d) died" % s.get("pid", cause.pid)
                if s.get("status"):
                    detail += ": " + s["status"]
                    break
            time.sleep(0.02)
        return LoaderError("loader: loader %d worker %d %s: %s" % (self.loader_id, w, detail, cause))

    # --- lifetime -----------------------------------------------------------

    def close(self):
        """Close the ring (waking its samplers) and the control connection;
        the node then stops the samplers and removes the ring file.
        Idempotent. Views of batches read old bytes afterwards."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._ring is not None:
                self._ring.close()
        finally:  # a Ctrl-C in the ring's close still lets go of the loader
            if self._conn is not None:
                self._conn.close()

    def close_loader(self):
        """Ask the node to end this loader now (close_loader), then close.
        The ring's consumer closes first: samplers blocked on a full ring
        then stop at once, where they would otherwise spend the node's
        grace for batches in hand (about 3 s) before the node answers."""
        if not self._closed and self._conn is not None:
            try:
                if self._ring is not None:
                    self._ring.close()
                self._conn.request({"op": OP_CLOSE_LOADER, "loader_id": self.loader_id})
            finally:
                self.close()

    def __reduce__(self):
        raise not_picklable("Loader")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return "Loader(id=%s, epoch=%d/%d, batches_per_epoch=%d, pid=%d)" % (
            getattr(self, "loader_id", "?"), getattr(self, "_epoch", 0), getattr(self, "epochs", 0),
            getattr(self, "_per_epoch", 0), os.getpid())


def _find_sampler(st, loader_id, w):
    for lo in (st or {}).get("loaders") or []:
        if lo.get("loader_id") == loader_id:
            for s in lo.get("samplers") or []:
                if s.get("worker") == w:
                    return s
    return None
