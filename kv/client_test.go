package kv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// transports builds, for a cluster, the two in-process transports: stores
// called directly, and the encoded path through Handler and WireTransport.
func transports(stores []*Store) map[string]struct {
	tr    Transport
	calls func(p int) int64
} {
	d := newDirect(stores)
	w, wcalls := wireCluster(stores)
	return map[string]struct {
		tr    Transport
		calls func(p int) int64
	}{
		"direct": {d, func(p int) int64 { return d.calls[p].Load() }},
		"wire":   {w, func(p int) int64 { return wcalls[p].Load() }},
	}
}

// TestClientShardsLikeOneStore: pulls and pushes through a client over 2
// and 4 shards give exactly what one unsharded store gives, in the
// caller's order, and the local shard never goes through the transport.
func TestClientShardsLikeOneStore(t *testing.T) {
	const rows, dim = 97, 5
	for _, parts := range []int{2, 4} {
		for _, name := range []string{"direct", "wire"} {
			t.Run(fmt.Sprintf("parts=%d/%s", parts, name), func(t *testing.T) {
				stores := newCluster(t, parts, entSpec(rows, dim, parts))
				trans := transports(stores)[name]
				ref := newStore(t, 0, entSpec(rows, dim, 1))
				const local = 1
				c, err := NewClient([]Spec{entSpec(rows, dim, parts)}, stores[local], trans.tr)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				rng := rand.New(rand.NewPCG(1, uint64(parts)))
				for range 20 {
					ids := make([]uint64, 1+rng.IntN(40))
					for i := range ids {
						ids[i] = rng.Uint64N(rows)
					}
					ids = append(ids, ids[0]) // a duplicate in every batch
					grads := make([]float32, len(ids)*dim)
					for i := range grads {
						grads[i] = float32(rng.IntN(9)) - 4
					}
					if err := c.Push(ctx, "ent", ids, grads); err != nil {
						t.Fatal(err)
					}
					if err := ref.Push("ent", ids, grads); err != nil {
						t.Fatal(err)
					}
					got, err := c.Pull(ctx, "ent", ids, f32(42))
					if err != nil {
						t.Fatal(err)
					}
					want, _ := ref.Pull("ent", ids, f32(42))
					if !slices.Equal(got, want) {
						t.Fatalf("pull of %v: got %v, want %v", ids, got, want)
					}
				}
				if n := trans.calls(local); n != 0 {
					t.Fatalf("local part went through the transport %d times", n)
				}
				for p := range parts {
					if p != local && trans.calls(p) == 0 {
						t.Fatalf("part %d never called", p)
					}
				}
				// All ids local: no transport call at all.
				before := make([]int64, parts)
				for p := range parts {
					before[p] = trans.calls(p)
				}
				lo, hi := stores[local].set.Load().tables["ent"].lo, stores[local].set.Load().tables["ent"].hi
				if _, err := c.Pull(ctx, "ent", idRange(lo, hi), nil); err != nil {
					t.Fatal(err)
				}
				for p := range parts {
					if trans.calls(p) != before[p] {
						t.Fatalf("an all-local pull called part %d", p)
					}
				}
			})
		}
	}
}

func entSpec(rows uint64, dim, parts int) Spec {
	s := spec("ent", rows, dim, Adagrad(0.25, 1e-10), Async, parts)
	s.Init = Init{Kind: InitUniform, Scale: KGEInitScale(12, dim), Seed: 11}
	return s
}

