package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Triple is one knowledge-graph fact in the partition's (new) ids.
type Triple struct {
	Head, Tail uint64
	Rel        uint32
}

// KGEParams is the parameter server as the KG trainer uses it: kv.Client
// in one process, node/client.KV through a node. Pull appends the rows of
// ids to dst[:0]; Push hands gradients to the owners' optimisers
// (asynchronous tables: applied as they arrive, as DGL-KE does). The ids
// of a Push are distinct rows, each with its gradient summed over the
// step, so a Push may be cut into several by rows.
type KGEParams interface {
	Pull(ctx context.Context, table string, ids []uint64, dst []float32) ([]float32, error)
	Push(ctx context.Context, table string, ids []uint64, grads []float32) error
}

// KGEConfig configures a KG embedding trainer. Defaults (DefaultKGEConfig)
// are DGL-KE's: hidden 400, gamma 12, batches of 1024 with 256 shared
// negatives per chunk, log-sigmoid loss, L3 regularisation 2e-6.
type KGEConfig struct {
	Model  string  // transe_l2, transe_l1, distmult, complex, rotate, rescal, simple, transr
	Hidden int     // hidden size (entity rows are 2×Hidden for complex, rotate and simple; see kgeModel)
	Gamma  float64 // margin of transe, rotate and transr
	// BatchSize positives per step, in chunks of NegSize that share
	// NegSize negative entities (DGL-KE's chunked negative sampling);
	// steps alternate between corrupting tails and heads.
	BatchSize, NegSize int
	// NegDeg adds to a chunk's NegSize uniform negatives the chunk's own
	// positive heads (a step corrupting heads) or tails, n of them for
	// n positives: entities drawn in proportion to their degree, as
	// DGL-KE's --neg_deg_sample. Positive i's own entity among them is
	// masked as DGL-KE masks it: its score is taken as 0, a constant in
	// the loss without a gradient.
	NegDeg bool
	// AdvTemp > 0 weighs each negative by softmax(AdvTemp × score) over its
	// chunk (self-adversarial sampling, DGL-KE's -adv with -a); 0 averages.
	AdvTemp float64
	// RegCoef × Σ|x|^RegNorm over the rows a step gathers, counted as
	// DGL-KE counts them (a relation once per positive triple, a negative
	// once per draw), is added to the loss (DGL-KE's
	// --regularization_coef, _norm); 0 turns it off.
	RegCoef float64
	RegNorm int
	// Epochs of StepsPerEpoch steps each. Every trainer runs the same
	// number of steps (the caller sizes an epoch to the largest part's
	// triples), cycling through its own triples in a fresh order per pass.
	// Epochs 0 trains nothing: Run evaluates the tables as they are
	// (DGL-KE's dglke_eval of a saved model).
	Epochs, StepsPerEpoch int
	Seed                  uint64
	Rank, World           int
	// Entities and Relations size the tables; EntityTable and
	// RelationTable name them (created by the caller, see KGETableDims),
	// and ProjectionTable the third, Relations rows of KGEProjectionDim,
	// of a model that has one (transr's M_r).
	Entities                                    uint64
	Relations                                   int
	EntityTable, RelationTable, ProjectionTable string
	// EvalEvery: evaluate after every N-th epoch and the last (0: only
	// the last). EvalBlock triples are ranked at a time.
	EvalEvery, EvalBlock int
	// EvalNeg > 0 ranks each evaluation triple against EvalNeg distinct
	// entities drawn uniformly for its block (DGL-KE's
	// --neg_sample_size_eval), pulling only their rows, instead of
	// against every entity with the whole entity table in memory; 0 (or
	// at least Entities) ranks against every entity.
	EvalNeg int
	// EvalNegDeg adds to the EvalNeg sampled candidates of a block the
	// block's own true tails (tail ranking) or heads: DGL-KE's
	// --neg_deg_sample_eval. A triple's own entity among them scores 0,
	// as DGL-KE's mask leaves it, and the others are ranked as they score,
	// a true entity as a tie. It needs EvalNeg and raw ranking (KGEData's
	// Filter nil), as DGL-KE refuses it with the filter.
	EvalNegDeg bool
	// Progress, when set, hears of every step ("epoch N": steps done of
	// StepsPerEpoch) and evaluation block ("evaluation": triples ranked of
	// this trainer's share).
	Progress func(stage string, done, total int64)
}

// DefaultKGEConfig is DGL-KE's default setting for TransE (L2).
func DefaultKGEConfig() KGEConfig {
	return KGEConfig{Model: "transe_l2", Hidden: 400, Gamma: 12, BatchSize: 1024, NegSize: 256,
		RegCoef: 2e-6, RegNorm: 3, Epochs: 1, World: 1, EntityTable: "kge.entity", RelationTable: "kge.relation",
		ProjectionTable: "kge.projection", EvalBlock: 64}
}

