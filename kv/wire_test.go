package kv

import (
	"bytes"
	"context"
	"errors"
	"math"
	"reflect"
	"runtime"
	"slices"
	"testing"
)

// samples are one message of every kind, as the fuzz seeds and the
// round-trip test use them.
func samples() map[Kind][]byte {
	nan := math.Float32frombits(0x7fc00001) // a NaN payload must survive
	return map[Kind][]byte{
		KindPullRequest:     AppendPullRequest(nil, &PullRequest{Table: "ent", MinVersion: 3, IDs: []uint64{5, 1 << 40, 0}}),
		KindPullResponse:    AppendPullResponse(nil, &PullResponse{Version: 9, Dim: 2, Rows: f32(1, -2, nan, 0.5)}),
		KindPushRequest:     AppendPushRequest(nil, &PushRequest{Table: "rel.emb", Dim: 3, IDs: []uint64{7, 7}, Grads: f32(1, 2, 3, 4, 5, float32(math.Inf(-1)))}),
		KindPushSyncRequest: AppendPushSyncRequest(nil, &PushSyncRequest{Table: "w", Step: 12, Trainer: 3, World: 4, Grads: f32(0.25, -0.25), Session: 0x8a5c_0000_0000_01f3}),
		KindLeaveRequest:    AppendLeaveRequest(nil, &LeaveRequest{Trainer: 2, Table: "w", Session: 0x8a5c_0000_0000_01f3}),
		KindAck:             AppendAck(nil, &Ack{Version: 1 << 33}),
		KindError:           AppendErrorMsg(nil, &ErrorMsg{Code: 6, Text: `kv: table "w" step 1: trainer 2 left`}),
	}
}

// roundTrip decodes b as kind and re-encodes it.
func roundTrip(kind Kind, b []byte) ([]byte, error) {
	switch kind {
	case KindPullRequest:
		var m PullRequest
		err := DecodePullRequest(b, &m)
		return AppendPullRequest(nil, &m), err
	case KindPullResponse:
		var m PullResponse
		err := DecodePullResponse(b, &m)
		return AppendPullResponse(nil, &m), err
	case KindPushRequest:
		var m PushRequest
		err := DecodePushRequest(b, &m)
		return AppendPushRequest(nil, &m), err
	case KindPushSyncRequest:
		var m PushSyncRequest
		err := DecodePushSyncRequest(b, &m)
		return AppendPushSyncRequest(nil, &m), err
	case KindLeaveRequest:
		var m LeaveRequest
		err := DecodeLeaveRequest(b, &m)
		return AppendLeaveRequest(nil, &m), err
	case KindAck:
		var m Ack
		err := DecodeAck(b, &m)
		return AppendAck(nil, &m), err
	case KindError:
		var m ErrorMsg
		err := DecodeErrorMsg(b, &m)
		return AppendErrorMsg(nil, &m), err
	}
	return nil, errors.New("no such kind")
}

func TestWireRoundTrip(t *testing.T) {
	for kind, b := range samples() {
		got, err := roundTrip(kind, b)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("%s: re-encoded\n%x\nwant\n%x", kind, got, b)
		}
		// Every strict prefix and every extension is refused, but for a
		// LeaveRequest without its optional table name (every table), and
		// a PushSyncRequest or LeaveRequest without its optional session
		// (an older sender's).
		for n := range len(b) {
			if kind == KindLeaveRequest && (n == 6 || n == len(b)-8) {
				want := LeaveRequest{Trainer: 2}
				if n > 6 {
					want.Table = "w"
				}
				var m LeaveRequest
				if err := DecodeLeaveRequest(b[:n], &m); err != nil || m != want {
					t.Fatalf("LeaveRequest of %d bytes: %+v, %v; want %+v", n, m, err, want)
				}
				continue
			}
			if kind == KindPushSyncRequest && n == len(b)-8 {
				var m PushSyncRequest
				if err := DecodePushSyncRequest(b[:n], &m); err != nil || m.Session != 0 || m.Step != 12 || m.Trainer != 3 || m.World != 4 || !slices.Equal(m.Grads, f32(0.25, -0.25)) {
					t.Fatalf("PushSyncRequest without a session: %+v, %v", m, err)
				}
				continue
			}
			if _, err := roundTrip(kind, b[:n]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: prefix of %d bytes: %v", kind, n, err)
			}
		}
		if _, err := roundTrip(kind, append(bytes.Clone(b), 0)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: trailing byte accepted", kind)
		}
	}
}

func TestWireDecodeFields(t *testing.T) {
	var m PushRequest
	if err := DecodePushRequest(samples()[KindPushRequest], &m); err != nil {
		t.Fatal(err)
	}
	want := PushRequest{Table: "rel.emb", Dim: 3, IDs: []uint64{7, 7}, Grads: f32(1, 2, 3, 4, 5, float32(math.Inf(-1)))}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("decoded %+v, want %+v", m, want)
	}
}

