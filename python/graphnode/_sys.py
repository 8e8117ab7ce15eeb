"""Linux system calls the ring reader needs, through ctypes: futex wait and
wake on a word of the shared mapping, a full memory fence, and a pid
liveness check. Nothing here is compiled; libc is loaded once per process
(a cache of a constant, not mutable state that changes behaviour).

The ring protocol (shm/doc.go, "Waiting") needs the stores and loads of
counter, waiter flag and futex word to be sequentially consistent. On
x86-64 every aligned load is an acquire and every aligned store a release
(TSO), so the only reordering left is a later load passing an earlier
store. full_fence() closes that hole with one locked instruction: glibc's
pthread_spin_trylock is an atomic exchange, and a locked instruction on
x86-64 drains the store buffer like MFENCE. It is called only around a
publish (release of a record) and before a sleep, never per poll. Where it
is missing, a missed wake costs at most the 50 ms futex timeout, which the
protocol allows ("a client without a full fence ... may simply poll").
"""

import ctypes
import ctypes.util
import errno
import os
import platform
import threading

# SYS_futex per architecture (asm/unistd.h). Only little-endian 64-bit
# hosts can view the ring's words directly.
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}

FUTEX_WAIT = 0  # the shared variant: no FUTEX_PRIVATE_FLAG, the word is
FUTEX_WAKE = 1  # in a mapping that other processes share

_lock = threading.Lock()
_cache = {}


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _libc():
    """The process's libc, its futex syscall number and a spin lock for
    the fence, loaded on first use."""
    with _lock:
        if "libc" not in _cache:
            name = ctypes.util.find_library("c") or "libc.so.6"
            libc = ctypes.CDLL(name, use_errno=True)  # CDLL: the GIL is released during calls
            libc.syscall.restype = ctypes.c_long
            spin = ctypes.c_int(0)
            fence = None
            try:
                libc.pthread_spin_trylock.argtypes = [ctypes.c_void_p]
                libc.pthread_spin_unlock.argtypes = [ctypes.c_void_p]
                libc.pthread_spin_init(ctypes.byref(spin), 0)
                fence = (libc.pthread_spin_trylock, libc.pthread_spin_unlock, ctypes.addressof(spin))
            except AttributeError:
                pass
            _cache.update(libc=libc, spin=spin, fence=fence,
                          nr=_SYS_FUTEX.get(platform.machine()))
        return _cache


def futex_supported():
    """Whether futex waits work here; without them waits poll every
    millisecond instead of sleeping."""
    return _libc()["nr"] is not None


def futex_wait(addr, expected, timeout_s):
    """Sleep while the uint32 at addr equals expected, at most timeout_s
    seconds. Spurious returns (EAGAIN: the word changed; EINTR; timeout)
    are fine: every caller re-checks its condition.

    addr is the address of a 4-byte aligned word inside a live shared
    mapping (the caller holds the mmap open), so the kernel reads a valid
    word."""
    c = _libc()
    if c["nr"] is None:
        import time
        time.sleep(min(timeout_s, 0.001))
        return
    ts = _Timespec(int(timeout_s), int((timeout_s % 1) * 1e9))
    c["libc"].syscall(ctypes.c_long(c["nr"]), ctypes.c_void_p(addr), ctypes.c_int(FUTEX_WAIT),
                      ctypes.c_uint(expected & 0xFFFFFFFF), ctypes.byref(ts),
                      ctypes.c_void_p(0), ctypes.c_int(0))


def futex_wake(addr):
    """Wake every process sleeping on the uint32 at addr."""
    c = _libc()
    if c["nr"] is None:
        return
    c["libc"].syscall(ctypes.c_long(c["nr"]), ctypes.c_void_p(addr), ctypes.c_int(FUTEX_WAKE),
                      ctypes.c_int(0x7FFFFFFF), ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_int(0))


def full_fence():
    """A full memory fence (see the module doc); a no-op where libc has no
    pthread spin locks."""
    f = _libc()["fence"]
    if f is not None:
        trylock, unlock, addr = f
        with _lock:  # one process-wide spin word: keep trylock from failing (EBUSY skips the exchange)
            trylock(addr)
            unlock(addr)


def pid_namespace():
    """This process's pid namespace: the inode number of /proc/self/ns/pid,
    as shm's pidNamespace; 0 when it cannot be read (unknown)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def pid_comparable(peer_ns, own_ns):
    """Whether a pid a peer recorded with pid namespace peer_ns names the
    same process here (shm's pidComparable): both known and the same."""
    return peer_ns != 0 and peer_ns == own_ns


# PID_MAX_LIMIT is the largest pid Linux can hand out (include/linux/threads.h).
PID_MAX_LIMIT = 1 << 22


def pid_gone(pid):
    """Whether no process with this pid exists. A pid that exists but is
    not ours to signal (EPERM) is alive; pid <= 0 is unknown, never gone,
    and so is a pid word above PID_MAX_LIMIT, which names no process.
    A zombie (exited, not yet reaped: state Z or X in /proc/<pid>/stat)
    counts as gone, as in shm/wait_linux.go."""
    if pid <= 0 or pid > PID_MAX_LIMIT:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    except OSError as e:
        return e.errno == errno.ESRCH
    return _zombie(pid)


def _zombie(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            b = f.read()
    except OSError:
        return False
    i = b.rfind(b")")
    if i < 0 or i + 2 >= len(b):
        return False
    return b[i + 2:i + 3] in (b"Z", b"X")
