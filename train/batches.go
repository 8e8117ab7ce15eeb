package train

import (
	"context"
	"errors"
	"fmt"
	"math"

	"graphnode/sample"
)

// Sentinel errors. Every error of this package wraps one of them, or an
// error of a Batches or Sync it was handed.
var (
	// ErrEndOfEpoch is what a Batches returns (possibly wrapped) after the
	// last batch of an epoch.
	ErrEndOfEpoch = errors.New("train: end of epoch")
	// ErrInvalid: a bad Config field or argument.
	ErrInvalid = errors.New("invalid argument")
	// ErrBatch: a batch does not fit the model (shape, hops, labels, edge
	// positions).
	ErrBatch = errors.New("batch does not fit the model")
	// ErrSync: the trainers disagree (step, vector length) or one left.
	ErrSync = errors.New("trainers out of step")
)

// Batches hands out decoded batch records in order. Next returns the next
// batch of the current epoch; after the epoch's last batch it returns an
// error wrapping ErrEndOfEpoch once, and the following call starts the
// next epoch. io.EOF means no epoch follows. The View must stay valid
// until the next call of Next; the trainer never writes to it.
//
// node/client's Loader fits once its ErrEndOfEpoch is translated: see
// BatchesFunc.
type Batches interface {
	Next(ctx context.Context) (sample.View, error)
}

// BatchesFunc adapts a function to Batches, e.g. a Go client loader:
//
//	train.BatchesFunc(func(ctx context.Context) (sample.View, error) {
//		b, err := loader.Next(ctx)
//		if errors.Is(err, client.ErrEndOfEpoch) {
//			err = train.ErrEndOfEpoch
//		}
//		return b.View, err
//	})
type BatchesFunc func(ctx context.Context) (sample.View, error)

// Next calls f.
func (f BatchesFunc) Next(ctx context.Context) (sample.View, error) { return f(ctx) }

// batch is a View checked against the model and cut per layer as PyG's
// trim_to_layer does: layer l (0-based, of L) computes outputs only for
// the nodes within L−1−l hops of the seeds, from the edges of hops 1 …
// L−l and the nodes within L−l hops.
type batch struct {
	seeds    int
	nIn      []int // per layer: input rows (nodes within L−l hops)
	targets  []int // per layer: output rows (nodes within L−1−l hops)
	edges    []int // per layer: edges used (hops 1 … L−l); a prefix of row/col
	row, col []int32
	labels   []int32 // per seed, −1 = none
	sampled  int64   // edges of the record (throughput figure)
}

// prepare checks v against the model's shape and fills b. Edges are
// validated hop by hop: an edge of hop k must point from a node within k
// hops to a node within k−1 hops, which keeps every layer's gather and
// scatter in bounds.
func (b *batch) prepare(v *sample.View, featDim, classes, layers int) error {
	h := &v.Header
	fail := func(format string, args ...any) error {
		return fmt.Errorf("train: batch %d of epoch %d: %s: %w", h.Index, h.Epoch, fmt.Sprintf(format, args...), ErrBatch)
	}
	if h.Kind != sample.KindBatch {
		return fail("record kind %v, want a batch", h.Kind)
	}
	if int(h.FeatDim) != featDim {
		return fail("feat dim %d, model has %d", h.FeatDim, featDim)
	}
	if h.XType != sample.F32 && h.XType != sample.F16 {
		return fail("x dtype %v", h.XType)
	}
	if h.LabelDim != 1 {
		return fail("label dim %d, want 1 (one class per node)", h.LabelDim)
	}
	nsn, nse := v.NumSampledNodes, v.NumSampledEdges
	if len(nse) < layers || len(nsn) != len(nse)+1 {
		return fail("%d hops, the model has %d layers", len(nse), layers)
	}
	if nsn[0] != int64(h.BatchSize) || len(v.Y) != int(h.BatchSize) {
		return fail("%d seeds in num_sampled_nodes, batch_size %d, %d labels", nsn[0], h.BatchSize, len(v.Y))
	}
	if h.NumNodes > math.MaxInt32 || h.NumEdges > math.MaxInt32 {
		return fail("%d nodes, %d edges: more than this trainer indexes", h.NumNodes, h.NumEdges)
	}
	b.seeds = int(h.BatchSize)
	cum := make([]int, layers+1) // nodes within k hops
	ecum := make([]int, layers+1)
	for k := 0; k <= layers; k++ {
		cum[k] = int(nsn[k])
		if k > 0 {
			cum[k] += cum[k-1]
			ecum[k] = ecum[k-1] + int(nse[k-1])
		}
	}
	b.nIn, b.targets, b.edges = b.nIn[:0], b.targets[:0], b.edges[:0]
	for l := range layers {
		b.nIn = append(b.nIn, cum[layers-l])
		b.targets = append(b.targets, cum[layers-1-l])
		b.edges = append(b.edges, ecum[layers-l])
	}
	e := b.edges[0]
	b.row, b.col = grow(b.row, e), grow(b.col, e)
	rows, cols := v.Row(), v.Col()
	for k := 1; k <= layers; k++ {
		for i := ecum[k-1]; i < ecum[k]; i++ {
			r, c := rows[i], cols[i]
			if r < 0 || r >= int64(cum[k]) || c < 0 || c >= int64(cum[k-1]) {
				return fail("edge %d of hop %d joins positions %d → %d, want < %d → < %d", i, k, r, c, cum[k], cum[k-1])
			}
			b.row[i], b.col[i] = int32(r), int32(c)
		}
	}
	b.labels = grow(b.labels, b.seeds)
	for i, y := range v.Y {
		if y < -1 || y >= int64(classes) {
			return fail("label %d of seed %d outside [-1, %d)", y, i, classes)
		}
		b.labels[i] = int32(y)
	}
	b.sampled = int64(h.NumEdges)
	return nil
}

// features copies the first rows feature rows of v into dst (rows × d)
// as T, dividing each row by its sum when normalize is set (rows summing
// to zero stay zero). It returns the count of non-zero values.
func features[T float](dst []T, v *sample.View, rows, d int, normalize bool) int {
	nnz := 0
	f32, f16 := v.XF32(), v.XF16()
	for i := range rows {
		out := dst[i*d : (i+1)*d]
		if f32 != nil {
			for j, x := range f32[i*d : (i+1)*d] {
				out[j] = T(x)
			}
		} else {
			for j, x := range f16[i*d : (i+1)*d] {
				out[j] = T(half(x))
			}
		}
		if normalize {
			var s T
			for _, x := range out {
				s += x
			}
			if s != 0 {
				inv := 1 / s
				for j := range out {
					out[j] *= inv
				}
			}
		}
		for _, x := range out {
			if x != 0 {
				nnz++
			}
		}
	}
	return nnz
}

// finiteFeatures reports whether every feature of v is finite.
func finiteFeatures(v *sample.View) bool {
	if x := v.XF32(); x != nil {
		return firstNonFinite(x) < 0
	}
	for _, x := range v.XF16() {
		if !finite(float64(half(x))) {
			return false
		}
	}
	return true
}

// half converts an IEEE 754 binary16 value to float32.
func half(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: man · 2^-24
	f := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		return -f
	}
	return f
}

// grow is buf resized to n, reallocated only when too small.
func grow[E any](buf []E, n int) []E {
	if cap(buf) < n {
		return make([]E, n)
	}
	return buf[:n]
}
