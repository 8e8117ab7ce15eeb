package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"graphnode/csr"
	"graphnode/kv"
	"graphnode/node/client"
	"graphnode/node/control"
	"graphnode/partition"
	"graphnode/shm"
	"graphnode/train"
)

// kgeFlags are `node kge`'s settings.
type kgeFlags struct {
	socket, parts string
	part          int
	lr            float64
	eval          string
	evalSample    int
	filter        bool
	prefix        string
	export        string
	jsonOut, save bool
	cfg           train.KGEConfig
	// memory is the machine's memory and swap in bytes (0: unknown).
	memory uint64
}

// kgeLine is one epoch as `node kge --json` prints it.
type kgeLine struct {
	Epoch       int     `json:"epoch"`
	Loss        float64 `json:"loss"`
	Steps       int     `json:"steps"`
	Triples     int64   `json:"triples"`
	TrainS      float64 `json:"train_s"`
	PullS       float64 `json:"pull_s"` // of train_s: this trainer's pulls and pushes
	TriplesPerS float64 `json:"triples_per_s"`
	Evaluated   bool    `json:"evaluated"`
	*KGEEval            // nil when the epoch was not evaluated
}

// KGEEval is an evaluated epoch's metrics. Every field is written, a zero
// one too: with omitempty, a Hits@1 of 0 (or raw ranks) left its key out
// of the line and of config.json. Exported: encoding/json fills no
// embedded pointer to an unexported struct, so a reader of the lines
// (the tests) lost the metrics.
type KGEEval struct {
	Ranks        int     `json:"ranks"`
	MRR          float64 `json:"mrr"`
	MR           float64 `json:"mr"`
	Hits1        float64 `json:"hits1"`
	Hits3        float64 `json:"hits3"`
	Hits10       float64 `json:"hits10"`
	EvalS        float64 `json:"eval_s"`
	EvalFiltered bool    `json:"eval_filtered"`
}

// newKGELine is the line of epoch st; filtered says how it ranked.
func newKGELine(st train.KGEEpochStats, filtered bool) kgeLine {
	l := kgeLine{Epoch: st.Epoch, Loss: st.Loss, Steps: st.Steps, Triples: st.Triples, TrainS: st.TrainTime.Seconds(),
		PullS: st.PullTime.Seconds(), TriplesPerS: st.TriplesPerSec(), Evaluated: st.Evaluated}
	if st.Evaluated {
		e := st.Eval
		l.KGEEval = &KGEEval{Ranks: e.Ranks, MRR: e.MRR, MR: e.MR, Hits1: e.Hits1, Hits3: e.Hits3, Hits10: e.Hits10,
			EvalS: st.EvalTime.Seconds(), EvalFiltered: filtered}
	}
	return l
}

