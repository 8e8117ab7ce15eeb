package kv

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// nStripes is the number of row locks per table shard. Row r (local index)
// is guarded by stripe r % nStripes, so neighbouring rows fall on different
// locks and pushes of disjoint batches from several trainers run in
// parallel, as fastcache shards its buckets.
const nStripes = 256

// stripe is one row lock, padded to a cache line so that trainers taking
// neighbouring stripes do not share a line.
type stripe struct {
	sync.RWMutex
	_ [64 - 24]byte
}

// table is this store's shard of one table: local rows [0, n) are global
// rows [lo, hi). The weights and optimiser state are flat []float32 and
// []uint32: pointer-free, so the GC never scans them however large they
// grow.
type table struct {
	spec   Spec
	lo, hi uint64
	n, dim int

	w     []float32 // n·dim weights
	acc   []float32 // adagrad: n row accumulators
	m, v  []float32 // adam: n·dim first and second moments
	steps []uint32  // adam: n per-row step counts

	// mu orders whole-shard work against row work: Pull and Push hold it
	// shared (and then lock rows by stripe); the synchronous apply, Save and
	// Load hold it exclusively, so a pull sees exactly one version and a
	// checkpoint is one consistent snapshot.
	mu      sync.RWMutex
	stripes [nStripes]stripe

	// version counts applied updates: synchronous steps for Sync tables,
	// pushes for Async tables.
	version atomic.Uint64
	sync    *syncState // nil for Async tables
	// origin is the checkpoint the rows last equalled (see Origin);
	// replaced whole, never changed in place.
	origin atomic.Pointer[Origin]
	// keepFiles: the table's checkpoint files hold the name's earlier
	// table, which no coordinated save has replaced yet; SaveExit leaves
	// it out (Store.KeepFiles).
	keepFiles atomic.Bool
}

func newTable(s Spec, part int) (*table, error) {
	lo, hi := s.Range(part)
	t := &table{spec: s, lo: lo, hi: hi, dim: s.Dim}
	rows := hi - lo
	// Local rows are int32; 2^40 float32 (4 TiB) is far beyond any host.
	const maxElems = 1 << 40
	if rows > math.MaxInt32 || rows > maxElems/uint64(s.Dim) {
		return nil, fmt.Errorf("kv: table %q: part %d: %d rows × %d: too large: %w", s.Name, part, rows, s.Dim, ErrSpec)
	}
	t.n = int(rows)
	t.w = make([]float32, t.n*t.dim)
	switch s.Opt.Kind {
	case OptAdagrad:
		t.acc = make([]float32, t.n)
	case OptAdam:
		t.m = make([]float32, t.n*t.dim)
		t.v = make([]float32, t.n*t.dim)
		t.steps = make([]uint32, t.n)
	}
	if s.Init.Kind != InitZeros {
		for r := range t.n {
			initRow(t.row(r), s.Init, lo+uint64(r))
		}
	}
	if s.Mode == Sync {
		t.sync = newSyncState()
	}
	t.origin.Store(&Origin{Loaded: Loaded{Sync: t.sync != nil}})
	return t, nil
}

// row is the weights of local row r.
func (t *table) row(r int) []float32 { return t.w[r*t.dim : (r+1)*t.dim : (r+1)*t.dim] }

// local maps global ids to local rows, failing on the first id outside the
// shard.
func (t *table) local(ids []uint64, dst []int32) ([]int32, error) {
	for i, id := range ids {
		if id < t.lo || id >= t.hi {
			return dst, fmt.Errorf("kv: table %q: id %d at position %d outside shard [%d, %d): %w", t.spec.Name, id, i, t.lo, t.hi, ErrNotOwner)
		}
		dst = append(dst, int32(id-t.lo))
	}
	return dst, nil
}

// pull appends the rows of ids to dst. t.mu is held shared by the caller.
func (t *table) pull(ids []uint64, dst []float32) ([]float32, error) {
	for i, id := range ids {
		if id < t.lo || id >= t.hi {
			return dst, fmt.Errorf("kv: table %q: id %d at position %d outside shard [%d, %d): %w", t.spec.Name, id, i, t.lo, t.hi, ErrNotOwner)
		}
	}
	if t.spec.Mode == Sync {
		// Rows change only under t.mu held exclusively.
		for _, id := range ids {
			dst = append(dst, t.row(int(id-t.lo))...)
		}
		return dst, nil
	}
	for _, id := range ids {
		r := int(id - t.lo)
		s := &t.stripes[r%nStripes]
		s.RLock()
		dst = append(dst, t.row(r)...)
		s.RUnlock()
	}
	return dst, nil
}

// applyRow applies the optimiser to local row r with gradient g. The row's
// stripe is held exclusively, or t.mu is.
func (t *table) applyRow(r int, g []float32) {
	o := t.spec.Opt
	switch o.Kind {
	case OptSGD:
		sgdRow(t.row(r), g, o.LR)
	case OptAdagrad:
		adagradRow(t.row(r), g, &t.acc[r], o.LR, o.Eps)
	case OptAdam:
		lo, hi := r*t.dim, (r+1)*t.dim
		adamRow(t.row(r), g, t.m[lo:hi], t.v[lo:hi], &t.steps[r], o)
	case OptAverage:
		copy(t.row(r), g)
	}
}

// applyLocked applies a gradient for every row of the shard (n·dim
// floats): the synchronous step. t.mu must be held exclusively.
func (t *table) applyLocked(g []float32) {
	for r := range t.n {
		t.applyRow(r, g[r*t.dim:(r+1)*t.dim])
	}
	t.version.Add(1)
}
