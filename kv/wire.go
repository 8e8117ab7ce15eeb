package kv

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Kind is the first byte of every kv message. The enum is append-only.
type Kind uint8

const (
	KindPullRequest     Kind = 1
	KindPullResponse    Kind = 2
	KindPushRequest     Kind = 3
	KindPushSyncRequest Kind = 4
	KindLeaveRequest    Kind = 5
	KindAck             Kind = 6
	KindError           Kind = 7
)

// WireVersion is the second byte of every kv message; decoders refuse any
// other value.
const WireVersion = 1

var kindNames = [...]string{"Invalid", "PullRequest", "PullResponse", "PushRequest", "PushSyncRequest", "LeaveRequest", "Ack", "Error"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// PullRequest asks a shard for rows; with MinVersion > 0 the shard first
// waits until the (Sync) table reaches that version.
type PullRequest struct {
	Table      string
	MinVersion uint64
	IDs        []uint64
}

// PullResponse holds len(Rows)/Dim rows in the request's order and the
// version they belong to.
type PullResponse struct {
	Version uint64
	Dim     uint32
	Rows    []float32
}

// PushRequest carries gradients for an Async table: len(Grads) ==
// len(IDs)·Dim.
type PushRequest struct {
	Table string
	Dim   uint32
	IDs   []uint64
	Grads []float32
}

// PushSyncRequest is one trainer's gradient of a Sync step for all rows of
// the receiving shard.
type PushSyncRequest struct {
	Table   string
	Step    uint64
	Trainer uint32
	World   uint32
	Grads   []float32
	// Session tells apart the processes that push as one trainer (a
	// nonce of the pushing trainer's connection; see sync.go); 0: none
	// given (an older sender), sent as no bytes.
	Session uint64
}

// LeaveRequest reports that a trainer is gone from the Sync table Table
// (Store.LeaveTable), or from every Sync table when Table is ""
// (Store.Leave).
type LeaveRequest struct {
	Trainer uint32
	Table   string
	// Session is the session of the trainer that left (PushSyncRequest);
	// 0: any. Only a leave that names its table carries one.
	Session uint64
	// Done: the session finished its job cleanly (the trainer said
	// kv_done), which fails no step: the rank is free for another
	// session at once (Store.FinishTableSession). Only a leave with a
	// session carries it.
	Done bool
}

// Ack answers a push, push-sync or leave with the table version after it
// (0 for a leave).
type Ack struct {
	Version uint64
}

// ErrorMsg answers any request that failed. Code maps to the sentinel the
// error wrapped (codeOf).
type ErrorMsg struct {
	Code uint16
	Text string
}

// Encoding, little-endian; every message starts [kind u8][WireVersion u8]:
//
//	PullRequest      name  minVersion u64  n u32  ids n×u64
//	PullResponse     version u64  dim u32  n u32  rows n·dim×f32
//	PushRequest      name  dim u32  n u32  ids n×u64  grads n·dim×f32
//	PushSyncRequest  name  step u64  trainer u32  world u32  n u32  grads n×f32  [session u64]
//	LeaveRequest     trainer u32  [name  [session u64  [done u8 = 1]]]     (no name: every Sync table)
//	Ack              version u64
//	ErrorMsg         code u16  len u16  text
//
// name is [len u8][bytes], a valid table name (1..MaxNameLen bytes). A
// session is sent only when it is not 0 (the bytes an older sender wrote
// are a message without one), and a decoder refuses an explicit 0.

var le = binary.LittleEndian

func appendHeader(dst []byte, k Kind) []byte { return append(dst, byte(k), WireVersion) }

func appendName(dst []byte, name string) []byte {
	return append(append(dst, byte(len(name))), name...)
}

func appendU64s(dst []byte, v []uint64) []byte {
	dst = le.AppendUint32(dst, uint32(len(v)))
	for _, x := range v {
		dst = le.AppendUint64(dst, x)
	}
	return dst
}

func appendF32s(dst []byte, v []float32) []byte {
	dst = slices.Grow(dst, 4*len(v))
	for _, x := range v {
		dst = le.AppendUint32(dst, math.Float32bits(x))
	}
	return dst
}

// AppendPullRequest appends the encoding of m to dst.
func AppendPullRequest(dst []byte, m *PullRequest) []byte {
	dst = appendName(appendHeader(dst, KindPullRequest), m.Table)
	dst = le.AppendUint64(dst, m.MinVersion)
	return appendU64s(dst, m.IDs)
}

// AppendPullResponse appends the encoding of m to dst.
func AppendPullResponse(dst []byte, m *PullResponse) []byte {
	dst = le.AppendUint64(appendHeader(dst, KindPullResponse), m.Version)
	dst = le.AppendUint32(dst, m.Dim)
	n := 0
	if m.Dim > 0 {
		n = len(m.Rows) / int(m.Dim)
	}
	dst = le.AppendUint32(dst, uint32(n))
	return appendF32s(dst, m.Rows)
}

// AppendPushRequest appends the encoding of m to dst.
func AppendPushRequest(dst []byte, m *PushRequest) []byte {
	dst = appendName(appendHeader(dst, KindPushRequest), m.Table)
	dst = le.AppendUint32(dst, m.Dim)
	dst = appendU64s(dst, m.IDs)
	return appendF32s(dst, m.Grads)
}

// AppendPushSyncRequest appends the encoding of m to dst.
func AppendPushSyncRequest(dst []byte, m *PushSyncRequest) []byte {
	dst = appendName(appendHeader(dst, KindPushSyncRequest), m.Table)
	dst = le.AppendUint64(dst, m.Step)
	dst = le.AppendUint32(dst, m.Trainer)
	dst = le.AppendUint32(dst, m.World)
	dst = le.AppendUint32(dst, uint32(len(m.Grads)))
	return appendSession(appendF32s(dst, m.Grads), m.Session)
}

// AppendLeaveRequest appends the encoding of m to dst.
func AppendLeaveRequest(dst []byte, m *LeaveRequest) []byte {
	dst = le.AppendUint32(appendHeader(dst, KindLeaveRequest), m.Trainer)
	if m.Table != "" {
		dst = appendSession(appendName(dst, m.Table), m.Session)
		if m.Done && m.Session != 0 {
			dst = append(dst, 1)
		}
	}
	return dst
}

// appendSession appends session unless it is 0 (none).
func appendSession(dst []byte, session uint64) []byte {
	if session == 0 {
		return dst
	}
	return le.AppendUint64(dst, session)
}

// AppendAck appends the encoding of m to dst.
func AppendAck(dst []byte, m *Ack) []byte {
	return le.AppendUint64(appendHeader(dst, KindAck), m.Version)
}

// AppendErrorMsg appends the encoding of m to dst; text longer than 65535
// bytes is cut.
func AppendErrorMsg(dst []byte, m *ErrorMsg) []byte {
	text := m.Text
	if len(text) > math.MaxUint16 {
		text = text[:math.MaxUint16]
	}
	dst = le.AppendUint16(appendHeader(dst, KindError), m.Code)
	dst = le.AppendUint16(dst, uint16(len(text)))
	return append(dst, text...)
}