// runKGE is `node kge`: DGL-KE's job on the cluster. Entity and relation
// embeddings live in asynchronous kv tables with server-side Adagrad
// (entities sharded by the partition book, so a part's own entities are
// local); each host's trainer trains on the triples its part stores (a
// triple lives with its head) and pulls and pushes through its node.
func runKGE(ctx context.Context, a *app, args []string) error {
	f := kgeFlags{cfg: train.DefaultKGEConfig()}
	fs := newFlagSet(a, "kge", "--socket PATH --parts DIR [flags]")
	fs.StringVar(&f.socket, "socket", "", "control socket of this host's node run (required)")
	fs.StringVar(&f.parts, "parts", "", "the partition directory of the knowledge graph (node partition --format kg); this host's part is read from it (required)")
	fs.IntVar(&f.part, "part", -1, "the part whose triples to train on (-1: the part the node serves; required on a client node)")
	fs.IntVar(&f.cfg.Rank, "rank", 0, "this trainer's rank: the part it trains (one trainer per part)")
	fs.IntVar(&f.cfg.World, "world-size", 1, "trainers in the job: the number of parts")
	fs.StringVar(&f.cfg.Model, "model", f.cfg.Model, "score function: transe_l2, transe_l1, distmult, complex, rotate, rescal, simple, transr (or as DGL-KE spells them: TransE_l2 or TransE, TransE_l1, DistMult, ComplEx, RotatE, RESCAL, SimplE, TransR)")
	fs.IntVar(&f.cfg.Hidden, "hidden", f.cfg.Hidden, "embedding size (entity rows are twice as wide for complex, rotate and simple, relation rows for complex and simple; rescal's relation rows are hidden² wide, and transr keeps a hidden × hidden projection per relation in <prefix>.projection)")
	fs.Float64Var(&f.cfg.Gamma, "gamma", f.cfg.Gamma, "margin of transe, rotate and transr; also sets the initial range ±(gamma+2)/hidden")
	fs.Float64Var(&f.lr, "lr", 0.1, "Adagrad learning rate, applied by the tables' owners (dglke_train's default is 0.01)")
	fs.IntVar(&f.cfg.BatchSize, "batch-size", f.cfg.BatchSize, "positive triples per step")
	fs.IntVar(&f.cfg.NegSize, "neg-size", f.cfg.NegSize, "negative entities per chunk of this many positives, uniform over all entities; steps alternate head and tail corruption")
	fs.BoolVar(&f.cfg.NegDeg, "neg-deg", false, "also use each chunk's own heads (tails) as its negatives, entities in proportion to their degree, as DGL-KE's --neg_deg_sample (a positive's own entity is masked as DGL-KE masks it)")
	fs.Float64Var(&f.cfg.AdvTemp, "adv-temp", 0, "self-adversarial negative weighting with this temperature (0: off)")
	fs.Float64Var(&f.cfg.RegCoef, "reg-coef", f.cfg.RegCoef, "coefficient of the Lp regulariser over the rows of each step (0: off)")
	fs.IntVar(&f.cfg.RegNorm, "reg-norm", f.cfg.RegNorm, "p of the regulariser")
	fs.IntVar(&f.cfg.Epochs, "epochs", f.cfg.Epochs, "epochs; an epoch is as many steps as the largest part needs to go through its triples once (0: train nothing, evaluate and --export the tables as they are, as dglke_eval; refused on tables no job trained)")
	fs.IntVar(&f.cfg.StepsPerEpoch, "steps-per-epoch", 0, "steps per epoch (0: the largest part's triples / batch size, rounded up)")
	fs.Uint64Var(&f.cfg.Seed, "seed", 1, "seed of the initial embeddings, the order and the negatives")
	fs.StringVar(&f.eval, "eval", "test", "triples to rank after training: test, valid or none")
	fs.IntVar(&f.evalSample, "eval-sample", 0, "rank this many triples drawn from --seed (0: all)")
	fs.IntVar(&f.cfg.EvalNeg, "eval-neg", 0, "rank each triple against this many distinct entities drawn uniformly per block, pulling only their rows, as DGL-KE's --neg_sample_size_eval (0, or as many as the entities: against every entity, with the whole entity table in each trainer)")
	fs.IntVar(&f.cfg.EvalBlock, "eval-batch", f.cfg.EvalBlock, "triples ranked at a time, as DGL-KE's --batch_size_eval: each block shares its --eval-neg draw, and under --eval-neg-deg its true entities are the block's")
	fs.BoolVar(&f.cfg.EvalNegDeg, "eval-neg-deg", false, "add each block's true tails (heads) to the --eval-neg candidates, as DGL-KE's --neg_deg_sample_eval; raw ranks only (--eval-filter=false), as there")
	fs.IntVar(&f.cfg.EvalEvery, "eval-every", 0, "evaluate after every N-th epoch and after the last (0: after the last only, as node train)")
	fs.BoolVar(&f.filter, "eval-filter", true, "filtered ranks (other known facts are not candidates; needs every part's triples under --parts); false: raw ranks")
	fs.StringVar(&f.prefix, "table-prefix", "kge", "kv tables <prefix>.entity, <prefix>.relation, <prefix>.projection (transr) and <prefix>.sync (the same on every trainer of the job)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object per epoch instead of a table")
	fs.BoolVar(&f.save, "save", false, "checkpoint every kv table (kv_save) after training (rank 0, once every trainer's pushes are in, and every rank fails when it fails; give it to every trainer of the job, or to none)")
	fs.StringVar(&f.export, "export", "", "rank 0 writes entity.npy (rows by the input's entity ids), relation.npy, for transr projection.npy, and config.json into this directory after training, the arrays also under DGL-KE's names <graph>_<Model>_entity.npy / _relation.npy (TransR's projection as <graph>_TransRprojection.npy) (needs orig_ids.bin under --parts; give it to every trainer of the job, or to none)")
	if hint := dglkeFlagHint(fs, args); hint != "" {
		fmt.Fprintf(a.stderr, "node kge: %s; node kge --help lists its flags\n", hint)
		return errUsage
	}
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	f.cfg.Model = kgeModelName(f.cfg.Model)
	if f.socket == "" || f.parts == "" {
		fmt.Fprintln(a.stderr, "node kge: --socket and --parts are required")
		fs.Usage()
		return errUsage
	}
	f.memory = a.memory()
	if err := f.check(f.memory); err != nil {
		fmt.Fprintf(a.stderr, "node kge: %v\n", err)
		return errUsage
	}
	return f.run(ctx, a.stdout, newProgress(a.stderr))
}

// dglkeFlags maps dglke_train's flags that node kge spells otherwise (or
// has no match for) to what it takes; the flags of the same name (--lr,
// --gamma) need none.
var dglkeFlags = map[string]string{
	"model_name":               "--model",
	"hidden_dim":               "--hidden",
	"max_step":                 "--epochs and --steps-per-epoch",
	"batch_size":               "--batch-size",
	"neg_sample_size":          "--neg-size",
	"neg_adversarial_sampling": "--adv-temp (self-adversarial weighting at a temperature > 0)",
	"adv":                      "--adv-temp (self-adversarial weighting at a temperature > 0)",
	"adversarial_temperature":  "--adv-temp",
	"a":                        "--adv-temp",
	"regularization_coef":      "--reg-coef",
	"rc":                       "--reg-coef",
	"regularization_norm":      "--reg-norm",
	"rn":                       "--reg-norm",
	"g":                        "--gamma",
	"data_path":                "--parts (a directory of node partition --format kg)",
	"dataset":                  "--parts (a directory of node partition --format kg)",
	"save_path":                "--export (the embeddings as .npy) or --save (a kv checkpoint)",
	"eval_interval":            "--eval-every (in epochs)",
	"test":                     "--eval test",
	"valid":                    "--eval valid",
	"no_eval_filter":           "--eval-filter=false",
	"eval_percent":             "--eval-sample (a count of triples)",
	"neg_sample_size_eval":     "--eval-neg",
	"batch_size_eval":          "--eval-batch",
	"neg_deg_sample":           "--neg-deg",
	"neg_deg_sample_eval":      "--eval-neg-deg (with --eval-neg N and --eval-filter=false)",
	"num_proc":                 "one node kge per part (--rank, --world-size)",
	"save_emb":                 "--export",
	"format":                   "node partition --format kg (DGL-KE's built-in layout: entities.dict, relations.dict, train.txt, …)",
	"data_files":               "node partition --format kg --input DIR",
	"log_interval":             "one line per epoch (--json for JSON)",
	"num_thread":               "GOMAXPROCS (every core by default)",
}

