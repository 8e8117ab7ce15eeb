package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Error codes of ErrorMsg: the sentinel the server's error wrapped. The
// table is append-only; code 0 is an error with no sentinel.
var errorCodes = [...]error{
	0:  nil,
	1:  ErrUnknownTable,
	2:  ErrNotOwner,
	3:  ErrShape,
	4:  ErrMode,
	5:  ErrStep,
	6:  ErrStepFailed,
	7:  ErrMalformed,
	8:  context.Canceled,
	9:  context.DeadlineExceeded,
	10: ErrSpec,
	11: ErrNonFinite,
	// A checkpoint file that kv_create's load refused (a node reports
	// it in its control error's kv_code): ErrResized travels as it.
	12: ErrMismatch,
}

// ErrorCode is the wire code of the sentinel err wraps (0: none), which
// Sentinel maps back: a daemon that reports kv errors in its own
// messages (the control socket's kv_code) keeps them matchable.
func ErrorCode(err error) uint16 { return codeOf(err) }

// Sentinel is the error of wire code code, or nil.
func Sentinel(code uint16) error {
	if int(code) < len(errorCodes) {
		return errorCodes[code]
	}
	return nil
}

// codeOf is the wire code of err.
func codeOf(err error) uint16 {
	for c, s := range errorCodes {
		if s != nil && errors.Is(err, s) {
			return uint16(c)
		}
	}
	return 0
}

// NewErrorMsg is the ErrorMsg that reports err: its text and the code of
// the sentinel it wraps, so that the receiver's RemoteError matches it
// with errors.Is. For a daemon that answers kv requests itself.
func NewErrorMsg(err error) *ErrorMsg { return &ErrorMsg{Code: codeOf(err), Text: err.Error()} }

// RemoteError is an error a shard sent back: its text as the shard wrote
// it, and the sentinel of its code, so errors.Is works across the wire.
type RemoteError struct {
	Part int
	Code uint16
	Text string
}

// Error is the shard's text after "kv: part P: ", without the "kv: " the
// shard's own error starts with ("kv: part 1: kv: table ..." said kv twice).
func (e *RemoteError) Error() string {
	return fmt.Sprintf("kv: part %d: %s", e.Part, strings.TrimPrefix(e.Text, "kv: "))
}

// Unwrap is the sentinel named by Code, or nil.
func (e *RemoteError) Unwrap() error { return Sentinel(e.Code) }

// serveScratch holds decoded requests between calls of Handle.
type serveScratch struct {
	pull PullRequest
	push PushRequest
	sync PushSyncRequest
	rows []float32
}

// Handler serves encoded kv requests from a Store: the daemon hands it
// every kv message a peer sends and returns the bytes it produces.
type Handler struct {
	store *Store
	pool  sync.Pool // *serveScratch
}

// NewHandler serves s.
func NewHandler(s *Store) *Handler {
	h := &Handler{store: s}
	h.pool.New = func() any { return new(serveScratch) }
	return h
}

// Handle decodes one request, runs it against the store and appends the
// encoded answer (PullResponse, Ack or ErrorMsg) to dst. A
// PushSyncRequest or LeaveRequest that carries a session goes to the
// store with it (PushSyncSession, LeaveTableSession; none is session 0,
// the rules of an older sender), so a trainer's session reaches the
// shards of other nodes. It never fails:
// every problem, a malformed request included, becomes an ErrorMsg. It
// blocks as long as the request does (a PushSync until its step ends, a
// Pull with MinVersion until the version exists), bounded by ctx. Safe for
// concurrent use.
func (h *Handler) Handle(ctx context.Context, req, dst []byte) []byte {
	out, err := h.handle(ctx, req, dst)
	if err != nil {
		return AppendErrorMsg(dst, &ErrorMsg{Code: codeOf(err), Text: err.Error()})
	}
	return out
}

func (h *Handler) handle(ctx context.Context, req, dst []byte) ([]byte, error) {
	kind, err := PeekKind(req)
	if err != nil {
		return dst, err
	}
	s := h.store
	sc := h.pool.Get().(*serveScratch)
	defer h.pool.Put(sc)
	switch kind {
	case KindPullRequest:
		m := &sc.pull
		if err := DecodePullRequest(req, m); err != nil {
			return dst, err
		}
		t, err := s.table(m.Table)
		if err != nil {
			return dst, err
		}
		var v uint64
		sc.rows, v, err = s.PullVersion(ctx, m.Table, m.MinVersion, m.IDs, sc.rows[:0])
		if err != nil {
			return dst, err
		}
		return AppendPullResponse(dst, &PullResponse{Version: v, Dim: uint32(t.dim), Rows: sc.rows}), nil
	case KindPushRequest:
		m := &sc.push
		if err := DecodePushRequest(req, m); err != nil {
			return dst, err
		}
		t, err := s.table(m.Table)
		if err != nil {
			return dst, err
		}
		if int(m.Dim) != t.dim && len(m.IDs) > 0 {
			return dst, fmt.Errorf("kv: table %q: push of dim %d, table dim %d: %w", m.Table, m.Dim, t.dim, ErrShape)
		}
		if err := s.Push(m.Table, m.IDs, m.Grads); err != nil {
			return dst, err
		}
		return AppendAck(dst, &Ack{Version: t.version.Load()}), nil
	case KindPushSyncRequest:
		m := &sc.sync
		if err := DecodePushSyncRequest(req, m); err != nil {
			return dst, err
		}
		t, err := s.table(m.Table)
		if err != nil {
			return dst, err
		}
		if err := s.PushSyncSession(ctx, m.Table, m.Step, int(m.Trainer), int(m.World), m.Session, m.Grads); err != nil {
			return dst, err
		}
		return AppendAck(dst, &Ack{Version: t.version.Load()}), nil
	case KindLeaveRequest:
		var m LeaveRequest
		if err := DecodeLeaveRequest(req, &m); err != nil {
			return dst, err
		}
		switch {
		case m.Table == "":
			s.Leave(int(m.Trainer))
		case m.Done:
			s.FinishTableSession(m.Table, int(m.Trainer), m.Session)
		default:
			s.LeaveTableSession(m.Table, int(m.Trainer), m.Session)
		}
		return AppendAck(dst, &Ack{}), nil
	}
	return dst, fmt.Errorf("kv: decode: %s is not a request: %w", kind, ErrMalformed)
}
