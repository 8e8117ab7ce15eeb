// Package shm implements shared-memory ring files: one file per loader,
// holding W single-producer single-consumer sub-rings of variable-size
// records that a consumer reads in place, without a copy. It knows bytes,
// not batches, and imports no other package of the project.
//
// # Contract
//
//  1. The creator (the daemon) calls RemoveStale(dir, prefix) once at
//     start, then Create(filepath.Join(dir, Name(prefix, id)), opts)
//     per loader. The file is created exclusively with mode 0600, or 0660
//     and the group Options.GID (with Options.Group); Options.Capacity is the TOTAL record space
//     of all sub-rings (see ParseSize for "1GB").
//  2. It hands the path to W producers (sampler processes) and to one
//     consumer (the trainer). Each Opens it.
//  3. Producer w calls ring.Producer(w) once, then Reserve + Commit (or
//     Write) per record, then Close: the consumer reads io.EOF once it
//     has drained the sub-ring.
//  4. The consumer calls ring.Consumer() once, then Next(ctx, w) and
//     Release(w) per record of sub-ring w, and Close when done (blocked
//     and later producers then get ErrConsumerGone).
//  5. Each process Closes its Ring after its Producer or Consumer calls
//     have returned; the creator calls Remove when the loader ends. A
//     record view is valid until Release or the Ring's Close.
//
// Concurrency: one goroutine per Producer (one producer per sub-ring,
// in any process); one Consumer per ring, whose sub-rings may be read by
// different goroutines, one goroutine per sub-ring. Ring accessors are
// safe for concurrent use.
//
// Errors: a record larger than a sub-ring can ever hold is refused at once
// (ErrTooLarge, naming both sizes). A producer that dies is reported by
// Next as ErrProducerDead, naming the sub-ring and pid, within about a
// second, after every record it published was read; never a hang.
//
// # File layout (format version 1.2)
//
// All integers are little-endian; counters are uint64 and futex words
// uint32, at the fixed offsets below. The file is exactly FileSize bytes.
//
//	offset  size  file header (HeaderSize = 256 bytes, written once by the creator)
//	0       8     magic "GNSHRING"
//	8       2     major version = 1 (readers refuse another major)
//	10      2     minor version = 2
//	12      4     header size = 256
//	16      4     W, number of sub-rings (1..4096)
//	20      4     control block size = 256
//	24      8     C, record area of one sub-ring in bytes (multiple of 4096, >= 4096)
//	32      8     D, data offset = roundup(256 + W*256, 4096)
//	40      8     file size = D + W*C (must equal the real file size)
//	48      4     creator pid
//	52      4     record header size = 64
//	56      8     creation time, Unix nanoseconds (informational)
//	64      4     flags (1.1; zero in 1.0): bit 0 FlagCreatorLock, the
//	              creator holds a shared flock(2) on the file while it lives
//	68      188   zero
//
//	256 + w*256   control block of sub-ring w (CtlSize = 256 bytes)
//	  +0    8     write counter: bytes published, ever  ─┐ producer line:
//	  +8    4     data futex word: producer adds 1 to     │ written only by
//	              wake the consumer                       │ the producer
//	  +12   4     space-waiter flag: 1 while the producer │
//	              may sleep on the space futex            │
//	  +16   4     producer state: 0 none, 1 open, 2 closed│
//	  +20   4     producer pid                            │
//	  +24   8     producer heartbeat (a counter)          │
//	  +32   8     producer pid namespace (1.2; 0 unknown) │
//	  +40   24    zero                                   ─┘
//	  +64   8     read counter: bytes released, ever     ─┐ consumer line:
//	  +72   4     space futex word: consumer adds 1 to    │ written only by
//	              wake the producer                       │ the consumer
//	  +76   4     data-waiter flag: 1 while the consumer  │
//	              may sleep on the data futex             │
//	  +80   4     consumer state: 0 none, 1 open, 2 closed│
//	  +84   4     consumer pid                            │
//	  +88   8     consumer pid namespace (1.2; 0 unknown) │
//	  +96   32    zero                                   ─┘
//	  +128  128   zero
//
//	D + w*C       record area of sub-ring w, C bytes, page aligned
//
// # Records
//
// Counters only grow; the position of counter x in the record area is
// x mod C. Both are multiples of 64, and 0 <= write - read <= C. A record
// at position p (a multiple of 64) is
//
//	p+0   8   payload length n (or the wrap marker 0xFFFFFFFFFFFFFFFF)
//	p+8   56  zero
//	p+64  n   payload, 64-byte aligned in the file, then 0 to 63 bytes of
//	          padding (unspecified) up to the next multiple of 64
//
// so a record takes 64 + roundup(n, 64) bytes and fits before the end of
// the area (p + 64 + n <= C); the largest payload is C - 64. When a record
// does not fit between p and the end, the producer writes the wrap marker
// at p, which stands for the C - p bytes up to the end, and the record
// goes at offset 0. A marker is never at offset 0.
//
// # Publication
//
// The producer writes the length word and the payload with plain stores,
// then publishes with a release store of the write counter (Go:
// atomic.StoreUint64, sequentially consistent). The consumer loads the
// write counter with acquire ordering; every record below it is complete.
// It reads a record in place and, when done with it, stores the read
// counter past it (release), which gives the bytes back to the producer.
// A wrap marker is released as soon as it is read. A consumer checks, and
// must check, before it trusts bytes: 0 <= write - read <= C, both
// multiples of 64; a length n <= C - p - 64 with 64 + roundup(n, 64) <=
// write - read; a marker not at 0 with C - p <= write - read. Anything
// else is a corrupt ring (ErrCorrupt).
//
// # Waiting
//
// Two futex word and flag pairs per sub-ring, each word and each flag
// written by one side only:
//
//	sleeper   sleeps on               sets while asleep       waker, after its counter store
//	consumer  data word (+8)          data-waiter flag (+76)  producer: if +76 == 1 { +8 += 1; FUTEX_WAKE +8 }
//	producer  space word (+72)        space-waiter flag (+12) consumer: if +12 == 1 { +72 += 1; FUTEX_WAKE +72 }
//
// A side that finds nothing to do (no record; no room) polls for a few
// microseconds, then loops: store 1 in its flag, load the word, poll once
// more, check ctx and liveness, then futex(FUTEX_WAIT, word, loaded
// value, timeout 50 ms) (op 0, shared: no FUTEX_PRIVATE_FLAG); it stores
// 0 in its flag when it stops waiting. The waker reads the flag after its
// counter store and makes a system call only when the flag is 1, so a
// busy stream makes none. All these stores and loads are sequentially
// consistent, so a wake cannot fall between the sleeper's last poll and
// its sleep: either the poll sees the new counter or the waker sees the
// flag, and then the word changed since the sleeper loaded it. The
// timeout bounds the cost of a missed wake (a client without a full
// fence, or without futex at all, may simply poll) and sets the cadence
// of the sleeper's ctx and liveness checks. Closing a side stores state 2,
// adds 1 to the word that side wakes the peer with, and wakes the peer.
//
// # Liveness
//
// A producer claims its sub-ring with state 1 when it attaches, stores
// its pid namespace and then its pid (a consumer does the same in each
// consumer line), then adds 1 to its heartbeat at least every
// HeartbeatEvery (100 ms) from a goroutine while it lives, and stores
// state 2 after its last write counter when it closes. A consumer that
// finds no record pending judges the producer:
//
//   - state 2 and write == read: end of stream, io.EOF;
//   - state 0 (no producer attached yet): dead only if the creator is
//     gone: with FlagCreatorLock, when an exclusive flock(2) on the file
//     can be taken (taken and dropped at once: nobody holds the creator's
//     shared lock, so it closed the ring or died, whatever became of its
//     pid); in a 1.0 file, when the creator pid of the header no longer
//     exists;
//   - the heartbeat has not moved for DeadAfter (5 s) by the consumer's
//     own clock: dead (hung or stopped);
//   - the pid no longer exists (kill(pid, 0) fails with ESRCH) or is a
//     zombie (state Z or X in /proc/<pid>/stat), and the heartbeat has not
//     moved for 250 ms: dead. A producer that exits, however it exits, is
//     therefore reported within about a quarter of a second.
//
// A pid is judged only when the peer recorded its pid namespace (the
// inode number of /proc/self/ns/pid; 0 when it cannot tell, and in files
// older than 1.2) and that is the judge's own: a pid taken in another
// namespace names another process here, or none (a node in a container,
// its trainer on the host, which Kubernetes pods are by default). There
// the heartbeat rule alone holds: a producer that exits is reported
// within DeadAfter. A producer that waits for room gives up with
// ErrConsumerGone when the consumer's state is 2 or, in the same
// namespace, its pid no longer exists. The consumer keeps no heartbeat:
// a consumer in another namespace (or one that recorded none) that dies
// without closing leaves the producer waiting until its ctx ends (the
// daemon stops the samplers of a loader whose trainer hung up).
//
// # A file truncated under its mappings
//
// Every process of a loader maps the file read-write, and any of them
// (or anyone the file's group admits) can truncate it; a page past the
// new end then faults (SIGBUS) in every mapping. Every call of Ring,
// Producer and Consumer that touches the mapping turns such a fault into
// ErrCorrupt naming the ring and the file's size now (fault.go), and a
// consumer that finds its producer gone says so when the file shrank.
// Code that reads or writes a view itself runs under Guard to have the
// same; the node copies a record it forwards over the mesh under it, and
// the sampler encodes under it. A reader in Python compares the file's
// size with its mapping before it touches the ring.
//
// # Python
//
// A reader in Python needs only mmap, struct and, to sleep instead of
// poll, ctypes' syscall(SYS_futex = 202 on x86-64): map the file, check
// the header as above (fcntl.flock on its own descriptor answers whether
// the creator is gone), store state 1, its pid namespace (os.stat of
// /proc/self/ns/pid, st_ino) and its pid in every consumer line,
// then per record read the write counter, validate, view the payload with
// memoryview (torch.frombuffer on 64-byte-aligned sections), and store
// the read counter when done. After that store it should read the
// space-waiter flag and, when 1, add 1 to the space futex word and wake
// it; if it does not, the producer still notices within 50 ms. Every
// word a consumer writes is on its own line and written by it alone, so
// plain stores do (no atomic read-modify-write is needed).
package shm