// dglkeNoFlags are dglke_train's flags that node kge has no flag for,
// and why, so that a pasted dglke_train command says what each means
// here rather than only "flag provided but not defined".
var dglkeNoFlags = map[string]string{
	"double_ent":          "the rows' layout follows --model (ComplEx, RotatE and SimplE double the entity rows)",
	"de":                  "the rows' layout follows --model (ComplEx, RotatE and SimplE double the entity rows)",
	"double_rel":          "the rows' layout follows --model (ComplEx and SimplE double the relation rows)",
	"dr":                  "the rows' layout follows --model (ComplEx and SimplE double the relation rows)",
	"gpu":                 "it trains on the CPUs (the GPU tier is not built)",
	"mix_cpu_gpu":         "it trains on the CPUs (the GPU tier is not built)",
	"async_update":        "pushes are asynchronous already: the owning node applies them as they arrive (Hogwild)",
	"rel_part":            "the relations are one kv table, pulled per step as the entities are",
	"soft_rel_part":       "the relations are one kv table, pulled per step as the entities are",
	"force_sync_interval": "the trainers meet once per epoch (and at each evaluation)",
	"no_save_emb":         "nothing is written without --export or --save",
	"delimiter":           "node partition --format kg reads tab-separated triples",
}

// dglkeFlagHint says which flag of node kge a dglke_train flag in args
// is, for the first one fs does not define; "" when there is none.
func dglkeFlagHint(fs *flag.FlagSet, args []string) string {
	for _, a := range args {
		if a == "--" {
			return ""
		}
		given, _, _ := strings.Cut(a, "=")
		name := strings.TrimLeft(given, "-")
		if !strings.HasPrefix(a, "-") || fs.Lookup(name) != nil {
			continue
		}
		if ours, ok := dglkeFlags[name]; ok {
			return fmt.Sprintf("%s is dglke_train's flag: node kge takes %s", given, ours)
		}
		if why, ok := dglkeNoFlags[name]; ok {
			return fmt.Sprintf("%s is dglke_train's flag: node kge has none, %s", given, why)
		}
	}
	return ""
}

// check reports every bad flag before anything connects or is read: they
// were found only after the wait for the node and the read of every
// part's triples (--eval, the model's settings), or never (--eval-sample
// -3 ranked every triple, --lr 0 trained nothing, a negative --lr away
// from the facts). have is the machine's memory and swap (0: unknown),
// which a step must fit.
func (f *kgeFlags) check(have uint64) error {
	var errs []error
	bad := func(format string, v ...any) { errs = append(errs, fmt.Errorf(format, v...)) }
	switch f.eval {
	case "test", "valid", "none":
	default:
		bad("--eval %q: want test, valid or none", f.eval)
	}
	if f.evalSample < 0 {
		bad("--eval-sample %d: want ≥ 0 (0: all)", f.evalSample)
	}
	if f.part < -1 {
		bad("--part %d: want a part index (-1: the node's)", f.part)
	}
	// The tables' owners hold the rate as a float32.
	if lr := float64(float32(f.lr)); !(lr > 0) || math.IsInf(lr, 0) {
		bad("--lr %g: want > 0 and finite as a float32", f.lr)
	}
	switch {
	case f.cfg.Epochs < 0:
		bad("--epochs %d: want ≥ 0 (0: evaluate or export the tables as they are)", f.cfg.Epochs)
	case f.cfg.Epochs == 0 && f.eval == "none" && f.export == "" && !f.save:
		bad("--epochs 0 --eval none: nothing to do (with --epochs 0 give --eval, --export or --save)")
	}
	if f.cfg.StepsPerEpoch < 0 {
		bad("--steps-per-epoch %d: want ≥ 0 (0: the largest part's triples / batch size)", f.cfg.StepsPerEpoch)
	}
	// Rows start uniform in ±(gamma+2)/hidden: at gamma -2 every row is 0
	// and no gradient of any model moves it (the job trained nothing),
	// below it the tables refused the range only once the triples were
	// read. (A gamma float32 cannot hold is train's to refuse.)
	if g := float64(float32(f.cfg.Gamma)); !math.IsNaN(g) && !math.IsInf(g, 0) && !(kv.KGEInitScale(float32(g), max(f.cfg.Hidden, 1)) > 0) {
		bad("--gamma %g: want > -2 (the initial range is ±(gamma+2)/hidden)", f.cfg.Gamma)
	}
	tables := []string{f.prefix + ".entity", f.prefix + ".relation", f.prefix + ".sync"}
	if hasProjection(f.cfg.Model) {
		tables = append(tables, f.kgeProjectionTable())
	}
	for _, table := range tables {
		if !validTableName(table) {
			bad("--table-prefix %q: the tables' names (%q) %s", f.prefix, table, tableNameRule())
			break
		}
	}
	// train.KGEConfig.Validate names none of these flags ("batch size 0
	// and negatives 256", "rank 0 of world 0").
	c := &f.cfg
	if c.BatchSize < 1 {
		bad("--batch-size %d: want ≥ 1", c.BatchSize)
	}
	if c.NegSize < 1 {
		bad("--neg-size %d: want ≥ 1", c.NegSize)
	}
	// The trainers meet in a kv synchronous step (the sync table), of at
	// most kv.MaxWorld; more was refused once every triple was read.
	if c.World < 1 {
		bad("--world-size %d: want ≥ 1 (one trainer per part)", c.World)
	} else if c.World > kv.MaxWorld {
		bad("--world-size %d: want at most %d (the trainers of a kv synchronous step)", c.World, kv.MaxWorld)
	} else if c.Rank < 0 || c.Rank >= c.World {
		bad("--rank %d: want 0 to %d (--world-size %d)", c.Rank, c.World-1, c.World)
	}
	if c.EvalEvery < 0 {
		bad("--eval-every %d: want ≥ 0 (0: after the last epoch only)", c.EvalEvery)
	}
	if c.EvalBlock < 1 {
		bad("--eval-batch %d: want ≥ 1", c.EvalBlock)
	}
	if c.EvalNeg < 0 {
		bad("--eval-neg %d: want ≥ 0 (0: every entity)", c.EvalNeg)
	}
	if c.EvalNegDeg {
		if c.EvalNeg < 1 {
			bad("--eval-neg-deg adds the block's true entities to sampled candidates: give --eval-neg N too")
		}
		if f.filter && f.eval != "none" {
			bad("--eval-neg-deg ranks raw, as DGL-KE refuses --neg_deg_sample_eval with its filter: pass --eval-filter=false")
		}
	}
	if c.Hidden < 1 {
		bad("--hidden %d: want ≥ 1", c.Hidden)
	}
	if c.AdvTemp < 0 {
		bad("--adv-temp %g: want ≥ 0 (0: off)", c.AdvTemp)
	}
	if c.RegCoef < 0 {
		bad("--reg-coef %g: want ≥ 0 (0: off)", c.RegCoef)
	} else if c.RegCoef > 0 && c.RegNorm < 1 {
		bad("--reg-norm %d: want ≥ 1", c.RegNorm)
	}
	// The graph's sizes are the partition's, read later; the flags
	// checked above by their names are left out of Validate.
	cfg := f.cfg
	cfg.Entities, cfg.Relations = 2, 1
	cfg.EntityTable, cfg.RelationTable, cfg.ProjectionTable = f.prefix+".entity", f.prefix+".relation", f.kgeProjectionTable()
	cfg.Epochs, cfg.StepsPerEpoch = max(cfg.Epochs, 0), max(cfg.StepsPerEpoch, 1)
	cfg.BatchSize, cfg.NegSize, cfg.Hidden, cfg.EvalEvery = max(cfg.BatchSize, 1), max(cfg.NegSize, 1), max(cfg.Hidden, 1), max(cfg.EvalEvery, 0)
	cfg.EvalBlock, cfg.EvalNeg = max(cfg.EvalBlock, 1), max(cfg.EvalNeg, 0)
	cfg.World, cfg.Rank = 1, 0
	cfg.EvalNegDeg = false // checked above; its bound is the graph's entities
	cfg.AdvTemp, cfg.RegCoef, cfg.RegNorm = max(cfg.AdvTemp, 0), max(cfg.RegCoef, 0), max(cfg.RegNorm, 1)
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, f.checkSizes(cfg, have))
	}
	return errors.Join(errs...)
}

