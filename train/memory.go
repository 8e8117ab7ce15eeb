package train

import "math"

// A trainer's memory is mostly buffers that grow with the batch: per
// layer its output, the gather or projection of its input, and in
// training their gradients (layerForward, layerBackward), each as many
// float32 rows as the layer's targets or inputs and as wide as the
// layer; and the first layer's input, the features made dense. They
// grow to the largest batch so far and stay (grow), evaluation batches
// included. Nothing else bounds them: a wide model with a large batch
// allocates at its first batch until the OOM killer ends the process,
// so a caller checks BatchBytes against the machine's memory before it
// starts.

// BlockNodes bounds the nodes of a batch of batch seeds sampled with
// fanouts (−1: every neighbour) from a graph of graphNodes nodes (0:
// unknown): element k is the most nodes within k hops of the seeds, for
// k = 0 … len(fanouts). Each hop adds at most fanout nodes for every
// node the hop before added, and none beyond the graph's: at most
// batch·Π(fanout+1), and never more than graphNodes. +Inf where nothing
// bounds it (fanout −1 on a graph of unknown size).
func BlockNodes(batch int, fanouts []int, graphNodes uint64) []float64 {
	total := math.Inf(1)
	if graphNodes > 0 {
		total = float64(graphNodes)
	}
	frontier := min(float64(max(batch, 0)), total)
	out := []float64{frontier}
	for _, f := range fanouts {
		if frontier > 0 { // 0·Inf is NaN: nothing new comes of nothing
			fan := math.Inf(1)
			if f >= 0 {
				fan = float64(f)
			}
			frontier = min(frontier*fan, total)
		}
		out = append(out, min(out[len(out)-1]+frontier, total))
	}
	return out
}

// BatchBytes estimates the bytes a trainer of c holds for its largest
// batches: training batches of at most train[k] nodes within k hops of
// their seeds (BlockNodes) and evaluation batches of at most eval[k]
// (nil: no evaluation), whichever order of aggregation a layer picks,
// plus the parameters, the sync vector and Adam's two moments. It leaves
// out the edge lists (8 bytes an edge) and counts the features dense (a
// sparse copy is smaller). A bound with fewer hops than c.Layers counts
// its last for the missing ones. +Inf when a bound is.
func (c *Config) BatchBytes(train, eval []float64) float64 {
	d := c.dims()
	L := len(d) - 1
	var fwd, bwd []float64 // per buffer, the most over the blocks
	add := func(buf *[]float64, i int, v float64) {
		for len(*buf) <= i {
			*buf = append(*buf, 0)
		}
		(*buf)[i] = max((*buf)[i], v)
	}
	for _, blk := range []struct {
		b        []float64
		training bool
	}{{train, true}, {eval, false}} {
		b, training := blk.b, blk.training
		if len(b) == 0 {
			continue
		}
		at := func(k int) float64 { return b[min(k, len(b)-1)] }
		seeds := at(0)
		add(&fwd, 0, at(L)*float64(d[0])) // the features
		add(&fwd, 1, seeds)               // labels, int32
		if training {
			add(&bwd, 0, seeds*float64(d[L])) // the logits' gradient
		}
		for l := range L {
			in, t := at(L-l), at(L-1-l)
			din, dout := float64(d[l]), float64(d[l+1])
			agg := max(in*dout, t*din) // projected first, or gathered first
			add(&fwd, 2+3*l, t)        // 1/degree of each target
			add(&fwd, 3+3*l, t*dout)   // the output
			add(&fwd, 4+3*l, agg)
			if !training {
				continue
			}
			if l == 0 {
				// The features need no gradient: the first layer keeps
				// only its projection's, when it projects first.
				add(&bwd, 1+2*l, in*dout)
				continue
			}
			add(&bwd, 1+2*l, agg) // the gradient of agg
			add(&bwd, 2+2*l, in*din)
		}
	}
	n := 4 * float64(c.SyncLen()) // parameters, sync vector, Adam's m and v
	for _, v := range append(fwd, bwd...) {
		n += v
	}
	return 4 * n
}
