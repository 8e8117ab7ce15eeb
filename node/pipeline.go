package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"graphnode/csr"
	"graphnode/sample"
)

// epochBatches makes this worker's batches of one epoch — b = w, w+W, … —
// with one goroutine per Sampler, and writes them into the sub-ring
// strictly in order.
//
// Goroutine g of C takes the worker's k-th batch for k ≡ g (mod C). The
// right to write passes round the goroutines as a token: g samples batch
// k while others write, waits for the token, writes k, hands the token to
// g+1. So at most C batches are in flight and the ring sees them in
// order whatever the timing (a reorder buffer of depth C without a
// buffer: each batch stays in its Sampler until its turn).
//
// When stop is closed, a goroutine starts no new batch; the batches
// already sampled are written in order up to the first that is not, and
// epochBatches returns errStopped.
func (r *samplerRun) epochBatches(ctx context.Context, stop <-chan struct{}, ep sample.Epoch, samplers []*sample.Sampler) error {
	w, W := r.spec.Worker, r.spec.Workers
	total := 0 // batches of this worker in the epoch
	if nb := ep.NumBatches(); w < nb {
		total = (nb - w + W - 1) / W
	}
	r.index = 0
	C := min(len(samplers), total)
	if C == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	turns := make([]chan struct{}, C)
	for g := range turns {
		turns[g] = make(chan struct{}, 1)
	}
	turns[0] <- struct{}{}
	var (
		halted   atomic.Bool // a goroutine stopped: no batch may follow
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for g := range C {
		s := samplers[g]
		var src, dst []uint64 // a link batch's seed edges
		// one makes batch k of this goroutine and writes it in its turn;
		// false: the goroutine stops.
		one := func(k int) bool {
			b := w + k*W
			var batch *sample.Batch
			var x sample.FeatureSource // where write finds x; nil: in the batch, or none
			var err error
			if !stopped() {
				err = r.read(func() (err error) {
					if e := r.spec.Options.SeedEdges; e != nil {
						src, dst = src[:0], dst[:0]
						for _, i := range ep.Batch(b) {
							src, dst = append(src, e.Src[i]), append(dst, e.Dst[i])
						}
						batch, err = s.SampleLink(ctx, ep.Key(b), src, dst, r.link)
					} else {
						batch, err = s.Sample(ctx, ep.Key(b), ep.Batch(b))
					}
					return err
				})
				switch {
				case err != nil || r.cfg.Features == nil:
				case r.src == nil:
					x = r.cfg.Features
				default:
					pf := r.src.prefetch(ctx, batch.NID)
					defer pf.release() // when the batch is not written
					x = pf
				}
			}
			select { // wait for the token: every batch before k is written
			case <-turns[g]:
			case <-ctx.Done():
				return false
			}
			switch {
			case err != nil:
				fail(err)
				return false
			case batch == nil || halted.Load():
				halted.Store(true)
				turns[(g+1)%C] <- struct{}{}
				return false
			}
			if err := r.write(ctx, batch, x); err != nil {
				fail(err)
				return false
			}
			turns[(g+1)%C] <- struct{}{}
			return true
		}
		wg.Go(func() {
			for k := g; k < total; k += C {
				if !one(k) {
					return
				}
			}
		})
	}
	wg.Wait()
	switch {
	case firstErr != nil:
		return firstErr
	case halted.Load():
		return errStopped
	}
	return nil
}

// write encodes batch straight into the reserved ring space, gathering
// its x section from x straight into the record (x nil: from batch.X, or
// no features). With one part every row is a copy from the mapped file;
// with peers the pulls were sent before the batch's turn (prefetch) and
// their rows wait in the answers. Either way the largest section (46 MB
// per batch of fanouts 15,10,5 on 2.4 M nodes) is written once.
func (r *samplerRun) write(ctx context.Context, batch *sample.Batch, x sample.FeatureSource) error {
	size, err := sample.EncodedSize(batch)
	if err != nil {
		return err
	}
	buf, err := r.prod.Reserve(ctx, size)
	if err != nil {
		return err
	}
	var n int
	// Rows are copied from the partition's mapping (its guard) into the
	// ring's (the producer's: a ring file truncated meanwhile is an
	// error naming it, not a SIGBUS).
	err = r.prod.Guard(func() error {
		return r.read(func() (err error) {
			if x != nil {
				n, err = sample.EncodeGather(ctx, buf, batch, x)
			} else {
				n, err = sample.Encode(buf, batch)
			}
			return err
		})
	})
	if err != nil {
		r.prod.Abandon() // the error record takes its place
		if errors.Is(err, csr.ErrChanged) {
			return err // it says what to do
		}
		return fmt.Errorf("node: encode batch %d: %w", batch.Index, err)
	}
	if err := r.prod.Commit(n); err != nil {
		return err
	}
	r.batches.Add(1)
	r.edges.Add(uint64(len(batch.Row)))
	r.index++
	return nil
}