// checkSizes refuses, for a cfg that Validate passed, rows that no kv
// message carries and a step this machine (have bytes of memory and
// swap, 0: unknown) cannot hold: they were found once every part's
// triples were read and the tables made (kv_create of a dim over 2^31),
// or ended in the runtime's "out of memory" crash at the first step.
func (f *kgeFlags) checkSizes(cfg train.KGEConfig, have uint64) error {
	ent, rel, err := train.KGETableDims(cfg)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range []struct {
		table, what string
		dim         int
	}{{cfg.EntityTable, "entity", ent}, {cfg.RelationTable, "relation", rel}, {cfg.ProjectionTable, "projection", train.KGEProjectionDim(cfg)}} {
		if most := client.MaxRowDim(t.table); t.dim > most {
			errs = append(errs, fmt.Errorf("--hidden %d: a %s %s row is %d values, more than the %d a kv message carries (one %s control frame): lower --hidden",
				cfg.Hidden, cfg.Model, t.what, t.dim, most, shm.FormatSize(control.MaxFrame)))
			break // the entity row, said once
		}
	}
	if need := cfg.StepBytes(); len(errs) == 0 && have > 0 && need > float64(have) {
		errs = append(errs, fmt.Errorf("--batch-size %d, --neg-size %d: a step of %s rows (--hidden %d) holds about %s, more than the %s of memory and swap of this machine: lower them",
			cfg.BatchSize, cfg.NegSize, cfg.Model, cfg.Hidden, partitionBytes(int64(min(need, math.MaxInt64))), partitionBytes(int64(have))))
	}
	return errors.Join(errs...)
}

// checkEvalMemory refuses, once graph.toml says the graph's entities and
// evaluation triples and before any triple is read, an evaluation that
// this machine (f.memory bytes of memory and swap, 0: unknown) cannot
// hold (train.KGEConfig.EvalBytes): --eval-batch triples each scored
// against --eval-neg sampled entities, or with --eval-neg 0 the entity
// table pulled whole and a block's scores against every entity.
// Unchecked, they were allocated only once training was over, and a
// size the machine lacks ended the trainer then (the runtime's
// out-of-memory crash, or the OOM killer).
func (f *kgeFlags) checkEvalMemory(m *partition.Manifest) error {
	triples := m.TriplesTest
	if f.eval == "valid" {
		triples = m.TriplesValid
	}
	if f.eval == "none" || f.memory == 0 || triples == 0 { // none: load says so
		return nil
	}
	if f.evalSample > 0 {
		triples = min(triples, uint64(f.evalSample))
	}
	cfg := f.cfg
	cfg.Entities, cfg.Relations = m.Nodes, m.Relations
	need := cfg.EvalBytes(int(min(triples, math.MaxInt32)))
	if need <= float64(f.memory) {
		return nil
	}
	size, have := partitionBytes(int64(min(need, math.MaxInt64))), partitionBytes(int64(f.memory))
	if cfg.EvalNeg > 0 && uint64(cfg.EvalNeg) < cfg.Entities {
		return fmt.Errorf("--eval-batch %d, --eval-neg %d: ranking blocks of up to %d of this trainer's %s triples, each against %d sampled entities (%s rows, --hidden %d), holds about %s, more than the %s of memory and swap of this machine: lower them",
			cfg.EvalBlock, cfg.EvalNeg, cfg.EvalBlock, f.eval, cfg.EvalNeg, cfg.Model, cfg.Hidden, size, have)
	}
	return fmt.Errorf("--eval-neg %d: ranking against every entity holds the entity table whole (%d %s rows, --hidden %d) and a block's scores against all of them, about %s, more than the %s of memory and swap of this machine: pass --eval-neg N to rank against N sampled entities (as DGL-KE's --neg_sample_size_eval), or lower --eval-batch",
		cfg.EvalNeg, cfg.Entities, cfg.Model, cfg.Hidden, size, have)
}

