package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultDir is where ring files live unless configured otherwise: a
// tmpfs, so the file is memory and never touches a disk.
const DefaultDir = "/dev/shm"

// Options of a new ring file.
type Options struct {
	// SubRings is W, the number of single-producer sub-rings (one per
	// sampler). At least 1, at most MaxSubRings.
	SubRings int
	// Capacity is the TOTAL record space of the file, all sub-rings
	// together, as the user configures it ("1GB" via ParseSize). Each
	// sub-ring gets Capacity/SubRings rounded down to a multiple of
	// PageSize, at least MinCapacity. The file is larger by its header
	// and control blocks (HeaderSize + W*CtlSize rounded up to a page).
	Capacity int64
	// Mode of the file: 0600 when zero, or 0660 when Group is set. Bits
	// for "other" are refused: a ring is never world-accessible.
	Mode os.FileMode
	// Group, when set, gives the file the group GID, 0 (root's) included,
	// so that a trainer running as another user of that group can map
	// it. Unset, the file has the group a new file gets: the creator's,
	// or its directory's when that is setgid. The creator must be in the
	// group (or be root): Create fails otherwise.
	Group bool
	GID   int
	// Prealloc reserves the file's memory at creation (fallocate), so a
	// full tmpfs is a clear error from Create instead of a SIGBUS in the
	// producer that first touches a missing page, and populates it: tmpfs
	// zeroes a reserved page only when it is first touched, so without
	// that the producer's first pass through the ring would pay for
	// clearing every page (a third of a sampler's CPU time in its first
	// gigabyte). Create then takes about a tenth of a second per GiB.
	Prealloc bool
}

// space says, after a failed reservation of a ring at path for want of
// room, how large its directory's filesystem is and how much of it is
// free: a /dev/shm too small for the ring (a container's default 64 MiB
// against rings.size 1GB) and one that other files filled call for
// different fixes. It is empty for other errors, or when statfs fails.
func space(path string, err error) string {
	dir := filepath.Dir(path)
	if !errors.Is(err, unix.ENOSPC) {
		return ""
	}
	free, total, serr := DirSpace(dir)
	if serr != nil {
		return ""
	}
	return fmt.Sprintf("; %s has %s free of %s", dir, ApproxSize(free), ApproxSize(total))
}

// DirSpace is the bytes free (to an unprivileged writer) and in all of
// the filesystem holding dir: where rings go, and whether they fit.
func DirSpace(dir string) (free, total int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	bs := int64(st.Bsize)
	return int64(st.Bavail) * bs, int64(st.Blocks) * bs, nil
}

// populate faults every page of a fresh, writable mapping in, so that
// the kernel zeroes them now: at once with MADV_POPULATE_WRITE (Linux
// 5.14), or by writing a zero into each page on older kernels. The
// file's memory is already reserved, so neither can fail for want of it.
func populate(mem []byte) {
	if unix.Madvise(mem, unix.MADV_POPULATE_WRITE) == nil {
		return
	}
	page := os.Getpagesize()
	for i := 0; i < len(mem); i += page {
		mem[i] = 0
	}
}

// mode returns the effective file mode.
func (o Options) mode() os.FileMode {
	switch {
	case o.Mode != 0:
		return o.Mode
	case o.Group:
		return 0o660
	}
	return 0o600
}

// subCapacity is the record area of one sub-ring.
func (o Options) subCapacity() int64 {
	if o.SubRings <= 0 {
		return 0
	}
	return o.Capacity / int64(o.SubRings) / PageSize * PageSize
}

// Validate reports every problem of o, not just the first.
func (o Options) Validate() error {
	if bad := o.problems(); len(bad) > 0 {
		return fmt.Errorf("shm: options: %s: %w", strings.Join(bad, "; "), ErrInvalid)
	}
	return nil
}

