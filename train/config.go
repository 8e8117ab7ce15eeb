package train

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"
)

// Config is the GraphSAGE trainer's configuration. Start from
// DefaultConfig and set FeatDim and Classes (the graph's) at least.
// Every trainer of a job must use the same Config but for Rank.
type Config struct {
	FeatDim int `toml:"-"` // input feature columns (the graph's feat dim)
	Classes int `toml:"-"` // output classes; labels lie in [0, Classes)

	Layers       int     `toml:"layers"`        // SAGE layers: 2 or 3; batches need at least as many hops
	Hidden       int     `toml:"hidden"`        // width of the hidden layers
	Dropout      float64 `toml:"dropout"`       // on the input of every layer but the first, training only
	InputDropout float64 `toml:"input_dropout"` // on the features (the first layer's input), training only
	Normalize    bool    `toml:"normalize"`     // divide every feature row by its sum (Planetoid bag-of-words)

	LR          float64 `toml:"lr"`           // Adam step size
	WeightDecay float64 `toml:"weight_decay"` // L2 added to the gradient (PyTorch Adam's weight_decay)
	AdamW       bool    `toml:"adamw"`        // decouple weight decay from the moments (AdamW)
	Beta1       float64 `toml:"beta1"`
	Beta2       float64 `toml:"beta2"`
	Eps         float64 `toml:"eps"`

	Epochs    int `toml:"epochs"`
	EvalEvery int `toml:"eval_every"` // evaluate after every EvalEvery-th epoch and after the last (0: the last only, as KGEConfig's)
	Patience  int `toml:"patience"`   // stop after this many evaluations without a better val accuracy; 0 = never
	// KeepBest keeps a copy of the parameters of the epoch of the best
	// val accuracy, Result.Best's (Trainer.BestParams), as DGL's and
	// PyG's examples keep their best model for saving.
	KeepBest bool `toml:"keep_best"`

	Seed    uint64 `toml:"seed"`    // parameter initialisation (same on every trainer) and dropout
	Rank    int    `toml:"-"`       // this trainer's rank: keys its dropout masks
	Threads int    `toml:"threads"` // goroutines for aggregation; 0 = GOMAXPROCS

	// Now is the clock for throughput figures; nil means time.Now.
	Now func() time.Time `toml:"-"`
}

// DefaultConfig is a 2-layer GraphSAGE of width 128 with the optimiser
// settings of the PyG Planetoid examples.
func DefaultConfig() Config {
	return Config{
		Layers: 2, Hidden: 128, Dropout: 0.5,
		LR: 0.01, WeightDecay: 5e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8,
		Epochs: 100, EvalEvery: 1,
	}
}

// Validate reports every problem of c, joined, each naming its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.FeatDim < 1 {
		bad("feat_dim %d: want ≥ 1", c.FeatDim)
	}
	if c.Classes < 2 {
		bad("classes %d: want ≥ 2", c.Classes)
	}
	if c.Layers < 2 || c.Layers > 3 {
		bad("layers %d: want 2 or 3", c.Layers)
	}
	if c.Hidden < 1 {
		bad("hidden %d: want ≥ 1", c.Hidden)
	}
	for _, p := range []struct {
		key string
		v   float64
	}{{"dropout", c.Dropout}, {"input_dropout", c.InputDropout}} {
		if !(p.v >= 0 && p.v < 1) {
			bad("%s %g: want [0, 1)", p.key, p.v)
		}
	}
	if !(c.LR > 0) || math.IsInf(c.LR, 0) {
		bad("lr %g: want > 0", c.LR)
	}
	if !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 0) {
		bad("weight_decay %g: want ≥ 0", c.WeightDecay)
	}
	if !(c.Beta1 >= 0 && c.Beta1 < 1) {
		bad("beta1 %g: want [0, 1)", c.Beta1)
	}
	if !(c.Beta2 >= 0 && c.Beta2 < 1) {
		bad("beta2 %g: want [0, 1)", c.Beta2)
	}
	if !(c.Eps > 0) {
		bad("eps %g: want > 0", c.Eps)
	}
	if c.Epochs < 1 {
		bad("epochs %d: want ≥ 1", c.Epochs)
	}
	if c.EvalEvery < 0 {
		bad("eval_every %d: want ≥ 0 (0: after the last epoch only)", c.EvalEvery)
	}
	if c.Patience < 0 {
		bad("patience %d: want ≥ 0", c.Patience)
	}
	if c.Rank < 0 {
		bad("rank %d: want ≥ 0", c.Rank)
	}
	if c.Threads < 0 {
		bad("threads %d: want ≥ 0", c.Threads)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("train: config: %w: %w", err, ErrInvalid)
	}
	return nil
}

// Evaluates reports whether the epoch (0-based) ends with an evaluation on
// the val and test batches: every EvalEvery-th and the last; with
// EvalEvery 0 the last only, as for KGEConfig (0 meant every epoch here,
// the opposite of node kge --eval-every 0).
func (c *Config) Evaluates(epoch int) bool {
	return c.EvalEvery > 0 && (epoch+1)%c.EvalEvery == 0 || epoch == c.Epochs-1
}

// Evaluations is how many evaluations a run of Epochs epochs makes: the
// number of epochs to open the val and test loaders with.
func (c *Config) Evaluations() int {
	n := 0
	for e := range c.Epochs {
		if c.Evaluates(e) {
			n++
		}
	}
	return n
}

// SyncLen is what Trainer.SyncLen will be for c, before New allocates
// the model: the parameters (per layer W_l and W_r, din × dout, and b)
// plus the statistics. A caller checks it against what its Sync carries
// (client.MaxSyncLen): a width off by digits made New's allocation crash
// the process. It saturates at math.MaxInt instead of overflowing.
func (c *Config) SyncLen() int {
	n := float64(statsLen)
	d := c.dims()
	for l := range len(d) - 1 {
		din, dout := float64(max(d[l], 0)), float64(max(d[l+1], 0))
		n += 2*din*dout + dout
	}
	if n >= 1<<53 { // exact below; far beyond any memory above
		return math.MaxInt
	}
	return int(n)
}

// dims are the layer widths: FeatDim, Hidden × (Layers−1), Classes.
func (c *Config) dims() []int {
	d := []int{c.FeatDim}
	for range c.Layers - 1 {
		d = append(d, c.Hidden)
	}
	return append(d, c.Classes)
}

func (c *Config) threads() int {
	if c.Threads > 0 {
		return c.Threads
	}
	return runtime.GOMAXPROCS(0)
}

func (c *Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
