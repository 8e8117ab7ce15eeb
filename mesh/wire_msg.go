package mesh

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Payload layouts. All integers little-endian; "str" is a uint16 length
// then bytes; "[]T" is a uint32 count then the elements. Reserved bytes
// are zero and trailing bytes are an error, so each value has exactly
// one encoding (the fuzz targets check decode → encode is the identity).

// Hello is the first message a client sends on a new connection, and,
// as HelloAck, the server's answer with its own values.
//
//	version u16 | reserved u16 | part u32 | cluster str | node str | checksum str
type Hello struct {
	Version  uint16 // ProtocolVersion
	Part     uint32 // the sender's partition index
	Cluster  string // cluster name, as in the CA certificate
	Node     string // the sender's node name, its certificate's CN
	Checksum string // partition-set checksum supplied by the daemon
}

// AppendHello appends h's payload to b.
func AppendHello(b []byte, h *Hello) []byte {
	b = binary.LittleEndian.AppendUint16(b, h.Version)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint32(b, h.Part)
	b = appendStr(b, h.Cluster)
	b = appendStr(b, h.Node)
	return appendStr(b, h.Checksum)
}

// DecodeHello decodes a Hello or HelloAck payload.
func DecodeHello(p []byte, h *Hello) error {
	d := decoder{msg: "Hello", b: p}
	h.Version = d.u16("version")
	d.zero("reserved", 2)
	h.Part = d.u32("part")
	h.Cluster = d.str("cluster")
	h.Node = d.str("node")
	h.Checksum = d.str("checksum")
	return d.end()
}

// ErrorMessage answers a request that failed.
//
//	code u16 | reserved u16 | message: u32 length then bytes
type ErrorMessage struct {
	Code    ErrorCode
	Message string
}

// maxErrorText caps the text of an ErrorMessage; longer text is cut.
const maxErrorText = 64 << 10

// maxErrorPayload bounds an Error payload: code, reserved, text length
// and text.
const maxErrorPayload = 2 + 2 + 4 + maxErrorText

// AppendError appends e's payload to b.
func AppendError(b []byte, e *ErrorMessage) []byte {
	msg := e.Message
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText]
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(e.Code))
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(msg)))
	return append(b, msg...)
}

// DecodeError decodes an Error payload.
func DecodeError(p []byte, e *ErrorMessage) error {
	d := decoder{msg: "Error", b: p}
	e.Code = ErrorCode(d.u16("code"))
	d.zero("reserved", 2)
	n := d.count("message", 1)
	if n > maxErrorText {
		d.fail("message", "%d bytes, limit %d", n, maxErrorText)
	}
	e.Message = string(d.take("message", uint64(n)))
	return d.end()
}

// KeySize is the size of a SampleRequest's RNG key.
const KeySize = 32

// SampleRequest asks a peer to expand nodes it owns for one hop. Key is
// opaque to the mesh: the sampler defines it (the batch's stream key), so
// the peer's choice equals the one a local expansion would make.
//
//	key [32]byte | hop u16 | flags u16 (bit 0: weighted, bit 1: narrow,
//	bit 2: exclude) | fanout i32 | ids []u64, or []u32 when narrow
//	[ | exclude at []u32 | exclude counts []u32 | exclude ids []u64, or
//	[]u32 when narrow ]   (only with bit 2)
type SampleRequest struct {
	Key      [KeySize]byte
	Hop      uint16
	Weighted bool
	Fanout   int32 // neighbours per node; -1 = all
	IDs      []uint64
	// Narrow sends ids as u32 both ways: the request's ids, and the
	// neighbours of the answer, a SampleResponseNarrow. It halves the
	// bytes of sampling; every id of the partition set must be below 2^32
	// (the client and the server check).
	Narrow bool
	// Exclusions: the node IDs[ExcludeAt[j]] is to be sampled as if its
	// edges from the ExcludeCounts[j] ids of run j of ExcludeIDs did not
	// exist (a link batch's seed edges, left out before the draw).
	// ExcludeAt is strictly ascending, each count at least 1, each run
	// strictly ascending, and the counts add up to len(ExcludeIDs)
	// (CheckExclusion). A request without exclusions sends none of the
	// three arrays, nor the flag: not a byte more than before they
	// existed. A peer that predates them refuses a request that carries
	// them as malformed ("flags: unknown bits 0x4"), so it never draws
	// without leaving the edges out.
	ExcludeAt     []uint32
	ExcludeCounts []uint32
	ExcludeIDs    []uint64
}

const (
	sampleWeighted = 1
	sampleNarrow   = 2
	sampleExclude  = 4
)

