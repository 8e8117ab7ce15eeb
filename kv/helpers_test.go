package kv

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// spec builds a table spec with bounds over parts even shards.
func spec(name string, rows uint64, dim int, opt Optimizer, mode Mode, parts int) Spec {
	return Spec{Name: name, Rows: rows, Dim: dim, Opt: opt, Mode: mode, Bounds: EvenBounds(rows, parts)}
}

// newStore builds the store of part for tables, failing the test on error.
func newStore(t testing.TB, part int, tables ...Spec) *Store {
	t.Helper()
	s, err := New(Config{Part: part, Tables: tables, SyncTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newCluster builds one store per shard.
func newCluster(t testing.TB, parts int, tables ...Spec) []*Store {
	t.Helper()
	stores := make([]*Store, parts)
	for p := range stores {
		stores[p] = newStore(t, p, tables...)
	}
	return stores
}

// directTransport calls the other stores in process and counts the calls
// per part, so tests can see that the local shard never goes through it.
type directTransport struct {
	stores []*Store
	calls  []atomic.Int64
}

func newDirect(stores []*Store) *directTransport {
	return &directTransport{stores: stores, calls: make([]atomic.Int64, len(stores))}
}

func (d *directTransport) Pull(ctx context.Context, part int, req *PullRequest, resp *PullResponse) error {
	d.calls[part].Add(1)
	s := d.stores[part]
	rows, v, err := s.PullVersion(ctx, req.Table, req.MinVersion, req.IDs, resp.Rows[:0])
	if err != nil {
		return err
	}
	sp, _ := s.Spec(req.Table)
	*resp = PullResponse{Version: v, Dim: uint32(sp.Dim), Rows: rows}
	return nil
}

func (d *directTransport) Push(_ context.Context, part int, req *PushRequest) error {
	d.calls[part].Add(1)
	return d.stores[part].Push(req.Table, req.IDs, req.Grads)
}

func (d *directTransport) PushSync(ctx context.Context, part int, req *PushSyncRequest) error {
	d.calls[part].Add(1)
	return d.stores[part].PushSync(ctx, req.Table, req.Step, int(req.Trainer), int(req.World), req.Grads)
}

func (d *directTransport) Leave(_ context.Context, part int, req *LeaveRequest) error {
	d.calls[part].Add(1)
	if req.Table == "" {
		d.stores[part].Leave(int(req.Trainer))
	} else {
		d.stores[part].LeaveTable(req.Table, int(req.Trainer))
	}
	return nil
}

// wireCluster serves stores through Handlers behind a WireTransport: the
// bytes path the mesh will carry, without a network.
func wireCluster(stores []*Store) (*WireTransport, []atomic.Int64) {
	hs := make([]*Handler, len(stores))
	for p, s := range stores {
		hs[p] = NewHandler(s)
	}
	calls := make([]atomic.Int64, len(stores))
	return NewWireTransport(func(ctx context.Context, part int, req []byte) ([]byte, error) {
		calls[part].Add(1)
		// Copy, as a network would: the handler must not see the sender's buffer.
		in := append([]byte(nil), req...)
		return hs[part].Handle(ctx, in, nil), nil
	}), calls
}

// f32 is a shorthand for building float32 slices from literals.
func f32(v ...float32) []float32 { return v }