// TestClientSyncAcrossShards: W trainers, each with its own client on its
// own node, step a dense table sharded over all nodes; the result equals
// one store applying the averaged gradient.
func TestClientSyncAcrossShards(t *testing.T) {
	const rows, dim, steps = 10, 3, 3
	for _, parts := range []int{2, 4} {
		t.Run(fmt.Sprintf("parts=%d", parts), func(t *testing.T) {
			dense := spec("w", rows, dim, SGD(0.5), Sync, parts)
			stores := newCluster(t, parts, dense)
			tr, _ := wireCluster(stores)
			world := parts
			var wg sync.WaitGroup
			for k := range world {
				c, err := NewClient([]Spec{dense}, stores[k], tr)
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					ctx := context.Background()
					for step := range uint64(steps) {
						if err := c.PushSync(ctx, "w", step, k, world, grad(rows*dim, k, step)); err != nil {
							t.Errorf("trainer %d: %v", k, err)
							return
						}
						_, v, err := c.PullVersion(ctx, "w", step+1, allIDs(rows), nil)
						if err != nil || v != step+1 {
							t.Errorf("trainer %d: version %d, %v", k, v, err)
							return
						}
					}
				})
			}
			wg.Wait()
			c, _ := NewClient([]Spec{dense}, nil, tr)
			got, err := c.Pull(context.Background(), "w", allIDs(rows), nil)
			if err != nil {
				t.Fatal(err)
			}
			// Σ_s 0.5·(W+1)/2·(s+1) over s = 0..2.
			want := -0.5 * float32(world+1) / 2 * 6
			for i, x := range got {
				if x != want {
					t.Fatalf("w[%d] = %v, want %v", i, x, want)
				}
			}
		})
	}
}

