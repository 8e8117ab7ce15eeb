package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"graphnode/sample"
)

// The sync vector is the flat gradient followed by these statistics. Sync
// averages them across trainers; every figure derived from them is a
// ratio of two averages (loss/count, correct/count), which is the ratio
// of the sums, so no trainer needs to know how many there are. The val
// and test accuracy are the ratios of the counts themselves, which W
// times the means give back (statWorld, countRatio).
const (
	statActive      = iota // 1: this trainer trained on a batch in the round
	statFailed             // 1: this trainer failed; everyone stops
	statLoss               // summed cross-entropy of the batch
	statCorrect            // seeds predicted right
	statCount              // labelled seeds
	statValCorrect         // evaluation rounds: val seeds right
	statValCount           // … and labelled
	statTestCorrect        // evaluation rounds: test seeds right
	statTestCount          // … and labelled
	statsLen

	// statWorld is statActive's slot in evaluation rounds: rank 0 alone
	// offers 1, so the mean is 1/W, and W times the means of the val and
	// test counts gives the counts back (countRatio).
	statWorld = statActive
)

// Data are a trainer's batch sources. Val and Test may be nil (no
// evaluation); every trainer of a job must give the same ones.
type Data struct {
	Train, Val, Test Batches
}

// Trainer trains GraphSAGE on batches. It is not safe for concurrent use;
// run one per goroutine (trainers of one job talk only through Sync).
type Trainer struct {
	cfg  Config
	net  *net[float32]
	opt  adam
	sync Sync
	step int       // AllReduce rounds so far: the step of the next one
	vec  []float32 // the sync vector; its first NumParams values are net.grads

	drops   []drop
	streams []uint64

	best []float32 // the parameters of the best val accuracy so far (Config.KeepBest)
}

// New checks cfg and builds a trainer whose parameters are initialised
// from cfg.Seed (the same on every trainer of a job).
func New(cfg Config, sync Sync) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sync == nil {
		return nil, fmt.Errorf("train: sync is nil (use NoSync for one trainer): %w", ErrInvalid)
	}
	n := newNet[float32](cfg.dims(), cfg.Seed, cfg.threads(), cfg.now)
	t := &Trainer{cfg: cfg, net: n, sync: sync, opt: newAdam(&cfg, len(n.params))}
	t.vec = make([]float32, len(n.params)+statsLen)
	n.grads = t.vec[:len(n.params)] // backward accumulates straight into the sync vector
	t.drops = make([]drop, cfg.Layers)
	t.streams = make([]uint64, cfg.Layers)
	for l := range t.drops {
		t.drops[l] = newDrop(cfg.Dropout)
	}
	t.drops[0] = newDrop(cfg.InputDropout)
	return t, nil
}

// Config is the trainer's configuration.
func (t *Trainer) Config() Config { return t.cfg }

// NumParams is the length of the parameter vector.
func (t *Trainer) NumParams() int { return len(t.net.params) }

// SyncLen is the length of every vector the trainer hands to Sync: the
// parameter count plus a few statistics.
func (t *Trainer) SyncLen() int { return len(t.vec) }

// Params is the live parameter vector (layout in model.go: per layer W_l,
// W_r, b). It must not be written, and changes with every step.
func (t *Trainer) Params() []float32 { return t.net.params }

// BestParams is a copy of the parameters as they were after the epoch of
// the best val accuracy of the last Run (Result.Best), laid out as
// Params; nil without Config.KeepBest or before an epoch was evaluated on
// val.
func (t *Trainer) BestParams() []float32 { return t.best }