// problems lists what is wrong with o, naming each option.
func (o Options) problems() []string {
	var bad []string
	if o.SubRings < 1 || o.SubRings > MaxSubRings {
		bad = append(bad, fmt.Sprintf("sub_rings = %d, want 1..%d", o.SubRings, MaxSubRings))
	}
	if o.SubRings >= 1 && o.SubRings <= MaxSubRings {
		// The file is the record areas and the header's pages: a
		// capacity near the largest int64 wrapped its size negative.
		if data := layoutFor(o.SubRings, 0).DataOffset; o.Capacity > math.MaxInt64-data {
			bad = append(bad, fmt.Sprintf("capacity = %d bytes: at most %d with %d sub-rings (the file adds %d bytes of header)",
				o.Capacity, math.MaxInt64-data, o.SubRings, data))
		}
	}
	if o.SubRings >= 1 && o.subCapacity() < MinCapacity {
		bad = append(bad, fmt.Sprintf("capacity = %d bytes gives %d per sub-ring for %d sub-rings, want at least %d each",
			o.Capacity, max(o.subCapacity(), 0), o.SubRings, MinCapacity))
	}
	if m := o.mode(); m&^fs.ModePerm != 0 || m&0o007 != 0 || m&0o600 != 0o600 {
		bad = append(bad, fmt.Sprintf("mode %#o, want owner read-write and nothing for others (0600 or 0660)", uint32(m)))
	}
	switch {
	case !o.Group && o.GID != 0:
		// Once "GID, when positive": without Group it would be ignored.
		bad = append(bad, fmt.Sprintf("gid = %d without Group: the file would keep the creator's group", o.GID))
	case o.Group && (o.GID < 0 || o.GID > math.MaxUint32-1):
		// chown takes the all-ones gid_t (-1) as "no change".
		bad = append(bad, fmt.Sprintf("gid = %d, want 0..%d", o.GID, uint32(math.MaxUint32-1)))
	}
	return bad
}

// Ring is one mapped ring file. Its methods other than Close and Remove
// are safe for concurrent use; Close and Remove must come after every
// Producer and Consumer of this Ring has returned from its last call,
// because they unmap the memory those views point into.
type Ring struct {
	path  string
	mem   []byte // the whole file, shared mapping
	hdr   header
	unmap func([]byte) error // nil for memory the ring does not own (tests)
	// file stays open while the ring is: the creator holds its shared
	// flock (FlagCreatorLock) on it, and an opener probes that lock
	// through it (creatorGone). nil for memory of tests.
	file    *os.File
	created bool // this Ring is the creator's, holding the lock on file

	mu struct {
		sync.Mutex
		closed    bool
		producers []*Producer // stopped (heartbeat, calls) before the unmap
		consumers []*Consumer // closed to calls before the unmap
	}
}

// Create makes a new ring file at path, exclusively (it fails if path
// exists), sized and mapped, with its header written. The caller (the
// daemon) hands path to the producers and the consumer and calls Remove
// when the loader ends. With Options.Prealloc, a ring in tmpfs that needs
// more memory than is available (see MemAvailable) is refused with
// ErrNoMemory before any of it is reserved.
func Create(path string, o Options) (*Ring, error) { return create(path, o, MemAvailable) }

