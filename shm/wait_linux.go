package shm

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Tunables of waiting and liveness. doc.go states the protocol they
// implement; a foreign client only needs HeartbeatEvery and DeadAfter.
const (
	// spinFor is how long a waiter polls before it sleeps on the futex:
	// a few microseconds cover a peer that is about to publish, without
	// burning a core on a peer that is busy for milliseconds.
	spinFor = 10 * time.Microsecond
	// spinTight is the number of polls before the spinner starts to
	// yield the processor between polls.
	spinTight = 64
	// waitSlice bounds one futex sleep, so that a sleeper notices a
	// cancelled context or a dead peer without any wake.
	waitSlice = 50 * time.Millisecond
	// HeartbeatEvery is how often a live producer advances its heartbeat.
	HeartbeatEvery = 100 * time.Millisecond
	// DeadAfter: a producer whose heartbeat did not move for this long is
	// dead, whatever its pid says (a hung or stopped process, a reused
	// pid, or one in another pid namespace). Generous, because a live
	// producer on an oversubscribed host was seen to stall its heartbeat
	// for over 3 s; a producer that exits is caught by the pid rule in
	// goneAfter instead.
	DeadAfter = 5 * time.Second
	// goneAfter: a producer whose pid no longer exists is dead once its
	// heartbeat has not moved for this long (a quarter second tolerates a
	// pid that is merely invisible to us while the heartbeat runs).
	goneAfter = 250 * time.Millisecond
)

// Futex operations. The ring is shared between processes, so the
// operations are the shared ones (no FUTEX_PRIVATE_FLAG).
const (
	futexWait = 0
	futexWake = 1
)

// futexSleep sleeps while *addr == val, for at most d. Spurious returns
// (EAGAIN, EINTR, a timeout) are fine: every caller re-checks.
//
// addr points into the shared mapping (or, in fuzz tests, into Go heap
// memory that the caller keeps alive), so the kernel reads a valid word.
func futexSleep(addr *uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWakeAll wakes every sleeper on addr, in any process.
func futexWakeAll(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, uintptr(1<<31-1), 0, 0, 0)
}

// signal tells a peer that may sleep on seq that something changed: it
// bumps seq (so a peer between its last check and its sleep does not
// sleep) and wakes it, but only when the peer's waiter flag is set, so a
// busy stream costs one atomic load per record and no system call.
func signal(waiterFlag, seq *uint32) {
	if atomic.LoadUint32(waiterFlag) != 0 {
		atomic.AddUint32(seq, 1)
		futexWakeAll(seq)
	}
}

// spin polls ready for about spinFor and reports whether it turned true.
func spin(ready func() bool) bool {
	for range spinTight {
		if ready() {
			return true
		}
	}
	deadline := time.Now().Add(spinFor)
	for i := 0; ; i++ {
		if ready() {
			return true
		}
		runtime.Gosched()
		if i%8 == 7 && time.Now().After(deadline) {
			return false
		}
	}
}

// pidMaxLimit is the largest pid Linux can hand out (PID_MAX_LIMIT in
// include/linux/threads.h).
const pidMaxLimit = 1 << 22

// pidGone reports whether no live process with this pid exists: none at
// all, or only a zombie (exited, not yet reaped), whose /proc stat state
// is Z or X. A pid that exists but is not ours to signal (EPERM) is
// alive; pid <= 0 is unknown and never reported gone, and so is a pid
// word above pidMaxLimit, which names no process (kill(2) would read it
// as a negative pid_t: a process group, or every process).
func pidGone(pid int) bool {
	if pid <= 0 || pid > pidMaxLimit {
		return false
	}
	if errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
		return true
	}
	return zombie(pid)
}

// zombie reads the state field of /proc/<pid>/stat: "pid (comm) S ...",
// where comm may itself hold spaces and parentheses, so the state is the
// first field after the last ')'.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}

// pidNSPath names the calling process's pid namespace (Linux 3.8).
const pidNSPath = "/proc/self/ns/pid"

// pidNamespace identifies the pid namespace this process lives in: the
// inode number of /proc/self/ns/pid, which every process of the
// namespace sees and no other namespace of the host has (they all live
// in the kernel's one nsfs). 0 means unknown: no /proc to ask.
func pidNamespace() uint64 {
	var st unix.Stat_t
	if err := unix.Stat(pidNSPath, &st); err != nil {
		return 0
	}
	return st.Ino
}

// pidComparable reports whether a pid a peer recorded in the ring names
// the same process here, so that pidGone may judge it: only when the
// peer recorded its pid namespace (format 1.2) and that is ours (own). A
// pid of another namespace names another process here or none (a node in
// a container and its trainer on the host), and a peer that recorded no
// namespace (0: a client of format 1.1 or older) may be in one.
func pidComparable(peer, own uint64) bool { return peer != 0 && peer == own }

// liveness tracks one peer's heartbeat as seen by this process's clock:
// the shared word is a counter, not a time, so the two processes need
// no common clock.
type liveness struct {
	seen    uint64    // last heartbeat value read
	changed time.Time // when seen last changed, on our clock
}

// observe records the current heartbeat and returns how long it has not
// moved.
func (l *liveness) observe(hb uint64, now time.Time) time.Duration {
	if l.changed.IsZero() || hb != l.seen {
		l.seen, l.changed = hb, now
	}
	return now.Sub(l.changed)
}

// lockFree reports whether an exclusive flock(2) on f's file can be taken
// now: no other open file holds a lock on it. The lock taken is dropped
// again at once. Any error other than "held" (none is expected on a file
// we hold open) reports false: not known to be free.
func lockFree(f *os.File) bool {
	fd := int(f.Fd())
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false
	}
	unix.Flock(fd, unix.LOCK_UN)
	return true
}
