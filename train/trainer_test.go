package train

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"graphnode/sample"
)

// smallSetup is a learnable block graph and a 2-layer model for it.
func smallSetup(t testing.TB) (*sample.Mem, Config) {
	g := blockGraph(1, 600, 6, 12, 4, 0.8, 1.0)
	cfg := DefaultConfig()
	cfg.FeatDim, cfg.Classes = g.d, g.classes
	cfg.Hidden, cfg.Epochs, cfg.Seed = 16, 15, 5
	return g.mem(t, sample.F32), cfg
}

// data is the sources of rank r of world over p: train 0…299, val
// 300…449, test 450…599.
func data(t testing.TB, p sample.Partition, r, world, batch int, fan []int) Data {
	opt := func(bs int, shuffle bool) sample.PlanOptions {
		return sample.PlanOptions{BatchSize: bs, Shuffle: shuffle, Seed: 9, Rank: r, WorldSize: world}
	}
	return Data{
		Train: newBatches(t, p, ids(300, 0, 1), fan, opt(batch, true)),
		Val:   newBatches(t, p, ids(450, 300, 1), fan, opt(200, false)),
		Test:  newBatches(t, p, ids(600, 450, 1), fan, opt(200, false)),
	}
}

func TestTrainerLearns(t *testing.T) {
	p, cfg := smallSetup(t)
	tr, err := New(cfg, NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	var reported []int
	res, err := tr.Run(context.Background(), data(t, p, 0, 1, 32, []int{5, 5}), func(s EpochStats) {
		reported = append(reported, s.Epoch)
	})
	if err != nil {
		t.Fatal(err)
	}
	first, last := res.Epochs[0], res.Epochs[len(res.Epochs)-1]
	t.Logf("epoch 0: loss %.3f val %.3f; last: loss %.3f train %.3f val %.3f test %.3f",
		first.Loss, first.ValAcc, last.Loss, last.TrainAcc, last.ValAcc, last.TestAcc)
	if !slices.Equal(reported, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}) {
		t.Errorf("reported epochs %v", reported)
	}
	if last.TestAcc < 0.9 || last.ValAcc < 0.9 || last.Loss > first.Loss/2 {
		t.Errorf("did not learn: loss %.3f → %.3f, val %.3f, test %.3f", first.Loss, last.Loss, last.ValAcc, last.TestAcc)
	}
	if last.Batches != 10 || last.Steps != 10 || last.Edges == 0 || !last.Evaluated {
		t.Errorf("last epoch: %d batches, %d steps, %d edges, evaluated %v; want 10, 10, > 0, true", last.Batches, last.Steps, last.Edges, last.Evaluated)
	}
	if res.Best < 0 || res.BestEpoch().ValAcc < last.ValAcc || res.Stopped {
		t.Errorf("best %d (val %.3f), stopped %v", res.Best, res.BestEpoch().ValAcc, res.Stopped)
	}
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("epoch", "stats", last)
	for _, key := range []string{"stats.epoch=14", "stats.loss=", "stats.val_acc=", "stats.test_acc=", "stats.batches_per_s=", "stats.edges_per_s="} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("log line %q lacks %s", buf.String(), key)
		}
	}
}

// runRanks trains world trainers in goroutines and returns them and
// their results; a failing trainer cancels nothing (the others must see
// its failure through Sync).
func runRanks(t *testing.T, cfg Config, world int, mk func(r int) Data) ([]*Trainer, []Result, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	syncs := NewLocalSync(world)
	trs := make([]*Trainer, world)
	res := make([]Result, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		c := cfg
		c.Rank = r
		tr, err := New(c, syncs[r])
		if err != nil {
			t.Fatal(err)
		}
		trs[r] = tr
		d := mk(r)
		wg.Go(func() { res[r], errs[r] = tr.Run(ctx, d, nil) })
	}
	wg.Wait()
	return trs, res, errs
}

