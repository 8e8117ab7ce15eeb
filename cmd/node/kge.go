package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"graphnode/kv"
	"graphnode/node/client"
	"graphnode/node/control"
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
		// "relations": the node sizes them from its graph.toml and tags
		// the table's checkpoints with its relations.txt, so that another
		// graph's relation rows of as many relations are refused.
		{Name: cfg.RelationTable, Rows: control.Rows{Relations: true}, Dim: rd, InitScale: scale},
	}
	if pd > 0 {
		specs = append(specs, control.TableSpec{Name: cfg.ProjectionTable, Rows: control.Rows{Relations: true}, Dim: pd,
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
