package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"graphnode/kv"
	"graphnode/node"
	"graphnode/node/client"
	"graphnode/node/control"
	"graphnode/sample"
	"graphnode/shm"
	"graphnode/train"
)

// trainFlags are `node train`'s settings.
type trainFlags struct {
	socket               string
	fanouts, evalFanouts string
	batch, evalBatch     int
	workers              int
	ringSize             string
	worldSize            int
	table, paramsTable   string
	jsonOut, save, eval  bool
	cfg                  train.Config
	// memory is the machine's memory and swap (app.memory; nil or 0:
	// unknown).
	memory func() uint64
}

// epochLine is one epoch as `node train --json` prints it (one JSON
// object a line; node demo reads them).
type epochLine struct {
	Epoch       int     `json:"epoch"`
	Loss        float64 `json:"loss"`
	TrainAcc    float64 `json:"train_acc"`
	Evaluated   bool    `json:"evaluated"`
	ValAcc      float64 `json:"val_acc"`
	TestAcc     float64 `json:"test_acc"`
	Batches     int     `json:"batches"`
	Edges       int64   `json:"edges"`
	TrainS      float64 `json:"train_s"`
	EvalS       float64 `json:"eval_s"`
	WaitS       float64 `json:"wait_s"` // of train_s: waiting for the loader's next batch
	BatchesPerS float64 `json:"batches_per_s"`
	EdgesPerS   float64 `json:"edges_per_s"`
}

// runTrain is `node train`: the built-in GraphSAGE trainer. It reads
// batches from its node's rings through node/client, as any external
// trainer does, and averages gradients with the job's other trainers
// through a synchronous kv table on the cluster.
func runTrain(ctx context.Context, a *app, args []string) error {
	fs, f := newTrainFlags(a)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if f.socket == "" {
		fmt.Fprintln(a.stderr, "node train: --socket is required")
		fs.Usage()
		return errUsage
	}
	if err := f.check(); err != nil {
		fmt.Fprintf(a.stderr, "node train: %v\n", err)
		return errUsage
	}
	return f.run(ctx, a.stdout)
}

// defaultParamsTable is --params-table's default.
const defaultParamsTable = "graphsage.params"

