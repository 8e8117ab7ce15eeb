package train

import (
	"context"
	"fmt"
	"math"
	"time"
)

// kgeStep holds a trainer's buffers, reused from step to step.
type kgeStep struct {
	batch []Triple
	// The step's distinct entities and relations, their pulled rows and
	// gradients; slot maps a global id to its index in ents / rels.
	ents, rels   []uint64
	entSlot      map[uint64]int32
	relSlot      map[uint64]int32
	E, R, gE, gR []float32
	// The rows of the projection table and their gradients, for a model
	// with one (transr): a relation row as the model reads it is R's row
	// then P's.
	P, gP []float32
	// How many times DGL-KE's regulariser counts each row (see
	// kgeRegWeights).
	entW, relW []float64
	// One chunk gathered: positives' heads, relations, tails, the
	// negatives, their gradients, scores and upstream gradients.
	hi, ri, ti, ni      []int32 // slots of the chunk's rows
	nd                  []int32 // one chunk's negatives under NegDeg: its positives' heads or tails, then ni's
	h, r, t, e          []float32
	dh, dr, dt, de      []float32
	pos, neg, gpos, gng []float32
}

// StepEntities is the most distinct entities one step of c gathers: its
// positives' heads and tails and every chunk's negatives (the chunk's own
// entities under NegDeg are among the former). Their slots are int32:
// Validate refuses more.
func (c *KGEConfig) StepEntities() float64 {
	b, n := float64(max(c.BatchSize, 1)), float64(max(c.NegSize, 1))
	chunks := math.Ceil(b / min(n, b))
	return 2*b + chunks*n
}

// StepBytes is about what one step of c holds at once (kgeStep and the
// model's scratch): the rows and gradients of its distinct entities and
// relations, their ids and slots, and one chunk's gathered rows, scores
// and score gradients. A caller checks it against the machine before
// the trainer starts: a --batch-size or --neg-size off by digits made
// the first step's allocations crash the process. In float64, which no
// size overflows; 0 for a model Validate refuses.
func (c *KGEConfig) StepBytes() float64 {
	m, err := newKGEModel(c.Model, max(c.Hidden, 1), float32(c.Gamma))
	if err != nil {
		return 0
	}
	ed, rd := float64(m.EntDim()), float64(m.RelDim())
	b, n := float64(max(c.BatchSize, 1)), float64(max(c.NegSize, 1))
	chunk := min(n, b) // positives per chunk
	nn := n            // negatives a chunk scores
	if c.NegDeg {
		nn += chunk
	}
	ents := c.StepEntities()
	// Bytes of a row value; of an id, its int32 slot and its map entry.
	const f32, idAndSlot = 4, 8 + 4 + 48
	bytes := 2*f32*(ents*ed+b*rd) + idAndSlot*(ents+b) + // pulled rows and their gradients
		f32*(4*chunk*ed+2*chunk*rd+3*nn*ed) + // h, t, dh, dt; r, dr; e, de and the model's scratch
		3*f32*chunk*nn // scores, their gradients, the model's weights
	if m.ProjDim() > 0 {
		// transr's scratch: a group's projected negatives, one triple's
		// signs against them and the group's sum of those.
		bytes += 3 * f32 * nn * ed
	}
	return bytes
}

// slot returns id's index among the step's distinct ids, adding it.
func slot(m map[uint64]int32, ids *[]uint64, id uint64) int32 {
	s, ok := m[id]
	if !ok {
		s = int32(len(*ids))
		m[id] = s
		*ids = append(*ids, id)
	}
	return s
}

