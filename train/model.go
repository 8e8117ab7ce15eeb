package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"graphnode/sample"
)

// net is GraphSAGE with mean aggregation, as PyG's SAGEConv with
// root_weight: layer l maps its input H (rows × d_l) to
//
//	O[t] = mean_{j ∈ N(t)} H[j] · W_l + H[t] · W_r + b
//
// for its target rows t, with ReLU and dropout between layers. Parameters
// live in one flat vector, layer by layer: W_l (d_l × d_{l+1}, row-major),
// W_r (same shape), b (d_{l+1}). Gradients have the same layout.
type net[T float] struct {
	dims    []int
	params  []T
	grads   []T
	layers  []layer[T]
	x       []T       // the first layer's input, dense: features after normalisation and dropout
	sp      sparse[T] // … or sparse
	store   int       // storeAuto, or forced by tests
	dLogits []T
	threads int
	order   int // orderAuto, or forced by tests
	b       batch
	prof    profile
	now     func() time.Time
}

// Aggregation orders of a layer. Both compute the same function;
// aggregate-first gathers the d_l-wide input and multiplies the targets'
// means, project-first multiplies every input row by W_l and gathers the
// d_{l+1}-wide products. The cheaper one is picked per batch and layer.
const (
	orderAuto = iota
	orderAggregateFirst
	orderProjectFirst
)

// layer is one SAGE layer's parameter offsets and per-batch work.
type layer[T float] struct {
	din, dout   int
	wl, wr, bia int // offsets in the parameter vector
	project     bool
	sparse      bool   // the input is net.sp (first layer only); in then has no data
	in          mat[T] // input rows after dropout (owned by the layer below, or net.x)
	inNNZ       int
	inv         []T // 1/degree of each target
	agg, out    []T
	dAgg, dIn   []T
	drop        drop
}

// profile adds up where a step's time goes.
type profile struct {
	gemm, agg time.Duration
}

// newNet lays out the parameters for dims and initialises them as
// PyTorch's Linear does: weights and biases uniform in ±1/√fan_in, drawn
// from seed (so every trainer starts from the same parameters).
func newNet[T float](dims []int, seed uint64, threads int, now func() time.Time) *net[T] {
	n := &net[T]{dims: dims, threads: max(threads, 1), now: now}
	off := 0
	for l := range len(dims) - 1 {
		din, dout := dims[l], dims[l+1]
		ly := layer[T]{din: din, dout: dout, wl: off, wr: off + din*dout, bia: off + 2*din*dout}
		off += 2*din*dout + dout
		n.layers = append(n.layers, ly)
	}
	n.params = make([]T, off)
	n.grads = make([]T, off)
	r := rand.New(rand.NewPCG(seed, 0x73616765)) // "sage"
	for _, ly := range n.layers {
		bound := 1 / math.Sqrt(float64(ly.din))
		for i := ly.wl; i < ly.bia+ly.dout; i++ {
			n.params[i] = T((2*r.Float64() - 1) * bound)
		}
	}
	return n
}

// forward checks v and computes the seeds' logits (seeds × classes).
// drops[l] is the dropout of layer l's input and streams[l] its mask
// stream; nil drops means no dropout (evaluation).
func (n *net[T]) forward(v *sample.View, normalize bool, drops []drop, streams []uint64) (mat[T], error) {
	b := &n.b
	L := len(n.layers)
	if err := b.prepare(v, n.dims[0], n.dims[L], L); err != nil {
		return mat[T]{}, err
	}
	d0 := n.dims[0]
	in := mat[T]{rows: b.nIn[0], cols: d0}
	ly0 := &n.layers[0]
	ly0.sparse = n.store == storeSparse || n.store == storeAuto && sparseInput(v, in.rows, d0)
	var nnz int
	if ly0.sparse {
		var dr drop
		var stream uint64
		if drops != nil {
			dr, stream = drops[0], streams[0]
		}
		nnz = n.sp.load(v, in.rows, d0, normalize, dr, stream)
	} else {
		n.x = grow(n.x, in.rows*d0)
		in = view(n.x, in.rows, d0)
		nnz = features(n.x, v, in.rows, d0, normalize)
	}
	for l := range n.layers {
		ly := &n.layers[l]
		ly.drop = drop{}
		var stream uint64
		if drops != nil {
			ly.drop, stream = drops[l], streams[l]
		}
		if l == 0 && ly.drop.on() && !ly.sparse {
			nnz = dropApply(ly.drop, stream, in.data)
		} else if l > 0 {
			nnz = reluDrop(ly.drop, stream, in.data)
		}
		ly.in, ly.inNNZ = in, nnz
		in = n.layerForward(l)
	}
	return in, nil
}