// TestWireRefusesLies: counts larger than the buffer are refused before
// anything is allocated; bad headers and names are refused.
func TestWireRefusesLies(t *testing.T) {
	huge := AppendPullRequest(nil, &PullRequest{Table: "e"})
	le.PutUint32(huge[len(huge)-4:], math.MaxUint32)
	rows := AppendPullResponse(nil, &PullResponse{Dim: 1 << 31})
	le.PutUint32(rows[len(rows)-4:], math.MaxUint32)
	zeroDim := AppendPushRequest(nil, &PushRequest{Table: "e", Dim: 0})
	le.PutUint32(zeroDim[len(zeroDim)-4:], 1)
	badName := AppendPullRequest(nil, &PullRequest{Table: "a/b"})
	version := AppendAck(nil, &Ack{})
	version[1] = 2
	cases := map[string]struct {
		kind Kind
		b    []byte
	}{
		"id count":   {KindPullRequest, huge},
		"row count":  {KindPullResponse, rows},
		"zero dim":   {KindPushRequest, zeroDim},
		"bad name":   {KindPullRequest, badName},
		"version":    {KindAck, version},
		"wrong kind": {KindAck, AppendLeaveRequest(nil, &LeaveRequest{})},
		// A leave names its table or none: an empty name is not the
		// canonical form of "every table".
		"leave empty table": {KindLeaveRequest, append(AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1}), 0)},
		"leave bad table":   {KindLeaveRequest, AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1, Table: "a b"})},
		// No session is sent as no bytes, never as 0; a leave of every
		// table carries none.
		"push_sync session 0": {KindPushSyncRequest, le.AppendUint64(AppendPushSyncRequest(nil, &PushSyncRequest{Table: "w", World: 1}), 0)},
		"leave session 0":     {KindLeaveRequest, le.AppendUint64(AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1, Table: "w"}), 0)},
		"leave short session": {KindLeaveRequest, AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1, Table: "w", Session: 7})[:15]},
		"leave session alone": {KindLeaveRequest, le.AppendUint64(AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1}), 7)},
	}
	for name, c := range cases {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := roundTrip(c.kind, c.b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
		// Only the error text is allocated, never the claimed arrays.
		if n := after.TotalAlloc - before.TotalAlloc; n > 4096 {
			t.Errorf("%s: %d bytes allocated for a refused message", name, n)
		}
	}
}

// TestHandleMalformed: the server answers garbage with an ErrorMsg.
func TestHandleMalformed(t *testing.T) {
	h := NewHandler(newStore(t, 0, spec("e", 4, 2, SGD(1), Async, 1)))
	for _, req := range [][]byte{nil, {1}, {9, WireVersion}, samples()[KindAck], {byte(KindPullRequest), WireVersion, 1}} {
		resp := h.Handle(context.Background(), req, nil)
		var m ErrorMsg
		if err := DecodeErrorMsg(resp, &m); err != nil {
			t.Fatalf("answer to %x: %v", req, err)
		}
		if m.Code != 7 {
			t.Fatalf("answer to %x: code %d (%s), want 7 malformed", req, m.Code, m.Text)
		}
	}
}

// TestWireLeaveDone: a leave that says its session finished cleanly ends
// with the byte 1 after the session, and round-trips; any other byte, or
// one more, is refused, and without a session there is no such byte.
func TestWireLeaveDone(t *testing.T) {
	m := LeaveRequest{Trainer: 2, Table: "w", Session: 7, Done: true}
	b := AppendLeaveRequest(nil, &m)
	var got LeaveRequest
	if err := DecodeLeaveRequest(b, &got); err != nil || got != m {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, m)
	}
	if again := AppendLeaveRequest(nil, &got); !bytes.Equal(again, b) {
		t.Fatalf("re-encoded %x, want %x", again, b)
	}
	plain := AppendLeaveRequest(nil, &LeaveRequest{Trainer: 2, Table: "w", Session: 7})
	if len(b) != len(plain)+1 || b[len(b)-1] != 1 {
		t.Fatalf("done leave %x, plain %x: want the plain one and the byte 1", b, plain)
	}
	for _, bad := range [][]byte{append(bytes.Clone(plain), 0), append(bytes.Clone(plain), 2), append(bytes.Clone(b), 1)} {
		if err := DecodeLeaveRequest(bad, &got); !errors.Is(err, ErrMalformed) {
			t.Errorf("%x: %v, want refused", bad, err)
		}
	}
	if b := AppendLeaveRequest(nil, &LeaveRequest{Trainer: 2, Table: "w", Done: true}); !bytes.Equal(b, AppendLeaveRequest(nil, &LeaveRequest{Trainer: 2, Table: "w"})) {
		t.Errorf("done without a session encoded as %x", b)
	}
}
