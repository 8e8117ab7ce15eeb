"""The node's control protocol (docs/control.md): over a Unix stream
socket, each message is a uint32 little-endian length then that many bytes
of one JSON object. The trainer sends a request and reads its response,
in order. Loaders opened on a connection live as long as it does.
"""

import json
import math
import os
import socket
import stat
import struct

from .errors import ControlError, LoaderError

MAX_FRAME = 64 << 20
OP_OPEN_LOADER = "open_loader"
OP_CLOSE_LOADER = "close_loader"
OP_STATS = "stats"


def socket_path(path):
    """path (a str, bytes or os.PathLike, as open() takes) as os.fspath
    gives it; ValueError naming the argument for anything else."""
    try:
        return os.fspath(path)
    except TypeError:
        raise ValueError("control: socket %r: want a path (str, bytes or os.PathLike) of the node's "
                         "control socket ([control] socket in node.toml)" % (path,)) from None


def check_timeout(timeout):
    """timeout (seconds per request) as a float, or None for no bound;
    ValueError for zero, a negative or a non-number: socket.settimeout(0)
    would make every request fail at once with EAGAIN."""
    if timeout is None:
        return None
    try:
        t = float(timeout)
    except (TypeError, ValueError):
        raise ValueError("control: timeout %r: want seconds (a positive number) or None" % (timeout,)) from None
    if not t > 0 or t == float("inf"):
        raise ValueError("control: timeout %r: want seconds (a positive number) or None (no bound)" % (timeout,))
    return t


def _not_socket(path):
    """What is at path when it is there and not a socket ("a regular
    file", "a directory", "a special file"), "" otherwise."""
    try:
        mode = os.stat(path).st_mode  # a link to a socket is connected to as one
    except OSError:
        return ""
    if stat.S_ISSOCK(mode):
        return ""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a special file"