// trainStep pulls the rows of one batch and its negatives, computes the
// loss (DGL-KE's: −(mean log σ(pos) + mean over positives of the
// negatives' mean, or self-adversarially weighted sum, of log σ(−neg)))/2
// plus the regulariser) and its gradient, and pushes it. It returns the
// loss and the time spent pulling and pushing.
func (k *KGE) trainStep(ctx context.Context, batch []Triple, corruptHead bool) (float64, time.Duration, error) {
	st, cfg, m := &k.st, &k.cfg, k.model
	if st.entSlot == nil {
		st.entSlot, st.relSlot = make(map[uint64]int32), make(map[uint64]int32)
	}
	clear(st.entSlot)
	clear(st.relSlot)
	st.ents, st.rels = st.ents[:0], st.rels[:0]
	B, N := len(batch), cfg.NegSize
	C := min(N, B) // positives per chunk
	chunks := (B + C - 1) / C
	st.hi, st.ri, st.ti = grow(st.hi, B), grow(st.ri, B), grow(st.ti, B)
	st.ni = grow(st.ni, chunks*N)
	for i, tr := range batch {
		st.hi[i] = slot(st.entSlot, &st.ents, tr.Head)
		st.ti[i] = slot(st.entSlot, &st.ents, tr.Tail)
		st.ri[i] = slot(st.relSlot, &st.rels, uint64(tr.Rel))
	}
	for j := range st.ni {
		st.ni[j] = slot(st.entSlot, &st.ents, k.rng.Uint64N(cfg.Entities))
	}
	ed, rd, pd := m.EntDim(), m.RelDim(), m.ProjDim()
	rw := rd - pd // of a relation row, what the relation table holds
	t0 := time.Now()
	var err error
	if st.E, err = k.params.Pull(ctx, cfg.EntityTable, st.ents, st.E[:0]); err != nil {
		return 0, 0, fmt.Errorf("pull %s: %w", cfg.EntityTable, err)
	}
	if st.R, err = k.params.Pull(ctx, cfg.RelationTable, st.rels, st.R[:0]); err != nil {
		return 0, 0, fmt.Errorf("pull %s: %w", cfg.RelationTable, err)
	}
	if pd > 0 {
		if st.P, err = k.params.Pull(ctx, cfg.ProjectionTable, st.rels, st.P[:0]); err != nil {
			return 0, 0, fmt.Errorf("pull %s: %w", cfg.ProjectionTable, err)
		}
	}
	pulled := time.Since(t0)
	if len(st.E) != len(st.ents)*ed || len(st.R) != len(st.rels)*rw || len(st.P) != len(st.rels)*pd {
		return 0, 0, fmt.Errorf("pulled %d, %d and %d values for %d entities of %d and %d relations of %d and %d: %w",
			len(st.E), len(st.R), len(st.P), len(st.ents), ed, len(st.rels), rw, pd, ErrInvalid)
	}
	st.gE, st.gR, st.gP = growZero(st.gE, len(st.E)), growZero(st.gR, len(st.R)), growZero(st.gP, len(st.P))

	var loss float64
	for c := range chunks {
		lo, hi := c*C, min(B, (c+1)*C)
		n := hi - lo
		st.h, st.t = gather(st.h, st.E, st.hi[lo:hi], ed), gather(st.t, st.E, st.ti[lo:hi], ed)
		st.r = gatherJoined(st.r, st.R, st.P, st.ri[lo:hi], rw, pd)
		negs, nn := st.ni[c*N:(c+1)*N], N
		if cfg.NegDeg {
			own := st.ti[lo:hi]
			if corruptHead {
				own = st.hi[lo:hi]
			}
			st.nd = append(append(st.nd[:0], own...), negs...)
			negs, nn = st.nd, n+N
		}
		st.e = gather(st.e, st.E, negs, ed)
		st.pos, st.gpos = growZero(st.pos, n), growZero(st.gpos, n)
		st.neg, st.gng = growZero(st.neg, n*nn), growZero(st.gng, n*nn)
		m.Pos(st.h, st.r, st.t, n, st.pos)
		m.Neg(st.h, st.r, st.t, st.e, n, nn, corruptHead, st.neg)
		if cfg.NegDeg {
			// DGL-KE's mask: positive i against its own entity scores
			// 0, in the mean (or the softmax) but without a gradient.
			for i := range n {
				st.neg[i*nn+i] = 0
			}
		}
		loss += kgeLossGrad(st.pos, st.neg, st.gpos, st.gng, n, nn, B, cfg.AdvTemp)
		if cfg.NegDeg {
			for i := range n {
				st.gng[i*nn+i] = 0
			}
		}
		st.dh, st.dr, st.dt = growZero(st.dh, n*ed), growZero(st.dr, n*rd), growZero(st.dt, n*ed)
		st.de = growZero(st.de, nn*ed)
		m.PosGrad(st.h, st.r, st.t, n, st.gpos, st.dh, st.dr, st.dt)
		m.NegGrad(st.h, st.r, st.t, st.e, n, nn, corruptHead, st.neg, st.gng, st.dh, st.dr, st.dt, st.de)
		scatter(st.gE, st.dh, st.hi[lo:hi], ed)
		scatter(st.gE, st.dt, st.ti[lo:hi], ed)
		scatterSplit(st.gR, st.gP, st.dr, st.ri[lo:hi], rw, pd)
		scatter(st.gE, st.de, negs, ed)
	}
	if cfg.RegCoef > 0 {
		st.kgeRegWeights(B)
		loss += kgeRegularize(st.E, st.gE, st.entW, ed, cfg.RegCoef, cfg.RegNorm)
		loss += kgeRegularize(st.R, st.gR, st.relW, rw, cfg.RegCoef, cfg.RegNorm)
	}
	// Checked before anything is pushed: the tables are every trainer's,
	// and one non-finite gradient poisons its rows for all of them.
	if !finite(loss) {
		return 0, 0, fmt.Errorf("loss is %g: lower the learning rate or gamma: %w", loss, ErrInvalid)
	}
	if err := kgeFinite(cfg.EntityTable, st.ents, st.gE, ed); err != nil {
		return 0, 0, err
	}
	if err := kgeFinite(cfg.RelationTable, st.rels, st.gR, rw); err != nil {
		return 0, 0, err
	}
	if err := kgeFinite(cfg.ProjectionTable, st.rels, st.gP, pd); err != nil {
		return 0, 0, err
	}
	t1 := time.Now()
	if err := k.params.Push(ctx, cfg.EntityTable, st.ents, st.gE); err != nil {
		return 0, 0, fmt.Errorf("push %s: %w", cfg.EntityTable, err)
	}
	if err := k.params.Push(ctx, cfg.RelationTable, st.rels, st.gR); err != nil {
		return 0, 0, fmt.Errorf("push %s: %w", cfg.RelationTable, err)
	}
	if pd > 0 {
		if err := k.params.Push(ctx, cfg.ProjectionTable, st.rels, st.gP); err != nil {
			return 0, 0, fmt.Errorf("push %s: %w", cfg.ProjectionTable, err)
		}
	}
	return loss, pulled + time.Since(t1), nil
}

