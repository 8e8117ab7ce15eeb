package train

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// KGEFilter holds the known facts for filtered ranking (Bordes et al.
// 2013, as DGL-KE and every KG benchmark report): when the tail of (h,
// r, t) is ranked, the other known tails of (h, r) are left out of the
// candidates, and likewise for heads. Safe for concurrent reads once
// built.
type KGEFilter struct {
	tails, heads map[kgeKey][]uint64 // sorted, distinct
}

type kgeKey struct {
	e uint64
	r uint32
}

// NewKGEFilter indexes the triples of every set (train, valid and test of
// the whole graph).
func NewKGEFilter(sets ...[]Triple) *KGEFilter {
	f := &KGEFilter{tails: make(map[kgeKey][]uint64), heads: make(map[kgeKey][]uint64)}
	for _, set := range sets {
		for _, t := range set {
			tk, hk := kgeKey{t.Head, t.Rel}, kgeKey{t.Tail, t.Rel}
			f.tails[tk] = append(f.tails[tk], t.Tail)
			f.heads[hk] = append(f.heads[hk], t.Head)
		}
	}
	for _, m := range []map[kgeKey][]uint64{f.tails, f.heads} {
		for k, v := range m {
			slices.Sort(v)
			m[k] = slices.Clip(slices.Compact(v))
		}
	}
	return f
}

// known lists the entities that complete (e, r) on the predicted side.
func (f *KGEFilter) known(e uint64, r uint32, head bool) []uint64 {
	if f == nil {
		return nil
	}
	if head {
		return f.heads[kgeKey{e, r}]
	}
	return f.tails[kgeKey{e, r}]
}

// kgePullRows bounds the rows of one pull while evaluation reads the
// whole tables (a pull is one message).
const kgePullBytes = 4 << 20

// pullAll reads every row of a table. dst is sized for the whole table
// first: grown by append, the entity table was held twice, the old
// array and the larger one, each time it was copied (EvalBytes counts
// it once).
func (k *KGE) pullAll(ctx context.Context, table string, rows uint64, dim int, dst []float32) ([]float32, error) {
	per := uint64(max(1, kgePullBytes/(4*dim)))
	dst = slices.Grow(dst[:0], int(rows)*dim)
	ids := make([]uint64, 0, min(per, rows))
	for lo := uint64(0); lo < rows; lo += per {
		ids = ids[:0]
		for id := lo; id < min(rows, lo+per); id++ {
			ids = append(ids, id)
		}
		out, err := k.params.Pull(ctx, table, ids, dst[len(dst):])
		if err != nil {
			return nil, fmt.Errorf("pull %s rows %d..%d: %w", table, lo, lo+uint64(len(ids)), err)
		}
		dst = append(dst, out...)
	}
	if len(dst) != int(rows)*dim {
		return nil, fmt.Errorf("pulled %d values of %s, want %d rows of %d: %w", len(dst), table, rows, dim, ErrInvalid)
	}
	return dst, nil
}

// evaluate ranks this trainer's share of eval (every World-th triple from
// Rank) against every entity, or against cfg.EvalNeg sampled ones, tails
// then heads.
func (k *KGE) evaluate(ctx context.Context, eval []Triple, f *KGEFilter) (KGEMetrics, error) {
	m, cfg := k.model, &k.cfg
	ed, rd, pd := m.EntDim(), m.RelDim(), m.ProjDim()
	k.progress("evaluation", 0, int64((len(eval)-cfg.Rank+cfg.World-1)/cfg.World))
	var share []Triple
	for i := cfg.Rank; i < len(eval); i += cfg.World {
		share = append(share, eval[i])
	}
	if cfg.EvalNeg > 0 && uint64(cfg.EvalNeg) < cfg.Entities {
		return k.evaluateSampled(ctx, share, f)
	}
	if pd > 0 {
		// transr projects every entity once per distinct M_r of a block:
		// in relation order a block holds one relation or two, where in
		// the split's order it held dozens. Each triple's rank against
		// every entity is its own, so the order changes no rank.
		slices.SortStableFunc(share, func(a, b Triple) int { return cmp.Compare(a.Rel, b.Rel) })
	}
	E, R, P, err := k.Embeddings(ctx)
	if err != nil {
		return KGEMetrics{}, err
	}
	N := int(cfg.Entities)
	block := kgeEvalBlock(cfg.EvalBlock, N)
	var h, r, t, s []float32
	var sum KGEMetrics
	for lo := 0; lo < len(share); lo += block {
		if err := ctx.Err(); err != nil {
			return KGEMetrics{}, err
		}
		blk := share[lo:min(len(share), lo+block)]
		c := len(blk)
		h, t = grow(h, c*ed), grow(t, c*ed)
		for i, tr := range blk {
			copy(h[i*ed:(i+1)*ed], E[tr.Head*uint64(ed):])
			copy(t[i*ed:(i+1)*ed], E[tr.Tail*uint64(ed):])
		}
		r = relRows(r, R, P, blk, rd-pd, pd)
		s = grow(s, c*N)
		for _, head := range []bool{false, true} {
			m.Neg(h, r, t, E, c, N, head, s)
			for i, tr := range blk {
				row := s[i*N : (i+1)*N]
				target, from := tr.predicted(head)
				sum.add(kgeRank(row, target, f.known(from, tr.Rel, head)))
			}
		}
		k.progress("evaluation", int64(lo+c), int64(len(share)))
	}
	return sum.mean(), nil
}