// TestClientErrorsCrossTheWire: a shard's error comes back with its
// sentinel and text; a departed trainer is reported to every shard.
func TestClientErrorsCrossTheWire(t *testing.T) {
	dense := spec("w", 4, 2, SGD(1), Sync, 2)
	ent := entSpec(8, 2, 2)
	stores := newCluster(t, 2, dense, ent)
	tr, _ := wireCluster(stores)
	c, err := NewClient([]Spec{dense, ent}, stores[0], tr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Pull(ctx, "ent", []uint64{1, 9}, nil); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("pull beyond the table: %v", err)
	}
	// A push to a sync table is refused before it is sent, one of no ids
	// too (a trainer's check of its table); the shard refuses it as well.
	var re *RemoteError
	for _, ids := range [][]uint64{{3}, nil} {
		err = c.Push(ctx, "w", ids, make([]float32, 2*len(ids)))
		if !errors.Is(err, ErrMode) || errors.As(err, &re) || !strings.Contains(err.Error(), `table "w": push to a sync table, use PushSync`) {
			t.Fatalf("push of %d ids to a sync table: %v, want ErrMode from the client", len(ids), err)
		}
	}
	err = tr.Push(ctx, 1, &PushRequest{Table: "w", Dim: 2, IDs: []uint64{3}, Grads: f32(1, 1)})
	if !errors.Is(err, ErrMode) || !errors.As(err, &re) || re.Part != 1 {
		t.Fatalf("push to part 1's rows: %T %v, want ErrMode in a RemoteError from part 1", err, err)
	}
	if _, err := c.Pull(ctx, "nope", []uint64{1}, nil); !errors.Is(err, ErrUnknownTable) {
		t.Fatalf("unknown table: %v", err)
	}
	// Only the remote shard (part 1) is asked for a row it does not own.
	err = tr.Push(ctx, 1, &PushRequest{Table: "ent", Dim: 2, IDs: []uint64{0}, Grads: f32(1, 1)})
	if !errors.As(err, &re) || re.Part != 1 || !errors.Is(err, ErrNotOwner) || !strings.Contains(err.Error(), "outside shard [4, 8)") {
		t.Fatalf("remote error %v", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "kv: part 1: ") || strings.Contains(msg, "kv: part 1: kv: ") {
		t.Fatalf("remote error %q: want one \"kv: \" before the shard's text", msg)
	}
	// Trainer 1 leaves through the client: both shards fail a step waiting for it.
	if err := c.Leave(ctx, 1); err != nil {
		t.Fatal(err)
	}
	err = c.PushSync(ctx, "w", 0, 0, 2, make([]float32, 8))
	for p, s := range stores {
		if v, _ := s.Version("w"); v != 0 {
			t.Fatalf("part %d applied a step", p)
		}
	}
	// Both shards failed the step alike: said once, naming both parts.
	if !errors.Is(err, ErrStepFailed) || err.Error() != `kv: parts 0, 1: table "w" step 0: trainer 1 left; missing trainers [1]: synchronous step failed` {
		t.Fatalf("sync push after leave: %v", err)
	}
}

// TestClientLeaveTable: a trainer leaving one Sync table through the
// client fails that table's steps on both shards (one local, one across
// the wire) and not another table's.
func TestClientLeaveTable(t *testing.T) {
	a, b := spec("a", 4, 2, SGD(1), Sync, 2), spec("b", 4, 2, SGD(1), Sync, 2)
	stores := newCluster(t, 2, a, b)
	tr, _ := wireCluster(stores)
	c, err := NewClient([]Spec{a, b}, stores[0], tr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.LeaveTable(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	if err := c.LeaveTable(ctx, "nope", 1); !errors.Is(err, ErrUnknownTable) {
		t.Fatalf("leave of an unknown table: %v", err)
	}
	err = c.PushSync(ctx, "a", 0, 0, 2, make([]float32, 8))
	if !errors.Is(err, ErrStepFailed) || err.Error() != `kv: parts 0, 1: table "a" step 0: trainer 1 left; missing trainers [1]: synchronous step failed` {
		t.Fatalf("table a after trainer 1 left it: %v", err)
	}
	// Table b waits for trainer 1, which completes its step.
	var wg sync.WaitGroup
	for k := range 2 {
		wg.Go(func() {
			if err := c.PushSync(ctx, "b", 0, k, 2, make([]float32, 8)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for p, s := range stores {
		if va, _ := s.Version("a"); va != 0 {
			t.Fatalf("part %d: table a at version %d", p, va)
		}
		if vb, _ := s.Version("b"); vb != 1 {
			t.Fatalf("part %d: table b at version %d, want 1", p, vb)
		}
	}
}

// staleTransport answers pulls as a shard that does not wait for the
// version asked for would: with the version it holds.
type staleTransport struct{ *directTransport }

func (d staleTransport) Pull(ctx context.Context, part int, req *PullRequest, resp *PullResponse) error {
	asked := *req
	asked.MinVersion = 0
	return d.directTransport.Pull(ctx, part, &asked, resp)
}

// TestClientRefusesAnswerBelowMinVersion: a remote shard answering below
// the version asked for is an error naming the part and both versions,
// not old rows passed off as new.
func TestClientRefusesAnswerBelowMinVersion(t *testing.T) {
	dense := spec("w", 4, 2, SGD(1), Sync, 2)
	stores := newCluster(t, 2, dense)
	c, err := NewClient([]Spec{dense}, stores[0], staleTransport{newDirect(stores)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err = c.PullVersion(ctx, "w", 1, []uint64{3}, nil) // part 1's row, at version 0
	if err == nil || !strings.Contains(err.Error(), `kv: table "w": part 1 answered version 0, below the 1 asked for`) {
		t.Fatalf("err = %v, want part 1 refused for answering version 0", err)
	}
}

// TestJoinShardErrors: errors several shards gave in the same words are
// said once, naming the parts, and still unwrap to the sentinel and the
// first shard's RemoteError; different errors stay apart, in part order.
func TestJoinShardErrors(t *testing.T) {
	local := fmt.Errorf("kv: table %q step 3: trainer 1 left: %w", "w", ErrStepFailed)
	remote := func(p int, text string) error { return &RemoteError{Part: p, Code: 6, Text: text} }
	err := joinShardErrors([]int{0, 1, 2, 3}, []error{local, remote(1, local.Error()), nil, remote(3, "kv: table \"w\": other")})
	want := "kv: parts 0, 1: table \"w\" step 3: trainer 1 left: synchronous step failed\nkv: part 3: table \"w\": other"
	if err == nil || err.Error() != want {
		t.Fatalf("joined:\n%v\nwant\n%s", err, want)
	}
	var re *RemoteError
	if !errors.Is(err, ErrStepFailed) || !errors.As(err, &re) || re.Part != 3 {
		t.Fatalf("joined error unwraps to %v, RemoteError %+v", err, re)
	}
	if err := joinShardErrors([]int{0, 1}, []error{nil, nil}); err != nil {
		t.Fatalf("no errors: %v", err)
	}
}