// kgeFinite reports the first non-finite gradient of g, the rows of ids
// in table (a float32 gradient overflows where the float64 loss does
// not).
func kgeFinite(table string, ids []uint64, g []float32, dim int) error {
	if i := firstNonFinite(g); i >= 0 {
		return fmt.Errorf("gradient of %s row %d is %g: lower the learning rate or gamma: %w", table, ids[i/dim], g[i], ErrInvalid)
	}
	return nil
}

// kgeLossGrad adds to the loss of a batch of B positives the share of one
// chunk of n positives and N negatives each, and sets the gradients of
// that loss with respect to the scores (gpos, gneg).
func kgeLossGrad(pos, neg, gpos, gneg []float32, n, N, B int, adv float64) float64 {
	var loss float64
	scale := 1 / (2 * float64(B))
	for i := range n {
		s := float64(pos[i])
		loss -= logSigmoid(s) * scale
		gpos[i] = float32(-sigmoid(-s) * scale) // d(−log σ(s))/ds = −σ(−s)
		row, g := neg[i*N:(i+1)*N], gneg[i*N:(i+1)*N]
		if adv > 0 {
			// softmax(adv·s) over the chunk, held constant (detached).
			mx := math.Inf(-1)
			for _, x := range row {
				mx = max(mx, adv*float64(x))
			}
			var z float64
			for j, x := range row {
				w := math.Exp(adv*float64(x) - mx)
				g[j] = float32(w)
				z += w
			}
			for j, x := range row {
				w := float64(g[j]) / z
				loss -= w * logSigmoid(-float64(x)) * scale
				g[j] = float32(w * sigmoid(float64(x)) * scale)
			}
			continue
		}
		for j, x := range row {
			loss -= logSigmoid(-float64(x)) * scale / float64(N)
			g[j] = float32(sigmoid(float64(x)) * scale / float64(N))
		}
	}
	return loss
}

