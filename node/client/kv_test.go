package client

import (
	"context"
	"errors"
	"testing"

	"graphnode/kv"
)

// kvNode serves a store of one async table "e" (4 rows of dim 2, SGD lr
// 1) through kv's Handler, as a node answers kv frames.
func kvNode(t *testing.T) (socket string, store *kv.Store) {
	t.Helper()
	s, err := kv.New(kv.Config{Tables: []kv.Spec{{Name: "e", Rows: 4, Dim: 2, Opt: kv.SGD(1), Mode: kv.Async, Bounds: []uint64{0, 4}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := kv.NewHandler(s)
	socket, _ = slowNode(t, 0, func(b []byte) []byte { return h.Handle(context.Background(), b, nil) })
	return socket, s
}

// TestPushShape: gradients that are not a whole row per id are the
// caller's shape error (kv.ErrShape), refused before anything is sent;
// they used to reach the node as a malformed message ("4 trailing
// bytes"). The session stays usable.
func TestPushShape(t *testing.T) {
	socket, store := kvNode(t)
	k, err := DialKV(context.Background(), socket)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		ids   []uint64
		grads []float32
	}{
		{[]uint64{1, 2}, []float32{1, 2, 3}},
		{nil, []float32{1, 2}},
		{[]uint64{1}, nil},
	} {
		if err := k.Push(ctx, "e", tc.ids, tc.grads); !errors.Is(err, kv.ErrShape) || errors.Is(err, kv.ErrMalformed) {
			t.Errorf("push of %d ids with %d values: %v, want a shape error", len(tc.ids), len(tc.grads), err)
		}
	}
	if err := k.Push(ctx, "e", []uint64{1}, []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	rows, err := store.Pull("e", []uint64{1}, nil)
	if err != nil || len(rows) != 2 || rows[0] != -1 || rows[1] != -2 {
		t.Fatalf("row 1 after the push: %v, %v; want [-1 -2]", rows, err)
	}
}