// newTrainFlags is `node train`'s flag set and the settings it fills
// (node demo checks the arguments it will give its trainers with it).
func newTrainFlags(a *app) (*flag.FlagSet, *trainFlags) {
	f := &trainFlags{cfg: train.DefaultConfig(), memory: a.memory}
	fs := newFlagSet(a, "train", "--socket PATH [flags]")
	fs.StringVar(&f.socket, "socket", "", "control socket of this host's node run (required)")
	fs.StringVar(&f.fanouts, "fanouts", "25,10", "neighbours sampled per hop for training, comma separated (-1 = all)")
	fs.StringVar(&f.evalFanouts, "eval-fanouts", "", "fanouts of the val/test loaders (sampled inference); default: --fanouts")
	fs.IntVar(&f.batch, "batch-size", 512, "training seeds per batch")
	fs.IntVar(&f.evalBatch, "eval-batch-size", 1024, "val/test seeds per batch")
	fs.IntVar(&f.workers, "workers", 0, "sampler processes per loader (0: the node's default)")
	fs.StringVar(&f.ringSize, "ring-size", "", `ring size per loader, like "256MB" ("": the node's default)`)
	fs.IntVar(&f.cfg.Rank, "rank", 0, "this trainer's rank")
	fs.IntVar(&f.worldSize, "world-size", 1, "trainers in the job (one per host)")
	fs.IntVar(&f.cfg.Epochs, "epochs", 10, "training epochs")
	fs.IntVar(&f.cfg.Hidden, "hidden", f.cfg.Hidden, "width of the hidden layers")
	fs.IntVar(&f.cfg.Layers, "layers", 0, "SAGE layers, 2 or 3 (0: one per fanout)")
	fs.Float64Var(&f.cfg.Dropout, "dropout", f.cfg.Dropout, "dropout on the input of every layer but the first")
	fs.Float64Var(&f.cfg.InputDropout, "input-dropout", f.cfg.InputDropout, "dropout on the input features")
	fs.BoolVar(&f.cfg.Normalize, "normalize", false, "divide every feature row by its sum (bag-of-words features)")
	fs.Float64Var(&f.cfg.LR, "lr", f.cfg.LR, "Adam learning rate")
	fs.Float64Var(&f.cfg.WeightDecay, "weight-decay", f.cfg.WeightDecay, "L2 weight decay")
	fs.Uint64Var(&f.cfg.Seed, "seed", 1, "seed of the parameters, dropout and loaders (the same on every trainer)")
	fs.IntVar(&f.cfg.EvalEvery, "eval-every", 1, "evaluate on val and test after every N-th epoch and after the last (0: after the last only, as node kge)")
	fs.IntVar(&f.cfg.Patience, "patience", 0, "stop after N evaluations without a better val accuracy (0: never)")
	fs.IntVar(&f.cfg.Threads, "threads", 0, "goroutines for aggregation (0: GOMAXPROCS)")
	fs.StringVar(&f.table, "table", "graphsage.sync", "kv table that averages the gradients (the same on every trainer)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object per epoch instead of a table")
	fs.BoolVar(&f.eval, "eval", true, "evaluate on the val and test splits (false: train only, for timing)")
	fs.BoolVar(&f.cfg.KeepBest, "save-best", false, "with --save, store the parameters of the epoch of the best val accuracy (the \"best epoch\" line) instead of the last epoch's, as DGL's and PyG's examples keep their best model")
	fs.BoolVar(&f.save, "save", false, "after training, store the last epoch's parameters (--save-best: the best epoch's) in kv table --params-table and checkpoint every kv table (kv_save; rank 0 does both, and every rank fails when it fails; give it to every trainer of the job, or to none): a model of another size saved under that name is replaced, its checkpoint files too; parameters kv refuses are kept in a .npy file in $TMPDIR")
	fs.StringVar(&f.paramsTable, "params-table", defaultParamsTable, "kv table --save stores the trained parameters in: row i holds parameters 256i to 256i+255, per layer W_l, W_r (din × dout, row-major) and b")
	return fs, f
}

