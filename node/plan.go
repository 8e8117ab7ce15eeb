package node

import (
	"context"
	"errors"
	"fmt"
	"math"

	"graphnode/csr"
	"graphnode/node/control"
	"graphnode/sample"
)

// describe checks o against the partition and computes what the trainer
// is told: seeds, batches per epoch, shapes and the worst-case record.
// In a partition set of several parts the seeds span the cluster and are
// returned, for the samplers' spec; with one part, or for a link loader
// (whose seed edges are in the options), they are nil: each sampler finds
// them itself.
func (n *Node) describe(ctx context.Context, o control.LoaderOptions) (control.LoaderInfo, []uint64, error) {
	var seeds []uint64
	var err error
	if n.multi() {
		seeds, err = n.clusterSeeds(ctx, o)
	} else {
		seeds, err = loaderSeeds(n.graph, o)
	}
	if err != nil {
		// The split is read from the mapped file (csr.Graph.Mask, through
		// csr.Graph.Read): a file changed under the node fails here,
		// before a sampler maps it.
		return control.LoaderInfo{}, nil, n.partErr(err)
	}
	info, err := n.describeSeeds(o, seeds)
	if !n.multi() || o.SeedEdges != nil {
		seeds = nil
	}
	return info, seeds, err
}

// multi reports whether the partition set has several parts: seeds, rows
// and neighbours then live on other nodes too.
func (n *Node) multi() bool { return n.book.Parts() > 1 }

func (n *Node) describeSeeds(o control.LoaderOptions, seeds []uint64) (control.LoaderInfo, error) {
	plan, err := sample.NewPlan(seeds, planOptions(o))
	if err != nil {
		return control.LoaderInfo{}, &control.Error{Key: "seed_ids", Msg: err.Error()}
	}
	schema, err := loaderSchema(n.graph, o)
	if err != nil {
		return control.LoaderInfo{}, &control.Error{Key: "features", Msg: err.Error()}
	}
	m := n.graph.Meta()
	info := control.LoaderInfo{
		NumSeeds: int64(plan.Len()), BatchesPerEpoch: int64(plan.NumBatches()),
		Epochs: o.Epochs, BatchSize: o.BatchSize, Fanouts: o.Fanouts, Concurrency: o.Concurrency,
		FeatDim: schema.FeatDim, LabelDim: schema.LabelDim,
		Part: int(m.Part), NumParts: int(m.NumParts), TotalNodes: m.TotalNodes,
	}
	if schema.FeatDim > 0 {
		info.XDtype = map[sample.DType]string{sample.F32: "float32", sample.F16: "float16"}[schema.XType]
	}
	if schema.LabelDim > 0 {
		info.NumClasses = int(m.NumClasses)
	}
	info.MaxRecord, err = maxRecord(o, plan.Len(), m.TotalNodes, n.maxDeg, n.maxDegExact, schema)
	if err != nil {
		return control.LoaderInfo{}, &control.Error{Key: "fanouts", Msg: err.Error()}
	}
	return info, nil
}

func planOptions(o control.LoaderOptions) sample.PlanOptions {
	return sample.PlanOptions{
		BatchSize: o.BatchSize, Shuffle: o.Shuffle, DropLast: o.DropLast,
		Seed: o.Seed, Rank: o.Rank, WorldSize: o.WorldSize,
	}
}

// loaderSeeds are the loader's seed ids: the split's owned nodes in
// ascending global id, or the explicit seed_ids, which must be owned here
// (sampling seeds of other partitions needs the mesh).
func loaderSeeds(g *csr.Graph, o control.LoaderOptions) ([]uint64, error) {
	m := g.Meta()
	if o.SeedEdges != nil {
		return edgeSeeds(o, m.TotalNodes)
	}
	if o.Split == "" {
		for i, id := range o.SeedIDs {
			if id < m.Start || id >= m.End {
				return nil, &control.Error{Key: "seed_ids", Msg: fmt.Sprintf(
					"seed_ids[%d] = %d is not owned by partition %d (ids %d..%d)", i, id, m.Part, m.Start, m.End-1)}
			}
		}
		return o.SeedIDs, nil
	}
	mask, err := g.Mask(o.Split)
	if errors.Is(err, csr.ErrChanged) {
		return nil, err // the file's fault, not the split's
	}
	if err != nil {
		return nil, &control.Error{Key: "split", Msg: err.Error()}
	}
	if mask.IsEmpty() {
		return nil, &control.Error{Key: "split", Msg: fmt.Sprintf("partition %d has no %s nodes (%s)", m.Part, o.Split, emptySplitHint)}
	}
	seeds := make([]uint64, 0, mask.GetCardinality())
	for it := mask.Iterator(); it.HasNext(); {
		seeds = append(seeds, m.Start+uint64(it.Next()))
	}
	return seeds, nil
}

