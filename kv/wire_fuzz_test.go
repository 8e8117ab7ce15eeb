package kv

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// fuzzKind seeds f with the encoder's output for kind and checks that any
// input the decoder accepts re-encodes to the same bytes.
func fuzzKind(f *testing.F, kind Kind) {
	f.Add(samples()[kind])
	f.Add([]byte{byte(kind), WireVersion})
	switch kind { // the optional session absent, and present
	case KindPushSyncRequest:
		f.Add(AppendPushSyncRequest(nil, &PushSyncRequest{Table: "w", Step: 1, World: 2, Grads: f32(1)}))
		f.Add(AppendPushSyncRequest(nil, &PushSyncRequest{Table: "w", World: 1, Session: 1<<64 - 1}))
	case KindLeaveRequest:
		f.Add(AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1, Table: "w"}))
		f.Add(AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1, Table: "w", Session: 1}))
		f.Add(AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1, Table: "w", Session: 1, Done: true}))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := roundTrip(kind, b)
		if err != nil {
			return
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("%s: accepted\n%x\nre-encoded as\n%x", kind, b, got)
		}
	})
}

func FuzzDecodePullRequest(f *testing.F)     { fuzzKind(f, KindPullRequest) }
func FuzzDecodePullResponse(f *testing.F)    { fuzzKind(f, KindPullResponse) }
func FuzzDecodePushRequest(f *testing.F)     { fuzzKind(f, KindPushRequest) }
func FuzzDecodePushSyncRequest(f *testing.F) { fuzzKind(f, KindPushSyncRequest) }
func FuzzDecodeLeaveRequest(f *testing.F)    { fuzzKind(f, KindLeaveRequest) }
func FuzzDecodeAck(f *testing.F)             { fuzzKind(f, KindAck) }
func FuzzDecodeErrorMsg(f *testing.F)        { fuzzKind(f, KindError) }

// FuzzHandle feeds arbitrary requests to a server through Handle: it
// must answer every one with a message that decodes, and never panic.
func FuzzHandle(f *testing.F) {
	for _, b := range samples() {
		f.Add(b)
	}
	f.Add(AppendPushRequest(nil, &PushRequest{Table: "e", Dim: 2, IDs: []uint64{1, 1}, Grads: f32(1, 2, 3, 4)}))
	f.Add(AppendPullRequest(nil, &PullRequest{Table: "e", IDs: []uint64{0, 3}}))
	f.Add(AppendPushSyncRequest(nil, &PushSyncRequest{Table: "w", World: 1, Grads: make([]float32, 4)}))
	f.Add(AppendPushSyncRequest(nil, &PushSyncRequest{Table: "w", World: 2, Grads: make([]float32, 4), Session: 5}))
	f.Add(AppendLeaveRequest(nil, &LeaveRequest{Trainer: 1, Table: "w", Session: 5}))
	s, err := New(Config{Part: 0, Tables: []Spec{
		spec("e", 4, 2, Adagrad(0.1, 1e-10), Async, 1),
		spec("w", 2, 2, SGD(1), Sync, 1),
	}, SyncTimeout: 10 * time.Millisecond}) // a fuzzed world > 1 must not stall the fuzzer
	if err != nil {
		f.Fatal(err)
	}
	h := NewHandler(s)
	f.Fuzz(func(t *testing.T, b []byte) {
		// A fuzzed MinVersion may never come: bound the wait.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		resp := h.Handle(ctx, b, nil)
		kind, err := PeekKind(resp)
		if err != nil {
			t.Fatalf("answer %x: %v", resp, err)
		}
		if _, err := roundTrip(kind, resp); err != nil {
			t.Fatalf("answer %x does not decode: %v", resp, err)
		}
	})
}