// kgeRegWeights sets entW and relW, for a step of B positives, to the
// number of times DGL-KE's regulariser counts each of the step's rows. It
// sums |x|^p over the embeddings the step gathered (KEModel.forward, curr_emb): the positive
// subgraph's entities once each, every negative as often as it was
// drawn (its chunks gather their own; NegDeg's negatives are the
// positives' rows, which DGL-KE takes from the positive subgraph and does
// not count again), and a relation row once per
// positive triple (pos_g.edata, one row per edge). Counting each
// distinct row once regularised a relation of k triples in the batch k
// times too weakly for the same --regularization_coef.
func (st *kgeStep) kgeRegWeights(B int) {
	st.entW, st.relW = grow(st.entW, len(st.ents)), grow(st.relW, len(st.rels))
	clear(st.entW)
	clear(st.relW)
	for i := range B {
		st.entW[st.hi[i]], st.entW[st.ti[i]] = 1, 1
		st.relW[st.ri[i]]++
	}
	for _, s := range st.ni {
		st.entW[s]++
	}
}

// kgeRegularize adds w_i·coef·p·|x|^(p−1)·sign(x) to g for every value of
// row i of x (rows of dim) and returns coef·Σ_i w_i·Σ|x|^p, DGL-KE's
// regulariser with row i counted w_i times (kgeRegWeights). The power is
// p−1 multiplications: with math.Pow the regulariser took 40 of the 93 ms
// of a default DistMult step (go test -bench KGEStep).
func kgeRegularize(x, g []float32, w []float64, dim int, coef float64, p int) float64 {
	var sum float64
	for r, wr := range w {
		var rs float64
		c := wr * coef * float64(p)
		for i := r * dim; i < (r+1)*dim; i++ {
			v := x[i]
			a := math.Abs(float64(v))
			ap1 := 1.0
			for range p - 1 {
				ap1 *= a
			}
			rs += ap1 * a
			d := c * ap1
			switch {
			case v < 0:
				d = -d
			case v == 0:
				d = 0 // sign(0), as torch's: for p = 1, |x|^0 is 1 at 0
			}
			g[i] += float32(d)
		}
		sum += wr * rs
	}
	return coef * sum
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// logSigmoid is log σ(x) without overflow for large |x|.
func logSigmoid(x float64) float64 {
	if x < 0 {
		return x - math.Log1p(math.Exp(x))
	}
	return -math.Log1p(math.Exp(-x))
}

// gather copies the rows of src at slots into dst (grown as needed).
func gather(dst, src []float32, slots []int32, dim int) []float32 {
	dst = grow(dst, len(slots)*dim)
	for i, s := range slots {
		copy(dst[i*dim:(i+1)*dim], src[int(s)*dim:(int(s)+1)*dim])
	}
	return dst
}

// gatherJoined copies, for each of slots, the row of a (da wide) and
// then the row of b (db wide) into dst (grown as needed): the relation
// rows of a model from the relation table and the projection table
// (gather, for db 0).
func gatherJoined(dst, a, b []float32, slots []int32, da, db int) []float32 {
	d := da + db
	dst = grow(dst, len(slots)*d)
	for i, s := range slots {
		copy(dst[i*d:i*d+da], a[int(s)*da:(int(s)+1)*da])
		copy(dst[i*d+da:(i+1)*d], b[int(s)*db:(int(s)+1)*db])
	}
	return dst
}

// scatterSplit adds the rows of src, as gatherJoined laid them out, into
// a and b at slots.
func scatterSplit(a, b, src []float32, slots []int32, da, db int) {
	d := da + db
	for i, s := range slots {
		addRow(a[int(s)*da:(int(s)+1)*da], src[i*d:i*d+da])
		addRow(b[int(s)*db:(int(s)+1)*db], src[i*d+da:(i+1)*d])
	}
}

// scatter adds the rows of src into dst at slots.
func scatter(dst, src []float32, slots []int32, dim int) {
	for i, s := range slots {
		addRow(dst[int(s)*dim:(int(s)+1)*dim], src[i*dim:(i+1)*dim])
	}
}

// addRow adds x to y, element by element.
func addRow(y, x []float32) {
	for j := range x {
		y[j] += x[j]
	}
}

func growZero(b []float32, n int) []float32 {
	b = grow(b, n)
	clear(b)
	return b
}
