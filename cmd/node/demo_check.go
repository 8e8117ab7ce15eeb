package main

import (
	"errors"
	"fmt"
	"io"
	"math"

	"graphnode/node"
	"graphnode/node/control"
	"graphnode/partition"
	"graphnode/sample"
	"graphnode/shm"
)

// What node demo checks before it works, and once the graph is
// partitioned before it starts the cluster: everything its nodes and
// trainers would refuse only once they run.

// checkRingSpace refuses a --ring-size whose rings cannot all be made in
// dir: every node's trainer holds a train loader and, with --eval, a val
// and a test loader open at once, each a ring of ringSize reserved when
// it opens. They were refused only once the graph was partitioned and
// the cluster started (a container's 64 MiB /dev/shm against the default
// 256MB), after the rings that did fit had filled the tmpfs, and with it
// memory.
func (f *demoFlags) checkRingSpace(ringSize int64, dir string) error {
	free, _, err := shm.DirSpace(dir)
	if err != nil {
		return fmt.Errorf("--ring-size: %w", err)
	}
	loaders, which := 1, "train"
	if f.eval {
		loaders, which = 3, "train, val and test"
	}
	rings := int64(f.parts * loaders)
	if ringSize <= free/rings {
		return nil
	}
	return fmt.Errorf("--ring-size %s: the %d rings of the demo's loaders (%d nodes × %s) need %s in %s, which has %s free: lower --ring-size",
		f.ringSize, rings, f.parts, which, demoBytes(float64(ringSize)*float64(rings)), dir, demoBytes(float64(free)))
}

// demoBytes prints n bytes in the units of --ring-size (powers of 1000).
func demoBytes(n float64) string {
	for _, u := range []string{"B", "KB", "MB", "GB", "TB", "PB"} {
		if n < 1000 || u == "PB" {
			return fmt.Sprintf("%.2f %s", n, u)
		}
		n /= 1000
	}
	return ""
}