// AppendSampleRequest appends r's payload to b. With Narrow every id,
// excluded ones too, must fit in 32 bits, and the exclusions must pass
// CheckExclusion (Client.Sample checks both).
func AppendSampleRequest(b []byte, r *SampleRequest) []byte {
	b = append(b, r.Key[:]...)
	b = binary.LittleEndian.AppendUint16(b, r.Hop)
	var flags uint16
	if r.Weighted {
		flags |= sampleWeighted
	}
	if r.Narrow {
		flags |= sampleNarrow
	}
	exclude := len(r.ExcludeAt) > 0
	if exclude {
		flags |= sampleExclude
	}
	b = binary.LittleEndian.AppendUint16(b, flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(r.Fanout))
	ids := appendU64s
	if r.Narrow {
		ids = appendU32sOf64
	}
	b = ids(b, r.IDs)
	if !exclude {
		return b
	}
	b = appendU32s(b, r.ExcludeAt)
	b = appendU32s(b, r.ExcludeCounts)
	return ids(b, r.ExcludeIDs)
}

// DecodeSampleRequest decodes a SampleRequest payload into r, reusing
// the capacity of r's slices.
func DecodeSampleRequest(p []byte, r *SampleRequest) error {
	d := decoder{msg: "SampleRequest", b: p}
	copy(r.Key[:], d.take("key", KeySize))
	r.Hop = d.u16("hop")
	flags := d.u16("flags")
	if unknown := flags &^ (sampleWeighted | sampleNarrow | sampleExclude); unknown != 0 {
		d.fail("flags", "unknown bits %#x", unknown)
	}
	r.Weighted = flags&sampleWeighted != 0
	r.Narrow = flags&sampleNarrow != 0
	r.Fanout = int32(d.u32("fanout"))
	if r.Fanout < -1 {
		d.fail("fanout", "%d, want -1 (all) or >= 0", r.Fanout)
	}
	ids := d.u64s
	if r.Narrow {
		ids = d.u32sAs64
	}
	r.IDs = ids("ids", r.IDs)
	r.ExcludeAt, r.ExcludeCounts, r.ExcludeIDs = r.ExcludeAt[:0], r.ExcludeCounts[:0], r.ExcludeIDs[:0]
	if flags&sampleExclude != 0 {
		r.ExcludeAt = d.u32s("exclude at", r.ExcludeAt)
		r.ExcludeCounts = d.u32s("exclude counts", r.ExcludeCounts)
		r.ExcludeIDs = ids("exclude ids", r.ExcludeIDs)
		if d.err == nil && len(r.ExcludeAt) == 0 {
			d.fail("exclude", "flag set without exclusions")
		}
		if d.err == nil {
			if err := CheckExclusion(r); err != nil {
				d.fail("exclude", "%s", err.Error())
			}
		}
	}
	return d.end()
}

// CheckExclusion reports the first way r's exclusions do not fit it: a
// count per listed node, nodes strictly ascending and within IDs, runs
// not empty and strictly ascending, counts adding up to len(ExcludeIDs).
func CheckExclusion(r *SampleRequest) error {
	at, counts, ids := r.ExcludeAt, r.ExcludeCounts, r.ExcludeIDs
	if len(counts) != len(at) {
		return fmt.Errorf("%d counts for %d nodes", len(counts), len(at))
	}
	o := 0
	for j, a := range at {
		switch {
		case int64(a) >= int64(len(r.IDs)):
			return fmt.Errorf("exclusion %d: node index %d, request of %d nodes", j, a, len(r.IDs))
		case j > 0 && a <= at[j-1]:
			return fmt.Errorf("exclusion %d: node index %d after %d, want ascending", j, a, at[j-1])
		case counts[j] == 0:
			return fmt.Errorf("exclusion %d: no ids", j)
		case uint64(counts[j]) > uint64(len(ids)-o):
			return fmt.Errorf("exclusion %d: %d ids, %d left", j, counts[j], len(ids)-o)
		}
		run := ids[o : o+int(counts[j])]
		for i := 1; i < len(run); i++ {
			if run[i] <= run[i-1] {
				return fmt.Errorf("exclusion %d: id %d after %d, want strictly ascending", j, run[i], run[i-1])
			}
		}
		o += len(run)
	}
	if o != len(ids) {
		return fmt.Errorf("counts add up to %d, %d ids given", o, len(ids))
	}
	return nil
}

// SampleResponse answers a SampleRequest: Counts[i] neighbours of IDs[i],
// concatenated in request order in Neighbors. A narrow request's answer
// is a SampleResponseNarrow, the same with 32-bit neighbours.
//
//	SampleResponse:       counts []u32 | neighbours []u64   (sum(counts) == len(neighbours))
//	SampleResponseNarrow: counts []u32 | neighbours []u32
type SampleResponse struct {
	Counts    []uint32
	Neighbors []uint64

	payload []byte // Client.Sample's read buffer, kept for the next call
	request []byte // Client.Sample's encoded request, kept for the next call
}

// AppendSampleResponse appends r's payload to b.
func AppendSampleResponse(b []byte, r *SampleResponse) []byte {
	b = appendU32s(b, r.Counts)
	return appendU64s(b, r.Neighbors)
}

