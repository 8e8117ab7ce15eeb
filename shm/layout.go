package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Sentinel errors. Every error returned by this package wraps one of them,
// or the operating system's error for a failed system call, and names the
// ring file and, where it applies, the sub-ring.
var (
	// ErrCorrupt: the bytes of the ring file are not a valid ring (bad
	// header, a length word out of bounds, counters out of order).
	ErrCorrupt = errors.New("corrupt ring")
	// ErrVersion: the file's major version is not one this build reads.
	ErrVersion = errors.New("unsupported ring version")
	// ErrTooLarge: a record can never fit its sub-ring.
	ErrTooLarge = errors.New("record too large")
	// ErrProducerDead: the producer of a sub-ring died (or never came
	// and the ring's creator died) with no record pending.
	ErrProducerDead = errors.New("producer dead")
	// ErrConsumerGone: the consumer closed the ring or died, so nobody
	// will ever make room again.
	ErrConsumerGone = errors.New("consumer gone")
	// ErrBusy: a sub-ring already has a producer, or the ring a consumer.
	ErrBusy = errors.New("already attached")
	// ErrOrder: a call out of protocol order (Commit without Reserve,
	// Next before Release, Release without Next, use after Close).
	ErrOrder = errors.New("call out of order")
	// ErrInvalid: bad Options or arguments.
	ErrInvalid = errors.New("invalid argument")
	// ErrNoMemory: a preallocated ring in tmpfs needs more memory than
	// the host or the process's memory cgroup has available.
	ErrNoMemory = errors.New("not enough memory")
)

// Format version written by this package. Readers accept any minor version
// of MajorVersion and refuse every other major version.
const (
	MajorVersion = 1
	MinorVersion = 2
)

// Header flags (the uint32 at offset 64, added in format 1.1; zero in 1.0
// files).
const (
	// FlagCreatorLock: the creator holds a shared flock(2) on the file
	// for as long as it lives, so "is the creator gone" is answered by
	// whether an exclusive lock can be taken, which neither pid reuse nor
	// a pid namespace can fool. Without it (a 1.0 file) the creator pid
	// is all there is.
	FlagCreatorLock = 1 << 0
)

// Magic is the first 8 bytes of every ring file.
const Magic = "GNSHRING"

// Layout constants. They are part of the format: doc.go draws them.
const (
	// LineSize is the cache line the layout is built around.
	LineSize = 64
	// PageSize is the alignment of every sub-ring's record area.
	PageSize = 4096
	// HeaderSize is the file header's size; sub-ring control block w
	// starts at HeaderSize + w*CtlSize.
	HeaderSize = 256
	// CtlSize is the size of one sub-ring's control block.
	CtlSize = 256
	// RecordHeaderSize precedes every payload, so the payload starts
	// 64-byte aligned.
	RecordHeaderSize = 64
	// WrapMarker in a record's length word means "no record here: continue
	// at offset 0 of the record area".
	WrapMarker = math.MaxUint64
	// MaxSubRings bounds W so that a corrupt header cannot ask for a huge
	// control area.
	MaxSubRings = 4096
	// MinCapacity is the smallest record area of one sub-ring.
	MinCapacity = PageSize
)

// File header offsets.
const (
	offMagic      = 0
	offMajor      = 8
	offMinor      = 10
	offHeaderSize = 12
	offSubRings   = 16
	offCtlSize    = 20
	offCapacity   = 24
	offDataOffset = 32
	offFileSize   = 40
	offCreatorPID = 48
	offRecHdrSize = 52
	offCreatedNs  = 56
	offFlags      = 64
)

