package kv

import (
	"bytes"
	"context"
	"errors"
	"math"
	"reflect"
	"runtime"
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
		KindPushSyncRequest: AppendPushSyncRequest(nil, &PushSyncRequest{Table: "w", Step: 12, Trainer: 3, World: 4, Grads: f32(0.25, -0.25)}),
		KindLeaveRequest:    AppendLeaveRequest(nil, &LeaveRequest{Trainer: 2, Table: "w"}),
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
		// LeaveRequest without its optional table name (every table).
		for n := range len(b) {
			if kind == KindLeaveRequest && n == 6 {
				var m LeaveRequest
				if err := DecodeLeaveRequest(b[:n], &m); err != nil || m != (LeaveRequest{Trainer: 2}) {
					t.Fatalf("LeaveRequest without a table: %+v, %v", m, err)
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
