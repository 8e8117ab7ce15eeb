package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"time"

	"graphnode/partition"
)

const genSynopsis = "rmat|sbm [flags] -o DIR"

// runGen is `node gen rmat|sbm`: generate a synthetic graph and write it in
// the OGB raw layout, which `node partition --format ogb` reads.
func runGen(ctx context.Context, a *app, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(a.stderr, "usage: node gen %s\n\n"+
			"generators:\n"+
			"  rmat  R-MAT power-law graph (Graph500 parameters), ogbn-products sized with\n"+
			"        --nodes 2400000 --edges 62000000 --feat-dim 100 --classes 47\n"+
			"  sbm   stochastic block model: communities = classes, noisy block features\n\n"+
			"Output is the OGB raw layout (raw/*.csv, split/<scheme>/*.csv).\n"+
			"Run 'node gen rmat --help' or 'node gen sbm --help' for the flags.\n", genSynopsis)
		if len(args) == 0 {
			return errUsage
		}
		return flag.ErrHelp
	}
	kind, args := args[0], args[1:]
	var w genWrite
	var generate func() (*partition.Graph, error)
	var validate func() error                  // the generator's config, from the flags
	var nodes, edges, featDim, classes float64 // the graph's size, for the memory check
	prog := newProgress(a.stderr)
	defer prog.stop()

	switch kind {
	case "rmat":
		c := partition.DefaultRMATConfig()
		fl := newFlagSet(a, "gen rmat", "[flags] -o DIR")
		fl.IntVar(&c.Nodes, "nodes", c.Nodes, "number of nodes (any count, not only powers of two)")
		fl.Int64Var(&c.Edges, "edges", c.Edges, "number of generated edges (undirected pairs with --undirected)")
		fl.Float64Var(&c.A, "a", c.A, "R-MAT probability of the top-left quadrant (--a, --b and --c all 0 are refused: d = 1 makes every edge the same self loop)")
		fl.Float64Var(&c.B, "b", c.B, "R-MAT probability of the top-right quadrant")
		fl.Float64Var(&c.C, "c", c.C, "R-MAT probability of the bottom-left quadrant (d = 1-a-b-c)")
		fl.Float64Var(&c.Noise, "noise", c.Noise, "per-level noise on a,b,c,d that smooths the degree distribution (0 = plain R-MAT)")
		fl.IntVar(&c.FeatDim, "feat-dim", c.FeatDim, "float32 features per node (class centroid + Gaussian noise); 0 = none")
		fl.IntVar(&c.Classes, "classes", c.Classes, "label classes; 0 = no labels")
		fl.BoolVar(&c.Undirected, "undirected", false, "write both directions of every generated edge (2 x --edges edges)")
		genCommonFlags(fl, &c.TrainFrac, &c.ValFrac, &c.TestFrac, &c.Seed, &w)
		if err := genParse(fl, args, &w); err != nil {
			return err
		}
		// RMATConfig takes a, b and c all 0 as Graph500's 0.57, 0.19,
		// 0.19, which the flags start from: given as 0, they were
		// replaced without a word.
		if c.A == 0 && c.B == 0 && c.C == 0 {
			fmt.Fprintf(fl.Output(), "node %s: --a, --b, --c = 0, 0, 0: d = 1 makes every edge the same self loop: give the quadrant probabilities (Graph500's: 0.57, 0.19, 0.19)\n", fl.Name())
			return errUsage
		}
		c.Workers = w.workers
		nodes, edges, featDim, classes = float64(c.Nodes), float64(c.Edges), float64(c.FeatDim), float64(c.Classes)
		if c.Undirected {
			edges *= 2
		}
		generate = func() (*partition.Graph, error) { return partition.RMAT(ctx, c, prog.report) }
		validate = c.Validate
	case "sbm":
		c := partition.DefaultSBMConfig()
		c.Exact = true // a flag given as 0 means 0
		fl := newFlagSet(a, "gen sbm", "[flags] -o DIR")
		fl.IntVar(&c.Nodes, "nodes", c.Nodes, "number of nodes")
		fl.IntVar(&c.Blocks, "blocks", c.Blocks, "number of blocks (communities), which are also the label classes")
		fl.Float64Var(&c.AvgDegree, "avg-degree", c.AvgDegree, "mean directed edges per node, at most --nodes - 1 (every edge is written in both directions, none twice)")
		fl.Float64Var(&c.Homophily, "homophily", c.Homophily, "fraction of edges that stay inside their block (1/blocks = no community signal; with --blocks 1 every edge does)")
		fl.IntVar(&c.FeatDim, "feat-dim", c.FeatDim, "float32 features per node; 0 = none")
		fl.Float64Var(&c.Signal, "signal", c.Signal, "standard deviation of the block centroids' entries (feature signal)")
		fl.Float64Var(&c.Noise, "noise", c.Noise, "standard deviation of the per-node feature noise")
		genCommonFlags(fl, &c.TrainFrac, &c.ValFrac, &c.TestFrac, &c.Seed, &w)
		if err := genParse(fl, args, &w); err != nil {
			return err
		}
		// With one block there is no other for an edge to go to: a
		// --homophily under 1 was ignored without a word.
		if c.Blocks == 1 && c.Homophily != 1 && genFlagSet(fl, "homophily") {
			fmt.Fprintf(fl.Output(), "node %s: --homophily %g with --blocks 1: every edge stays in the one block; give --blocks 2 or more\n", fl.Name(), c.Homophily)
			return errUsage
		}
		c.Workers = w.workers
		nodes, edges, featDim, classes = float64(c.Nodes), float64(c.Nodes)*c.AvgDegree, float64(c.FeatDim), float64(c.Blocks)
		generate = func() (*partition.Graph, error) { return partition.SBM(ctx, c, prog.report) }
		validate = c.Validate
	default:
		fmt.Fprintf(a.stderr, "node gen: unknown generator %q (want rmat or sbm)\n", kind)
		return errUsage
	}

	// Before generating, which takes minutes at ogbn-products' size.
	if err := validate(); err != nil {
		return badFlags(err)
	}
	checked, err := partition.CheckOGBOutput(w.out, w.force)
	if err != nil {
		return err
	}
	// A size off by digits would end in the runtime's out-of-memory crash
	// once every edge is drawn.
	if need, have := genMemory(nodes, edges, featDim, classes), a.memory(); have > 0 && need > float64(have) {
		return fmt.Errorf("%s: %.0f nodes, %.0f edges, %.0f features a node and %.0f classes hold %s, more than the %s of memory and swap of this machine",
			kind, nodes, edges, featDim, classes, partitionBytes(int64(min(need, math.MaxInt64))), partitionBytes(int64(have)))
	}
	start := time.Now()
	g, err := generate()
	if err != nil {
		return err
	}
	prog.done()
	g.Name = kind
	// Checked: the run began at CheckOGBOutput, before the graph was
	// generated; what appears in the output since fails it at the end,
	// which keeps the finished output, not before anything is written.
	err = partition.WriteOGB(ctx, w.out, g, partition.OGBWriteOptions{
		Gzip: w.gzip, Scheme: w.scheme, Force: w.force, Checked: checked, Workers: w.workers, Progress: prog.report,
	})
	if err != nil {
		return err
	}
	prog.done()
	files, size, err := genDirSize(w.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "gen %s: %d nodes, %d edges, %d features, %d classes, %d self loops; %d files, %s bytes in %s, %.1fs\n",
		kind, g.NumNodes, len(g.Src), g.FeatDim, g.NumClasses, g.Stats.SelfLoops, files, count(size), w.out, time.Since(start).Seconds())
	return nil
}