// check reports every bad flag before anything connects: a batch size or
// world size of 0 went to the node as "not given" (its 512, and 1), and
// the model's settings were checked only once the loaders had started
// their samplers.
func (f *trainFlags) check() error {
	var errs []error
	bad := func(format string, v ...any) { errs = append(errs, fmt.Errorf(format, v...)) }
	fan, err := parseLoaderFanouts("--fanouts", f.fanouts)
	if err != nil {
		errs = append(errs, err)
	}
	var evalFan []int
	if f.evalFanouts != "" {
		if evalFan, err = parseLoaderFanouts("--eval-fanouts", f.evalFanouts); err != nil {
			errs = append(errs, err)
		}
	}
	// The upper bounds are open_loader's and kv's: they refused them once
	// the loaders were open (--world-size 100000 trained a batch, then
	// failed with "bad synchronous step").
	if f.batch < 1 {
		bad("--batch-size %d: want ≥ 1", f.batch)
	} else if f.batch > control.MaxBatchSize {
		bad("--batch-size %d: want at most %d (a loader's batch_size)", f.batch, control.MaxBatchSize)
	}
	if f.evalBatch < 1 {
		bad("--eval-batch-size %d: want ≥ 1", f.evalBatch)
	} else if f.evalBatch > control.MaxBatchSize {
		bad("--eval-batch-size %d: want at most %d (a loader's batch_size)", f.evalBatch, control.MaxBatchSize)
	}
	if f.workers < 0 || f.workers > control.MaxWorkers {
		bad("--workers %d: want 0 (the node's default) to %d", f.workers, control.MaxWorkers)
	}
	if f.cfg.Epochs > control.MaxEpochs {
		bad("--epochs %d: want at most %d (a loader's epochs)", f.cfg.Epochs, control.MaxEpochs)
	}
	// open_loader refused it, once the node had been reached.
	if f.ringSize != "" {
		// With --workers 0 the node's samplers.workers, 1 or more.
		workers := min(max(f.workers, 1), control.MaxWorkers)
		if n, err := shm.ParseSize(f.ringSize); err != nil {
			bad("--ring-size %q: %v", f.ringSize, err)
		} else if n <= 0 {
			bad("--ring-size %q: want a positive size such as 256MB (\"\": the node's rings.size)", f.ringSize)
		} else if least := node.MinRingSize(workers); n < least {
			bad("--ring-size %q: want at least %s, %s", f.ringSize, shm.FormatSize(least), subRingsNeed(workers))
		}
	}
	if f.worldSize < 1 || f.worldSize > kv.MaxWorld {
		bad("--world-size %d: want 1 to %d (the trainers of a kv synchronous step)", f.worldSize, kv.MaxWorld)
	} else if f.cfg.Rank < 0 || f.cfg.Rank >= f.worldSize {
		bad("--rank %d: want 0 to %d (--world-size %d)", f.cfg.Rank, f.worldSize-1, f.worldSize)
	}
	// The features and classes are the partition's, known once a loader
	// is open; the rank is checked above, bad fanouts too.
	cfg := f.cfg
	cfg.FeatDim, cfg.Classes, cfg.Rank = 1, 2, 0
	if cfg.Layers == 0 {
		cfg.Layers = 2
		if n := len(fan); n != 0 {
			cfg.Layers = n
			// The count comes from --fanouts: Validate's "layers 1: want
			// 2 or 3" named a flag that was not given.
			if n < 2 || n > 3 {
				bad("--fanouts %q samples %s, and the model has a layer per hop: want 2 or 3 hops", f.fanouts, hops(n))
				cfg.Layers = 2 // said above
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	} else if err := checkModelSize(cfg, f.table, "even on 1 feature and 2 classes"); err != nil {
		// On the smallest graph: the partition's is checked once a
		// loader says its features and classes (run).
		errs = append(errs, err)
	}
	// A batch of fewer hops than the model's layers does not fit it: the
	// trainer found out at the first batch, or the first evaluation. One
	// of more hops was sampled, sent and then not read past the model's
	// layers (DGL's model refuses the extra blocks of such a sampler).
	if f.cfg.Layers != 0 && fan != nil && len(fan) < f.cfg.Layers {
		bad("--layers %d: --fanouts %q samples %s; the model needs one per layer", f.cfg.Layers, f.fanouts, hops(len(fan)))
	} else if f.cfg.Layers != 0 && len(fan) > f.cfg.Layers {
		bad("--layers %d: --fanouts %q samples %s, and the model reads %s: give one fanout per layer", f.cfg.Layers, f.fanouts, hops(len(fan)), hops(f.cfg.Layers))
	}
	if !validTableName(f.table) {
		bad("--table %q: %s", f.table, tableNameRule())
	}
	if f.save && !validTableName(f.paramsTable) {
		bad("--params-table %q: %s", f.paramsTable, tableNameRule())
	} else if f.save && f.paramsTable == f.table {
		bad("--params-table %q: the same as --table, which averages the gradients", f.paramsTable)
	}
	if !f.eval && f.cfg.Patience > 0 {
		bad("--patience %d: early stopping watches the val accuracy, which --eval=false turns off", f.cfg.Patience)
	}
	if f.cfg.KeepBest && !f.save {
		bad("--save-best chooses the epoch --save stores: give --save too")
	} else if f.cfg.KeepBest && !f.eval {
		bad("--save-best stores the epoch of the best val accuracy, which --eval=false does not measure")
	}
	if f.eval && evalFan != nil && len(evalFan) < cfg.Layers {
		bad("--eval-fanouts %q samples %s; the model (%d layers) needs one per layer", f.evalFanouts, hops(len(evalFan)), cfg.Layers)
	} else if f.eval && len(evalFan) > cfg.Layers {
		bad("--eval-fanouts %q samples %s, and the model (%d layers) reads %s: give one fanout per layer", f.evalFanouts, hops(len(evalFan)), cfg.Layers, hops(cfg.Layers))
	}
	return errors.Join(errs...)
}

// checkModelSize refuses a model that the sync table named table cannot
// all-reduce (client.MaxSyncLen: a kv push is one control frame), before
// train.New allocates it: --hidden 3000000000 ended in the runtime's
// "out of memory" crash, 2^40 in a makeslice panic, once the loaders
// had started.
// graph says which features and classes cfg has.
func checkModelSize(cfg train.Config, table, graph string) error {
	n, most := cfg.SyncLen(), client.MaxSyncLen(table)
	if n <= most {
		return nil
	}
	size := fmt.Sprintf("%d values", n)
	if n == math.MaxInt {
		size = "more values than memory holds"
	}
	return fmt.Errorf("--hidden %d: a model of %d layers that wide, %s, is %s to average each step, more than the %d a kv sync table (--table) carries in one %s control frame: lower --hidden",
		cfg.Hidden, cfg.Layers, graph, size, most, shm.FormatSize(control.MaxFrame))
}

// checkBatchMemory refuses a job whose trainer cannot hold its largest
// batches in this machine's memory and swap: the activations of every
// layer and their gradients, --hidden wide for as many nodes as a batch
// of --batch-size (or --eval-batch-size) seeds reaches through the
// fanouts, bounded by the graph (train.BlockNodes,
// train.Config.BatchBytes). Unchecked, a large --hidden with a large
// --batch-size allocated at the first batch until the OOM killer ended
// the trainer. It needs what the train loader says (the graph's nodes,
// the features and classes, this rank's seeds), and comes before the
// evaluation loaders, the kv tables and the model. A graph of unknown
// size (a node of an earlier build) with a fanout of -1 is not refused.
func (f *trainFlags) checkBatchMemory(cfg train.Config, fan, evalFan []int, info control.LoaderInfo) error {
	var have uint64
	if f.memory != nil {
		have = f.memory()
	}
	batch := int(min(int64(f.batch), info.NumSeeds))
	trainB := train.BlockNodes(batch, fan, info.TotalNodes)
	var evalB []float64
	if f.eval {
		evalB = train.BlockNodes(f.evalBatch, evalFan, info.TotalNodes)
	}
	need := cfg.BatchBytes(trainB, evalB)
	if have == 0 || need <= float64(have) || math.IsInf(need, 0) {
		return nil
	}
	nodes := func(b []float64) float64 { return b[min(cfg.Layers, len(b)-1)] } // the trainer reads cfg.Layers hops
	flags := fmt.Sprintf("--hidden %d with --batch-size %d and --fanouts %s", cfg.Hidden, f.batch, joinInts(fan))
	reach := fmt.Sprintf("a training batch may reach %.0f", nodes(trainB))
	lower := "--hidden, --batch-size or --fanouts"
	if evalB != nil {
		flags += fmt.Sprintf(", --eval-batch-size %d and --eval-fanouts %s", f.evalBatch, joinInts(evalFan))
		reach += fmt.Sprintf(" and an evaluation batch %.0f", nodes(evalB))
		lower = "--hidden, --batch-size, --eval-batch-size or the fanouts"
	}
	reach += " nodes"
	if info.TotalNodes > 0 {
		reach += fmt.Sprintf(" of the graph's %d", info.TotalNodes)
	}
	return fmt.Errorf("%s: the trainer's buffers for its largest batches may take %s (%s within %d hops; %d features, %d classes), more than the %s of memory and swap of this machine: lower %s",
		flags, partitionBytes(int64(min(need, math.MaxInt64))), reach, cfg.Layers, cfg.FeatDim, cfg.Classes, partitionBytes(int64(have)), lower)
}

// ringHint names node train's flags behind open_loader's refusal err of
// a ring too small for the split's largest batch, which speaks of the
// request's ring_size and batch_size: the val and test loaders' batch
// size is --eval-batch-size, and the ring size is the node's rings.size
// unless --ring-size was given.
func ringHint(err error, split string) string {
	if ce, ok := errors.AsType[*control.Error](err); !ok || ce.Key != "ring_size" {
		return ""
	}
	batch := "--batch-size"
	if split != "train" {
		batch = "--eval-batch-size"
	}
	return fmt.Sprintf(" (node train: raise --ring-size, or lower %s, the fanouts or --workers)", batch)
}

// joinInts is fanouts as a flag gives them: 25,10.
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// subRingsNeed says why a ring under node.MinRingSize(workers) is
// refused.
func subRingsNeed(workers int) string {
	if workers == 1 {
		return "what a loader's one sub-ring needs to hold a sampler's error record"
	}
	return fmt.Sprintf("what the %d sub-rings of a loader (--workers) need to hold a sampler's error record each", workers)
}

// validTableName reports whether kv accepts name for a table (kv_create
// refuses it otherwise, and only once a job's loaders are open or its
// triples read).
func validTableName(name string) bool {
	s := kv.Spec{Name: name, Rows: 1, Dim: 1, Init: kv.Init{Kind: kv.InitZeros}, Opt: kv.Optimizer{Kind: kv.OptAverage},
		Mode: kv.Sync, Bounds: []uint64{0, 1}}
	return s.Validate() == nil
}

// tableNameRule is what validTableName checks, for error messages.
func tableNameRule() string {
	return fmt.Sprintf("must be 1-%d bytes of [A-Za-z0-9_.-], not starting with '.'", kv.MaxNameLen)
}

func hops(n int) string {
	if n == 1 {
		return "1 hop"
	}
	return fmt.Sprintf("%d hops", n)
}

// timedBatches adapts a client loader to train.Batches and measures the
// time spent waiting for batches.
type timedBatches struct {
	l    *client.Loader
	wait time.Duration
}

func (b *timedBatches) Next(ctx context.Context) (sample.View, error) {
	t := time.Now()
	bt, err := b.l.Next(ctx)
	b.wait += time.Since(t)
	if errors.Is(err, client.ErrEndOfEpoch) {
		err = fmt.Errorf("%w (%w)", train.ErrEndOfEpoch, err)
	}
	return bt.View, err
}

func (f *trainFlags) run(ctx context.Context, out io.Writer) (err error) {
	stage := jobStage{where: "before its first epoch"}
	defer func() { err = trainerError(ctx, f.socket, stage, err) }()
	fan, err := parseLoaderFanouts("--fanouts", f.fanouts)
	if err != nil {
		return err
	}
	evalFan := fan
	if f.evalFanouts != "" {
		if evalFan, err = parseLoaderFanouts("--eval-fanouts", f.evalFanouts); err != nil {
			return err
		}
	}
	layersGiven := f.cfg.Layers != 0
	if !layersGiven {
		f.cfg.Layers = len(fan)
	}
	if f.save {
		sctx, cancel := context.WithTimeout(ctx, kgeReadyTimeout)
		st, err := client.Stats(sctx, f.socket)
		cancel()
		if err != nil {
			return err
		}
		if err := checkSave(st, f.socket); err != nil {
			return err
		}
	}
	cfg := f.cfg
	open := func(split string, fanouts []int, batch, epochs int, shuffle bool) (*client.Loader, error) {
		o := client.DefaultOptions()
		o.Split, o.Fanouts, o.BatchSize, o.Epochs, o.Shuffle = split, fanouts, batch, epochs, shuffle
		o.Seed, o.Rank, o.WorldSize, o.Workers, o.RingSize = cfg.Seed, cfg.Rank, f.worldSize, f.workers, f.ringSize
		l, err := client.OpenLoader(ctx, f.socket, o)
		if err != nil {
			return nil, fmt.Errorf("%s loader: %w%s", split, err, ringHint(err, split))
		}
		return l, nil
	}
	trainL, err := open("train", fan, f.batch, cfg.Epochs, true)
	if err != nil {
		return err
	}
	defer trainL.Close()
	stage = inTraining("before its first epoch")
	info := trainL.Info()
	cfg.FeatDim, cfg.Classes = info.FeatDim, info.NumClasses
	if cfg.FeatDim == 0 || info.LabelDim == 0 {
		return fmt.Errorf("the partition has no features or labels (feat_dim %d, label_dim %d): GraphSAGE needs both", cfg.FeatDim, info.LabelDim)
	}
	if err := checkModelSize(cfg, f.table, fmt.Sprintf("on the partition's %d features and %d classes", cfg.FeatDim, cfg.Classes)); err != nil {
		return err
	}
	if err := f.checkBatchMemory(cfg, fan, evalFan, info); err != nil {
		return badFlags(err)
	}
	data := train.Data{}
	tb := &timedBatches{l: trainL}
	data.Train = tb
	evals := []struct {
		split string
		dst   *train.Batches
	}{{"val", &data.Val}, {"test", &data.Test}}
	if !f.eval {
		evals = nil
	}
	for _, s := range evals {
		l, err := open(s.split, evalFan, f.evalBatch, cfg.Evaluations(), false)
		if err != nil {
			return err
		}
		defer l.Close()
		*s.dst = &timedBatches{l: l}
	}

	kvc, err := client.DialKV(ctx, f.socket)
	if err != nil {
		return err
	}
	defer kvc.Close()
	// Build the trainer first: the sync vector's length is the model's.
	probe, err := train.New(cfg, train.NoSync{})
	if err != nil {
		return err
	}
	sync, err := client.NewSync(ctx, kvc, f.table, probe.SyncLen(), cfg.Rank, f.worldSize)
	if err != nil {
		if tableClash(err) {
			// The sync table is as long as the model: one of an earlier job
			// of another size stays on the nodes, or another trainer of
			// this job made it for another size.
			return fmt.Errorf("%w (an earlier job's sync table of another model keeps the name %q until kv_drop: pass another --table, or drop it with node kv drop --socket %s %s; "+
				"or another trainer of this job was started with another --hidden or --layers, and every trainer of a job needs the same)", err, f.table, f.socket, f.table)
		}
		return err
	}
	if err := agreeJob(ctx, sync, trainSettings(cfg, f, fan, evalFan), trainFollows(f, layersGiven)); err != nil {
		return err
	}
	tr, err := train.New(cfg, sync)
	if err != nil {
		return err
	}
	if !f.jsonOut {
		fmt.Fprintf(out, "graphsage: %d layers, hidden %d, %d parameters; %d features, %d classes; rank %d of %d; %d training batches per epoch\n",
			cfg.Layers, cfg.Hidden, tr.NumParams(), cfg.FeatDim, cfg.Classes, cfg.Rank, f.worldSize, trainL.BatchesPerEpoch())
		fmt.Fprintln(out, "epoch    loss  train    val   test  batches/s  edges/s  loader wait")
	}
	enc := json.NewEncoder(out)
	var waited time.Duration
	res, err := tr.Run(ctx, data, func(st train.EpochStats) {
		l := epochLine{Epoch: st.Epoch, Loss: st.Loss, TrainAcc: st.TrainAcc, Evaluated: st.Evaluated,
			ValAcc: st.ValAcc, TestAcc: st.TestAcc, Batches: st.Batches, Edges: st.Edges,
			TrainS: st.TrainTime.Seconds(), EvalS: st.EvalTime.Seconds(), WaitS: (tb.wait - waited).Seconds(),
			BatchesPerS: st.BatchesPerSec(), EdgesPerS: st.EdgesPerSec()}
		waited = tb.wait
		stage = inTraining(fmt.Sprintf("after epoch %d", st.Epoch))
		if f.jsonOut {
			enc.Encode(l)
			return
		}
		val, test := "     -", "     -"
		if st.Evaluated {
			val, test = fmt.Sprintf("%6.3f", st.ValAcc), fmt.Sprintf("%6.3f", st.TestAcc)
		}
		fmt.Fprintf(out, "%5d  %6.4f  %5.3f %s %s  %9.1f  %7s  %10.0f%%\n", st.Epoch, st.Loss, st.TrainAcc, val, test,
			l.BatchesPerS, count(int64(l.EdgesPerS)), 100*l.WaitS/max(l.TrainS, 1e-9))
	})
	if err != nil {
		return err
	}
	if res.Stopped && !f.jsonOut {
		// --json says "stopped" in its last line; the table said only
		// its best epoch, and a job of fewer epochs than asked read as
		// cut short.
		fmt.Fprintln(out, stoppedEarly(res, cfg))
	}
	if f.save {
		stage = jobStage{where: "during --save, once training was over", reached: true,
			interrupted: fmt.Sprintf("whether the trained parameters reached kv table %q and a checkpoint is not known (node kv save --socket %s checkpoints what the nodes hold)", f.paramsTable, f.socket)}
		if cfg.Rank != 0 {
			stage.where, stage.interrupted = "while rank 0 saved, once training was over", "rank 0 goes on saving"
		}
		params, which := tr.Params(), "trained"
		if b := tr.BestParams(); b != nil { // --save-best
			params, which = b, fmt.Sprintf("epoch %d's (best val)", res.Epochs[res.Best].Epoch)
		}
		if err := f.saveParams(ctx, out, sync, params, which); err != nil {
			return err
		}
	}
	if err := kvc.Done(ctx); err != nil {
		return err
	}
	best := res.BestEpoch()
	if f.jsonOut {
		return enc.Encode(map[string]any{"best_epoch": best.Epoch, "val_acc": best.ValAcc, "test_acc": best.TestAcc, "stopped": res.Stopped})
	}
	if best.Epoch < 0 {
		fmt.Fprintf(out, "trained %d epochs without evaluation (--eval=false): no best epoch\n", len(res.Epochs))
		return nil
	}
	fmt.Fprintf(out, "best epoch %d: val %.4f test %.4f\n", best.Epoch, best.ValAcc, best.TestAcc)
	return nil
}

// stoppedEarly says that --patience ended the run res of cfg.
func stoppedEarly(res train.Result, cfg train.Config) string {
	last := res.Epochs[len(res.Epochs)-1].Epoch
	evals := "evaluations"
	if cfg.Patience == 1 {
		evals = "evaluation"
	}
	return fmt.Sprintf("stopped early after epoch %d of --epochs %d: no better val accuracy than epoch %d's in the %d %s since (--patience %d)",
		last, cfg.Epochs, res.BestEpoch().Epoch, cfg.Patience, evals, cfg.Patience)
}

// parseLoaderFanouts parses node train's fanout flag named flag as the
// node's loaders take it: each hop -1 (all) or a count ≥ 1. parseFanouts
// also takes 0 (node partition's heat estimate does), and its message
// says "≥ 0"; the loaders refused 0 once node train had connected, and
// node demo had generated, partitioned and started its cluster.
func parseLoaderFanouts(flag, s string) ([]int, error) {
	return parseFanoutsOf(flag, s, 1)
}