// Run trains for cfg.Epochs epochs (fewer with early stopping): per epoch
// one pass over data.Train, then, when cfg.Evaluates(epoch), one pass over
// data.Val and one over data.Test. report, when non-nil, is called after
// every epoch. On error the trainer cannot be used further.
func (t *Trainer) Run(ctx context.Context, data Data, report func(EpochStats)) (Result, error) {
	res := Result{Best: -1}
	since := 0
	t.best = nil
	for e := range t.cfg.Epochs {
		st, err := t.trainEpoch(ctx, e, data.Train)
		if err != nil {
			return res, err
		}
		if t.cfg.Evaluates(e) && (data.Val != nil || data.Test != nil) {
			if err := t.evalEpoch(ctx, e, data, &st); err != nil {
				return res, err
			}
			if data.Val != nil {
				if res.Best < 0 || st.ValAcc > res.Epochs[res.Best].ValAcc {
					res.Best, since = len(res.Epochs), 0
					if t.cfg.KeepBest {
						t.best = append(t.best[:0], t.net.params...)
					}
				} else {
					since++
				}
			}
		}
		res.Epochs = append(res.Epochs, st)
		if report != nil {
			report(st)
		}
		// Patience that runs out at the last epoch cuts nothing short.
		if t.cfg.Patience > 0 && since >= t.cfg.Patience && e < t.cfg.Epochs-1 {
			res.Stopped = true
			break
		}
	}
	return res, nil
}

// trainEpoch runs one synchronous pass over src. Each round every trainer
// contributes its next batch's gradient, or zeros once its epoch is over;
// the rounds end when no trainer had a batch, so trainers with different
// batch counts stay in step.
func (t *Trainer) trainEpoch(ctx context.Context, e int, src Batches) (EpochStats, error) {
	st := EpochStats{Epoch: e}
	P := len(t.net.params)
	start := t.cfg.now()
	prof0 := t.net.prof
	var loss, correct, count float64
	done := false
	for {
		clear(t.vec)
		var fail error
		if !done {
			v, err := src.Next(ctx)
			switch {
			case errors.Is(err, ErrEndOfEpoch):
				done = true
			case ctx.Err() != nil:
				return st, fmt.Errorf("train: epoch %d: %w", e, ctx.Err())
			case errors.Is(err, io.EOF):
				fail = fmt.Errorf("train: epoch %d: training batches ended early: %w", e, err)
			case err != nil:
				fail = fmt.Errorf("train: epoch %d: training batches: %w", e, err)
			default:
				fail = t.batchGrad(e, &v)
				st.Batches++
				st.Edges += t.net.b.sampled
			}
		}
		if fail != nil {
			clear(t.vec)
			t.vec[P+statFailed] = 1
		}
		if err := t.allReduce(ctx, e, fail != nil); err != nil || fail != nil {
			return st, errors.Join(fail, err)
		}
		s := t.vec[P:]
		if s[statActive] == 0 {
			break
		}
		if n := float64(s[statCount]); n > 0 {
			t.opt.step(t.net.params, t.vec[:P], 1/n)
			st.Steps++
		}
		loss += float64(s[statLoss])
		correct += float64(s[statCorrect])
		count += float64(s[statCount])
	}
	if count > 0 {
		st.Loss, st.TrainAcc = loss/count, correct/count
	}
	st.TrainTime = t.cfg.now().Sub(start)
	st.GEMMTime = t.net.prof.gemm - prof0.gemm
	st.AggTime = t.net.prof.agg - prof0.agg
	return st, nil
}

// batchGrad computes the summed loss gradient of one batch into t.vec
// (cleared by the caller).
func (t *Trainer) batchGrad(e int, v *sample.View) error {
	n := t.net
	for l := range t.streams {
		t.streams[l] = dropStream(t.cfg.Seed, t.cfg.Rank, e, int(v.Header.Index), l)
	}
	logits, err := n.forward(v, t.cfg.Normalize, t.drops, t.streams)
	if err != nil {
		return err
	}
	loss, correct, count := n.lossGrad(logits, n.b.labels)
	n.backward()
	// Checked before the gradient reaches the other trainers (the
	// all-reduce, then every rank's optimiser): one NaN or Inf there
	// makes every parameter NaN on every rank.
	if !finite(loss) {
		return fmt.Errorf("train: batch %d of epoch %d: loss is %g (a NaN or Inf feature, or a learning rate too large): %w", v.Header.Index, e, loss, ErrInvalid)
	}
	if i := firstNonFinite(t.vec[:len(n.params)]); i >= 0 {
		return fmt.Errorf("train: batch %d of epoch %d: gradient %d of %d is %g (a NaN or Inf feature, or a learning rate too large): %w", v.Header.Index, e, i, len(n.params), t.vec[i], ErrInvalid)
	}
	s := t.vec[len(n.params):]
	s[statActive] = 1
	s[statLoss] = float32(loss)
	s[statCorrect] = float32(correct)
	s[statCount] = float32(count)
	return nil
}