// genMemory is what a generated graph holds, whole: 8 bytes an edge, 4
// a feature, 8 a node (its label and split), and the class centroids its
// features are drawn around, 8 bytes a value (classes × featDim: 1e8
// classes of 1e5 features are 80 TB, which the estimate left out). In
// float64, which no flag overflows.
func genMemory(nodes, edges, featDim, classes float64) float64 {
	return 8*edges + 4*nodes*featDim + 8*nodes + 8*max(classes, 1)*featDim
}

// genFlagSet reports whether flag name was given on fl's command line.
func genFlagSet(fl *flag.FlagSet, name string) bool {
	set := false
	fl.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// genWrite holds the output flags both generators share.
type genWrite struct {
	out, scheme string
	gzip, force bool
	workers     int
}

func genCommonFlags(fl *flag.FlagSet, train, val, test *float64, seed *uint64, w *genWrite) {
	fl.Float64Var(train, "train-frac", *train, "fraction of the non-isolated nodes in the train split (all three fractions 0: the defaults)")
	fl.Float64Var(val, "val-frac", *val, "fraction of the non-isolated nodes in the validation split")
	fl.Float64Var(test, "test-frac", *test, "fraction of the non-isolated nodes in the test split")
	fl.Uint64Var(seed, "seed", *seed, "random seed; the same seed gives the same graph whatever --workers")
	fl.IntVar(&w.workers, "workers", 0, fmt.Sprintf("generator and writer goroutines (0 = all CPUs, at most %d)", partition.MaxGenWorkers))
	fl.StringVar(&w.out, "o", "", "output `DIR` (required); created, must be empty unless --force")
	fl.StringVar(&w.scheme, "split", "random", "split `scheme`: the folder name under split/")
	fl.BoolVar(&w.gzip, "gzip", false, "gzip every file (*.csv.gz, as OGB ships them)")
	fl.BoolVar(&w.force, "force", false, "write into a non-empty directory, replacing the raw/ and split/ it holds once the new ones are complete (needs room for both; one that appears during the run is kept)")
}

func genParse(fl *flag.FlagSet, args []string, w *genWrite) error {
	pos, err := parseFlags(fl, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fmt.Fprintf(fl.Output(), "node %s: unexpected argument %q\n", fl.Name(), pos[0])
		fl.Usage()
		return errUsage
	}
	if w.out == "" {
		fmt.Fprintf(fl.Output(), "node %s: -o DIR is required\n", fl.Name())
		fl.Usage()
		return errUsage
	}
	// The scheme is one folder under split/, as partition --split-scheme
	// reads it: "a/b" nests it, and ".." reaches out of the output (or
	// out of the temporary directory the files are written to first).
	// "" was taken as the default, random, without a word.
	if w.scheme == "" || w.scheme == "." || w.scheme == ".." || strings.ContainsAny(w.scheme, `/\`) {
		fmt.Fprintf(fl.Output(), "node %s: --split %q: want a folder name, without / or \\, not . or ..\n", fl.Name(), w.scheme)
		return errUsage
	}
	// ogbPipeline keeps 2*workers+2 chunks in flight: --workers 1e8 went
	// to the OOM killer, leaving the output's temporary directory.
	if w.workers < 0 || w.workers > partition.MaxGenWorkers {
		fmt.Fprintf(fl.Output(), "node %s: --workers %d: want 0 (all CPUs, at most %d) to %d\n", fl.Name(), w.workers, partition.MaxGenWorkers, partition.MaxGenWorkers)
		return errUsage
	}
	return nil
}

// genDirSize counts the files and bytes under dir's raw/ and split/.
func genDirSize(dir string) (files int, size int64, err error) {
	for _, sub := range []string{"raw", "split"} {
		n, b, err := treeSize(filepath.Join(dir, sub))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, 0, fmt.Errorf("gen: %w", err)
		}
		files += n
		size += b
	}
	return files, size, nil
}

// treeSize counts the regular files under root and their bytes.
func treeSize(root string) (files int, size int64, err error) {
	err = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files++
		size += fi.Size()
		return nil
	})
	return files, size, err
}
