package client

import (
	"context"
	"fmt"

	"graphnode/node/control"
)

// SyncDim is the row width of an all-reduce table: a vector of n values
// is ceil(n/SyncDim) rows, so a pull names few ids.
const SyncDim = 256

// Sync averages a vector across the trainers of a job through a
// synchronous kv table with the "average" optimiser: each step every
// trainer pushes its vector, the shards average them once all have
// pushed, and every trainer pulls the mean. It has the method set of
// train.Sync (AllReduce). Not safe for concurrent use.
type Sync struct {
	kv          *KV
	table       string
	rank, world int
	n           int
	base        uint64 // the table's version when the job started
	ids         []uint64
	buf, out    []float32
}

// NewSync declares the all-reduce table (the same name and length on
// every trainer of the job) and reads its version, so that steps count
// from wherever an earlier job on the same cluster left it.
func NewSync(ctx context.Context, k *KV, table string, n, rank, world int) (*Sync, error) {
	if n < 1 || world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("client: sync table %q: length %d, rank %d of world %d: invalid", table, n, rank, world)
	}
	rows := (n + SyncDim - 1) / SyncDim
	if _, err := k.Create(ctx, control.TableSpec{Name: table, Rows: control.Rows{N: uint64(rows)}, Dim: SyncDim, Optimizer: "average", Mode: "sync"}); err != nil {
		return nil, err
	}
	s := &Sync{kv: k, table: table, rank: rank, world: world, n: n,
		ids: make([]uint64, rows), buf: make([]float32, rows*SyncDim)}
	for i := range s.ids {
		s.ids[i] = uint64(i)
	}
	var err error
	if s.out, s.base, err = k.PullVersion(ctx, table, 0, s.ids, s.out[:0]); err != nil {
		return nil, err
	}
	return s, nil
}

// AllReduce replaces v with the mean of every trainer's v at step.
func (s *Sync) AllReduce(ctx context.Context, step int, v []float32) error {
	if len(v) != s.n {
		return fmt.Errorf("client: sync table %q step %d: vector of %d values, table holds %d", s.table, step, len(v), s.n)
	}
	copy(s.buf, v) // the padding stays zero
	st := s.base + uint64(step)
	if err := s.kv.PushSync(ctx, s.table, st, s.rank, s.world, s.buf); err != nil {
		return err
	}
	var err error
	if s.out, _, err = s.kv.PullVersion(ctx, s.table, st+1, s.ids, s.out[:0]); err != nil {
		return err
	}
	copy(v, s.out[:s.n])
	return nil
}