// create is Create with the memory estimate given (tests give their own).
func create(path string, o Options, avail func() (int64, bool)) (*Ring, error) {
	if bad := o.problems(); len(bad) > 0 {
		return nil, fmt.Errorf("shm: create %s: options: %s: %w", path, strings.Join(bad, "; "), ErrInvalid)
	}
	h := layoutFor(o.SubRings, o.subCapacity())
	h.CreatorPID, h.CreatedNs = os.Getpid(), time.Now().UnixNano()
	h.Flags = FlagCreatorLock
	mode := o.mode()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return nil, fmt.Errorf("shm: create %s: %w", path, err)
	}
	r, err := func() (*Ring, error) {
		// Locked before the file has a header: whoever reads the flag
		// finds the lock already held. The lock lives as long as f, which
		// the ring keeps open until Close, and ends with this process.
		if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
			return nil, fmt.Errorf("lock: %w", err)
		}
		// The umask may have cleared group bits; set the mode we mean.
		if err := f.Chmod(mode); err != nil {
			return nil, err
		}
		if o.Group {
			if err := f.Chown(-1, o.GID); err != nil {
				return nil, fmt.Errorf("group %d: %w", o.GID, err)
			}
		}
		if err := f.Truncate(h.FileSize); err != nil {
			return nil, fmt.Errorf("size %d bytes: %w", h.FileSize, err)
		}
		if o.Prealloc {
			if err := fitsMemory(f, h.FileSize, avail); err != nil {
				return nil, err
			}
			if err := unix.Fallocate(int(f.Fd()), 0, 0, h.FileSize); err != nil {
				// A disk filesystem (ext4) keeps the blocks a failed
				// fallocate took until the file is cut: the free space
				// said would be none.
				f.Truncate(0)
				return nil, fmt.Errorf("reserve %s (%d bytes)%s: %w", ApproxSize(h.FileSize), h.FileSize, space(path, err), err)
			}
		}
		mem, err := mapFile(f, h.FileSize)
		if err != nil {
			return nil, err
		}
		if o.Prealloc {
			populate(mem)
		}
		h.encode(mem)
		return &Ring{path: path, mem: mem, hdr: h, unmap: unix.Munmap, file: f, created: true}, nil
	}()
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("shm: create %s: %w", path, err)
	}
	return r, nil
}

// Open maps an existing ring file read-write and validates its header. A
// producer (sampler) and a consumer (trainer) each Open the path that the
// creator handed them.
func Open(path string) (*Ring, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: %w", err) // "open PATH: …" once
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shm: %w", err)
	}
	var first [HeaderSize]byte
	n, _ := f.ReadAt(first[:], 0)
	if _, err := decodeHeader(first[:n], st.Size()); err != nil {
		return nil, fmt.Errorf("shm: open %s: %w", path, err)
	}
	mem, err := mapFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("shm: open %s: %w", path, err)
	}
	r, err := newRing(path, mem, unix.Munmap)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	r.file, keep = f, true
	return r, nil
}

// newRing validates the header in mem (decoded again from the mapping,
// which is what the ring will trust) and every sub-ring's counters.
func newRing(path string, mem []byte, unmap func([]byte) error) (_ *Ring, err error) {
	r := &Ring{path: path, mem: mem, unmap: unmap}
	defer r.catch(&err, debug.SetPanicOnFault(true)) // truncated since Open's stat
	h, err := decodeHeader(mem, int64(len(mem)))
	if err != nil {
		return nil, fmt.Errorf("shm: open %s: %w", path, err)
	}
	r.hdr = h
	for w := range h.SubRings {
		wc, rc := atomic.LoadUint64(r.u64(w, ctlWrite)), atomic.LoadUint64(r.u64(w, ctlRead))
		if err := r.checkCounters(w, wc, rc); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// mapFile maps size bytes of f shared and read-write.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, fmt.Errorf("cannot map %d bytes: %w", size, ErrInvalid)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	return mem, nil
}

// Path is the ring file's path.
func (r *Ring) Path() string { return r.path }

// SubRings is W.
func (r *Ring) SubRings() int { return r.hdr.SubRings }

// Capacity is the record area of one sub-ring in bytes.
func (r *Ring) Capacity() int64 { return r.hdr.Capacity }

// MaxRecord is the largest payload a sub-ring can ever hold.
func (r *Ring) MaxRecord() int64 { return r.hdr.Capacity - RecordHeaderSize }

// CreatorPID is the pid of the process that created the file.
func (r *Ring) CreatorPID() int { return r.hdr.CreatorPID }

// Used is the number of bytes of sub-ring w published and not yet
// released: the ring's occupancy, for metrics. It is a snapshot; 0 for a
// closed ring, a sub-ring out of range or a file truncated under the
// mapping.
func (r *Ring) Used(w int) (used int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed || w < 0 || w >= r.hdr.SubRings {
		return 0
	}
	var err error
	defer func() {
		if err != nil {
			used = 0
		}
	}()
	defer r.catch(&err, debug.SetPanicOnFault(true))
	rc := atomic.LoadUint64(r.u64(w, ctlRead))
	wc := atomic.LoadUint64(r.u64(w, ctlWrite))
	return int64(wc - rc)
}

// Close unmaps the ring. It is idempotent. Every record view handed out
// by this Ring's consumer is invalid afterwards.
func (r *Ring) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return nil
	}
	r.mu.closed = true
	// Later calls on these get ErrOrder instead of touching unmapped memory.
	for _, p := range r.mu.producers {
		p.closed.Store(true)
		p.stopHeartbeat()
	}
	for _, c := range r.mu.consumers {
		c.closed.Store(true)
	}
	r.mu.producers, r.mu.consumers = nil, nil
	var err error
	if r.unmap != nil {
		if uerr := r.unmap(r.mem); uerr != nil {
			err = fmt.Errorf("shm: close %s: %w", r.path, uerr)
		}
	}
	if r.file != nil {
		r.file.Close() // the creator's lock ends here
	}
	return err
}