// layerForward runs layer l on ly.in and returns its output (targets ×
// dout), before activation.
func (n *net[T]) layerForward(l int) mat[T] {
	b, ly := &n.b, &n.layers[l]
	t, e := b.targets[l], b.edges[l]
	row, col := b.row[:e], b.col[:e]
	ly.inv = grow(ly.inv, t)
	invDegrees(ly.inv, col)
	ly.project = n.projectFirst(l)
	ly.out = grow(ly.out, t*ly.dout)
	out := view(ly.out, t, ly.dout)
	wl := view(n.params[ly.wl:], ly.din, ly.dout)
	wr := view(n.params[ly.wr:], ly.din, ly.dout)
	t0 := n.now()
	if ly.project {
		ly.agg = grow(ly.agg, ly.in.rows*ly.dout)
		p := view(ly.agg, ly.in.rows, ly.dout)
		n.mulIn(ly, wl, 0, p)
		t1 := n.now()
		gatherMean(out, p, row, col, ly.inv, n.threads)
		t2 := n.now()
		n.prof.gemm += t1.Sub(t0)
		n.prof.agg += t2.Sub(t1)
		t0 = t2
	} else {
		ly.agg = grow(ly.agg, t*ly.din)
		a := view(ly.agg, t, ly.din)
		gatherMean(a, ly.in, row, col, ly.inv, n.threads)
		t1 := n.now()
		gemm(nn, a, wl, 0, out)
		n.prof.agg += t1.Sub(t0)
		t0 = t1
	}
	n.mulIn(ly, wr, 1, out)
	addBias(out, n.params[ly.bia:ly.bia+ly.dout])
	n.prof.gemm += n.now().Sub(t0)
	return out
}

// projectFirst picks the cheaper order for layer l by counting
// multiply-adds, weighting products with the input's density (BLAS skips
// zeros of the left operand) and guessing the density of the means as
// density × mean degree.
func (n *net[T]) projectFirst(l int) bool {
	if n.layers[l].sparse {
		return true
	}
	switch n.order {
	case orderAggregateFirst:
		return false
	case orderProjectFirst:
		return true
	}
	b, ly := &n.b, &n.layers[l]
	rho := float64(ly.inNNZ) / float64(max(ly.in.rows*ly.din, 1))
	t, e := float64(b.targets[l]), float64(b.edges[l])
	din, dout := float64(ly.din), float64(ly.dout)
	rhoAgg := min(1, rho*e/max(t, 1))
	aggregateFirst := e*din + t*din*dout*rhoAgg
	projectFirst := float64(ly.in.rows)*din*dout*rho + e*dout
	return projectFirst < aggregateFirst
}

// backward adds the gradient of the loss whose gradient with respect to
// the logits is in n.dLogits to n.grads, layer by layer from the top.
func (n *net[T]) backward() {
	b := &n.b
	L := len(n.layers)
	dOut := view(n.dLogits, b.targets[L-1], n.dims[L])
	for l := L - 1; l >= 0; l-- {
		ly := &n.layers[l]
		dIn := n.layerBackward(l, dOut)
		if l == 0 {
			break
		}
		// The layer's input is drop(relu(O)) of the layer below: map the
		// gradient back through both.
		reluDropBack(ly.drop, ly.in.data, dIn.data)
		dOut = dIn
	}
}