// kgeEvalScoreBytes bounds the scores of one block ranked against every
// entity: a DGL-KE --batch_size_eval of 1000 against 86 M entities would
// be 344 GB.
const kgeEvalScoreBytes = 256 << 20

// kgeEvalBlock is how many of the triples ranked against all n entities
// are scored at once: want (EvalBlock), but no more than fit
// kgeEvalScoreBytes of scores. Against every entity a block is only a
// unit of work, each triple's rank its own, so the metrics do not
// depend on it.
func kgeEvalBlock(want, n int) int { return max(1, min(want, kgeEvalScoreBytes/(4*n))) }

// EvalBytes is about what a trainer of c holds at once while it ranks
// its share (every World-th) of triples evaluation triples: against
// EvalNeg sampled entities (evaluateSampled), a block's pulled rows (its
// heads, its tails and the candidates), the candidates' scores for each
// of its triples, their ids and the relation table; against every
// entity (evaluate: EvalNeg 0, or at least Entities), the entity table
// pulled whole and a block's scores against all of it. A caller checks
// it against the machine before the trainer starts: evaluation
// allocates only once training is over, and a size the machine lacks
// (an --eval-batch and an --eval-neg of tens of thousands each, every
// entity of a table larger than the machine) ended the trainer then. In
// float64; 0 for a model Validate refuses.
func (c *KGEConfig) EvalBytes(triples int) float64 {
	m, err := newKGEModel(c.Model, max(c.Hidden, 1), float32(c.Gamma))
	if err != nil {
		return 0
	}
	ed, rd := float64(m.EntDim()), float64(m.RelDim())
	proj := 0.0 // 1 for a model that projects the candidates (transr)
	if m.ProjDim() > 0 {
		proj = 1
	}
	world := max(c.World, 1)
	share := float64((max(triples, 0) + world - 1) / world)
	rel := float64(c.Relations) * rd
	// Bytes of a row value; of an id, its map entry (as StepBytes).
	const f32, id, entry = 4, 8, 48
	if c.EvalNeg > 0 && uint64(c.EvalNeg) < c.Entities {
		b, n := min(float64(max(c.EvalBlock, 1)), share), float64(c.EvalNeg)
		scores := b * n
		if c.EvalNegDeg {
			scores += b * b
		}
		return f32*(rel+(2*b+n)*ed+b*rd+b+scores) + // rows; r, the positives' and the candidates' scores
			f32*(b*ed+b+n+proj*n*ed) + // the model's scratch: the kept rows, the rows' norms, transr's projected candidates
			id*(2*b+2*n) + entry*n // the block's ids and the candidates', the draw's set
	}
	n := float64(max(c.Entities, 1))
	b := min(float64(kgeEvalBlock(max(c.EvalBlock, 1), int(min(n, math.MaxInt32)))), share)
	return f32 * (n*ed + rel + // the tables
		b*(2*ed+rd) + b*n + // h, t, r of a block and its scores
		b*ed + b + n + proj*n*ed) // the model's scratch (transr's: the projected entities)
}

// kgeEvalSeed keys the draws of evaluation's negatives, apart from the
// training order and negatives of the same seed.
const kgeEvalSeed = 0x6b67652d6576616c // "kge-eval"

