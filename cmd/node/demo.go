package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"graphnode/csr"
	"graphnode/partition"
	"graphnode/shm"
)

// demoFlags are `node demo`'s settings; the defaults finish in under two
// minutes on two cores.
type demoFlags struct {
	input, format, split, method, workdir string
	fanouts, ringSize                     string
	ringBytes                             int64 // --ring-size
	undirected, keep, normalize, eval     bool
	nodes, featDim, classes               int
	epochs, parts, batch, hidden, workers int
	cacheRatio, lr, dropout, inDropout    float64
	seed                                  uint64
}

// runDemo is `node demo`: a two-node cluster on loopback over a generated
// graph (or --input), trained with the built-in GraphSAGE trainer, one
// `node train` per node; then everything is shut down and removed.
func runDemo(ctx context.Context, a *app, args []string) error {
	fs, f := newDemoFlags(a)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if f.parts < 2 {
		return badFlags(fmt.Errorf("--parts %d: a cluster needs at least 2", f.parts))
	}
	if err := f.checkGraphFlags(fs); err != nil {
		return badFlags(err)
	}
	// What the partitioning takes is checked before a graph is generated
	// or read (seconds to minutes), as node partition does.
	if err := (partition.AssignOptions{Method: f.method, Parts: f.parts}).Validate(); err != nil {
		return badFlags(err)
	}
	if err := (partition.CacheOptions{Ratio: f.cacheRatio}).Validate(-1); err != nil {
		return badFlags(fmt.Errorf("--cache-ratio: %w", err))
	}
	// As the demo's trainers' loaders take them: -2 was told "a count
	// ≥ 0", and 0 then "a count ≥ 1".
	if _, err := parseLoaderFanouts("--fanouts", f.fanouts); err != nil {
		return badFlags(err)
	}
	ringSize, err := shm.ParseSize(f.ringSize)
	if err != nil || ringSize <= 0 {
		return badFlags(fmt.Errorf("--ring-size %q: want a size such as 256MB", f.ringSize))
	}
	f.ringBytes = ringSize
	if f.input != "" {
		// Read refused a bad --format, once the demo had begun.
		ro := partition.ReadOptions{Format: f.format}
		_, splitErr := partition.ParseSplit(f.split)
		if err := errors.Join(ro.ValidateFor(f.input), splitErr); err != nil {
			return badFlags(err)
		}
	}
	if err := f.checkCluster(ringSize); err != nil {
		return badFlags(err)
	}
	if f.input == "" {
		// A ring too small for the least the graph will hold; one
		// too small for the graph itself is refused once it is
		// partitioned (an --input's too, once read).
		if err := f.checkRings(f.leastRings()); err != nil {
			return badFlags(err)
		}
	}
	if err := f.checkMemory(a.memory()); err != nil {
		return err
	}
	// Rings of a demo killed outright (SIGKILL, the OOM killer) take the
	// room checkRingSpace measures; they go first.
	sweepKilledDemos(a.stderr)
	if err := f.checkRingSpace(ringSize, demoRingDir); err != nil {
		return err
	}
	return f.runUntilOutputCloses(ctx, a)
}

// checkGraphFlags refuses the flags of --input given without it, and
// those of the generated graph given with it: either was ignored, and a
// bad value of it (--split bogus) ran the demo as if it were not there.
func (f *demoFlags) checkGraphFlags(fs *flag.FlagSet) error {
	var errs []error
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "format", "split", "undirected":
			if f.input == "" {
				errs = append(errs, fmt.Errorf("--%s: for --input only (the stochastic block model graph has its own split and format)", fl.Name))
			}
		case "nodes", "feat-dim", "classes":
			if f.input != "" {
				errs = append(errs, fmt.Errorf("--%s: for the stochastic block model graph, not --input", fl.Name))
			}
		}
	})
	return errors.Join(errs...)
}

