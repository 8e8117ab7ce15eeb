package csr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A Graph maps its file, so its views are the page cache of the file's
// inode. Renaming another file over the path (what Writer does) leaves
// the mapping on the old inode and is harmless. Writing into the mapped
// inode is not: cp or scp over the file truncate it first, and a view's
// page past the new end raises SIGBUS, which the Go runtime reports as
// "fatal error: fault" and ends the process with every goroutine's
// stack; other bytes written in place break, under readers that trust
// them, what Open checked (an indptr past the indices).
//
// Read is the defence, for callers to put around each request or batch
// (not around an inner loop: it costs an fstat and a deferred recover).
// Before the reads it compares the file's size and times with those last
// seen; when they moved it reads the header again. Another size or
// another header is a change, and so is a fault on the mapping while the
// reads run (a change that raced them), which debug.SetPanicOnFault
// turns into a panic that Read recovers. The first change found sticks:
// every later Read returns it without touching the mapping, whose bytes
// may no longer be those Open checked, even once the copy has finished.
// The same size and header (only metadata moved, or the same bytes were
// copied over and no read faulted meanwhile) are no change.

// watch is a Graph's record of its file, for Check.
type watch struct {
	last    atomic.Pointer[stamp]       // size and times when last seen unchanged
	changed atomic.Pointer[changeError] // the first change found; never cleared
	mu      sync.Mutex                  // one header read at a time (recheck)
}

// stamp is what Check compares on every call (stat_linux.go).
type stamp struct{ size, mtime, ctime int64 }

// changeError is the sticky error of a changed file.
type changeError struct{ path, why string }

func (e *changeError) Error() string {
	return fmt.Sprintf("csr: %s: %s: %v", e.path, e.why, ErrChanged)
}

func (e *changeError) Unwrap() error { return ErrChanged }

// faultError is a fault on the mapping recovered by guard; Read makes it
// the graph's changeError, Open an error of its own.
type faultError struct{ off uintptr }

func (e *faultError) Error() string {
	return fmt.Sprintf("a read at offset %d of the mapping faulted: the file shrank or was rewritten in place: %v", e.off, ErrChanged)
}

func (e *faultError) Unwrap() error { return ErrChanged }

// Identity tells the file a Graph opened from any other: its inode, and
// its size and header CRC-32C when Open checked it. The header holds
// every section's CRC-32C, so the header CRC stands for the contents: two
// Graphs of equal Identity map the same inode holding the same bytes.
type Identity struct {
	Dev       uint64 `json:"dev"`
	Ino       uint64 `json:"ino"`
	Size      int64  `json:"size"`
	HeaderCRC uint32 `json:"header_crc32c"`
}

func (id Identity) String() string {
	return fmt.Sprintf("inode %d on device %#x, %d bytes, header CRC-32C %08x", id.Ino, id.Dev, id.Size, id.HeaderCRC)
}

// Identity is the file as Open checked it.
func (g *Graph) Identity() Identity { return g.id }

// File is the open file g maps, for a child process to inherit
// (exec.Cmd.ExtraFiles) and map the same inode with OpenFile, whatever
// has been renamed over the path since. g owns it: the caller must not
// close it, nor use it after Close.
func (g *Graph) File() *os.File { return g.f }

// Read runs f, which reads g's views, unless the file has changed since
// Open checked it; a change, found before f or as a fault on the mapping
// while f runs, is returned as an error that names the file and wraps
// ErrChanged, and every later Read returns it at once. A panic of f that
// is not a fault on the mapping goes on, unless it is a runtime error
// (an index out of range) and the file has changed: then it is that
// change. Read is safe for concurrent use; the goroutine that calls it
// must be the one that reads.
func (g *Graph) Read(f func() error) error {
	if err := g.Check(); err != nil {
		return err
	}
	err := g.guard(f)
	if fe, ok := err.(*faultError); ok {
		return g.change(fmt.Sprintf("a read at offset %d of the mapping faulted: the file shrank or was rewritten in place", fe.off))
	}
	return err
}

// Check reports whether the file is still the one Open checked, without
// touching the mapping: one fstat, and a read of the header when the
// size or times moved. A change is reported as Read reports it, for good.
func (g *Graph) Check() error {
	if e := g.watch.changed.Load(); e != nil {
		return e
	}
	fi, err := g.f.Stat()
	if err != nil {
		return fmt.Errorf("csr: %s: %w", g.path, err)
	}
	if s := stampOf(fi); s != *g.watch.last.Load() {
		return g.recheck(s)
	}
	return nil
}

// recheck compares the file, whose stamp is now s, with what Open
// checked, and remembers s when it is the same file.
func (g *Graph) recheck(s stamp) error {
	g.watch.mu.Lock()
	defer g.watch.mu.Unlock()
	if e := g.watch.changed.Load(); e != nil {
		return e
	}
	if s == *g.watch.last.Load() {
		return nil // another caller found it unchanged meanwhile
	}
	if s.size != g.id.Size {
		return g.change(fmt.Sprintf("the file is %d bytes, %d when opened: it was truncated or rewritten in place", s.size, g.id.Size))
	}
	hb := make([]byte, len(g.header))
	if _, err := g.f.ReadAt(hb, 0); errors.Is(err, io.EOF) {
		return g.change("the file shrank while its header was read again: it was truncated or rewritten in place")
	} else if err != nil {
		return fmt.Errorf("csr: %s: read the header again: %w", g.path, err)
	}
	if !bytes.Equal(hb, g.header) {
		return g.change("its header is not the one opened: the file was rewritten in place")
	}
	g.watch.last.Store(&s)
	return nil
}

// change records the first change found and returns it.
func (g *Graph) change(why string) error {
	g.watch.changed.CompareAndSwap(nil, &changeError{path: g.path, why: why})
	return g.watch.changed.Load()
}

// guard runs f with faults made panics (debug.SetPanicOnFault, for this
// goroutine only) and recovers those on g's mapping as a *faultError.
// Other panics go on, but a runtime error when the file has changed
// (Check) is that change.
func (g *Graph) guard(f func() error) (err error) {
	prev := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(prev)
		r := recover()
		if r == nil {
			return
		}
		if off, ok := g.faultOffset(r); ok {
			err = &faultError{off: off}
			return
		}
		if _, ok := r.(runtime.Error); ok {
			if cerr := g.Check(); errors.Is(cerr, ErrChanged) {
				err = cerr
				return
			}
		}
		panic(r)
	}()
	return f()
}

// faultOffset is the offset in the mapping of the fault that r reports,
// if r is a fault there (a runtime error with the faulting address).
func (g *Graph) faultOffset(r any) (uintptr, bool) {
	fe, ok := r.(interface{ Addr() uintptr })
	if !ok || len(g.m) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(g.m)))
	if a := fe.Addr(); a >= base && a-base < uintptr(len(g.m)) {
		return a - base, true
	}
	return 0, false
}