// evaluateSampled is evaluate against cfg.EvalNeg distinct entities per
// block of cfg.EvalBlock triples, drawn uniformly from the seed, the rank
// and the block (the same for tails and heads), as DGL-KE's
// --neg_sample_size_eval. Only the block's heads, tails and negatives
// are pulled (and the relation table whole), so a graph whose entity
// table does not fit a trainer is ranked all the same. Under EvalNegDeg
// the block's true tails (heads) are candidates too (see kgeRankDeg).
func (k *KGE) evaluateSampled(ctx context.Context, share []Triple, f *KGEFilter) (KGEMetrics, error) {
	m, cfg := k.model, &k.cfg
	ed, pd := m.EntDim(), m.ProjDim()
	R, P, err := k.relationTables(ctx)
	if err != nil {
		return KGEMetrics{}, err
	}
	n := cfg.EvalNeg
	var ids, neg []uint64
	var rows, r, p, s, sd []float32
	var sum KGEMetrics
	for b, lo := 0, 0; lo < len(share); b, lo = b+1, lo+cfg.EvalBlock {
		if err := ctx.Err(); err != nil {
			return KGEMetrics{}, err
		}
		blk := share[lo:min(len(share), lo+cfg.EvalBlock)]
		c := len(blk)
		rng := rand.New(rand.NewPCG(cfg.Seed^kgeEvalSeed, uint64(cfg.Rank)<<32|uint64(b)))
		neg = kgeDistinct(rng, cfg.Entities, n, neg[:0])
		ids = ids[:0]
		for _, tr := range blk {
			ids = append(ids, tr.Head)
		}
		for _, tr := range blk {
			ids = append(ids, tr.Tail)
		}
		ids = append(ids, neg...)
		if rows, err = k.params.Pull(ctx, cfg.EntityTable, ids, rows[:0]); err != nil {
			return KGEMetrics{}, fmt.Errorf("pull %s: %w", cfg.EntityTable, err)
		}
		if len(rows) != len(ids)*ed {
			return KGEMetrics{}, fmt.Errorf("pulled %d values of %s, want %d rows of %d: %w", len(rows), cfg.EntityTable, len(ids), ed, ErrInvalid)
		}
		h, t, E := rows[:c*ed], rows[c*ed:2*c*ed], rows[2*c*ed:]
		r = relRows(r, R, P, blk, m.RelDim()-pd, pd)
		p, s = grow(p, c), grow(s, c*n)
		m.Pos(h, r, t, c, p)
		for _, head := range []bool{false, true} {
			m.Neg(h, r, t, E, c, n, head, s)
			if cfg.EvalNegDeg {
				// The block's true heads (tails) are h's (t's) rows.
				own := t
				if head {
					own = h
				}
				sd = grow(sd, c*c)
				m.Neg(h, r, t, own, c, c, head, sd)
			}
			for i, tr := range blk {
				target, from := tr.predicted(head)
				rank := kgeRankSampled(p[i], s[i*n:(i+1)*n], neg, target, f.known(from, tr.Rel, head))
				if cfg.EvalNegDeg {
					rank += kgeRankDeg(p[i], sd[i*c:(i+1)*c], blk, i, head)
				}
				sum.add(rank)
			}
		}
		k.progress("evaluation", int64(lo+c), int64(len(share)))
	}
	return sum.mean(), nil
}

// kgeRankDeg counts, for triple i of blk whose true entity scores pos,
// the candidates of DGL-KE's degree-proportional evaluation negatives
// that rank at or above it: blk's true heads (head set) or tails, which
// score scores. Triple i's own is masked as DGL-KE masks it, a score of
// 0 (it counts when pos is at most 0); another triple's entity that is
// i's true entity counts as a tie, as in kgeRankSampled, and a NaN pos
// ranks below every candidate. There is no filter to leave any out.
func kgeRankDeg(pos float32, scores []float32, blk []Triple, i int, head bool) int {
	nan := math.IsNaN(float64(pos))
	target, _ := blk[i].predicted(head)
	n := 0
	for j, tr := range blk {
		e, _ := tr.predicted(head)
		switch {
		case j == i:
			if nan || pos <= 0 {
				n++
			}
		case e == target || nan || scores[j] >= pos:
			n++
		}
	}
	return n
}