// newDemoFlags is `node demo`'s flag set and the settings it fills.
func newDemoFlags(a *app) (*flag.FlagSet, *demoFlags) {
	f := &demoFlags{}
	fs := newFlagSet(a, "demo", "[flags]")
	fs.StringVar(&f.input, "input", "", "a real dataset instead of the generated graph (any node partition --input)")
	fs.StringVar(&f.format, "format", "", "format of --input (default: detected)")
	fs.StringVar(&f.split, "split", "keep", `split of --input: keep, random:0.8,0.1,0.1 or per-class:20,500,1000`)
	fs.BoolVar(&f.undirected, "undirected", false, "add reverse edges to --input")
	fs.BoolVar(&f.normalize, "normalize", false, "row-normalise features in the trainer (bag-of-words inputs such as Cora)")
	fs.IntVar(&f.nodes, "nodes", 200_000, "nodes of the generated stochastic block model graph")
	fs.IntVar(&f.featDim, "feat-dim", 64, "features of the generated graph")
	fs.IntVar(&f.classes, "classes", 16, "classes (blocks) of the generated graph")
	fs.IntVar(&f.parts, "parts", 2, "nodes of the cluster (partitions)")
	fs.StringVar(&f.method, "method", "metis", "partitioning method: metis, random or freq")
	fs.Float64Var(&f.cacheRatio, "cache-ratio", 0.05, "hot nodes of the other part cached in each part file (fraction of its nodes)")
	fs.IntVar(&f.epochs, "epochs", 10, "training epochs")
	fs.StringVar(&f.fanouts, "fanouts", "10,5", "neighbours sampled per hop")
	fs.IntVar(&f.batch, "batch-size", 512, "seeds per batch")
	fs.IntVar(&f.hidden, "hidden", 64, "width of the hidden layer")
	fs.Float64Var(&f.lr, "lr", 0.01, "Adam learning rate")
	fs.Float64Var(&f.dropout, "dropout", 0.5, "dropout between layers")
	fs.Float64Var(&f.inDropout, "input-dropout", 0, "dropout on the input features")
	fs.BoolVar(&f.eval, "eval", true, "evaluate on val and test after every epoch (false: train only, for timing)")
	fs.IntVar(&f.workers, "workers", 1, "sampler processes per loader")
	fs.StringVar(&f.ringSize, "ring-size", "256MB", "ring size per loader")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the graph, the partitioning and the training")
	fs.StringVar(&f.workdir, "workdir", "", "directory for the graph, certificates, configs and logs, new or empty (default: a new temporary one)")
	fs.BoolVar(&f.keep, "keep", false, "keep the work directory (it is removed otherwise)")
	return fs, f
}

// demoRingDir is where the demo's nodes put their rings (a directory of
// their own in it).
const demoRingDir = "/dev/shm"

// sbmConfig is the generated graph's configuration (without --input).
func (f *demoFlags) sbmConfig() partition.SBMConfig {
	c := partition.DefaultSBMConfig()
	c.Nodes, c.FeatDim, c.Blocks, c.Seed = f.nodes, f.featDim, f.classes, f.seed
	c.Exact = true // --nodes 0 is 0 nodes, not the default 200 k
	return c
}

// trainArgs is the command line of rank's `node train` on socket.
func (f *demoFlags) trainArgs(socket string, rank int) []string {
	return []string{"train", "--socket", socket, "--rank", strconv.Itoa(rank), "--world-size", strconv.Itoa(f.parts),
		"--epochs", strconv.Itoa(f.epochs), "--fanouts", f.fanouts, "--batch-size", strconv.Itoa(f.batch),
		"--eval-batch-size", strconv.Itoa(f.evalBatch()),
		"--hidden", strconv.Itoa(f.hidden), "--lr", strconv.FormatFloat(f.lr, 'g', -1, 64),
		"--dropout", strconv.FormatFloat(f.dropout, 'g', -1, 64), "--input-dropout", strconv.FormatFloat(f.inDropout, 'g', -1, 64),
		"--seed", strconv.FormatUint(f.seed, 10), "--workers", strconv.Itoa(f.workers), "--threads", "1", "--json",
		"--normalize=" + strconv.FormatBool(f.normalize), "--eval=" + strconv.FormatBool(f.eval)}
}

func (f *demoFlags) run(ctx context.Context, a *app) (err error) {
	start := time.Now()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	work, created, lock, err := demoWorkdir(f.workdir, f.keep)
	if err != nil {
		return err
	}
	defer func() {
		if lock != nil {
			defer lock.Close()
		}
		if f.keep {
			// Made without a lock file (demoWorkdir): a later demo's
			// sweep leaves it alone. Said on stderr too when stdout has
			// closed (node demo --keep | head).
			if _, werr := fmt.Fprintf(a.stdout, "kept %s\n", work); werr != nil {
				fmt.Fprintf(a.stderr, "node demo: kept %s\n", work)
			}
			return
		}
		if rerr := removeWorkdir(work, created); rerr != nil {
			err = errors.Join(err, rerr)
		} else if err != nil && strings.Contains(err.Error(), work+string(filepath.Separator)) {
			// A failed node or trainer is reported with the tail of its
			// log, named by path: a path that is gone once this returns.
			err = fmt.Errorf("%w\n(the logs named above were removed with the work directory %s: --keep keeps it)", err, work)
		}
	}()
	parts := filepath.Join(work, "parts")
	if err := f.partition(ctx, a, parts); err != nil {
		return err
	}
	m, err := partition.OpenManifest(parts)
	if err != nil {
		return err
	}
	if err := f.checkRings(manifestRings(m)); err != nil {
		return badFlags(err)
	}
	prog := newProgress(a.stderr)
	defer prog.stop()
	prog.report(fmt.Sprintf("starting %d nodes", f.parts), 0, 0)
	cl, err := startDemoCluster(ctx, exe, work, parts, f.parts, f.ringSize, f.workers)
	defer func() {
		if serr := cl.stop(); serr != nil {
			err = errors.Join(err, serr)
		} else {
			fmt.Fprintf(a.stdout, "stopped %d nodes; nothing left in /dev/shm; %.1fs in all\n", f.parts, time.Since(start).Seconds())
		}
	}()
	if err != nil {
		return err
	}
	prog.done()
	return f.train(ctx, a, cl, exe)
}