// Validate reports every bad field, joined.
func (c *KGEConfig) Validate() error {
	var errs []error
	bad := func(f string, a ...any) {
		errs = append(errs, fmt.Errorf("train: kge: "+f+": %w", append(a, ErrInvalid)...))
	}
	if m, err := newKGEModel(c.Model, max(c.Hidden, 1), float32(c.Gamma)); err != nil {
		errs = append(errs, err) // names the model and wraps ErrInvalid
	} else if m.ProjDim() > 0 && (c.ProjectionTable == "" || c.ProjectionTable == c.EntityTable || c.ProjectionTable == c.RelationTable) {
		bad("model %s: projection table %q: want a name apart from the tables %q and %q", c.Model, c.ProjectionTable, c.EntityTable, c.RelationTable)
	}
	if c.Hidden < 1 {
		bad("hidden %d is not positive", c.Hidden)
	}
	if c.BatchSize < 1 || c.NegSize < 1 {
		bad("batch size %d and negatives %d must be positive", c.BatchSize, c.NegSize)
	} else if e := c.StepEntities(); e > math.MaxInt32 {
		bad("batch size %d and negatives %d: a step gathers up to %.0f entities, more than its int32 slots count", c.BatchSize, c.NegSize, e)
	}
	// The models hold gamma as a float32: 1e300 is +Inf there.
	if !finite(float64(float32(c.Gamma))) {
		bad("gamma %g: must be finite (as a float32)", c.Gamma)
	}
	mustBeFinite := func(field string, v float64) bool {
		if !finite(v) {
			bad("%s %g: must be finite", field, v)
			return false
		}
		return true
	}
	advOK := mustBeFinite("adversarial temperature", c.AdvTemp)
	regOK := mustBeFinite("regularisation coefficient", c.RegCoef)
	if advOK && regOK && (c.AdvTemp < 0 || c.RegCoef < 0 || c.RegNorm < 1 && c.RegCoef > 0) {
		bad("adversarial temperature %g, regularisation %g (norm %d): want >= 0 (norm >= 1)", c.AdvTemp, c.RegCoef, c.RegNorm)
	}
	if c.Epochs < 0 || c.StepsPerEpoch < 1 {
		bad("%d epochs of %d steps: want epochs >= 0 and steps >= 1", c.Epochs, c.StepsPerEpoch)
	}
	if c.World < 1 || c.Rank < 0 || c.Rank >= c.World {
		bad("rank %d of world %d", c.Rank, c.World)
	}
	if c.Entities < 2 || c.Relations < 1 {
		bad("%d entities and %d relations: want at least 2 and 1", c.Entities, c.Relations)
	}
	if c.EntityTable == "" || c.RelationTable == "" || c.EntityTable == c.RelationTable {
		bad("tables %q and %q: want two distinct names", c.EntityTable, c.RelationTable)
	}
	if c.EvalEvery < 0 || c.EvalBlock < 1 || c.EvalNeg < 0 {
		bad("eval every %d epochs in blocks of %d against %d negatives: want >= 0, >= 1 and >= 0", c.EvalEvery, c.EvalBlock, c.EvalNeg)
	}
	if c.EvalNegDeg && (c.EvalNeg < 1 || uint64(c.EvalNeg) >= c.Entities) {
		bad("degree-proportional evaluation negatives beside %d sampled ones of %d entities: they need sampled candidates (EvalNeg from 1 to the entities less one)", c.EvalNeg, c.Entities)
	}
	return errors.Join(errs...)
}

// KGETableDims are the row widths of the entity and relation tables of
// the model cfg names.
func KGETableDims(cfg KGEConfig) (ent, rel int, err error) {
	m, err := newKGEModel(cfg.Model, cfg.Hidden, float32(cfg.Gamma))
	if err != nil {
		return 0, 0, err
	}
	return m.EntDim(), m.RelDim() - m.ProjDim(), nil
}

// KGEProjectionDim is the row width of the projection table of the model
// cfg names: Hidden² for transr (its M_r, DGL-KE's projection_emb, a
// table of its own there too), 0 for a model without one or that
// Validate refuses. The caller creates it beside the other two, with
// KGEProjectionInitScale and the same optimiser.
func KGEProjectionDim(cfg KGEConfig) int {
	m, err := newKGEModel(cfg.Model, cfg.Hidden, float32(cfg.Gamma))
	if err != nil {
		return 0
	}
	return m.ProjDim()
}

// KGEProjectionInitScale bounds the projection table's uniform
// initialisation: DGL-KE's TransRScore.reset_parameters,
// projection_emb.init(1.0), where entity and relation rows start within
// ±(gamma+2)/hidden. The regulariser leaves the table out, as DGL-KE's
// (KEModel.forward's norms are of the entity and relation rows alone).
const KGEProjectionInitScale = 1