// edgeSeeds checks a link loader's seed edges against the graph's total
// nodes and returns what its plan orders: the edges' indices.
func edgeSeeds(o control.LoaderOptions, total uint64) ([]uint64, error) {
	e := o.SeedEdges
	for _, side := range []struct {
		name string
		ids  []uint64
	}{{"src", e.Src}, {"dst", e.Dst}} {
		for i, id := range side.ids {
			if id >= total {
				return nil, &control.Error{Key: "seed_edges", Msg: fmt.Sprintf("seed_edges.%s[%d] = %d is not a node of the graph (ids 0..%d)", side.name, i, id, total-1)}
			}
		}
	}
	idx := make([]uint64, len(e.Src))
	for i := range idx {
		idx[i] = uint64(i)
	}
	return idx, nil
}

// linkPairs is the number of node pairs a link batch of o scores (0 for
// a node loader), and the most seed nodes it has.
func linkPairs(o control.LoaderOptions, batch int) (pairs, seedNodes int) {
	if o.SeedEdges == nil {
		return 0, batch
	}
	return batch * (1 + o.NegRatio), batch * (2 + o.NegRatio)
}

// loaderSchema is the shape of x and y with the loader's features and
// labels switches applied. A partition without features or labels gives
// a loader without them rather than an error.
func loaderSchema(g *csr.Graph, o control.LoaderOptions) (sample.Schema, error) {
	m := g.Meta()
	var s sample.Schema
	if o.Features && m.FeatDim > 0 {
		s.FeatDim = int(m.FeatDim)
		switch m.FeatType {
		case csr.TypeF32:
			s.XType = sample.F32
		case csr.TypeF16:
			s.XType = sample.F16
		default:
			return s, fmt.Errorf("feature type %v is not float32 or float16", m.FeatType)
		}
	}
	if o.Labels {
		s.LabelDim = int(m.LabelDim)
	}
	return s, nil
}

// maxRecord bounds the size of one batch record: at most batch·f₁ edges
// at hop 1, each new node expanded at the next hop, no hop reaching more
// nodes than the graph has; fanout -1 counts as the largest degree
// maxDeg. When degExact (maxDeg is the largest degree of every part) a
// fanout above it counts as maxDeg too: no node gives more neighbours
// than it has, and a fanout of 1000 meant as "all" would otherwise ask a
// ring for a hundred times what a batch can take. A batch holds at most
// the loader's seeds (its share of seed nodes, or seed edges for a link
// loader): a batch_size above them, as for full-batch training, asked for
// a ring sized for batch_size seeds (Cora's 1625 training nodes with
// batch_size 100000 and one hop of 2: 1.1 GiB instead of 15 MB).
func maxRecord(o control.LoaderOptions, seeds int, total uint64, maxDeg int, degExact bool, s sample.Schema) (int64, error) {
	fanouts := o.Fanouts
	pairs, batch := linkPairs(o, min(o.BatchSize, seeds))
	if pairs > 0 { // seed nodes are distinct: no more than the graph has
		batch = min(batch, int(min(total, math.MaxInt32)))
	}
	sat := func(a, b uint64) uint64 {
		if a != 0 && b > math.MaxUint64/a {
			return math.MaxUint64
		}
		return a * b
	}
	frontier, nodes, edges := uint64(batch), uint64(batch), uint64(0)
	for _, f := range fanouts {
		fan := uint64(f)
		if f < 0 || degExact && f > maxDeg {
			fan = uint64(maxDeg)
		}
		e := sat(frontier, fan)
		edges = min(edges+e, math.MaxUint64/2)
		frontier = min(e, total)
		nodes = min(nodes+frontier, max(total, uint64(batch)))
	}
	h := sample.Header{
		Kind: sample.KindBatch, BatchSize: uint64(batch), NumNodes: nodes, NumEdges: edges,
		Hops: uint32(len(fanouts)), FeatDim: uint32(s.FeatDim), XType: s.XType, LabelDim: uint32(s.LabelDim),
		Pairs: uint64(pairs),
	}
	_, size, err := h.Layout()
	if err != nil {
		return 0, fmt.Errorf("fanouts %v with batch_size %d: a batch may reach %d nodes and %d edges, more than a record can hold", fanouts, o.BatchSize, nodes, edges)
	}
	return int64(size), nil
}

// emptySplitHint follows the refusal of a split without nodes: the
// partitioning of an input that carries no split (a LINQS Cora, an edge
// list), with node partition's default --split keep, has none.
const emptySplitHint = "node inspect shows each part's train/val/test counts; node partition keeps the input's split by default, " +
	"and LINQS files and edge lists carry none: partition them with --split per-class:TRAIN,VAL,TEST or random:TRAIN,VAL,TEST"
