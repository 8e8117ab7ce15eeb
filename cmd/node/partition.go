package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"graphnode/csr"
	"graphnode/partition"
	"graphnode/shm"
)

const partitionSynopsis = "--input PATH [--format F] --parts N [--method M] [flags] -o DIR"

// partitionFlags are the values of `node partition`'s flags.
type partitionFlags struct {
	read                                     partition.ReadOptions
	input, out, method, direction, split     string
	selfLoops, duplicates, dangling, missing string
	featDtype, header, ids                   string
	balance, fanouts, cacheBytes             string
	parts, batchSize                         int
	imbalance, cacheRatio                    float64
	seed                                     uint64
	undirected, force, directionSet          bool
	danglingSet, imbalanceSet                bool
}

// runPartition is `node partition`: read a graph, clean it, split it,
// assign its nodes to partitions and write a parts/ directory.
func runPartition(ctx context.Context, a *app, args []string) error {
	var f partitionFlags
	fs := newFlagSet(a, "partition", partitionSynopsis)
	fs.StringVar(&f.input, "input", "", "input file or directory (required)")
	fs.StringVar(&f.read.Format, "format", "", "input format: "+strings.Join(partition.Formats(), ", ")+" (default: guessed from the path)")
	fs.StringVar(&f.read.Name, "name", "", "graph name recorded in graph.toml (default: the input's base name); planetoid: also which ind.<name>.* files of the directory to read (default: the only ones)")
	fs.IntVar(&f.parts, "parts", 1, "number of partitions")
	fs.StringVar(&f.method, "method", partition.MethodRandom, "partitioner: random (balanced random), metis (multilevel edge cut), freq (access frequency of each trainer's sampling, as GLT's FrequencyPartitioner: part p holds rank p's training nodes and the nodes it reads most)")
	fs.StringVar(&f.balance, "balance", "nodes", "quantities to balance, a list of nodes, edges (stored edges per part) and train (training nodes per part); nodes always; metis and freq balance all three (freq: train by construction), random nodes")
	fs.Float64Var(&f.imbalance, "imbalance", partition.DefaultImbalance, "largest allowed max/mean of every balanced quantity (metis and freq; not with random, which is exact)")
	fs.StringVar(&f.fanouts, "fanouts", "15,10,5", "sampling fanouts per hop (-1 = all) for the freq heat estimate, the cache ranking and the expected read shares; \"none\" skips the estimate (not with --method freq, which places nodes by it)")
	fs.IntVar(&f.batchSize, "batch-size", partition.DefaultBatchSize, "the trainers' batch size, for the estimate's per-batch deduplication (0 = count visits)")
	fs.Float64Var(&f.cacheRatio, "cache-ratio", 0, "cache in every part file the hottest nodes it does not own, up to this fraction of the nodes it owns (0.2 = 20%)")
	fs.StringVar(&f.cacheBytes, "cache-bytes", "", "instead of --cache-ratio: cache up to this many bytes per part, feature rows and their 8-byte ids (64MB, 1GiB, ...)")
	fs.StringVar(&f.direction, "direction", "in", "which endpoint owns an edge: in (the destination; sampling expands in-neighbours) or out; knowledge graphs default to out (a triple goes with its head)")
	fs.BoolVar(&f.undirected, "undirected", false, "add the reverse of every edge (reciprocal pairs become duplicates, dropped by default)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the random choices (assignment, splits); below 2^63")
	fs.StringVar(&f.selfLoops, "self-loops", "keep", "self loops: keep, drop or error")
	fs.StringVar(&f.duplicates, "duplicates", "drop", "repeated edges (same pair and relation): drop (the first is kept), keep or error")
	fs.StringVar(&f.dangling, "dangling", "drop", "edges or labels naming an unknown node: drop, add (the node) or error")
	fs.StringVar(&f.missing, "missing-label", "keep", "nodes without a label: keep (label -1, in no split) or error")
	fs.StringVar(&f.split, "split", "keep", "train/val/test: keep (the input's), random:TRAIN,VAL,TEST fractions, or per-class:TRAIN,VAL,TEST counts")
	fs.StringVar(&f.featDtype, "feat-dtype", "f32", "feature type on disk: f32 or f16 (round to nearest even)")
	fs.BoolVar(&f.force, "force", false, "replace an existing non-empty output directory once the new partitioning is complete (needs room for both)")
	fs.StringVar(&f.out, "o", "", "output directory (required)")
	fs.BoolVar(&f.read.Weighted, "weighted", false, "edge lists: the third column is an edge weight")
	fs.StringVar(&f.header, "header", "auto", "edge lists: the first line is a header: auto, yes or no")
	fs.StringVar(&f.ids, "ids", "auto", "edge lists: node ids are int, string, or auto (integers until one is not, or is spelt with a leading zero: then strings as spelt)")
	fs.StringVar(&f.read.NodeFile, "node-file", "", "edge lists: file of node ids, one per line (adds isolated nodes, defines the known nodes)")
	fs.StringVar(&f.read.LabelFile, "label-file", "", "edge lists: file of \"id label\" lines (an id given twice or more is multi-label; label -1 or nan: none)")
	fs.StringVar(&f.read.SplitScheme, "split-scheme", "", "ogb: the folder under split/ (default: the only one)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	usage := func(format string, v ...any) error {
		fmt.Fprintf(a.stderr, "node partition: "+format+"\n", v...)
		fs.Usage()
		return errUsage
	}
	if len(pos) > 0 {
		return usage("unexpected argument %q", pos[0])
	}
	// Partitioning's heap is a few large pointer-free arrays (edges,
	// features, the coarsening hierarchy): collecting at 25% growth costs
	// little CPU and keeps peak memory near what is live while the input
	// is read into growing arrays.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	if f.input == "" || f.out == "" {
		return usage("--input and -o are required")
	}
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "direction":
			f.directionSet = true
		case "dangling":
			f.danglingSet = true
		case "imbalance":
			f.imbalanceSet = true
		}
	})
	return partitionRun(ctx, a, &f)
}