// KGEData is what a trainer reads: its own training triples, and for
// evaluation the triples to rank (every trainer the same list; each ranks
// its share) and the filter of known facts (nil: raw ranks).
type KGEData struct {
	Train  []Triple
	Eval   []Triple
	Filter *KGEFilter
}

// KGEEpochStats is one epoch over all trainers.
type KGEEpochStats struct {
	Epoch     int
	Loss      float64 // mean over every trainer's steps
	Steps     int     // this trainer's
	Triples   int64   // positives trained on, all trainers
	TrainTime time.Duration
	PullTime  time.Duration // of TrainTime, this trainer's waits on pulls and pushes
	Evaluated bool
	Eval      KGEMetrics
	EvalTime  time.Duration
}

// TriplesPerSec is the positives trained per second over all trainers.
func (s KGEEpochStats) TriplesPerSec() float64 {
	return float64(s.Triples) / max(s.TrainTime.Seconds(), 1e-9)
}

// KGE trains knowledge-graph embeddings held in a parameter server. It
// belongs to one goroutine.
type KGE struct {
	cfg    KGEConfig
	model  kgeModel
	params KGEParams
	sync   Sync
	rng    *rand.Rand
	step   int // sync rounds so far
	st     kgeStep
}

// NewKGE checks cfg and builds a trainer on params (whose tables the
// caller created with KGETableDims's widths) and sync (the job's
// all-reduce, for epoch losses and evaluation counts).
func NewKGE(cfg KGEConfig, params KGEParams, sync Sync) (*KGE, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newKGEModel(cfg.Model, cfg.Hidden, float32(cfg.Gamma))
	if err != nil {
		return nil, err
	}
	return &KGE{cfg: cfg, model: m, params: params, sync: sync,
		rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Rank)+0x6b6765))}, nil
}

// KGESyncLen is the length of the vectors a KGE trainer all-reduces
// (size the Sync's table with it): once per epoch the loss sum and steps
// (the third value, once the positives, is left zero: every trainer counts
// them itself), and after each evaluation three zeros, then the metric sums
// as digits (see KGEMetrics.vector). Its 51 values fit one row of
// node/client.Sync's table (SyncDim 256), the one row they took as 9
// values: a job's sync table keeps its spec.
const KGESyncLen = 3 + kgeMetricsLen

// SyncLayout numbers the layout of what a job's trainers exchange in the
// rounds of its sync table: the KGE metric sums' encoding (base-256
// digits since layout 2: float32 sums before), the rounds of a job's end.
// A build whose rounds an earlier one would misread has a new number, and
// the trainers of a job compare it before their first step, so that
// trainers of two builds are refused at once, not decoded wrongly.
const SyncLayout = 2

func (k *KGE) progress(stage string, done, total int64) {
	if k.cfg.Progress != nil {
		k.cfg.Progress(stage, done, total)
	}
}

// allReduce sums v over the trainers (Sync averages; the trainer count
// turns means back into sums) in the next round.
func (k *KGE) allReduce(ctx context.Context, v []float32) error {
	if err := k.allReduceMean(ctx, v); err != nil {
		return err
	}
	w := float32(k.cfg.World)
	for i := range v {
		v[i] *= w
	}
	return nil
}

// allReduceMean replaces v with its mean over the trainers in the next
// round.
func (k *KGE) allReduceMean(ctx context.Context, v []float32) error {
	if err := k.sync.AllReduce(ctx, k.step, v); err != nil {
		return err
	}
	k.step++
	return nil
}

// checkTriples reports the first triple of ts that names an entity or a
// relation outside the tables.
func (k *KGE) checkTriples(ts []Triple) error {
	for i, t := range ts {
		switch {
		case t.Head >= k.cfg.Entities:
			return fmt.Errorf("triple %d: head %d outside the %d entities: %w", i, t.Head, k.cfg.Entities, ErrInvalid)
		case t.Tail >= k.cfg.Entities:
			return fmt.Errorf("triple %d: tail %d outside the %d entities: %w", i, t.Tail, k.cfg.Entities, ErrInvalid)
		case int64(t.Rel) >= int64(k.cfg.Relations):
			return fmt.Errorf("triple %d: relation %d outside the %d relations: %w", i, t.Rel, k.cfg.Relations, ErrInvalid)
		}
	}
	return nil
}

