package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"graphnode/kv"
	"graphnode/node/control"
	"graphnode/partition"
)

// TestKVPullOverFrameLimit: a trainer's pull whose answer would not fit
// one control frame is answered with an error saying how many ids fit,
// not with an answer the connection cannot carry (it closed without a
// word, and its synchronous ranks left the job).
func TestKVPullOverFrameLimit(t *testing.T) {
	cfg := &Config{KV: KVConfig{SyncTimeout: "5s"}}
	s, err := newKVServer(cfg, slog.New(slog.DiscardHandler), partition.Book{Bounds: []uint64{0, 10}}, numbering{})
	if err != nil {
		t.Fatal(err)
	}
	const dim = 1 << 16 // 256 KiB a row: 255 rows fit a frame, 256 do not
	ts := control.TableSpec{Name: "wide", Rows: control.Rows{N: 2}, Dim: dim, Optimizer: "sgd", LR: 1, Mode: "async"}
	if err := ts.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.create(context.Background(), &ts, false, false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ids  int
		want string // in the error; "": rows
	}{
		{ids: 2},
		{ids: 256, want: "pull of 256 ids of table \"wide\" (dim 65536): the answer would exceed the 67108864-byte frame limit; pull at most 255 ids per request"},
		{ids: 1000, want: "pull at most 255 ids"},
	} {
		t.Run(fmt.Sprint("ids=", tc.ids), func(t *testing.T) {
			body := kv.AppendPullRequest(nil, &kv.PullRequest{Table: "wide", IDs: make([]uint64, tc.ids)})
			resp := s.serveTrainer(context.Background(), body, &kvConn{ranks: map[syncRank]struct{}{}})
			if err := control.CheckSize(len(resp)); err != nil {
				t.Fatal(err)
			}
			k, err := kv.PeekKind(resp)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				var m kv.PullResponse
				if err := kv.DecodePullResponse(resp, &m); err != nil || m.Dim != dim || len(m.Rows) != tc.ids*dim {
					t.Fatalf("answer %v (%v): dim %d, %d values; want %d rows of %d", k, err, m.Dim, len(m.Rows), tc.ids, dim)
				}
				return
			}
			var m kv.ErrorMsg
			if k != kv.KindError {
				t.Fatalf("answer %v of %d bytes, want an error", k, len(resp))
			}
			if err := kv.DecodeErrorMsg(resp, &m); err != nil || !strings.Contains(m.Text, tc.want) {
				t.Fatalf("error %q (%v), want it to say %q", m.Text, err, tc.want)
			}
		})
	}
}