// layerBackward adds layer l's parameter gradients given dOut (targets ×
// dout) and returns the gradient with respect to its input (none for the
// first layer: the features need no gradient).
func (n *net[T]) layerBackward(l int, dOut mat[T]) mat[T] {
	b, ly := &n.b, &n.layers[l]
	t, e := b.targets[l], b.edges[l]
	row, col := b.row[:e], b.col[:e]
	in := ly.in
	wl := view(n.params[ly.wl:], ly.din, ly.dout)
	wr := view(n.params[ly.wr:], ly.din, ly.dout)
	gwl := view(n.grads[ly.wl:], ly.din, ly.dout)
	gwr := view(n.grads[ly.wr:], ly.din, ly.dout)
	colSums(n.grads[ly.bia:ly.bia+ly.dout], dOut)
	t0 := n.now()
	n.mulInT(ly, dOut, gwr)
	var dIn mat[T]
	if l > 0 {
		ly.dIn = grow(ly.dIn, in.rows*ly.din)
		dIn = view(ly.dIn, in.rows, ly.din)
	}
	if ly.project {
		ly.dAgg = grow(ly.dAgg, in.rows*ly.dout)
		dp := view(ly.dAgg, in.rows, ly.dout)
		dp.zero()
		t1 := n.now()
		scatterMean(dp, dOut, row, col, ly.inv, n.threads)
		t2 := n.now()
		n.mulInT(ly, dp, gwl)
		if l > 0 {
			gemm(nt, dp, wl, 0, dIn)
		}
		n.prof.agg += t2.Sub(t1)
		n.prof.gemm += t1.Sub(t0)
		t0 = t2
	} else {
		a := view(ly.agg, t, ly.din)
		gemm(tn, a, dOut, 1, gwl)
		if l > 0 {
			ly.dAgg = grow(ly.dAgg, t*ly.din)
			da := view(ly.dAgg, t, ly.din)
			gemm(nt, dOut, wl, 0, da)
			t1 := n.now()
			dIn.zero()
			scatterMean(dIn, da, row, col, ly.inv, n.threads)
			t2 := n.now()
			n.prof.gemm += t1.Sub(t0)
			n.prof.agg += t2.Sub(t1)
			t0 = t2
		}
	}
	if l > 0 {
		gemm(nt, dOut, wr, 1, dIn.top(t))
	}
	n.prof.gemm += n.now().Sub(t0)
	return dIn
}

// mulIn sets c = in·w + beta·c over the first c.rows input rows of ly.
func (n *net[T]) mulIn(ly *layer[T], w mat[T], beta T, c mat[T]) {
	if ly.sparse {
		spmm(n.sp.top(c.rows), w, beta, c, n.threads)
		return
	}
	gemm(nn, ly.in.top(c.rows), w, beta, c)
}

// mulInT adds inᵀ·g to c over the first g.rows input rows of ly.
func (n *net[T]) mulInT(ly *layer[T], g, c mat[T]) {
	if ly.sparse {
		spmmT(n.sp.top(g.rows), g, c, n.threads)
		return
	}
	gemm(tn, ly.in.top(g.rows), g, 1, c)
}

// lossGrad computes the summed softmax cross-entropy of the logits over
// the labelled seeds, writes its gradient with respect to the logits into
// n.dLogits, and counts the labelled seeds and those whose largest logit
// is their label.
func (n *net[T]) lossGrad(logits mat[T], labels []int32) (loss float64, correct, count int) {
	n.dLogits = grow(n.dLogits, len(logits.data))
	g := view(n.dLogits, logits.rows, logits.cols)
	for i := range logits.rows {
		z, gi := logits.row(i), g.row(i)
		y := int(labels[i])
		if y < 0 {
			clear(gi)
			continue
		}
		best, zmax := 0, z[0]
		for j, v := range z {
			if v > zmax {
				best, zmax = j, v
			}
		}
		var sum float64
		for j, v := range z {
			p := math.Exp(float64(v - zmax))
			gi[j] = T(p)
			sum += p
		}
		for j := range gi {
			gi[j] = T(float64(gi[j]) / sum)
		}
		gi[y] -= 1
		loss += math.Log(sum) - float64(z[y]-zmax)
		count++
		if best == y {
			correct++
		}
	}
	return loss, correct, count
}

// evaluate counts the labelled seeds of v and those the model gets right.
func (n *net[T]) evaluate(v *sample.View, normalize bool) (correct, count int, err error) {
	logits, err := n.forward(v, normalize, nil, nil)
	if err != nil {
		return 0, 0, err
	}
	for i := range logits.rows {
		y := int(n.b.labels[i])
		if y < 0 {
			continue
		}
		z := logits.row(i)
		// A NaN logit compares false with everything, so the argmax
		// below would take class 0 and count a hit for every label 0:
		// training fails on such a batch, and evaluation does too.
		for _, x := range z {
			if !finite(float64(x)) {
				h := &v.Header
				// Finite features overflow too, through parameters that a
				// learning rate too large sent to 1e30 in one step.
				cause := " (a NaN or Inf feature in its neighbourhood)"
				if finiteFeatures(v) {
					cause = ", and the features of its neighbourhood are finite: the parameters diverged (lr or weight_decay too large)"
				}
				return 0, 0, fmt.Errorf("train: evaluation batch %d of epoch %d: a logit of seed %d (node %d) is %g%s: %w", h.Index, h.Epoch, i, v.NID[i], x, cause, ErrInvalid)
			}
		}
		best := 0
		for j, v := range z {
			if v > z[best] {
				best = j
			}
		}
		count++
		if best == y {
			correct++
		}
	}
	return correct, count, nil
}