// kgeReadyTimeout bounds how long `node kge` waits for its node to have
// heard from every peer (a trainer started beside its node).
const kgeReadyTimeout = 60 * time.Second

// waitReady polls the node's stats until it is ready. The whole wait,
// each request included, is bounded: a node that accepts the connection
// and never answers (wedged) held node kge at its start for good.
func waitReady(ctx context.Context, socket string, timeout time.Duration) (*control.Stats, error) {
	deadline := time.Now().Add(timeout)
	for {
		sctx, cancel := context.WithDeadline(ctx, deadline)
		st, err := client.Stats(sctx, socket)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("the node at %s did not answer a stats request within %v: %w", socket, timeout, err)
		}
		if err != nil {
			return nil, err
		}
		if st.Ready {
			return st, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the node at %s is not ready after %v: some mesh peer has not answered (see its log)", socket, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kgeInput is what the trainer reads from the partition directory.
type kgeInput struct {
	m    *partition.Manifest
	part int
	// client: the node is a client node, which holds no shard (and so
	// cannot say whether a table's rows were trained).
	client bool
	train  []train.Triple
	eval   []train.Triple
	filter *train.KGEFilter
	orig   []uint64 // new id -> input entity id, for --export
	export []string // --export's files (kgeExportFiles)
}

// load checks the node against the partition directory and reads the
// part's triples, the evaluation triples and the filter.
func (f *kgeFlags) load(ctx context.Context) (*kgeInput, error) {
	st, err := waitReady(ctx, f.socket, kgeReadyTimeout)
	if err != nil {
		return nil, err
	}
	if f.save {
		if err := checkSave(st, f.socket); err != nil {
			return nil, err
		}
	}
	in := &kgeInput{part: f.part, client: st.Part < 0}
	switch {
	case in.part < 0 && st.Part < 0:
		return nil, fmt.Errorf("the node at %s is a client node (no part): pass --part", f.socket)
	case in.part < 0:
		in.part = st.Part
	case st.Part >= 0 && st.Part != in.part:
		return nil, fmt.Errorf("--part %d, but the node at %s serves part %d: train on the part of this host", in.part, f.socket, st.Part)
	}
	if in.m, err = partition.OpenPart(f.parts, in.part); err != nil {
		return nil, err
	}
	m := in.m
	// A node without a mesh (one part) says its checksum only at the top
	// of its stats; one of an earlier build only in its mesh's.
	served := st.Checksum
	if served == "" && st.Mesh != nil {
		served = st.Mesh.Checksum
	}
	if served != "" && served != m.Checksum {
		return nil, fmt.Errorf("%s has checksum %s, the node at %s serves %s: not the same partitioning", f.parts, m.Checksum, f.socket, served)
	}
	if err := checkKGEManifest(f.parts, m); err != nil {
		return nil, err
	}
	if f.cfg.World != m.Parts {
		// Each trainer trains the triples its part stores: fewer trainers
		// would leave parts untrained, more would train a part twice.
		return nil, fmt.Errorf("--world-size %d, but %s has %d parts: run one trainer per part (rank r on the host of part r)", f.cfg.World, f.parts, m.Parts)
	}
	if f.cfg.Rank != in.part {
		// With distinct ranks (the first all-reduce refuses a rank twice)
		// every part is then trained once.
		return nil, fmt.Errorf("--rank %d trains part %d: run rank r on the host of part r", f.cfg.Rank, in.part)
	}
	if err := f.checkEvalMemory(m); err != nil {
		return nil, badFlags(err)
	}
	if f.export != "" && f.cfg.Rank == 0 {
		// Checked before training, not after it.
		if in.orig, err = partition.ReadOrigIDs(f.parts, m); err != nil {
			return nil, fmt.Errorf("--export maps rows back to the input's entity ids: %w", err)
		}
		if err := checkOrigIDs(in.orig); err != nil {
			return nil, fmt.Errorf("--export: %s: %w", f.parts, err)
		}
		if in.export, err = kgeExportFiles(m.Name, f.cfg.Model); err != nil {
			return nil, fmt.Errorf("--export %s: %w", f.export, err)
		}
		if err := prepareKGEExport(f.export, in.export); err != nil {
			return nil, fmt.Errorf("--export %s: %w", f.export, err)
		}
	}
	if in.train, err = readPartTriples(f.parts, m, in.part); err != nil {
		return nil, err
	}
	if err := checkPartTriples(len(in.train), f.cfg.Epochs, in.part, f.parts); err != nil {
		return nil, err
	}
	var evalFile string
	switch f.eval {
	case "test":
		evalFile = partition.TriplesTestFile
	case "valid":
		evalFile = partition.TriplesValidFile
	case "none":
		return in, nil
	default:
		return nil, fmt.Errorf("--eval %q: want test, valid or none", f.eval)
	}
	ev, err := partition.ReadTriples(f.parts, m, evalFile)
	if errors.Is(err, fs.ErrNotExist) {
		// node fetch, without --all, brings graph.toml and the part only.
		return nil, fmt.Errorf("--eval %s reads %s, which %s lacks: node fetch -c node.toml brings it, or pass --eval none: %w", f.eval, evalFile, f.parts, err)
	}
	if err != nil {
		return nil, err
	}
	if ev.Len() == 0 {
		return nil, fmt.Errorf("%s holds no %s triples: pass --eval with another split or none", f.parts, f.eval)
	}
	in.eval = kgeTriples(ev)
	if f.filter {
		// Before the sample is drawn: every triple of the split is known.
		if in.filter, err = kgeFilter(f.parts, m, in.part, in.train, evalFile, in.eval); err != nil {
			return nil, err
		}
	}
	if f.evalSample > 0 && f.evalSample < len(in.eval) {
		// The same sample on every trainer: drawn from the job's seed.
		rng := rand.New(rand.NewPCG(f.cfg.Seed, 0x65766c))
		rng.Shuffle(len(in.eval), func(i, j int) { in.eval[i], in.eval[j] = in.eval[j], in.eval[i] })
		in.eval = in.eval[:f.evalSample]
	}
	return in, nil
}

// checkKGEManifest refuses a partitioning whose stored edges are not the
// knowledge graph's triples, each once, with its head: node kge reads
// every stored edge (h, r, t) as a training triple.
func checkKGEManifest(dir string, m *partition.Manifest) error {
	if m.Relations == 0 {
		return fmt.Errorf("%s: no relations: not a knowledge graph (partition it with --format kg)", dir)
	}
	if m.Direction != "out" {
		return fmt.Errorf("%s: edges are stored with their %s endpoint; knowledge graphs are stored with their head (partition with --direction out, the default of --format kg)", dir, m.Direction)
	}
	if m.Undirected {
		// A reverse edge keeps its relation: (t, r, h) is no fact of the
		// graph, and training on it teaches every relation to be symmetric.
		return fmt.Errorf("%s: %s has undirected = true: the reverse edges added by --undirected would be read as triples (t, r, h) the graph does not hold; partition the knowledge graph again without --undirected", dir, partition.ManifestFile)
	}
	return nil
}

// kgeFilter indexes every known fact: the triples of every part, valid
// and test. Part own's triples and the split in evalFile are already
// read (ownTriples, evalTriples); every other part file must be here.
func kgeFilter(dir string, m *partition.Manifest, own int, ownTriples []train.Triple, evalFile string, evalTriples []train.Triple) (*train.KGEFilter, error) {
	if _, err := partition.OpenDir(dir); err != nil {
		return nil, fmt.Errorf("filtered evaluation reads every part's triples: %w (node fetch --all -c node.toml brings every file of the set to this host, or pass --eval-filter=false for raw ranks)", err)
	}
	sets := [][]train.Triple{ownTriples, evalTriples}
	for p := range m.Parts {
		if p == own {
			continue
		}
		ts, err := readPartTriples(dir, m, p)
		if err != nil {
			return nil, err
		}
		sets = append(sets, ts)
	}
	for _, file := range []string{partition.TriplesValidFile, partition.TriplesTestFile} {
		if file == evalFile {
			continue
		}
		ts, err := partition.ReadTriples(dir, m, file)
		if err != nil {
			return nil, err
		}
		sets = append(sets, kgeTriples(ts))
	}
	return train.NewKGEFilter(sets...), nil
}

// readPartTriples reads the training triples part p stores: its rows are
// heads (the part's own entities), the edges' targets tails, the etype
// section relations.
func readPartTriples(dir string, m *partition.Manifest, p int) ([]train.Triple, error) {
	path := filepath.Join(dir, filepath.FromSlash(partition.PartFile(p)))
	g, err := csr.Open(path, csr.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	return partTriples(g, path, m, p)
}

// partTriples is readPartTriples of the open file g at path. It reads
// the mapping through csr.Graph.Read: a part file truncated or rewritten
// in place meanwhile (another copy of the parts arriving) is an error
// naming it, not a SIGBUS that ends the trainer.
func partTriples(g *csr.Graph, path string, m *partition.Manifest, p int) (out []train.Triple, err error) {
	et := g.Etypes()
	if et == nil {
		return nil, fmt.Errorf("%s: no etype section: not a knowledge graph (partition it with --format kg)", path)
	}
	start := m.Part[p].Start
	err = g.Read(func() error {
		ip, idx := g.Indptr(), g.Indices()
		out = make([]train.Triple, 0, len(idx))
		for v := range g.NumNodes() {
			for e := ip[v]; e < ip[v+1]; e++ {
				if int(et[e]) >= m.Relations {
					return fmt.Errorf("%s: edge %d has relation %d of %d: %w", path, e, et[e], m.Relations, csr.ErrCorrupt)
				}
				out = append(out, train.Triple{Head: start + uint64(v), Rel: et[e], Tail: idx[e]})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func kgeTriples(t partition.Triples) []train.Triple {
	out := make([]train.Triple, t.Len())
	for i := range out {
		out[i] = train.Triple{Head: uint64(t.Head[i]), Rel: t.Rel[i], Tail: uint64(t.Tail[i])}
	}
	return out
}

// evalCandidates says what the evaluation of cfg ranks a triple's head
// and tail against, as train's evaluate chooses: every entity, or
// --eval-neg sampled ones (fewer than the entities) per block.
func evalCandidates(cfg train.KGEConfig) string {
	if cfg.EvalNeg == 0 || uint64(cfg.EvalNeg) >= cfg.Entities {
		return "every entity"
	}
	s := fmt.Sprintf("%d sampled entities per block (--eval-neg)", cfg.EvalNeg)
	if cfg.EvalNegDeg {
		s += " plus the block's true entities"
	}
	return s
}

func (f *kgeFlags) run(ctx context.Context, out io.Writer, prog *progress) (err error) {
	defer prog.stop() // a failed epoch's status line
	stage := jobStage{where: "before its first epoch"}
	defer func() { err = trainerError(ctx, f.socket, stage, err) }()
	in, err := f.load(ctx)
	if err != nil {
		return err
	}
	stage = inTraining("before its first epoch")
	m, cfg := in.m, f.cfg
	cfg.Entities, cfg.Relations = m.Nodes, m.Relations
	cfg.EntityTable, cfg.RelationTable, cfg.ProjectionTable = f.prefix+".entity", f.prefix+".relation", f.kgeProjectionTable()
	if cfg.StepsPerEpoch == 0 {
		var most uint64
		for _, p := range m.Part {
			most = max(most, p.Edges)
		}
		cfg.StepsPerEpoch = int((most + uint64(cfg.BatchSize) - 1) / uint64(max(cfg.BatchSize, 1)))
	}
	cfg.Progress = prog.report
	if cfg.EvalNegDeg && uint64(cfg.EvalNeg) >= cfg.Entities {
		return fmt.Errorf("--eval-neg %d --eval-neg-deg: %s has %d entities; the degree candidates join a sample of fewer (or drop --eval-neg-deg to rank against every entity)", cfg.EvalNeg, f.parts, cfg.Entities)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	ed, rd, err := train.KGETableDims(cfg)
	if err != nil {
		return err
	}
	pd := train.KGEProjectionDim(cfg)
	kvc, err := client.DialKV(ctx, f.socket)
	if err != nil {
		return err
	}
	defer kvc.Close()
	scale := float64(kv.KGEInitScale(float32(cfg.Gamma), cfg.Hidden))
	var ent *control.TableInfo
	made := false // a table this rank's kv_create made (checkTrained)
	specs := []control.TableSpec{
		{Name: cfg.EntityTable, Rows: control.Rows{Nodes: true}, Dim: ed, InitScale: scale},
		{Name: cfg.RelationTable, Rows: control.Rows{N: uint64(m.Relations)}, Dim: rd, InitScale: scale},
	}
	if pd > 0 {
		specs = append(specs, control.TableSpec{Name: cfg.ProjectionTable, Rows: control.Rows{N: uint64(m.Relations)}, Dim: pd,
			InitScale: train.KGEProjectionInitScale})
	}
	for _, t := range specs {
		t.Init, t.InitSeed = "uniform", cfg.Seed
		t.Optimizer, t.LR, t.Mode = "adagrad", f.lr, "async"
		info, err := kvc.Create(ctx, t)
		if err != nil {
			if errors.Is(err, kv.ErrMismatch) {
				// [kv] load: the nodes' checkpoint of the table is of
				// another model or size (or graph).
				return fmt.Errorf("create kv table %s: %w (the nodes' checkpoint of the table, which [kv] load brings back, holds another table, as the field above says: of another --model or --hidden, pass those of the job that saved it to go on from it; of another partitioning or graph (field id set), serve that one; or pass another --table-prefix to start afresh, or move its files aside in the nodes' [kv] checkpoint_dir)", t.Name, err)
			}
			if tableClash(err) {
				if hyperClash(err) {
					// Same shape: the job that made it had other --seed,
					// --gamma (the init's scale) or --lr. Going on, or
					// evaluating with --epochs 0, takes that job's values.
					return fmt.Errorf("create kv table %s: %w (the table exists, made by a job with another --seed, --gamma or --lr, as the field above says: pass that job's values to go on training or evaluating it, or another --table-prefix to start afresh, or drop the job's tables with %s)", t.Name, err, f.dropCommand())
				}
				return fmt.Errorf("create kv table %s: %w (a table of an earlier job with another model or size keeps its name until kv_drop: pass another --table-prefix, or drop the job's tables with %s)", t.Name, err, f.dropCommand())
			}
			return fmt.Errorf("create kv table %s: %w", t.Name, err)
		}
		if ent == nil {
			ent = info
		}
		made = made || info.Created
	}
	if err := f.checkModelRecord(ctx, kvc, cfg); err != nil {
		return err
	}
	sync, err := client.NewSync(ctx, kvc, f.prefix+".sync", train.KGESyncLen, cfg.Rank, cfg.World)
	if err != nil {
		return err
	}
	if err := agreeJob(ctx, sync, kgeSettings(cfg, f, in), kgeFollows(f)); err != nil {
		return err
	}
	if cfg.Epochs == 0 {
		if err := f.checkTrained(ctx, kvc, sync, ent, made, in.client); err != nil {
			return err
		}
	}
	k, err := train.NewKGE(cfg, kgeParams{kvc}, sync)
	if err != nil {
		return err
	}
	if !f.jsonOut {
		rows := fmt.Sprintf("rows of %d and %d floats", ed, rd)
		if pd > 0 {
			rows = fmt.Sprintf("rows of %d, %d and %d floats, the last %s's", ed, rd, pd, cfg.ProjectionTable)
		}
		fmt.Fprintf(out, "%s: hidden %d (%s); %d entities, %d relations; part %d: %d triples; rank %d of %d; %d steps of %d per epoch\n",
			cfg.Model, cfg.Hidden, rows, cfg.Entities, cfg.Relations, in.part, len(in.train), cfg.Rank, cfg.World, cfg.StepsPerEpoch, cfg.BatchSize)
		if len(in.eval) > 0 {
			kind := "filtered"
			if in.filter == nil {
				kind = "raw"
			}
			fmt.Fprintf(out, "evaluation: %d %s triples, %s ranks of heads and tails against %s\n", len(in.eval), f.eval, kind, evalCandidates(cfg))
		}
		fmt.Fprintln(out, "epoch    loss  triples/s  pull+push     MRR      MR  hits@1  hits@3  hits@10")
	}
	enc := json.NewEncoder(out)
	var last kgeLine
	_, err = k.Run(ctx, train.KGEData{Train: in.train, Eval: in.eval, Filter: in.filter}, func(st train.KGEEpochStats) {
		prog.done() // the epoch's status line, before the epoch's result
		stage = inTraining(fmt.Sprintf("after epoch %d", st.Epoch))
		l := newKGELine(st, in.filter != nil)
		last = l
		if f.jsonOut {
			enc.Encode(l)
			return
		}
		ev := "      -        -       -       -        -"
		if st.Evaluated {
			ev = fmt.Sprintf("%7.4f %8.1f %7.4f %7.4f  %7.4f", l.MRR, l.MR, l.Hits1, l.Hits3, l.Hits10)
		}
		fmt.Fprintf(out, "%5d  %6.4f  %9.0f  %8.0f%%  %s\n", st.Epoch, st.Loss, l.TriplesPerS, 100*l.PullS/max(l.TrainS, 1e-9), ev)
	})
	if err != nil {
		return err
	}
	if f.export != "" || f.save {
		stage = jobStage{where: "during " + f.finishing() + ", once training was over", reached: true,
			interrupted: fmt.Sprintf("what it wrote is not known (node kv save --socket %s checkpoints what the nodes hold)", f.socket)}
		if cfg.Rank != 0 {
			stage.where, stage.interrupted = "while rank 0 did the job's "+f.finishing()+", once training was over", "rank 0 goes on"
		}
		if err := f.finish(ctx, out, sync, func() ([]string, error) {
			var notes []string
			if in.orig != nil {
				ent, rel, proj, err := k.Embeddings(ctx)
				if err != nil {
					return nil, err
				}
				meta := kgeExport{Dataset: m.Name, Model: dglkeModelName(cfg.Model), Hidden: cfg.Hidden, Gamma: cfg.Gamma,
					DoubleEnt: dglkeDoubleEnt[cfg.Model], DoubleRel: dglkeDoubleRel[cfg.Model],
					EntityDim: ed, RelationDim: rd, Entities: cfg.Entities, Relations: cfg.Relations, Last: &last}
				if cfg.Epochs > 0 {
					meta.KGETrained = &KGETrained{BatchSize: cfg.BatchSize, NegSize: cfg.NegSize, NegDeg: cfg.NegDeg, LR: f.lr,
						MaxStep: cfg.Epochs * cfg.StepsPerEpoch, Epochs: cfg.Epochs, Steps: cfg.StepsPerEpoch, Seed: cfg.Seed}
				}
				if err := writeKGEExport(f.export, in.export, in.orig, ent, ed, rel, rd, proj, pd, meta); err != nil {
					return nil, err
				}
				notes = append(notes, fmt.Sprintf("wrote %s: %s", f.export, strings.Join(in.export, ", ")))
			}
			// Run's last loss round is the barrier after which every
			// trainer's pushes are in, and kv_save writes every node's
			// tables.
			if f.save {
				si, err := saveTables(ctx, f.socket)
				if err != nil {
					return notes, saveFailed(err, f.socket)
				}
				notes = append(notes, "checkpointed every kv table into "+savedWhere(si.Dir, f.socket))
			}
			return notes, nil
		}); err != nil {
			return err
		}
	}
	return kvc.Done(ctx)
}

// checkPartTriples refuses to train (epochs > 0) on a part that holds no
// training triples, before any table is made and with what to do; the
// trainer said only "rank 1 has no training triples", and its peers then
// waited a minute for it.
func checkPartTriples(n, epochs, part int, dir string) error {
	if n > 0 || epochs == 0 {
		return nil
	}
	return fmt.Errorf("part %d of %s holds no training triples (a triple lives with its head, and no head is on this part): "+
		"partition again with --balance nodes,edges, which spreads the triples over the parts, or train with fewer parts", part, dir)
}

// tableClash reports whether err is a kv_create refused because a table
// of that name exists with another spec (kv.ErrSpec, which reaches a
// trainer as the text of a control error).
func tableClash(err error) bool { return errors.Is(err, kv.ErrSpec) }

// hyperClash reports whether the clash tableClash found is of the
// initialiser or the optimiser only (the fields that differ, as kv names
// them), not of the table's shape.
func hyperClash(err error) bool {
	f := kv.SpecFields(err)
	return len(f) > 0 && !slices.ContainsFunc(f, func(f string) bool { return f != "init" && f != "optimiser" })
}

// kgeParams is the trainer's parameter server: the node's kv, each
// step's gradients pushed as distinct rows in as many messages as the
// frame needs (client.KV.PushRows). A step's relation rows can pass a
// frame: RESCAL's are hidden² values, 640 KB each at hidden 400, and a
// step of FB15k-237 touches about 200 relations.
type kgeParams struct{ *client.KV }

// Push implements train.KGEParams: a step's ids are distinct rows.
func (p kgeParams) Push(ctx context.Context, table string, ids []uint64, grads []float32) error {
	return p.PushRows(ctx, table, ids, grads)
}