// Control block offsets, relative to the block. The producer line
// (0..63) is written only by the producer, the consumer line (64..127)
// only by the consumer, so neither side's stores evict the other's line.
const (
	ctlWrite       = 0  // uint64 write counter (producer)
	ctlDataSeq     = 8  // uint32 futex word: data available (producer)
	ctlSpaceWaiter = 12 // uint32 1 while the producer may sleep on space (producer)
	ctlProdState   = 16 // uint32 producer state (producer)
	ctlProdPID     = 20 // uint32 producer pid (producer)
	ctlHeartbeat   = 24 // uint64 producer heartbeat (producer)
	ctlProdPIDNS   = 32 // uint64 producer's pid namespace, 0 unknown (producer; 1.2)

	ctlRead       = 64 // uint64 read counter (consumer)
	ctlSpaceSeq   = 72 // uint32 futex word: space available (consumer)
	ctlDataWaiter = 76 // uint32 1 while the consumer may sleep on data (consumer)
	ctlConsState  = 80 // uint32 consumer state (consumer)
	ctlConsPID    = 84 // uint32 consumer pid (consumer)
	ctlConsPIDNS  = 88 // uint64 consumer's pid namespace, 0 unknown (consumer; 1.2)
)

// Values of the producer and consumer state words.
const (
	StateNone   = 0 // nobody attached yet
	StateOpen   = 1 // attached
	StateClosed = 2 // closed cleanly
)

// header is the decoded file header.
type header struct {
	Major, Minor uint16
	SubRings     int
	Capacity     int64 // record area of one sub-ring, bytes
	DataOffset   int64 // offset of sub-ring 0's record area
	FileSize     int64
	CreatorPID   int
	CreatedNs    int64
	Flags        uint32 // FlagCreatorLock
}

// layoutFor computes the header of a file with w sub-rings of capacity
// bytes each. capacity must be a positive multiple of PageSize.
func layoutFor(w int, capacity int64) header {
	data := roundUp(HeaderSize+int64(w)*CtlSize, PageSize)
	return header{
		Major: MajorVersion, Minor: MinorVersion,
		SubRings: w, Capacity: capacity, DataOffset: data,
		FileSize: data + int64(w)*capacity,
	}
}

// encode writes h into the first HeaderSize bytes of b.
func (h header) encode(b []byte) {
	le := binary.LittleEndian
	clear(b[:HeaderSize])
	copy(b[offMagic:], Magic)
	le.PutUint16(b[offMajor:], h.Major)
	le.PutUint16(b[offMinor:], h.Minor)
	le.PutUint32(b[offHeaderSize:], HeaderSize)
	le.PutUint32(b[offSubRings:], uint32(h.SubRings))
	le.PutUint32(b[offCtlSize:], CtlSize)
	le.PutUint64(b[offCapacity:], uint64(h.Capacity))
	le.PutUint64(b[offDataOffset:], uint64(h.DataOffset))
	le.PutUint64(b[offFileSize:], uint64(h.FileSize))
	le.PutUint32(b[offCreatorPID:], uint32(h.CreatorPID))
	le.PutUint32(b[offRecHdrSize:], RecordHeaderSize)
	le.PutUint64(b[offCreatedNs:], uint64(h.CreatedNs))
	le.PutUint32(b[offFlags:], h.Flags)
}

