package shm

import (
	"fmt"
	"runtime/debug"
	"unsafe"
)

// A ring's memory is a file every process of its loader maps read-write:
// the node, its samplers and the trainer, and whoever else the rings
// group admits. Any of them may truncate the file under the others'
// mappings, and an access past the file's new end then raises SIGBUS,
// which kills a Go process outright: one trainer's truncated ring took
// down the node serving every other trainer. So every method that
// touches the mapping runs with faults made panics for its goroutine
// (debug.SetPanicOnFault) and turns one inside the mapping into
// ErrCorrupt, naming the ring and its file's size now, as csr.Graph does
// for a partition file. Views handed out (Consumer.Next's records,
// Producer.Reserve's room) are read and written by the caller: Guard
// runs such code the same way.

// catch is deferred by a method that touches r's mapping, given the
// goroutine's setting before (debug.SetPanicOnFault(true)'s result):
//
//	defer r.catch(&err, debug.SetPanicOnFault(true))
//
// It restores the setting and turns a fault in r's mapping into *errp;
// any other panic goes on.
func (r *Ring) catch(errp *error, prev bool) {
	debug.SetPanicOnFault(prev)
	v := recover()
	if v == nil {
		return
	}
	off, ok := r.faultOffset(v)
	if !ok {
		panic(v)
	}
	*errp = r.faultError(off)
}

// Guard runs f, which reads or writes views of r (a record from
// Consumer.Next, the room from Producer.Reserve), and returns a fault in
// r's mapping, where another process truncated the file, as ErrCorrupt
// instead of letting SIGBUS end the process. Only f's own goroutine is
// guarded.
func (r *Ring) Guard(f func() error) (err error) {
	defer r.catch(&err, debug.SetPanicOnFault(true))
	return f()
}

// Guard is Guard of p's ring, for code that writes the room Reserve
// gave.
func (p *Producer) Guard(f func() error) error { return p.r.Guard(f) }

// Guard is Guard of c's ring, for code that reads the records Next
// gave.
func (c *Consumer) Guard(f func() error) error { return c.r.Guard(f) }

// faultOffset is the offset in r's mapping of the fault that v, a
// recovered panic, reports, if it is one there.
func (r *Ring) faultOffset(v any) (int64, bool) {
	fe, ok := v.(interface{ Addr() uintptr })
	if !ok || len(r.mem) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(r.mem)))
	if a := fe.Addr(); a >= base && a-base < uintptr(len(r.mem)) {
		return int64(a - base), true
	}
	return 0, false
}

// faultError says that an access at offset off of r's mapping faulted,
// with the file's size now when it can be had.
func (r *Ring) faultError(off int64) error {
	size := "of unknown size"
	if r.file != nil {
		if st, err := r.file.Stat(); err == nil {
			size = fmt.Sprintf("now %d bytes", st.Size())
		}
	}
	return fmt.Errorf("shm: ring %s: access at byte %d faulted: the file (%s) is shorter than its %d-byte mapping: another process truncated it: %w",
		r.path, off, size, len(r.mem), ErrCorrupt)
}

// truncated is ErrCorrupt when r's file is shorter than its mapping,
// else nil (also when its size cannot be had).
func (r *Ring) truncated() error {
	if r.file == nil {
		return nil
	}
	st, err := r.file.Stat()
	if err != nil || st.Size() >= int64(len(r.mem)) {
		return nil
	}
	return fmt.Errorf("shm: ring %s: the file (now %d bytes) is shorter than its %d-byte mapping: another process truncated it: %w",
		r.path, st.Size(), len(r.mem), ErrCorrupt)
}