// partitionRun runs the pipeline once the flags are parsed.
func partitionRun(ctx context.Context, a *app, f *partitionFlags) error {
	start := time.Now()
	// Every bad flag is collected, not the first returned: the user
	// fixes them in one go (README: refused all at once).
	var errs []error
	dir := csr.In
	switch f.direction {
	case "in":
	case "out":
		dir = csr.Out
	default:
		errs = append(errs, fmt.Errorf("--direction %q: want in or out", f.direction))
	}
	featType := csr.TypeF32
	switch f.featDtype {
	case "f32":
	case "f16":
		featType = csr.TypeF16
	default:
		errs = append(errs, fmt.Errorf("--feat-dtype %q: want f32 or f16", f.featDtype))
	}
	balance, err := partition.ParseBalance(f.balance)
	if err != nil {
		errs = append(errs, fmt.Errorf("--balance: %w", err))
	}
	if f.imbalanceSet && f.method == partition.MethodRandom {
		// Refused as a quantity random cannot balance is: it was taken,
		// ignored, and printed as the bound asked.
		errs = append(errs, fmt.Errorf("--imbalance %g: method random balances nodes exactly and takes no imbalance: leave --imbalance out, or use --method metis or freq", f.imbalance))
	}
	var fanouts []int
	fanoutsOK := true // a bad --fanouts is reported once, not again as none
	if f.fanouts != "none" {
		if fanouts, err = parseFanouts(f.fanouts); err != nil {
			errs = append(errs, err)
			fanoutsOK = false
		}
	}
	cache := partition.CacheOptions{Ratio: f.cacheRatio}
	if f.cacheBytes != "" {
		if cache.Bytes, err = shm.ParseSize(f.cacheBytes); err != nil {
			errs = append(errs, fmt.Errorf("--cache-bytes: %w", err))
		}
	}
	if cache.On() && fanouts == nil && fanoutsOK {
		errs = append(errs, fmt.Errorf("--cache-ratio/--cache-bytes need --fanouts to rank the hot nodes"))
	}
	if f.method == "freq" && fanouts == nil && fanoutsOK {
		// It took 15,10,5 without a word, and graph.toml recorded none.
		errs = append(errs, fmt.Errorf("--method freq places nodes by the heat of sampling with --fanouts: give the trainers' fanouts, not none"))
	}
	if f.batchSize < 0 {
		errs = append(errs, fmt.Errorf("--batch-size %d: want ≥ 0", f.batchSize))
	}
	if f.seed > math.MaxInt64 {
		errs = append(errs, fmt.Errorf("--seed %d: want below 2^63", f.seed))
	}
	clean := partition.CleanOptions{SelfLoops: partition.Policy(f.selfLoops), Duplicates: partition.Policy(f.duplicates), Undirected: f.undirected}
	split, err := partition.ParseSplit(f.split)
	if err != nil {
		errs = append(errs, err)
	}
	split.Seed = f.seed
	f.read.MissingLabel = partition.Policy(f.missing)
	f.read.EvalRepeats = partition.Policy(f.duplicates) // a knowledge graph's valid and test triples
	if f.danglingSet {                                  // else the reader's default: a format without the policy refuses it
		f.read.Dangling = partition.Policy(f.dangling)
	}
	f.read.Header = f.header
	if f.header == "auto" {
		f.read.Header = partition.HeaderAuto
	}
	f.read.IDs = f.ids
	estFanouts := fanouts
	if estFanouts == nil {
		estFanouts = partition.DefaultFanouts()
	}
	assignOpts := partition.AssignOptions{
		Method: f.method, Parts: f.parts, Seed: f.seed, Balance: balance, Imbalance: f.imbalance,
		Fanouts: estFanouts, BatchSize: f.batchSize,
	}
	// Everything that does not need the graph is checked before the
	// input is read, which can take minutes; every problem at once.
	// A bad flag among them makes the exit status a usage error's;
	// options of another format than the one guessed from the input's
	// path are bad flags as they are beside --format.
	errs = append(errs, f.read.ValidateFor(f.input), clean.Validate(), assignOpts.Validate(), cache.Validate(-1))
	flagErr := errors.Join(errs...)
	checked, outErr := partition.CheckOutput(f.out, f.force)
	if err := errors.Join(flagErr, outErr, outputHoldsInput(f)); err != nil {
		if flagErr != nil {
			return badFlags(err)
		}
		return err
	}
	// Hidden, and never removed by a later run: two kills left 91 MB.
	var tmps, olds []string
	for _, left := range checked.Leftovers() {
		if left.Old {
			olds = append(olds, left.Path)
		} else {
			tmps = append(tmps, left.Path)
		}
	}
	if len(tmps) > 0 {
		fmt.Fprintf(a.stdout, "note: %s: the temporary output of a node partition into %s that did not finish (killed before it put its output in place), or of one running now: remove it once none runs\n",
			strings.Join(tmps, ", "), f.out)
	}
	if len(olds) > 0 {
		fmt.Fprintf(a.stdout, "note: %s: the previous partitioning of %s, which a node partition --force moved aside when it replaced it and did not finish removing (killed, or the removal failed), or is removing now: remove it once none runs\n",
			strings.Join(olds, ", "), f.out)
	}
	prog := newProgress(a.stderr)
	defer prog.stop()
	f.read.Progress = prog.report

	g, err := partition.Read(ctx, f.input, f.read)
	if err != nil {
		return err
	}
	prog.done()
	read := g.Stats
	edges := fmt.Sprintf("%d edges", len(g.Src))
	if read.ReverseAdded > 0 {
		// Planetoid's adjacency lists, made symmetric as DGL does.
		edges = fmt.Sprintf("%d edges (%d of them the reverses of listed ones the file lacks)", len(g.Src), read.ReverseAdded)
	}
	fmt.Fprintf(a.stdout, "read %s: %d nodes, %s, %d features, %d classes, %d/%d/%d train/val/test\n",
		f.input, g.NumNodes, edges, g.FeatDim, g.NumClasses, len(g.Train), len(g.Val), len(g.Test))
	if err := checkMemoryFloor(f.input, g, a.memory()); err != nil {
		return err
	}
	if g.KG != nil && !f.directionSet {
		dir = csr.Out // a triple is stored with its head entity, as DGL-KE does
	}
	// Before BuildAdj consumes the edges; a pass over them only when some
	// self loop was listed.
	distinctLoops := g.Stats.SelfLoops
	if distinctLoops > 0 {
		if distinctLoops, err = g.DistinctSelfLoops(ctx); err != nil {
			return err
		}
	}
	adj, err := partition.BuildAdj(ctx, g, dir, clean, prog.report)
	if err != nil {
		return err
	}
	prog.done()
	s := g.Stats
	// graph.toml's self_loops counts every self loop listed; a graph
	// that lists one twice (Planetoid's CiteSeer, each of its 124) says
	// how many there are besides, or 248 reads as 248 loops stored.
	distinct := ""
	if distinctLoops != s.SelfLoops {
		distinct = fmt.Sprintf("%d distinct; ", distinctLoops)
	}
	fmt.Fprintf(a.stdout, "cleaned: %d edges stored (direction %s); self loops %d (%sdropped %d), duplicates dropped %d, reverse edges added %d, dangling %d (dropped %d), missing labels %d\n",
		adj.NumEdges(), dir, s.SelfLoops, distinct, s.SelfLoopsDrop, s.Duplicates, s.ReverseAdded, read.Dangling, read.DanglingDrop, read.MissingLabels)
	if note, err := oneWayNote(ctx, g, adj, f.undirected); err != nil {
		return err
	} else if note != "" {
		fmt.Fprintln(a.stdout, note)
	} else if !f.undirected && readFormat(f) == partition.FormatLINQS {
		// A few citations go both ways, so the note above keeps quiet,
		// and a DGL or PyG user's Cora then trains on half its edges,
		// one way: those libraries store Cora and CiteSeer both ways.
		fmt.Fprintln(a.stdout, "note: LINQS lists each citation once, citing to cited: DGL and PyG train on Cora and CiteSeer undirected, each edge both ways: --undirected adds the reverses. A directed graph needs nothing.")
	}
	if read.EvalRepeats > 0 {
		verb := "dropped"
		if f.duplicates == string(partition.Keep) {
			verb = "kept (each counts twice in MRR and Hits@k)"
		}
		fmt.Fprintf(a.stdout, "repeated valid/test triples (a triple listed again in its file): %d %s\n", read.EvalRepeats, verb)
	}
	removed, err := partition.Split(g, split)
	if err != nil {
		return err
	}
	if removed > 0 {
		fmt.Fprintf(a.stdout, "split: %d unlabelled nodes taken out of the input's splits\n", removed)
	}
	// Checked: the run began at CheckOutput, before the input was read;
	// what appears in the output since fails it at the end, which keeps
	// the finished output, not before anything is written.
	writeOpts := partition.WriteOptions{
		Parts: f.parts, Force: f.force, Checked: checked, FeatType: featType, Method: f.method, Seed: f.seed,
		Clean: clean, Split: split.String(), Balance: balance, Imbalance: f.imbalance,
		Fanouts: fanouts, BatchSize: f.batchSize, Cache: cache, Progress: prog.report,
	}
	// What the files cannot take is refused before the assignment, which
	// takes hours on the largest graphs, not after it.
	if err := partition.CheckWrite(g, writeOpts); err != nil {
		return err
	}
	assignOpts.Progress = prog.report
	assign, err := partition.Assign(ctx, g, adj, assignOpts)
	if err != nil {
		return err
	}
	prog.done()
	m, err := partition.Write(ctx, f.out, g, adj, assign, writeOpts)
	if err != nil {
		return err
	}
	prog.done()
	fmt.Fprintf(a.stdout, "split %s: %d/%d/%d train/val/test\n", m.Split, m.Train, m.Val, m.Test)
	if m.Train == 0 && m.Relations == 0 && f.split == "keep" {
		// A LINQS Cora, the first graph many try, then failed at the
		// trainer with "partition 0 has no train nodes".
		fmt.Fprintln(a.stdout, "note: no training nodes: the input carries no split of its own (LINQS files and edge lists do not), "+
			"and a trainer's loader over split \"train\" finds none; pass --split per-class:20,500,1000 (Planetoid's counts) or --split random:0.8,0.1,0.1")
	}
	fmt.Fprintf(a.stdout, "partitioned into %d parts (%s, seed %d): %s %.2f%%\n", m.Parts, m.Method, m.Seed, m.CutName(), partitionPct(m.EdgeCut(), m.Edges))
	train := "-" // no training nodes: nothing to balance
	if m.Train > 0 {
		train = fmt.Sprintf("%.3f", m.Achieved.Train)
	}
	asked := fmt.Sprintf("%s within %.3f", strings.Join(balance, ","), f.imbalance)
	if f.method == partition.MethodRandom {
		asked = strings.Join(balance, ",") + "; random is exact" // and takes no --imbalance
	}
	fmt.Fprintf(a.stdout, "balance max/mean (asked: %s): nodes %.3f, edges %.3f, train %s\n",
		asked, m.Achieved.Nodes, m.Achieved.Edges, train)
	for _, line := range append(missNotes(m, f.method, balance, f.imbalance), skewNotes(m, f.method, balance)...) {
		fmt.Fprintln(a.stdout, line)
	}
	if m.Fanouts != nil {
		var reads, local, cached, remote, cachedN float64
		for _, p := range m.Part {
			reads += p.Reads
			local += p.Reads * p.ReadsLocal
			cached += p.Reads * p.ReadsCached
			remote += p.Reads * p.ReadsRemote
			cachedN += float64(p.Cache)
		}
		if reads > 0 {
			local, cached, remote = local/reads, cached/reads, remote/reads
		}
		fmt.Fprintf(a.stdout, "expected feature reads per epoch (fanouts %s, batch %d): local %.2f%%, cached %.2f%%, remote %.2f%%; %d nodes cached\n",
			f.fanouts, m.BatchSize, 100*local, 100*cached, 100*remote, int64(cachedN))
	}
	fmt.Fprintf(a.stdout, "wrote %s: %s in %d files, checksum %s, %.1fs\n",
		f.out, partitionBytes(m.Bytes()), len(m.File)+1, m.Checksum, time.Since(start).Seconds())
	return nil
}

// outputHoldsInput refuses --force when the output directory it would
// replace holds an input file: the output is replaced whole, so the
// input would be deleted with it (-o . beside the edge list).
func outputHoldsInput(f *partitionFlags) error {
	if !f.force {
		return nil
	}
	out, err := realPath(f.out)
	if err != nil {
		return nil // no output yet: nothing to replace
	}
	for _, in := range []string{f.input, f.read.NodeFile, f.read.LabelFile} {
		if in == "" {
			continue
		}
		p, err := realPath(in)
		if err != nil {
			continue // an input that is not there fails when it is read
		}
		if rel, err := filepath.Rel(out, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("-o %s holds the input %s, which --force would delete with the directory it replaces: write the partitions elsewhere", f.out, in)
		}
	}
	return nil
}

// realPath is path made absolute, its symbolic links resolved.
func realPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

func partitionPct(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// partitionBytes prints n bytes with a binary unit.
func partitionBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// parseFanouts parses "15,10,5" (-1 = all neighbours).
func parseFanouts(s string) ([]int, error) { return parseFanoutsOf("--fanouts", s, 0) }

// parseFanoutsOf parses flag's fanout list s, each hop -1 (all) or a
// count ≥ least (0 or 1) up to math.MaxInt32, as partition.ValidFanouts
// checks it besides. The loaders refuse a larger count (the mesh carries
// a fanout as an int32): node train met it once connected, node demo
// once it had generated, partitioned and started its cluster.
func parseFanoutsOf(flag, s string, least int) ([]int, error) {
	var out []int
	for k, f := range strings.Split(s, ",") {
		t := strings.TrimSpace(f)
		n, err := strconv.Atoi(t)
		if errors.Is(err, strconv.ErrRange) {
			err = nil // a count past int's range, n held at its bound
		}
		switch {
		case err == nil && n > math.MaxInt32:
			return nil, fmt.Errorf("%s %q: hop %d is %s, over %d: -1 takes every neighbour", flag, s, k+1, t, math.MaxInt32)
		case err != nil:
			return nil, fmt.Errorf("%s %q: %q is not an integer", flag, s, f)
		case least > 0 && n == 0:
			return nil, fmt.Errorf("%s %q: hop %d samples 0 neighbours: want -1 (all) or a count ≥ %d", flag, s, k+1, least)
		case n < -1: // as typed: past int's range n is its bound
			return nil, fmt.Errorf("%s %q: hop %d is %s: want -1 (all) or a count ≥ %d", flag, s, k+1, t, max(least, 0))
		}
		out = append(out, n)
	}
	if err := partition.ValidFanouts(out); err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, s, err)
	}
	return out, nil
}

// readFormat is the input's format: --format, or the one guessed from
// the path ("" when neither: Read has refused it then).
func readFormat(f *partitionFlags) string {
	if f.read.Format != "" {
		return f.read.Format
	}
	format, _ := partition.DetectFormat(f.input)
	return format
}