// decodeHeader decodes and validates the header at the start of a file of
// fileSize bytes whose first bytes are b. Errors start with "header:" so
// the caller can put the path in front; they wrap ErrCorrupt or
// ErrVersion and never panic, whatever b holds.
func decodeHeader(b []byte, fileSize int64) (header, error) {
	var h header
	if len(b) < len(Magic) || string(b[:len(Magic)]) != Magic {
		return h, fmt.Errorf("header: bad magic %q, want %q: %w", b[:min(len(b), len(Magic))], Magic, ErrCorrupt)
	}
	if len(b) < HeaderSize {
		return h, fmt.Errorf("header: truncated at %d bytes, want %d: %w", len(b), HeaderSize, ErrCorrupt)
	}
	le := binary.LittleEndian
	h.Major, h.Minor = le.Uint16(b[offMajor:]), le.Uint16(b[offMinor:])
	if h.Major != MajorVersion {
		return h, fmt.Errorf("header: major version %d (minor %d), this build reads %d: %w", h.Major, h.Minor, MajorVersion, ErrVersion)
	}
	var bad []string
	badf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if v := le.Uint32(b[offHeaderSize:]); v != HeaderSize {
		badf("header size %d, want %d", v, HeaderSize)
	}
	if v := le.Uint32(b[offCtlSize:]); v != CtlSize {
		badf("control block size %d, want %d", v, CtlSize)
	}
	if v := le.Uint32(b[offRecHdrSize:]); v != RecordHeaderSize {
		badf("record header size %d, want %d", v, RecordHeaderSize)
	}
	w := le.Uint32(b[offSubRings:])
	capacity := le.Uint64(b[offCapacity:])
	data := le.Uint64(b[offDataOffset:])
	size := le.Uint64(b[offFileSize:])
	h.CreatorPID = int(le.Uint32(b[offCreatorPID:]))
	h.CreatedNs = int64(le.Uint64(b[offCreatedNs:]))
	h.Flags = le.Uint32(b[offFlags:])
	if w == 0 || w > MaxSubRings {
		badf("%d sub-rings, want 1..%d", w, MaxSubRings)
	}
	if capacity < MinCapacity || capacity%PageSize != 0 || capacity > math.MaxInt64/MaxSubRings {
		badf("sub-ring capacity %d is not a multiple of %d in [%d, %d]", capacity, PageSize, MinCapacity, int64(math.MaxInt64/MaxSubRings))
	}
	if len(bad) == 0 {
		want := layoutFor(int(w), int64(capacity))
		if want.FileSize < want.DataOffset { // wrapped past the largest int64
			badf("%d sub-rings of %d bytes: a file past the largest size", w, capacity)
		} else if data != uint64(want.DataOffset) {
			badf("data offset %d, want %d for %d sub-rings", data, want.DataOffset, w)
		}
		if size != uint64(want.FileSize) {
			badf("file size field %d, want %d", size, want.FileSize)
		}
		if fileSize != want.FileSize {
			badf("file is %d bytes, header says %d", fileSize, want.FileSize)
		}
		h.SubRings, h.Capacity, h.DataOffset, h.FileSize = int(w), int64(capacity), want.DataOffset, want.FileSize
	}
	if len(bad) > 0 {
		return header{}, fmt.Errorf("header: %s: %w", strings.Join(bad, "; "), ErrCorrupt)
	}
	return h, nil
}

// footprint is the number of bytes a record of n payload bytes takes in a
// record area: the record header plus the payload rounded up to LineSize.
func footprint(n int64) int64 { return RecordHeaderSize + roundUp(n, LineSize) }

// checkRecord validates a length word read at offset pos of a record area
// of capacity bytes, with avail published bytes from pos on. It returns
// the bytes to skip for a wrap marker (payload length -1), or the payload
// length. Errors start with "offset N:" and wrap ErrCorrupt.
func checkRecord(word uint64, pos, capacity, avail int64) (n, skip int64, err error) {
	if word == WrapMarker {
		if pos == 0 {
			return 0, 0, fmt.Errorf("offset 0: wrap marker at the start of the record area: %w", ErrCorrupt)
		}
		if avail < capacity-pos {
			return 0, 0, fmt.Errorf("offset %d: wrap marker skips %d bytes, only %d published: %w", pos, capacity-pos, avail, ErrCorrupt)
		}
		return -1, capacity - pos, nil
	}
	if word > uint64(capacity-pos-RecordHeaderSize) {
		return 0, 0, fmt.Errorf("offset %d: record length %d runs past the end of the %d-byte record area: %w", pos, word, capacity, ErrCorrupt)
	}
	n = int64(word)
	if f := footprint(n); f > avail {
		return 0, 0, fmt.Errorf("offset %d: record of %d bytes needs %d, only %d published: %w", pos, n, f, avail, ErrCorrupt)
	}
	return n, footprint(n), nil
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }
