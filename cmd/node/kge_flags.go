package main

// node kge's flags checked before it trains: DGL-KE's flags named by ours,
// values in range, and the sizes and memory they ask for.

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"

	"graphnode/kv"
	"graphnode/node/client"
	"graphnode/node/control"
	"graphnode/partition"
	"graphnode/shm"
	"graphnode/train"
)

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