// demoWorkdir makes the demo's work directory: dir, or a new temporary
// one when dir is "", locked for its sweep (makeDemoDir) until lock is
// closed, unless keep is set: a kept directory holds no lock file from
// the start, so that a later demo's sweep leaves it, the logs in it
// included, even when this demo is killed outright. A dir that exists
// must be empty, since the demo removes what is in it when done; created
// says whether the demo made dir itself (and removes it too).
func demoWorkdir(dir string, keep bool) (work string, created bool, lock *os.File, err error) {
	if dir == "" && keep {
		work, err = os.MkdirTemp(os.TempDir(), demoDirPrefix)
		return work, true, nil, err
	}
	if dir == "" {
		work, lock, err = makeDemoDir(os.TempDir())
		return work, true, lock, err
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", false, nil, fmt.Errorf("--workdir: %w", err)
		}
		return dir, true, nil, nil
	case err != nil:
		return "", false, nil, fmt.Errorf("--workdir: %w", err)
	case len(entries) > 0:
		return "", false, nil, fmt.Errorf("--workdir %s is not empty (it holds %s): the demo removes its work directory's contents when done, so it takes a new or empty one", dir, entries[0].Name())
	}
	return dir, false, nil, nil
}

// removeWorkdir removes what the demo wrote into work, and work itself
// when the demo created it.
func removeWorkdir(work string, created bool) error {
	if created {
		return os.RemoveAll(work)
	}
	entries, err := os.ReadDir(work)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(work, e.Name())))
	}
	return errors.Join(errs...)
}

// partition makes the graph (generated or read) and writes it in parts.
func (f *demoFlags) partition(ctx context.Context, a *app, out string) error {
	prog := newProgress(a.stderr)
	defer prog.stop()
	var g *partition.Graph
	var err error
	split := partition.SplitOptions{Mode: partition.SplitKeep}
	clean := partition.CleanOptions{Undirected: f.undirected}
	if f.input == "" {
		g, err = partition.SBM(ctx, f.sbmConfig(), prog.report)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "generated a stochastic block model graph: %d nodes, %d edges, %d features, %d classes\n",
			g.NumNodes, len(g.Src), g.FeatDim, g.NumClasses)
	} else {
		if g, err = partition.Read(ctx, f.input, partition.ReadOptions{Format: f.format, Progress: prog.report}); err != nil {
			return err
		}
		if err := checkMemoryFloor(f.input, g, a.memory()); err != nil {
			return err
		}
		if split, err = partition.ParseSplit(f.split); err != nil {
			return err
		}
		split.Seed = f.seed
		fmt.Fprintf(a.stdout, "read %s: %d nodes, %d edges, %d features, %d classes\n", f.input, g.NumNodes, len(g.Src), g.FeatDim, g.NumClasses)
		// What the trainers need, before the partitioning: such a graph
		// failed at writing the parts (nothing to cache) or in the
		// trainers, once the cluster ran.
		var lacks []string
		if g.FeatDim == 0 {
			lacks = append(lacks, "features")
		}
		if g.NumClasses < 2 {
			lacks = append(lacks, "labels")
		}
		if len(lacks) > 0 {
			return fmt.Errorf("%s: %d nodes without %s: GraphSAGE trains on features to predict labels (of 2 classes or more)",
				f.input, g.NumNodes, strings.Join(lacks, " or "))
		}
	}
	prog.done()
	adj, err := partition.BuildAdj(ctx, g, csr.In, clean, prog.report)
	if err != nil {
		return err
	}
	prog.done()
	if _, err := partition.Split(g, split); err != nil {
		return err
	}
	fanouts, err := parseFanouts(f.fanouts)
	if err != nil {
		return err
	}
	t := time.Now()
	assign, err := partition.Assign(ctx, g, adj, partition.AssignOptions{Method: f.method, Parts: f.parts, Seed: f.seed,
		Fanouts: fanouts, BatchSize: f.batch, Progress: prog.report})
	if err != nil {
		return err
	}
	took := time.Since(t)
	m, err := partition.Write(ctx, out, g, adj, assign, partition.WriteOptions{Parts: f.parts, Method: f.method, Seed: f.seed,
		Clean: clean, Split: split.String(), Fanouts: fanouts, BatchSize: f.batch,
		Cache: partition.CacheOptions{Ratio: f.cacheRatio}, Progress: prog.report})
	if err != nil {
		return err
	}
	prog.done()
	fmt.Fprintf(a.stdout, "partitioned into %d parts with %s in %.1fs: edge cut %.1f%%, %d/%d/%d train/val/test\n",
		m.Parts, m.Method, took.Seconds(), partitionPct(m.EdgeCut(), m.Edges), m.Train, m.Val, m.Test)
	return nil
}
