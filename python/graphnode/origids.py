"""Map relabelled global ids (n_id of a batch) back to the input graph's
ids through a partition directory's orig_ids.bin (DESIGN.md §4):
little-endian uint64, entry i = the original id of relabelled node i.

The file is memory-mapped read-only (numpy.memmap), so a lookup reads only
the pages it touches, never the whole file:

    ids = graphnode.OrigIds("parts/")
    orig = ids[batch.n_id]            # torch int64 tensor, same shape
    names = ids.names(batch.n_id[:4]) # string ids (names.txt), when the input had them
"""

import errno
import os

import numpy as np

ORIG_IDS_FILE = "orig_ids.bin"
NAMES_FILE = "names.txt"
MANIFEST_FILE = "graph.toml"


class OrigIds:
    """Relabelled id -> original id for the parts/ directory parts_dir."""

    def __init__(self, parts_dir):
        parts_dir = os.fsdecode(os.fspath(parts_dir))  # bytes too, as Loader, KV and NodeData take
        self.path = os.path.join(parts_dir, ORIG_IDS_FILE)
        self._dir = parts_dir
        try:
            self._f = open(self.path, "rb")
        except OSError as e:
            raise FileNotFoundError("origids: %s: %s" % (self.path, e.strerror)) from e
        size = os.fstat(self._f.fileno()).st_size
        if size % 8:
            self._f.close()
            raise ValueError("origids: %s: %d bytes is not a whole number of uint64 ids" % (self.path, size))
        nodes = _manifest_nodes(os.path.join(parts_dir, MANIFEST_FILE))
        if nodes is not None and nodes * 8 != size:
            self._f.close()
            raise ValueError("origids: %s: %d ids, graph.toml says nodes = %d" % (self.path, size // 8, nodes))
        self._n = size // 8
        self._map = np.memmap(self._f, dtype="<u8", mode="r") if size else np.zeros(0, dtype="<u8")
        self._names = None

    def __reduce__(self):
        # The path, not the mapping: a DataLoader worker maps the file
        # itself (on papers100M the ids are 0.9 GB).
        return (OrigIds, (self._dir,))

    def __len__(self):
        return self._n

    def __getitem__(self, ids):
        """Original ids of ids: an int gives an int; a torch tensor gives a
        torch int64 tensor (an original id of 2^63 or more is an
        OverflowError there); anything else (list, numpy array) a numpy
        uint64 array. Out-of-range ids raise IndexError naming the first
        one."""
        if self._f.closed:
            # Not "id 3 outside [0, 0)", nor, for no ids, an I/O error of
            # the closed file.
            raise ValueError("origids: %s: closed" % self.path)
        if isinstance(ids, (int, np.integer)):
            i = int(ids)
            self._check(np.array([i]))
            _check_size(self._f, self.path, self._n * 8)
            return int(self._map[i])
        torch = _torch_of(ids)
        idx = ids.cpu().numpy() if torch is not None else np.asarray(ids)
        if idx.size == 0 and idx.dtype.kind == "f":
            idx = idx.astype(np.int64)  # np.asarray([]) is float64
        if idx.dtype.kind not in "iu":
            raise TypeError("origids: ids must be integers, got %s" % idx.dtype)
        self._check(idx)
        _check_size(self._f, self.path, self._n * 8)
        out = np.asarray(self._map[idx.astype(np.int64, copy=False)])
        if torch is not None:
            # torch has no uint64: an original id of 2^63 or more (hashed
            # input ids) would come back negative, so it is refused.
            over = out > np.iinfo(np.int64).max
            if over.any():
                i = int(np.argmax(over.reshape(-1)))
                raise OverflowError(
                    "origids: %s: original id %d of id %d does not fit a torch int64; look it up with a numpy array for uint64"
                    % (self.path, int(out.reshape(-1)[i]), int(idx.reshape(-1)[i])))
            return torch.from_numpy(out.astype(np.int64)).to(ids.device)
        return out

    def _check(self, idx):
        if idx.size == 0:
            return
        bad = (idx < 0) | (idx >= self._n)
        if bad.any():
            first = int(idx.reshape(-1)[np.argmax(bad.reshape(-1))])
            raise IndexError("origids: %s: id %d outside [0, %d)" % (self.path, first, self._n))

    def names(self, ids):
        """The input's string names of ids (names.txt: line k = the name of
        original index k), for graphs whose input ids were strings. The
        file is memory-mapped too; the first call indexes its lines (8
        bytes per name, one pass over the file)."""
        if self._f.closed:
            raise ValueError("origids: %s: closed" % self.path)
        p = os.path.join(self._dir, NAMES_FILE)
        if self._names is None:
            if not os.path.exists(p):
                raise FileNotFoundError("origids: %s: the input had integer ids, so there are no names" % p)
            self._names = _Lines(p)
        orig = self[ids]
        one = isinstance(orig, int)
        out = []
        for o in [orig] if one else np.asarray(orig).reshape(-1).tolist():
            if o >= len(self._names):
                raise IndexError("origids: %s: %d lines, no name for original index %d" % (p, len(self._names), o))
            out.append(self._names[o])
        return out[0] if one else out

    def close(self):
        """Drop the mapping (it is unmapped once no result views it)."""
        self._map = np.zeros(0, dtype="<u8")
        self._n = 0
        self._names = None
        self._f.close()

    def __del__(self):
        f = getattr(self, "_f", None)  # absent when __init__ failed to open it
        if f is not None:
            f.close()


class _Lines:
    """The lines of a names file, memory-mapped: line k is bytes
    [start k, end k) where the ends are the newline bytes (and the file's
    end when its last line has none). The names are the input's bytes: no
    newline translation (a carriage return stays in its name), and bytes
    that are not UTF-8 (a Latin-1 input) come back as surrogate escapes
    rather than failing the lookup."""

    _CHUNK = 1 << 20  # bytes scanned at a time: the scan's temporaries stay small

    def __init__(self, path):
        self._path = path
        self._f = open(path, "rb")
        size = self._size = os.fstat(self._f.fileno()).st_size
        self._mm = np.memmap(self._f, dtype=np.uint8, mode="r") if size else np.zeros(0, dtype=np.uint8)
        ends = [np.flatnonzero(self._mm[lo:lo + self._CHUNK] == 10) + lo for lo in range(0, size, self._CHUNK)]
        ends = np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64)
        if size and (ends.size == 0 or ends[-1] != size - 1):
            ends = np.append(ends, size)  # a last line without "\n"
        self._ends = ends

    def __del__(self):
        f = getattr(self, "_f", None)
        if f is not None:
            f.close()

    def __len__(self):
        return self._ends.size

    def __getitem__(self, k):
        _check_size(self._f, self._path, self._size)
        lo = 0 if k == 0 else int(self._ends[k - 1]) + 1
        return self._mm[lo:int(self._ends[k])].tobytes().decode("utf-8", "surrogateescape")


def _check_size(f, path, mapped):
    """Raise OSError when the file open as f is now shorter than the
    mapped bytes: it was truncated or rewritten in place (cp, scp,
    truncate) after it was opened, and reading a page past its new end
    would end this process with SIGBUS, naming nothing. A file renamed over
    the path (what node partition --force does) leaves the mapping on the
    old file and is no change. A truncation within microseconds of the
    read still faults, as in any process mapping the file."""
    size = os.fstat(f.fileno()).st_size
    if size < mapped:
        raise OSError(errno.ESTALE, "origids: %s: the file is now %d bytes, %d when opened: it was truncated or rewritten in place; "
                      "replace partition files by renaming a new one over the old, and open OrigIds again" % (path, size, mapped))


def _torch_of(x):
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch
        return torch
    return None


def _manifest_nodes(path):
    """nodes from graph.toml, or None when absent or unreadable."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11: skip the cross-check
        return None
    try:
        with open(path, "rb") as f:
            n = tomllib.load(f).get("nodes")
    except (OSError, ValueError):
        return None
    return int(n) if isinstance(n, int) else None