// Run trains cfg.Epochs epochs on data.Train, evaluating as cfg says when
// data.Eval is not empty, and calls report after every epoch. With
// cfg.Epochs 0 it trains nothing and evaluates the tables once, reported
// as epoch 0 of no step. All trainers must call Run with the same Eval
// list and Filter presence. An evaluation triple naming an entity or
// relation outside the tables is an error (ErrInvalid, naming it) before
// the first step.
func (k *KGE) Run(ctx context.Context, data KGEData, report func(KGEEpochStats)) ([]KGEEpochStats, error) {
	if k.cfg.Epochs > 0 && len(data.Train) == 0 {
		return nil, fmt.Errorf("train: kge: rank %d has no training triples: %w", k.cfg.Rank, ErrInvalid)
	}
	if k.cfg.EvalNegDeg && data.Filter != nil && len(data.Eval) > 0 {
		return nil, fmt.Errorf("train: kge: degree-proportional evaluation negatives are the block's true entities, which filtered ranking would leave out: rank raw (DGL-KE refuses --neg_deg_sample_eval with its filter): %w", ErrInvalid)
	}
	// Checked before training, not when the first evaluation would index
	// the tables with them (a panic, after the epochs it ends).
	if err := k.checkTriples(data.Eval); err != nil {
		return nil, fmt.Errorf("train: kge: evaluation %w", err)
	}
	if k.cfg.Epochs == 0 {
		st := KGEEpochStats{}
		if len(data.Eval) > 0 {
			if err := k.evalInto(ctx, data, &st, make([]float32, KGESyncLen)); err != nil {
				return nil, fmt.Errorf("train: kge: evaluation: %w", err)
			}
		}
		if report != nil {
			report(st)
		}
		return []KGEEpochStats{st}, nil
	}
	order := make([]int32, len(data.Train))
	pos := len(order) // next position in order; a pass reshuffles
	var all []KGEEpochStats
	for epoch := 1; epoch <= k.cfg.Epochs; epoch++ {
		st := KGEEpochStats{Epoch: epoch}
		stage := fmt.Sprintf("epoch %d", epoch)
		var lossSum float64
		start := time.Now()
		for s := range k.cfg.StepsPerEpoch {
			if err := ctx.Err(); err != nil {
				return all, err
			}
			batch := k.st.batch[:0]
			for len(batch) < k.cfg.BatchSize {
				if pos == len(order) {
					for i := range order {
						order[i] = int32(i)
					}
					k.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
					pos = 0
				}
				batch = append(batch, data.Train[order[pos]])
				pos++
			}
			k.st.batch = batch
			loss, pulled, err := k.trainStep(ctx, batch, s%2 == 1)
			if err != nil {
				return all, fmt.Errorf("train: kge: epoch %d step %d: %w", epoch, s, err)
			}
			lossSum += loss
			st.PullTime += pulled
			k.progress(stage, int64(s+1), int64(k.cfg.StepsPerEpoch))
		}
		st.TrainTime, st.Steps = time.Since(start), k.cfg.StepsPerEpoch
		evalNow := len(data.Eval) > 0 && (epoch == k.cfg.Epochs || k.cfg.EvalEvery > 0 && epoch%k.cfg.EvalEvery == 0)
		// The loss round is also the barrier after which every trainer's
		// pushes of the epoch are in: evaluation then reads one model.
		vec := make([]float32, KGESyncLen)
		vec[0], vec[1] = float32(lossSum), float32(st.Steps)
		if err := k.allReduce(ctx, vec); err != nil {
			return all, fmt.Errorf("train: kge: epoch %d: %w", epoch, err)
		}
		st.Loss = float64(vec[0]) / math.Max(float64(vec[1]), 1)
		// Every trainer runs the job's steps of the job's batch size (both
		// agreed before the first step): the count is theirs multiplied,
		// exact, where summed through the float32 round it came out one
		// or more low past 2^24 triples an epoch (Wikidata5M's 20 M).
		st.Triples = int64(st.Steps) * int64(k.cfg.BatchSize) * int64(k.cfg.World)
		if evalNow {
			if err := k.evalInto(ctx, data, &st, vec); err != nil {
				return all, fmt.Errorf("train: kge: evaluation after epoch %d: %w", epoch, err)
			}
		}
		all = append(all, st)
		if report != nil {
			report(st)
		}
	}
	return all, nil
}

// evalInto ranks data.Eval, this trainer's share, merges every trainer's
// metrics through the sync table (vec, KGESyncLen long, is its scratch)
// and sets st's evaluation.
func (k *KGE) evalInto(ctx context.Context, data KGEData, st *KGEEpochStats, vec []float32) error {
	t := time.Now()
	m, err := k.evaluate(ctx, data.Eval, data.Filter)
	if err != nil {
		return err
	}
	if st.Eval, err = k.mergeMetrics(ctx, m, vec); err != nil {
		return err
	}
	st.Evaluated, st.EvalTime = true, time.Since(t)
	return nil
}