// evalEpoch evaluates on data.Val and data.Test and combines the counts
// of all trainers in one round.
func (t *Trainer) evalEpoch(ctx context.Context, e int, data Data, st *EpochStats) error {
	start := t.cfg.now()
	P := len(t.net.params)
	var vc, vn, tc, tn int
	var fail error
	if data.Val != nil {
		vc, vn, fail = t.Evaluate(ctx, data.Val)
	}
	if fail == nil && data.Test != nil {
		tc, tn, fail = t.Evaluate(ctx, data.Test)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("train: epoch %d: evaluation: %w", e, ctx.Err())
	}
	clear(t.vec)
	s := t.vec[P:]
	if fail != nil {
		s[statFailed] = 1
		fail = fmt.Errorf("train: epoch %d: evaluation: %w", e, fail)
	}
	if t.cfg.Rank == 0 {
		s[statWorld] = 1
	}
	s[statValCorrect], s[statValCount] = float32(vc), float32(vn)
	s[statTestCorrect], s[statTestCount] = float32(tc), float32(tn)
	if err := t.allReduce(ctx, e, fail != nil); err != nil || fail != nil {
		return errors.Join(fail, err)
	}
	st.Evaluated = true
	st.ValAcc = countRatio(s[statValCorrect], s[statValCount], s[statWorld])
	st.TestAcc = countRatio(s[statTestCorrect], s[statTestCount], s[statWorld])
	st.EvalTime = t.cfg.now().Sub(start)
	return nil
}

func ratio(a, b float32) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// meanSum is the sum of world trainers' whole numbers (counts, or the
// KGE metrics' digits) whose mean a reduction gave as mean. In float64:
// mean·world rounded to float32, within 1/2 of the sum, could land on a
// half (below 2^23, where float32's spacing is 1/2 or less) and round
// the wrong way.
func meanSum(mean float32, world int) float64 {
	return math.Round(float64(mean) * float64(world))
}

// countRatio is the ratio of two whole-number sums over the W trainers
// of a round whose means are a and b, and inv the mean of rank 0's 1
// alone, 1/W. The ratio of the means, float32 each, was up to about
// 10^-7 off the recount for W not a power of two (0.7699999459838883 for
// 770 test seeds right of 1000 on 3 trainers). A mean is the float32 sum
// (exact below 2^24) divided by W, one rounding, and W·fl(C/W) is within
// C·2^-24 of C, so rounding gives C back below 2^23 seeds; 1/fl(1/W)
// likewise gives W for W ≤ kv.MaxWorld. With no inv (a rank 0 of an
// earlier build) it is the ratio of the means.
func countRatio(a, b, inv float32) float64 {
	if !(inv > 0) {
		return ratio(a, b)
	}
	w := int(math.Round(1 / float64(inv)))
	c, n := meanSum(a, w), meanSum(b, w)
	if n == 0 {
		return 0
	}
	return c / n
}

// allReduce runs one Sync round on t.vec and fails when another trainer
// reported a failure in it (failed: this one did, and says why itself).
func (t *Trainer) allReduce(ctx context.Context, e int, failed bool) error {
	step := t.step
	t.step++
	if err := t.sync.AllReduce(ctx, step, t.vec); err != nil {
		return fmt.Errorf("train: epoch %d: sync step %d: %w", e, step, err)
	}
	if !failed && t.vec[len(t.net.params)+statFailed] != 0 {
		return fmt.Errorf("train: epoch %d: sync step %d: another trainer failed: %w", e, step, ErrSync)
	}
	return nil
}

// Evaluate runs sampled inference (no dropout) over one epoch of src and
// counts this trainer's labelled seeds and those predicted right.
func (t *Trainer) Evaluate(ctx context.Context, src Batches) (correct, count int, err error) {
	for {
		v, err := src.Next(ctx)
		if errors.Is(err, ErrEndOfEpoch) {
			return correct, count, nil
		}
		if err != nil {
			return correct, count, fmt.Errorf("train: evaluation batches: %w", err)
		}
		c, n, err := t.net.evaluate(&v, t.cfg.Normalize)
		if err != nil {
			return correct, count, err
		}
		correct += c
		count += n
	}
}