class Connection:
    """One control connection to a node. Not safe for concurrent use.

    A request that fails in transit (a timeout, a reset, a short or
    oversized frame, a KeyboardInterrupt) leaves the stream at an unknown
    point: its answer may still come and would be read as the next
    request's. The connection then refuses every later request, saying
    why, and, unless close_on_break is false (a loader's connection, which
    keeps the loader alive), closes its socket."""

    def __init__(self, path, timeout=60.0, close_on_break=True):
        path = socket_path(path)
        timeout = check_timeout(timeout)
        self.path = path
        self._pid = os.getpid()
        self._broken = None
        self._close_on_break = close_on_break
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(path)
        except OSError as e:
            self._sock.close()
            hint = ""
            what = _not_socket(path) if isinstance(e, ConnectionRefusedError) else ""
            if what:
                # A file or a directory refuses the connection too; node
                # run refuses to start over it, so it is named.
                hint = " (%s is %s, not a socket: give the control.socket of the node's node.toml)" % (path, what)
            elif isinstance(e, (FileNotFoundError, ConnectionRefusedError)):
                # As the Go client says: the bare errno left a new user to
                # guess that node run was not started.
                hint = " (no node listens there: start node run, or give the control.socket of its node.toml)"
            raise LoaderError("control: connect to node socket %s: %s%s" % (path, e, hint)) from e
        except BaseException:
            self._sock.close()
            raise

    def request(self, obj, timeout=None):
        """Send one request and return the response object. An error
        response raises ControlError (with .key); a broken connection or a
        malformed frame raises LoaderError."""
        op = obj.get("op", "?")
        try:
            body = json.dumps(obj, separators=(",", ":"), default=_json_value, allow_nan=False)
        except ValueError:
            # JSON has no NaN or infinity: written as NaN, the node refused
            # "bad JSON: invalid character 'N'", naming no key.
            key, v = _non_finite(obj)
            if key is None:
                raise
            raise ValueError("control: %s: %s = %s: want a finite number (JSON has no NaN or infinity)" % (op, key, v)) from None
        raw = self.exchange(body.encode(), op, timeout)
        try:
            resp = json.loads(raw)
        except ValueError as e:
            raise LoaderError("control: %s: bad JSON response: %s" % (op, e)) from None
        if not isinstance(resp, dict):
            raise LoaderError("control: %s: response is not a JSON object" % op)
        if resp.get("error"):
            raise ControlError(resp["error"], resp.get("key", ""), int(resp.get("kv_code", 0)))
        return resp

    def exchange(self, body, op, timeout=None):
        """Send one frame holding body and return the body of the answer
        frame (bytes-like): a JSON request's response, or a kv wire
        message's answer (graphnode.kv). op names the request in errors."""
        if self._broken is not None:
            raise LoaderError("control: %s: connection to %s closed after an interrupted call (%s)"
                              % (op, self.path, self._broken))
        if self._sock is None:
            raise LoaderError("control: %s: connection is closed" % self.path)
        if os.getpid() != self._pid:
            # A forked child shares the socket: its requests and the
            # parent's would interleave and each read the other's answers.
            raise LoaderError("control: %s: connection to %s was opened in pid %d, used in pid %d: a connection "
                              "cannot be shared with a forked process; open one per process"
                              % (op, self.path, self._pid, os.getpid()))
        if len(body) > MAX_FRAME:
            raise LoaderError("control: %s: request of %d bytes exceeds %d" % (op, len(body), MAX_FRAME))
        old = self._sock.gettimeout()
        if timeout is not None:
            self._sock.settimeout(timeout)
        try:
            self._sock.sendall(struct.pack("<I", len(body)))
            self._sock.sendall(body)
            n = struct.unpack("<I", self._read(4, op))[0]
            if n > MAX_FRAME:
                raise LoaderError("control: %s: response of %d bytes exceeds %d" % (op, n, MAX_FRAME))
            return self._read(n, op)
        except socket.timeout:
            self._break("timed out")
            raise LoaderError("control: %s: node at %s did not answer in time" % (op, self.path)) from None
        except OSError as e:
            self._break(str(e))
            raise LoaderError("control: %s: %s: %s" % (op, self.path, e)) from e
        except LoaderError as e:
            self._break(str(e))
            raise
        except BaseException as e:
            # KeyboardInterrupt (Ctrl-C in a notebook) or another signal's
            # exception, possibly between the request and its answer.
            self._break(type(e).__name__)
            raise
        finally:
            if timeout is not None and self._sock is not None:
                self._sock.settimeout(old)

    def _break(self, why):
        self._broken = why
        if self._close_on_break and self._sock is not None:
            self._sock.close()
            self._sock = None

    def _read(self, n, op):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self._sock.recv_into(view[got:])
            if not k:
                raise LoaderError("control: %s: node closed the connection %s" % (op, self.path))
            got += k
        return buf

    def stats(self, timeout=None):
        """The node's stats object (docs/control.md, "stats")."""
        return self.request({"op": OP_STATS}, timeout).get("stats") or {}

    def close(self):
        """Close the connection; the node then reclaims its loaders.
        Idempotent."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def not_picklable(what):
    """The error of pickling a client of a node connection (a spawn-started
    DataLoader worker gets its dataset pickled): its socket belongs to
    this process."""
    return LoaderError("%s holds a connection to the node, which cannot be pickled into another process "
                       "(a DataLoader worker started by spawn or forkserver): open one per process" % what)


def _non_finite(v, key=""):
    """The key (as the node names a field: table.lr, ids[1]) and value of
    the first NaN or infinity in a request, (None, None) when none."""
    if isinstance(v, dict):
        items = (((key + "." if key else "") + str(k), x) for k, x in v.items())
    elif isinstance(v, (list, tuple)):
        items = (("%s[%d]" % (key, i), x) for i, x in enumerate(v))
    else:
        try:
            x = float(v) if isinstance(v, float) else float(_json_value(v))
        except (TypeError, ValueError):
            return None, None
        return (key, x) if isinstance(x, float) and not math.isfinite(x) else (None, None)
    for k, x in items:
        found = _non_finite(x, k)
        if found[0] is not None:
            return found
    return None, None


def _json_value(v):
    """json.dumps's hook for the numbers numpy and torch give (np.int64, a
    one-element tensor): their Python value."""
    item = getattr(v, "item", None)
    if item is not None:
        try:
            x = item()  # more than one element: ValueError (numpy), RuntimeError (torch)
        except (ValueError, RuntimeError):
            x = None
        if isinstance(x, (bool, int, float)):
            return x
    raise TypeError("control: a request value of type %s: want a number, a string, a list or a bool" % type(v).__name__)


class Session:
    """A client over one control connection (KV, NodeData): a context
    manager whose close() is idempotent."""

    def __init__(self, socket, timeout):
        self._conn = Connection(socket, timeout)

    def __reduce__(self):
        raise not_picklable(type(self).__name__)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Close the connection. Idempotent."""
        self._conn.close()


def stats(path, timeout=5.0):
    """Ask the node listening on path for its stats."""
    c = Connection(path, timeout)
    try:
        return c.stats()
    finally:
        c.close()
