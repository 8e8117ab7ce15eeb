package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

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
		wg.Go(func() {
			for k := g; k < total; k += C {
				b := w + k*W
				var batch *sample.Batch
				var err error
				if !stopped() {
					batch, err = s.Sample(ctx, ep.Key(b), ep.Batch(b))
					if err == nil && !r.gatherInRing() {
						err = s.Gather(ctx, batch)
					}
				}
				select { // wait for the token: every batch before k is written
				case <-turns[g]:
				case <-ctx.Done():
					return
				}
				switch {
				case err != nil:
					fail(err)
					return
				case batch == nil || halted.Load():
					halted.Store(true)
					turns[(g+1)%C] <- struct{}{}
					return
				}
				if err := r.write(ctx, batch); err != nil {
					fail(err)
					return
				}
				turns[(g+1)%C] <- struct{}{}
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

// gatherInRing reports whether x is gathered straight into the ring
// record, while the batch holds the right to write: with one part every
// row is a copy from the mapped file, so this saves a copy of the largest
// section (46 MB per batch of fanouts 15,10,5 on 2.4 M nodes). With
// peers, x is gathered beforehand, so that pulls overlap other batches.
func (r *samplerRun) gatherInRing() bool { return r.src == nil }

// write encodes batch straight into the reserved ring space.
func (r *samplerRun) write(ctx context.Context, batch *sample.Batch) error {
	size, err := sample.EncodedSize(batch)
	if err != nil {
		return err
	}
	buf, err := r.prod.Reserve(ctx, size)
	if err != nil {
		return err
	}
	var n int
	if r.gatherInRing() {
		n, err = sample.EncodeGather(ctx, buf, batch, r.cfg.Features)
	} else {
		n, err = sample.Encode(buf, batch)
	}
	if err != nil {
		return fmt.Errorf("node: encode batch %d: %w", batch.Index, err)
	}
	if err := r.prod.Commit(n); err != nil {
		return err
	}
	r.batches.Add(1)
	r.index++
	return nil
}
