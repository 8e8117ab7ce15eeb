package client

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"graphnode/kv"
	"graphnode/node/control"
)

// syncNode serves a store of one synchronous "average" table "s" (rows
// rows of SyncDim) through kv's Handler, and answers kv_create of that
// table as a node does, so that NewSync runs against it.
func syncNode(t *testing.T, rows uint64) string {
	t.Helper()
	s, err := kv.New(kv.Config{Tables: []kv.Spec{{Name: "s", Rows: rows, Dim: SyncDim, Opt: kv.Average(), Mode: kv.Sync, Bounds: []uint64{0, rows}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := kv.NewHandler(s)
	socket, _ := slowNode(t, 0, func(b []byte) []byte {
		if b[0] != '{' {
			return h.Handle(context.Background(), b, nil)
		}
		var r control.Request
		resp := control.Response{Error: "unexpected request"}
		if json.Unmarshal(b, &r) == nil && r.Op == control.OpKVCreate && r.Table.Name == "s" && r.Table.Rows.N == rows {
			resp = control.Response{KVTable: &control.TableInfo{Name: "s", Rows: rows, Dim: SyncDim, Bounds: []uint64{0, rows}}}
		}
		out, _ := json.Marshal(resp)
		return out
	})
	return socket
}

// TestSyncAgree: every trainer gets the same list of the settings whose
// values differ (in the order given), whichever trainer holds the odd
// value, and the steps of AllReduce count from after the round.
func TestSyncAgree(t *testing.T) {
	base := []Setting{{"--epochs", "10"}, {"--seed", "1"}, {"--lr", "0.003"}, {"--fanouts", "25,10"}, {"steps", "40"}}
	for _, tc := range []struct {
		name   string
		world  int
		n      int // the vector's length (a row is SyncDim)
		change func(rank int, s []Setting)
		want   []string
	}{
		{"one alone", 1, 7, func(int, []Setting) {}, nil},
		{"all agree", 3, 7, func(int, []Setting) {}, nil},
		{"last differs", 3, 7, func(r int, s []Setting) {
			if r == 2 {
				s[0].Value = "11"
			}
		}, []string{"--epochs"}},
		{"first differs, two rows", 2, 300, func(r int, s []Setting) {
			if r == 0 {
				s[1].Value = "2"
				s[4].Value = "41"
			}
		}, []string{"--seed", "steps"}},
		{"each its own", 4, 7, func(r int, s []Setting) { s[3].Value = fmt.Sprintf("%d,10", 25+r) }, []string{"--fanouts"}},
		{"one like the first of four", 4, 7, func(r int, s []Setting) {
			if r == 1 || r == 3 {
				s[2].Value = "0.01"
			}
		}, []string{"--lr"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket := syncNode(t, uint64((tc.n+SyncDim-1)/SyncDim))
			ctx := context.Background()
			got := make([][]string, tc.world)
			means := make([][]float32, tc.world)
			var wg sync.WaitGroup
			errs := make([]error, tc.world)
			for r := range tc.world {
				wg.Go(func() {
					k, err := DialKV(ctx, socket)
					if err != nil {
						errs[r] = err
						return
					}
					defer k.Close()
					s, err := NewSync(ctx, k, "s", tc.n, r, tc.world)
					if err != nil {
						errs[r] = err
						return
					}
					set := slices.Clone(base)
					tc.change(r, set)
					if got[r], errs[r] = s.Agree(ctx, set); errs[r] != nil {
						return
					}
					v := make([]float32, tc.n)
					for i := range v {
						v[i] = float32(r + i)
					}
					errs[r] = s.AllReduce(ctx, 0, v)
					means[r] = v
				})
			}
			wg.Wait()
			for r := range tc.world {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if !slices.Equal(got[r], tc.want) {
					t.Errorf("rank %d: differ %q, want %q", r, got[r], tc.want)
				}
				// Step 0 after the round: the mean of r+i over the ranks.
				for i, x := range means[r] {
					if want := float32(i) + float32(tc.world-1)/2; x != want {
						t.Fatalf("rank %d: step 0 value %d = %v, want %v", r, i, x, want)
					}
				}
			}
		})
	}
}

// TestSyncAgreeTooMany: more settings than a round holds is the caller's
// error, named before anything is pushed.
func TestSyncAgreeTooMany(t *testing.T) {
	socket := syncNode(t, 1)
	ctx := context.Background()
	k, err := DialKV(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	s, err := NewSync(ctx, k, "s", 3, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	set := make([]Setting, SyncDim/agreeWidth+1)
	if _, err := s.Agree(ctx, set); err == nil {
		t.Fatal("33 settings in a round of 32: no error")
	}
	if _, err := s.Agree(ctx, set[:SyncDim/agreeWidth]); err != nil {
		t.Fatalf("32 settings: %v", err)
	}
}