// checkCluster refuses, before the graph is generated or read, what the
// nodes and trainers would refuse only once it is partitioned and the
// cluster started: the sampler count and ring size of the nodes' config,
// a generated graph GraphSAGE cannot train on, and every setting the
// trainers check, from the arguments they will be given. (A ring too
// small for the graph's batches is refused once the graph is
// partitioned: checkRings.)
func (f *demoFlags) checkCluster(ringSize int64) error {
	var errs []error
	trainer := *f
	if f.workers < 1 || f.workers > node.MaxWorkers {
		errs = append(errs, fmt.Errorf("--workers %d: want 1 to %d", f.workers, node.MaxWorkers))
		trainer.workers = 1 // said once
	} else if least := node.MinRingSize(f.workers); ringSize < least {
		// The nodes refused their rings.size at start.
		errs = append(errs, fmt.Errorf("--ring-size %s: want at least %s, %s", f.ringSize, shm.FormatSize(least), subRingsNeed(f.workers)))
	}
	if f.input == "" && f.featDim < 1 {
		errs = append(errs, fmt.Errorf("--feat-dim %d: want ≥ 1 (GraphSAGE trains on features)", f.featDim))
	}
	if f.input == "" && f.classes < 2 {
		errs = append(errs, fmt.Errorf("--classes %d: want ≥ 2", f.classes))
	} else if f.input == "" {
		errs = append(errs, f.sbmConfig().Validate()) // --nodes, and blocks per node
	}
	fs, tf := newTrainFlags(&app{stdout: io.Discard, stderr: io.Discard})
	if err := parseNoArgs(fs, trainer.trainArgs("demo.sock", 0)[1:]); err != nil {
		return fmt.Errorf("the trainers' arguments do not parse (a bug of the demo's): %v", err)
	}
	if err := tf.check(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkMemory refuses a generated graph that this machine, of have bytes
// of memory and swap (0: unknown), cannot generate and partition: node
// gen refuses the same graph, and the demo ended in the runtime's "out of
// memory" crash, leaving its work directory. An --input is checked once
// read (checkMemoryFloor).
func (f *demoFlags) checkMemory(have uint64) error {
	if f.input != "" || have == 0 {
		return nil
	}
	c := f.sbmConfig()
	nodes, edges := float64(c.Nodes), float64(c.Nodes)*c.AvgDegree
	need := genMemory(nodes, edges, float64(c.FeatDim), float64(c.Blocks)) + 16*nodes + 4*edges // partition.Graph.MemoryFloor
	if need <= float64(have) {
		return nil
	}
	return fmt.Errorf("--nodes %d: the stochastic block model graph (%.0f edges, %d features, %d classes) and its partitioning need at least %s, more than the %s of memory and swap of this machine",
		c.Nodes, edges, c.FeatDim, c.Blocks, partitionBytes(int64(min(need, math.MaxInt64))), partitionBytes(int64(have)))
}

// ringGraph is what checkRings needs of the graph: its nodes, their
// largest degree, its splits and what a batch carries of each node.
type ringGraph struct {
	nodes, maxDeg    uint64
	train, val, test uint64
	schema           sample.Schema
	// least: a graph not yet generated, of which every count but nodes
	// is the least it will have (partition.SBMConfig.Least).
	least bool
}

// manifestRings is the partitioned graph that graph.toml m describes.
func manifestRings(m *partition.Manifest) ringGraph {
	maxDeg, _ := m.MaxDegree()
	schema := sample.Schema{FeatDim: m.FeatDim, XType: sample.F32, LabelDim: m.LabelDim}
	if m.FeatDtype == "f16" {
		schema.XType = sample.F16
	}
	return ringGraph{nodes: m.Nodes, maxDeg: maxDeg, train: m.Train, val: m.Val, test: m.Test, schema: schema}
}

// leastRings is the graph the demo generates, as far as it is known
// before it is: nodes, features and one label each as asked (the demo
// writes f32 features), and the least degree and splits it will have.
func (f *demoFlags) leastRings() ringGraph {
	c := f.sbmConfig()
	l := c.Least()
	return ringGraph{
		nodes: uint64(c.Nodes), maxDeg: uint64(l.MaxDegree),
		train: uint64(l.Train), val: uint64(l.Val), test: uint64(l.Test),
		schema: sample.Schema{FeatDim: c.FeatDim, XType: sample.F32, LabelDim: 1},
		least:  true,
	}
}

// checkRings refuses a --ring-size that the nodes would refuse the
// trainers' loaders for (the node's RingNeed, from every rank's share of
// a split and the largest degree of g): the demo started its cluster,
// and the trainers failed. It runs once the graph is partitioned, from
// graph.toml, and for a generated graph before it is generated too, from
// what that graph holds at least: a ring too small for that is too small
// for the graph, refused before any work.
func (f *demoFlags) checkRings(g ringGraph) error {
	fan, err := parseFanouts(f.fanouts)
	if err != nil {
		return err
	}
	type loader struct {
		split string
		seeds uint64 // the split's, all parts
		batch int
	}
	loaders := []loader{{"train", g.train, f.batch}}
	if f.eval {
		loaders = append(loaders, loader{"val", g.val, f.evalBatch()}, loader{"test", g.test, f.evalBatch()})
	}
	var most int64
	var worst loader
	short := false // worst's batches are its share, fewer seeds than its batch size
	for _, l := range loaders {
		o := control.DefaultLoaderOptions()
		o.Split, o.Fanouts, o.BatchSize, o.Workers, o.WorldSize = l.split, fan, l.batch, f.workers, f.parts
		// Rank 0 has the largest share (sample.NewPlan).
		share := (l.seeds + uint64(f.parts) - 1) / uint64(f.parts)
		need, err := node.RingNeed(o, int(min(share, math.MaxInt32)), g.nodes, int(min(g.maxDeg, math.MaxInt32)), g.schema)
		if err != nil {
			return fmt.Errorf("the %s loaders: %w", l.split, err)
		}
		if need > most {
			most, worst = need, l
			worst.batch = int(min(uint64(l.batch), share))
			short = worst.batch < l.batch
		}
	}
	if f.ringBytes >= most {
		return nil
	}
	seeds, deg := fmt.Sprint(worst.batch), fmt.Sprint(g.maxDeg)
	if g.least {
		if short {
			seeds += " or more" // a share of the least split
		}
		deg += " or more"
	}
	return fmt.Errorf("--ring-size %s: the trainers' rings need at least %s, for the %s loaders' batches (%s seeds, fanouts %s, %d features, %d nodes of largest degree %s; --workers %d): raise --ring-size",
		f.ringSize, shm.FormatSize(most), worst.split, seeds, f.fanouts, g.schema.FeatDim, g.nodes, deg, f.workers)
}

// evalBatch is the trainers' --eval-batch-size.
func (f *demoFlags) evalBatch() int { return max(f.batch, 1024) }