// AppendSampleResponseNarrow appends r's payload as a
// SampleResponseNarrow; every neighbour must fit in 32 bits (the server
// checks).
func AppendSampleResponseNarrow(b []byte, r *SampleResponse) []byte {
	b = appendU32s(b, r.Counts)
	return appendU32sOf64(b, r.Neighbors)
}

// DecodeSampleResponse decodes a SampleResponse payload into r, reusing
// its slices' capacity.
func DecodeSampleResponse(p []byte, r *SampleResponse) error {
	return decodeSampleResponse(p, r, false)
}

// DecodeSampleResponseNarrow decodes a SampleResponseNarrow payload into
// r, reusing its slices' capacity.
func DecodeSampleResponseNarrow(p []byte, r *SampleResponse) error {
	return decodeSampleResponse(p, r, true)
}

func decodeSampleResponse(p []byte, r *SampleResponse, narrow bool) error {
	d := decoder{msg: "SampleResponse", b: p}
	r.Counts = d.u32s("counts", r.Counts)
	if narrow {
		d.msg = "SampleResponseNarrow"
		r.Neighbors = d.u32sAs64("neighbours", r.Neighbors)
	} else {
		r.Neighbors = d.u64s("neighbours", r.Neighbors)
	}
	if d.err == nil {
		var sum uint64
		for _, c := range r.Counts {
			sum += uint64(c)
		}
		if sum != uint64(len(r.Neighbors)) {
			d.fail("counts", "sum to %d, but %d neighbours follow", sum, len(r.Neighbors))
		}
	}
	return d.end()
}

// PullRequest asks for the feature rows of ids the peer owns.
//
//	ids []u64
type PullRequest struct {
	IDs []uint64
}

// AppendPullRequest appends r's payload to b.
func AppendPullRequest(b []byte, r *PullRequest) []byte { return appendU64s(b, r.IDs) }

// DecodePullRequest decodes a PullRequest payload into r.
func DecodePullRequest(p []byte, r *PullRequest) error {
	d := decoder{msg: "PullRequest", b: p}
	r.IDs = d.u64s("ids", r.IDs)
	return d.end()
}

// DType tags the element type of feature rows. Append-only.
type DType uint8

const (
	DTypeFloat32 DType = 1
	DTypeFloat16 DType = 2
)

// Size is the element size in bytes, 0 for an unknown tag.
func (t DType) Size() int {
	switch t {
	case DTypeFloat32:
		return 4
	case DTypeFloat16:
		return 2
	}
	return 0
}

// PullResponse carries Count rows of RowSize bytes, in request order, in
// the partition's dtype.
//
//	dtype u8 | reserved [3]u8 | row size u32 | count u32 | rows [count*rowsize]byte
type PullResponse struct {
	DType   DType
	RowSize uint32
	Rows    []byte // len = Count()*RowSize; decoded Rows alias the payload

	payload []byte // Client.Pull's read buffer, which Rows alias, kept for the next call
}

// Count is the number of rows.
func (r *PullResponse) Count() int {
	if r.RowSize == 0 {
		return 0
	}
	return len(r.Rows) / int(r.RowSize)
}

// appendPullResponseHead appends the fields before the rows, so the rows
// can be written to the stream from where they lie.
func appendPullResponseHead(b []byte, r *PullResponse, count int) []byte {
	b = append(b, byte(r.DType), 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, r.RowSize)
	return binary.LittleEndian.AppendUint32(b, uint32(count))
}

// AppendPullResponse appends r's payload to b. RowSize must divide
// len(Rows) (the server checks handler output with validPull).
func AppendPullResponse(b []byte, r *PullResponse) []byte {
	b = appendPullResponseHead(b, r, r.Count())
	return append(b, r.Rows...)
}

// DecodePullResponse decodes a PullResponse payload into r; r.Rows
// aliases p.
func DecodePullResponse(p []byte, r *PullResponse) error {
	d := decoder{msg: "PullResponse", b: p}
	r.DType = DType(d.u8("dtype"))
	if d.err == nil && r.DType.Size() == 0 {
		d.fail("dtype", "unknown tag %d", r.DType)
	}
	d.zero("reserved", 3)
	r.RowSize = d.u32("row size")
	n := d.u32("count")
	if d.err == nil && (r.RowSize == 0 || r.RowSize%uint32(r.DType.Size()) != 0) {
		d.fail("row size", "%d is not a positive multiple of the %d-byte dtype", r.RowSize, r.DType.Size())
	}
	r.Rows = d.take("rows", uint64(n)*uint64(r.RowSize))
	return d.end()
}

// validPull reports whether r encodes as it claims.
func validPull(r *PullResponse) bool {
	s := r.DType.Size()
	return s != 0 && r.RowSize != 0 && r.RowSize%uint32(s) == 0 &&
		len(r.Rows)%int(r.RowSize) == 0 && len(r.Rows)/int(r.RowSize) <= math.MaxUint32
}
