package partition

// Repeated entries in the heat estimate. A row may list a neighbour more
// than once (--duplicates keep, or a knowledge graph's relations between
// one pair). The sampler draws over entries, not over distinct
// neighbours (sample.Chooser.Uniform: f of d positions without
// replacement, all of them when f ≥ d), so a node listed m times among
// d entries is in a draw of f with chance
//
//	q(d, f, m) = 1 − C(d−m, f) / C(d, f)
//
// and read once however many of its copies the draw takes. The estimate
// pulls each run of copies as one branch with that chance, where taking
// the copies as m independent branches of chance f/d each counted the
// neighbour up to m times (every edge listed 3 times: reads ×1.5).

// entryChance is the chance that a draw of f of d entries takes a given
// one: q(d, f, 1) in float32, as the estimate has always computed it.
func entryChance(d uint32, f int) float32 {
	switch {
	case d == 0:
		return 0
	case f >= 0 && uint32(f) < d:
		return float32(f) / float32(d)
	}
	return 1
}

// pickChance is q(d, f, m): the chance that a uniform draw of f of d
// entries without replacement (all of them when f < 0 or f ≥ d) takes
// at least one of m given ones (m ≤ d).
func pickChance(d uint32, f int, m uint64) float64 {
	switch {
	case d == 0 || f == 0 || m == 0:
		return 0
	case f < 0 || uint64(f) >= uint64(d):
		return 1
	}
	miss := 1.0 // C(d−m, f)/C(d, f) = Π_{i<m} (d−f−i)/(d−i)
	for i := range m {
		if uint64(f)+i >= uint64(d) {
			return 1
		}
		miss *= float64(uint64(d)-uint64(f)-i) / float64(uint64(d)-i)
	}
	return 1 - miss
}

// repeatRun is one pull of target v from u at hop k where one of the
// two rows lists the other more than once: row(u) holds copies of v,
// row(v) backCopies of u (0: the entry is not reciprocal). heat pulls a
// single entry both ways itself, in float32, bit for bit as before
// repeats were handled.
type repeatRun struct {
	copies uint64  // copies of v in row(u)
	r      float32 // u's chance per entry at hop k, by which w was scaled
	pick   float64 // q(deg u, f_k, copies)
	// Reciprocal entries only: copies of u in row(v), v's chance per
	// entry at hop k−1 (by which back was scaled) and q for them.
	backCopies uint64
	backR      float32
	backPick   float64
}

// pull folds the run into acc: w is w_k(u) per part, back w_{k−1}(v).
//
// Batched, the chance that u, new at hop k−1, reads v is π_{k−1}(u) · q,
// less the part where v, new at hop k−2, picked u (π_{k−2}(v) · q_b at
// hop k−1) and u picks v back. Counting visits, the expected picks
// of v's copies, m · w, less the returns, m · r · m_b · back.
func (run *repeatRun) pull(acc []float64, w, back []float32, batched bool) {
	var scale, backScale float64 // w → π·q; back → π_{k−2}(v)·q_b·q
	if run.r > 0 {
		scale = run.pick / float64(run.r)
	}
	if run.backR > 0 {
		backScale = run.backPick / float64(run.backR) * run.pick
	}
	m, mb := float64(run.copies), float64(run.backCopies)
	for p := range acc {
		if batched {
			acc[p] *= 1 - max(0, float64(w[p])*scale-float64(back[p])*backScale)
		} else {
			acc[p] += m * max(0, float64(w[p])-float64(run.r)*mb*float64(back[p]))
		}
	}
}