// kgeDistinct appends n distinct ids of 0..m-1, drawn uniformly (Floyd's
// algorithm), to dst; n must not pass m.
func kgeDistinct(rng *rand.Rand, m uint64, n int, dst []uint64) []uint64 {
	seen := make(map[uint64]struct{}, n)
	for j := m - uint64(n); j < m; j++ {
		x := rng.Uint64N(j + 1)
		if _, dup := seen[x]; dup {
			x = j
		}
		seen[x] = struct{}{}
		dst = append(dst, x)
	}
	return dst
}

// kgeRankSampled is the rank of a triple whose true entity target scores
// pos among candidates neg scoring scores: 1 + the candidates scoring at
// least pos (ties against the model, a NaN pos ranks last), leaving out
// the known entities (filtered ranking; sorted, target among them). A
// candidate that is the target itself, not left out (raw ranking), counts
// as a tie whatever the rounding of its two scores.
func kgeRankSampled(pos float32, scores []float32, neg []uint64, target uint64, known []uint64) int {
	nan := math.IsNaN(float64(pos))
	rank := 1
	for j, e := range neg {
		if _, ok := slices.BinarySearch(known, e); ok {
			continue
		}
		if e == target || nan || scores[j] >= pos {
			rank++
		}
	}
	return rank
}

// predicted is the entity that ranking t's head (head set) or tail
// predicts, and the one kept from t.
func (t Triple) predicted(head bool) (target, kept uint64) {
	if head {
		return t.Head, t.Tail
	}
	return t.Tail, t.Head
}

// kgeRank is the rank of row[target] among row, leaving out the known
// entities other than target. A NaN score of the target ranks last, after
// every candidate: a diverged model must not count as a hit (compared
// with NaN, no candidate scores at least as high, which made its rank 0,
// an MRR of +Inf). A known id outside row is not a candidate, so there is
// nothing to leave out: it is ignored (the evaluation triples themselves
// are checked by Run).
func kgeRank(row []float32, target uint64, known []uint64) int {
	ts := row[target]
	nan := math.IsNaN(float64(ts))
	n := 0
	for _, x := range row {
		if nan || x >= ts {
			n++ // target itself included: rank = 1 + the others
		}
	}
	for _, e := range known {
		if e != target && e < uint64(len(row)) && (nan || row[e] >= ts) {
			n--
		}
	}
	return n
}

// Embeddings pulls the tables whole, by global id: Entities rows of the
// entity width, Relations rows of the relation width and, for a model
// with one (transr), Relations rows of the projection table (proj nil
// for the others); the widths are KGETableDims's and KGEProjectionDim's.
func (k *KGE) Embeddings(ctx context.Context) (ent, rel, proj []float32, err error) {
	if ent, err = k.pullAll(ctx, k.cfg.EntityTable, k.cfg.Entities, k.model.EntDim(), nil); err != nil {
		return nil, nil, nil, err
	}
	if rel, proj, err = k.relationTables(ctx); err != nil {
		return nil, nil, nil, err
	}
	return ent, rel, proj, nil
}

// relationTables pulls the relation table whole and, for a model with
// one, the projection table.
func (k *KGE) relationTables(ctx context.Context) (rel, proj []float32, err error) {
	m, n := k.model, uint64(k.cfg.Relations)
	if rel, err = k.pullAll(ctx, k.cfg.RelationTable, n, m.RelDim()-m.ProjDim(), nil); err != nil {
		return nil, nil, err
	}
	if m.ProjDim() > 0 {
		if proj, err = k.pullAll(ctx, k.cfg.ProjectionTable, n, m.ProjDim(), nil); err != nil {
			return nil, nil, err
		}
	}
	return rel, proj, nil
}

// relRows copies the relation rows of blk's triples as the model reads
// them, the relation table's row (rw wide) and then the projection
// table's (pd wide), into dst (grown as needed).
func relRows(dst, R, P []float32, blk []Triple, rw, pd int) []float32 {
	d := rw + pd
	dst = grow(dst, len(blk)*d)
	for i, tr := range blk {
		r := int(tr.Rel)
		copy(dst[i*d:i*d+rw], R[r*rw:(r+1)*rw])
		copy(dst[i*d+rw:(i+1)*d], P[r*pd:(r+1)*pd])
	}
	return dst
}