// creatorGone reports whether the ring's creator has ended. With
// FlagCreatorLock it is whether nobody holds the creator's shared lock
// any more: neither a reused pid nor another pid namespace can fool that.
// A 1.0 file has only the creator's pid to go by.
func (r *Ring) creatorGone() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed || r.created {
		// The creator's own consumer: probing its own open file would
		// convert, then drop, the lock it holds.
		return false
	}
	if r.hdr.Flags&FlagCreatorLock == 0 || r.file == nil {
		return pidGone(r.hdr.CreatorPID)
	}
	return lockFree(r.file)
}

// Remove closes the ring and deletes its file. It is idempotent: a file
// that is already gone is not an error. Processes that still map the file
// keep their memory until they unmap it.
func (r *Ring) Remove() error {
	err := r.Close()
	if rerr := os.Remove(r.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, fmt.Errorf("shm: remove %s: %w", r.path, rerr))
	}
	return err
}

// ctl returns the offset of sub-ring w's control block.
func ctl(w int) int { return HeaderSize + w*CtlSize }

// u64 points at the uint64 at offset off of sub-ring w's control block.
//
// Sound because mem is a live mapping (page aligned) or, in fuzz tests, Go
// memory of uint64 words that mem keeps alive; every offset used is
// 8-byte aligned within the control area the header validated; the
// indexing below is bounds checked; and Close unmaps only after every
// Producer and Consumer of the ring was closed to calls.
func (r *Ring) u64(w, off int) *uint64 {
	return (*uint64)(unsafe.Pointer(&r.mem[ctl(w)+off : ctl(w)+off+8][0]))
}

// u32 points at the uint32 at offset off of sub-ring w's control block;
// sound for the reasons given at u64.
func (r *Ring) u32(w, off int) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.mem[ctl(w)+off : ctl(w)+off+4][0]))
}

// area returns sub-ring w's record area.
func (r *Ring) area(w int) []byte {
	start := r.hdr.DataOffset + int64(w)*r.hdr.Capacity
	return r.mem[start : start+r.hdr.Capacity : start+r.hdr.Capacity]
}

// checkSub reports a sub-ring index out of range.
func (r *Ring) checkSub(w int) error {
	if w < 0 || w >= r.hdr.SubRings {
		return fmt.Errorf("shm: ring %s: sub-ring %d of %d: %w", r.path, w, r.hdr.SubRings, ErrInvalid)
	}
	return nil
}

// checkCounters validates a write and a read counter of sub-ring w.
func (r *Ring) checkCounters(w int, wc, rc uint64) error {
	if wc%LineSize != 0 || rc%LineSize != 0 || wc-rc > uint64(r.hdr.Capacity) {
		return fmt.Errorf("shm: ring %s: sub-ring %d: write counter %d, read counter %d (capacity %d): %w",
			r.path, w, wc, rc, r.hdr.Capacity, ErrCorrupt)
	}
	return nil
}