// TestTrainersStayIdentical: two trainers with different batch counts
// (26 and 25 seeds in batches of 5) and their own dropout masks end with
// bit-identical parameters and report the same figures.
func TestTrainersStayIdentical(t *testing.T) {
	p, cfg := smallSetup(t)
	cfg.Epochs, cfg.InputDropout = 3, 0.2
	trs, res, errs := runRanks(t, cfg, 2, func(r int) Data {
		opt := sample.PlanOptions{BatchSize: 5, Shuffle: true, Seed: 9, Rank: r, WorldSize: 2}
		d := data(t, p, r, 2, 5, []int{4, 4})
		d.Train = newBatches(t, p, ids(51, 0, 1), []int{4, 4}, opt)
		return d
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if !slices.Equal(trs[0].Params(), trs[1].Params()) {
		t.Fatal("parameters differ between the trainers")
	}
	if slices.Equal(trs[0].Params(), newNet[float32](cfg.dims(), cfg.Seed, 1, time.Now).params) {
		t.Fatal("parameters never changed")
	}
	for e := range cfg.Epochs {
		a, b := res[0].Epochs[e], res[1].Epochs[e]
		if a.Batches != 6 || b.Batches != 5 || a.Steps != 6 || b.Steps != 6 {
			t.Errorf("epoch %d: batches %d and %d, steps %d and %d; want 6, 5, 6, 6", e, a.Batches, b.Batches, a.Steps, b.Steps)
		}
		if a.Loss != b.Loss || a.TrainAcc != b.TrainAcc || a.ValAcc != b.ValAcc || a.TestAcc != b.TestAcc {
			t.Errorf("epoch %d: rank 0 %+v, rank 1 %+v", e, a, b)
		}
	}
}

// recording is a Sync that keeps a copy of the vector of the first round.
type recording struct {
	Sync
	first []float32
}

func (r *recording) AllReduce(ctx context.Context, step int, v []float32) error {
	err := r.Sync.AllReduce(ctx, step, v)
	if step == 0 {
		r.first = slices.Clone(v)
	}
	return err
}

// TestTwoTrainersMatchOne: with full neighbourhoods and no dropout, two
// trainers on halves of the seeds compute the gradient one trainer
// computes on all of them (the mean over every labelled seed).
func TestTwoTrainersMatchOne(t *testing.T) {
	p, cfg := smallSetup(t)
	cfg.Epochs, cfg.Dropout = 1, 0
	full := []int{-1, -1}
	seeds := ids(40, 0, 1)
	grad := func(world int) []float64 {
		ctx := context.Background()
		syncs := NewLocalSync(world)
		rec := &recording{Sync: syncs[0]}
		syncs[0] = rec
		errs := make([]error, world)
		var wg sync.WaitGroup
		for r := range world {
			c := cfg
			c.Rank = r
			tr, err := New(c, syncs[r])
			if err != nil {
				t.Fatal(err)
			}
			opt := sample.PlanOptions{BatchSize: 40 / world, Seed: 9, Rank: r, WorldSize: world}
			d := Data{Train: newBatches(t, p, seeds, full, opt)}
			wg.Go(func() { _, errs[r] = tr.Run(ctx, d, nil) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		P := len(rec.first) - statsLen
		g := make([]float64, P)
		for i := range g {
			g[i] = float64(rec.first[i]) / float64(rec.first[P+statCount])
		}
		return g
	}
	one, two := grad(1), grad(2)
	worst, norm := 0.0, 0.0
	for i := range one {
		worst = max(worst, math.Abs(one[i]-two[i]))
		norm = max(norm, math.Abs(one[i]))
	}
	if norm == 0 || worst > 1e-5*norm {
		t.Errorf("gradients differ by %g (largest %g)", worst, norm)
	}
}

// failing is a Batches that fails at its n-th call.
type failing struct {
	Batches
	n   int
	err error
}

func (f *failing) Next(ctx context.Context) (sample.View, error) {
	if f.n--; f.n == 0 {
		return sample.View{}, f.err
	}
	return f.Batches.Next(ctx)
}

func TestRunFailures(t *testing.T) {
	p, cfg := smallSetup(t)
	cfg.Epochs = 2
	boom := errors.New("boom")
	for _, c := range []struct {
		name  string
		set   func(*Config)
		data  func(Data) Data
		world int
		want  []error // per rank
	}{
		{"feat dim", func(c *Config) { c.FeatDim++ }, nil, 1, []error{ErrBatch}},
		{"classes", func(c *Config) { c.Classes = 2 }, nil, 1, []error{ErrBatch}},
		{"hops", func(c *Config) { c.Layers = 3 }, nil, 1, []error{ErrBatch}},
		{"source", nil, func(d Data) Data { d.Train = &failing{d.Train, 3, boom}; return d }, 1, []error{boom}},
		{"eof", nil, func(d Data) Data { d.Train.(*memBatches).epochs = 1; return d }, 1, []error{io.EOF}},
		{"eval", nil, func(d Data) Data { d.Test = &failing{d.Test, 1, boom}; return d }, 1, []error{boom}},
		{"peer", nil, func(d Data) Data { d.Train = &failing{d.Train, 4, boom}; return d }, 2, []error{ErrSync, boom}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfg
			if c.set != nil {
				c.set(&cfg)
			}
			_, _, errs := runRanks(t, cfg, c.world, func(r int) Data {
				d := data(t, p, r, c.world, 64, []int{3, 3})
				if c.data != nil && r == c.world-1 {
					d = c.data(d)
				}
				return d
			})
			for r, err := range errs {
				if !errors.Is(err, c.want[r]) || !strings.HasPrefix(err.Error(), "train: ") {
					t.Errorf("rank %d: %v, want %v", r, err, c.want[r])
				}
			}
		})
	}
}

// TestNonFiniteStopsEveryRank: a NaN feature of a training seed makes
// the loss of the batches that reach it NaN. A rank that computes one
// must fail before the gradient reaches the all-reduce, naming the
// batch, and the others stop with it (ErrSync), every parameter still
// finite: they went NaN on every rank, and Run returned no error.
func TestNonFiniteStopsEveryRank(t *testing.T) {
	g := blockGraph(1, 600, 6, 12, 4, 0.8, 1.0)
	g.feat[5*g.d+2] = float32(math.NaN()) // node 5, a training seed
	p := g.mem(t, sample.F32)
	cfg := DefaultConfig()
	cfg.FeatDim, cfg.Classes = g.d, g.classes
	cfg.Hidden, cfg.Epochs, cfg.Seed, cfg.Dropout = 16, 2, 5, 0
	trs, _, errs := runRanks(t, cfg, 2, func(r int) Data { return data(t, p, r, 2, 32, []int{5, 5}) })
	named := 0
	for r, err := range errs {
		switch {
		case errors.Is(err, ErrInvalid) && strings.Contains(err.Error(), "is NaN (a NaN or Inf feature, or a learning rate too large)"):
			named++
		case errors.Is(err, ErrSync):
		default:
			t.Errorf("rank %d: %v, want ErrInvalid naming the NaN, or ErrSync", r, err)
		}
		for i, x := range trs[r].Params() {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("rank %d: parameter %d is %g", r, i, x)
			}
		}
	}
	if named == 0 {
		t.Errorf("no rank names the NaN: %v", errs)
	}
}

// TestEvaluateNonFinite: a val node with a NaN feature makes the logits
// of the seeds it reaches NaN. The argmax took class 0 for them and
// counted a hit for every label 0 (an untrained model scored 56 of 150,
// no error); evaluation now fails as training does, naming the batch and
// the node.
func TestEvaluateNonFinite(t *testing.T) {
	g := blockGraph(1, 600, 6, 12, 4, 0.8, 1.0)
	for v := 300; v < 450; v++ { // the val nodes of class 0
		if g.labels[v] == 0 {
			g.feat[v*g.d+2] = float32(math.NaN())
		}
	}
	p := g.mem(t, sample.F32)
	cfg := DefaultConfig()
	cfg.FeatDim, cfg.Classes = g.d, g.classes
	cfg.Hidden, cfg.Seed = 16, 5
	tr, err := New(cfg, NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	d := data(t, p, 0, 1, 32, []int{-1, -1})
	c, n, err := tr.Evaluate(context.Background(), d.Val)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "(node 300) is NaN") {
		t.Errorf("evaluation with NaN logits: %d of %d right, err %v; want ErrInvalid naming node 300", c, n, err)
	}
	// Finite features evaluate as before.
	g = blockGraph(1, 600, 6, 12, 4, 0.8, 1.0)
	d = data(t, g.mem(t, sample.F32), 0, 1, 32, []int{-1, -1})
	if c, n, err := tr.Evaluate(context.Background(), d.Val); err != nil || n != 150 || c == 0 {
		t.Errorf("finite features: %d of %d right, err %v", c, n, err)
	}
}

// TestEvaluateDiverged: logits that overflow on finite features (the
// parameters of node train --lr 1e30 after one step) fail evaluation
// naming the learning rate and weight decay: the message blamed "a NaN
// or Inf feature in its neighbourhood", and the features were fine.
func TestEvaluateDiverged(t *testing.T) {
	p, cfg := smallSetup(t)
	tr, err := New(cfg, NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range tr.net.params {
		tr.net.params[i] = 1e30
	}
	d := data(t, p, 0, 1, 32, []int{-1, -1})
	_, _, err = tr.Evaluate(context.Background(), d.Val)
	want := "is +Inf, and the features of its neighbourhood are finite: the parameters diverged (lr or weight_decay too large)"
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "Inf feature") {
		t.Errorf("evaluation with diverged parameters: err %v; want ErrInvalid and %q", err, want)
	}
}

func TestRunCancelled(t *testing.T) {
	p, cfg := smallSetup(t)
	tr, err := New(cfg, NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.Run(ctx, data(t, p, 0, 1, 64, []int{3, 3}), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
}

// TestEarlyStopping: with a step too small to change a prediction, the
// val accuracy never improves on the first evaluation, so the run stops
// Patience evaluations later; evaluations follow EvalEvery.
func TestEarlyStopping(t *testing.T) {
	p, cfg := smallSetup(t)
	cfg.LR, cfg.Epochs, cfg.EvalEvery, cfg.Patience = 1e-12, 20, 2, 3
	tr, err := New(cfg, NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	d := data(t, p, 0, 1, 100, []int{-1, -1}) // the same val batches every epoch
	res, err := tr.Run(context.Background(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	var evaluated []int
	for _, s := range res.Epochs {
		if s.Evaluated {
			evaluated = append(evaluated, s.Epoch)
		}
	}
	if !res.Stopped || res.Best != 1 || len(res.Epochs) != 8 || !slices.Equal(evaluated, []int{1, 3, 5, 7}) {
		t.Fatalf("stopped %v after %d epochs, best %d, evaluated %v; want stopped after 8, best 1, evaluated [1 3 5 7]",
			res.Stopped, len(res.Epochs), res.Best, evaluated)
	}
	if got := d.Val.(*memBatches).epoch; got != 4 {
		t.Errorf("val source read for %d epochs, want 4", got)
	}
}

// TestPatienceAtLastEpoch: patience that runs out at the last epoch ends
// no run early: Result.Stopped said it did, and node train printed
// "stopped early after epoch 7 of --epochs 8" for a run of all 8 epochs.
func TestPatienceAtLastEpoch(t *testing.T) {
	p, cfg := smallSetup(t)
	cfg.LR, cfg.Epochs, cfg.EvalEvery, cfg.Patience = 1e-12, 8, 2, 3
	tr, err := New(cfg, NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background(), data(t, p, 0, 1, 100, []int{-1, -1}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped || res.Best != 1 || len(res.Epochs) != 8 {
		t.Fatalf("stopped %v after %d epochs, best %d; want all 8 epochs, not stopped early, best 1", res.Stopped, len(res.Epochs), res.Best)
	}
}

// TestKeepBest: with KeepBest, BestParams are the parameters as they
// were after the epoch of the best val accuracy (Result.Best), not the
// last epoch's; without it, nil.
func TestKeepBest(t *testing.T) {
	p, cfg := smallSetup(t)
	cfg.Epochs, cfg.EvalEvery, cfg.KeepBest = 30, 1, true
	tr, err := New(cfg, NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	var after [][]float32 // the parameters after each epoch
	res, err := tr.Run(context.Background(), data(t, p, 0, 1, 100, []int{-1, -1}), func(EpochStats) {
		after = append(after, slices.Clone(tr.Params()))
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Best < 0 || !slices.Equal(tr.BestParams(), after[res.Best]) {
		t.Fatalf("best epoch %d: BestParams are not the parameters after it", res.Best)
	}
	// 30 epochs: the val accuracy peaks before the last, so that the last
	// epoch's parameters would fail the test above.
	if last := len(after) - 1; res.Best == last || slices.Equal(after[res.Best], after[last]) {
		t.Fatalf("best epoch %d of %d: the test tells the best epoch from the last by its parameters only when they differ", res.Best, len(after))
	}

	cfg.KeepBest = false
	if tr, err = New(cfg, NoSync{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), data(t, p, 0, 1, 100, []int{-1, -1}), nil); err != nil || tr.BestParams() != nil {
		t.Fatalf("without KeepBest: %v, %d best parameters; want none", err, len(tr.BestParams()))
	}
}

func TestNewErrors(t *testing.T) {
	_, cfg := smallSetup(t)
	if _, err := New(cfg, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil sync: %v", err)
	}
	cfg.Layers = 1
	if _, err := New(cfg, NoSync{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("1 layer: %v", err)
	}
	cfg.Layers = 3
	tr, err := New(cfg, NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	// 3 layers of widths 12→16→16→4: (2·12·16+16) + (2·16·16+16) + (2·16·4+4).
	if want := 400 + 528 + 132; tr.NumParams() != want || tr.SyncLen() != want+statsLen {
		t.Errorf("%d params, sync length %d; want %d, %d", tr.NumParams(), tr.SyncLen(), want, want+statsLen)
	}
	if tr.Config().Layers != 3 {
		t.Errorf("config layers %d", tr.Config().Layers)
	}
}
