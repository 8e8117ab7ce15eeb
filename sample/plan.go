package sample

import (
	"errors"
	"fmt"
	"slices"
)

// PlanOptions say how a trainer's seeds become batches.
type PlanOptions struct {
	BatchSize int
	Shuffle   bool   // permute the rank's seeds every epoch
	DropLast  bool   // drop a short final batch (and the seeds that do not divide among ranks)
	Seed      uint64 // the loader's seed: keys the shuffle and every BatchKey
	Rank      int    // this trainer's rank in [0, WorldSize)
	WorldSize int    // trainers sharing the split; 0 means 1
}

// Validate reports every problem of o.
func (o PlanOptions) Validate() error {
	var errs []error
	if o.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch_size %d, want ≥ 1", o.BatchSize))
	}
	if o.WorldSize < 0 {
		errs = append(errs, fmt.Errorf("world_size %d, want ≥ 1", o.WorldSize))
	}
	if o.Rank < 0 || o.Rank >= max(o.WorldSize, 1) {
		errs = append(errs, fmt.Errorf("rank %d outside [0, %d)", o.Rank, max(o.WorldSize, 1)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sample: plan: %w: %w", err, ErrInvalid)
	}
	return nil
}

// Plan is one rank's share of a split, cut into batches per epoch.
//
// The split's n ids are taken in the order given (ascending for a split
// read from a mask). Rank r of W takes a contiguous share of it:
//   - without DropLast, the first n mod W ranks take ⌊n/W⌋+1 ids and the
//     others ⌊n/W⌋ (every id is used; the last batch may be short and
//     ranks may differ by one batch);
//   - with DropLast, every rank takes ⌊n/W⌋ ids, the last n mod W ids of
//     the split are dropped, and so is each rank's short final batch: all
//     ranks run the same number of full batches, as DDP needs.
//
// With Shuffle the share is permuted every epoch by Fisher–Yates driven
// by the stream (Seed, epoch, Rank); batch b of an epoch is the b-th run
// of BatchSize ids of that order. So a batch is a pure function of (ids,
// options, epoch, b) and any worker can make any batch. A Plan is
// immutable and safe for concurrent use.
type Plan struct {
	opt   PlanOptions
	share []uint64
}

// NewPlan checks opt and ids (no duplicates) and keeps a copy of the
// rank's share.
func NewPlan(ids []uint64, opt PlanOptions) (*Plan, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return nil, fmt.Errorf("sample: plan: seed %d listed twice: %w", sorted[i], ErrInvalid)
		}
	}
	w, r, n := max(opt.WorldSize, 1), opt.Rank, len(ids)
	q, rem := n/w, n%w
	var lo, hi int
	if opt.DropLast {
		lo, hi = r*q, (r+1)*q
	} else {
		lo = r*q + min(r, rem)
		hi = lo + q
		if r < rem {
			hi++
		}
	}
	return &Plan{opt: opt, share: slices.Clone(ids[lo:hi])}, nil
}

// Len is the number of seeds in this rank's share.
func (p *Plan) Len() int { return len(p.share) }

// Options are the plan's options.
func (p *Plan) Options() PlanOptions { return p.opt }

// NumBatches is the number of batches in every epoch.
func (p *Plan) NumBatches() int {
	if p.opt.DropLast {
		return len(p.share) / p.opt.BatchSize
	}
	return (len(p.share) + p.opt.BatchSize - 1) / p.opt.BatchSize
}

// Epoch is the order of a rank's seeds in one epoch.
type Epoch struct {
	plan  *Plan
	num   uint64
	order []uint64
}

// Epoch computes epoch e's order into buf (reused when large enough).
// It costs O(Len()): compute it once per epoch, then take its batches.
func (p *Plan) Epoch(e uint64, buf []uint64) Epoch {
	order := append(buf[:0], p.share...)
	if p.opt.Shuffle {
		r := rng{state: shuffleStream(p.opt.Seed, e, uint64(p.opt.Rank))}
		for i := len(order) - 1; i > 0; i-- {
			j := r.bounded(uint64(i) + 1)
			order[i], order[j] = order[j], order[i]
		}
	}
	return Epoch{plan: p, num: e, order: order}
}

// Order is the epoch's order of the whole share; its storage is the buf
// given to Plan.Epoch.
func (e Epoch) Order() []uint64 { return e.order }

// NumBatches is Plan.NumBatches.
func (e Epoch) NumBatches() int { return e.plan.NumBatches() }

// Batch is the seeds of batch b, a view into the epoch's order.
func (e Epoch) Batch(b int) []uint64 {
	bs := e.plan.opt.BatchSize
	lo := b * bs
	return e.order[lo:min(lo+bs, len(e.order))]
}

// Key is the BatchKey of batch b.
func (e Epoch) Key(b int) BatchKey {
	return BatchKey{Seed: e.plan.opt.Seed, Epoch: e.num, Rank: uint64(e.plan.opt.Rank), Batch: uint64(b)}
}
