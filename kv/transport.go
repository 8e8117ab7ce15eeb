package kv

import (
	"context"
	"fmt"
	"sync"
)

// Transport carries a Client's requests to the shard of another node.
// part is the shard index; the implementation maps it to a peer. Every
// method may be called concurrently. An error names the part or peer.
type Transport interface {
	// Pull fills resp (reusing its slices) with the rows of req.IDs.
	Pull(ctx context.Context, part int, req *PullRequest, resp *PullResponse) error
	Push(ctx context.Context, part int, req *PushRequest) error
	// PushSync blocks until the shard's step ends, like Store.PushSync.
	PushSync(ctx context.Context, part int, req *PushSyncRequest) error
	Leave(ctx context.Context, part int, req *LeaveRequest) error
}

// Call sends one encoded kv request to the node serving part and returns
// its encoded answer, as produced by that node's Handler.Handle. It must
// not keep req after it returns. The mesh supplies it.
type Call func(ctx context.Context, part int, req []byte) ([]byte, error)

// WireTransport is a Transport over encoded messages: it encodes each
// request, hands the bytes to a Call and decodes the answer, turning an
// ErrorMsg into a *RemoteError.
type WireTransport struct {
	call Call
	bufs sync.Pool // *[]byte encode buffers
}

// NewWireTransport returns a Transport that sends through call.
func NewWireTransport(call Call) *WireTransport {
	t := &WireTransport{call: call}
	t.bufs.New = func() any { return new([]byte) }
	return t
}

func (t *WireTransport) roundTrip(ctx context.Context, part int, enc func([]byte) []byte) ([]byte, error) {
	bp := t.bufs.Get().(*[]byte)
	*bp = enc((*bp)[:0])
	resp, err := t.call(ctx, part, *bp)
	t.bufs.Put(bp)
	if err != nil {
		return nil, err
	}
	k, err := PeekKind(resp)
	if err != nil {
		return nil, fmt.Errorf("kv: part %d: answer: %w", part, err)
	}
	if k == KindError {
		var m ErrorMsg
		if err := DecodeErrorMsg(resp, &m); err != nil {
			return nil, fmt.Errorf("kv: part %d: answer: %w", part, err)
		}
		return nil, &RemoteError{Part: part, Code: m.Code, Text: m.Text}
	}
	return resp, nil
}

func (t *WireTransport) ack(ctx context.Context, part int, enc func([]byte) []byte) error {
	resp, err := t.roundTrip(ctx, part, enc)
	if err != nil {
		return err
	}
	var a Ack
	if err := DecodeAck(resp, &a); err != nil {
		return fmt.Errorf("kv: part %d: answer: %w", part, err)
	}
	return nil
}

// Pull implements Transport.
func (t *WireTransport) Pull(ctx context.Context, part int, req *PullRequest, resp *PullResponse) error {
	b, err := t.roundTrip(ctx, part, func(dst []byte) []byte { return AppendPullRequest(dst, req) })
	if err != nil {
		return err
	}
	if err := DecodePullResponse(b, resp); err != nil {
		return fmt.Errorf("kv: part %d: answer: %w", part, err)
	}
	return nil
}

// Push implements Transport.
func (t *WireTransport) Push(ctx context.Context, part int, req *PushRequest) error {
	return t.ack(ctx, part, func(dst []byte) []byte { return AppendPushRequest(dst, req) })
}

// PushSync implements Transport.
func (t *WireTransport) PushSync(ctx context.Context, part int, req *PushSyncRequest) error {
	return t.ack(ctx, part, func(dst []byte) []byte { return AppendPushSyncRequest(dst, req) })
}

// Leave implements Transport.
func (t *WireTransport) Leave(ctx context.Context, part int, req *LeaveRequest) error {
	return t.ack(ctx, part, func(dst []byte) []byte { return AppendLeaveRequest(dst, req) })
}
