package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"graphnode/kv"
)

// kgeTestGraph is a small knowledge graph of n entities (n a multiple
// of 4) in four groups A, B, C, D and 3 relations, r0 a random bijection
// from A to B, r1 from A to C, r2 from A to D: facts to memorise that
// every model can represent (the constraints form a forest; TransE cannot
// close a cycle of translations, DistMult scores (h, r, t) and (t, r, h)
// alike).
func kgeTestGraph(n int) []Triple {
	rng := rand.New(rand.NewPCG(5, 7))
	q := n / 4
	var ts []Triple
	for r := range 3 {
		perm := rng.Perm(q)
		for a := range q {
			ts = append(ts, Triple{Head: uint64(a), Rel: uint32(r), Tail: uint64((r+1)*q + perm[a])})
		}
	}
	return ts
}

// kgeStore is one in-process kv store holding cfg's tables (Adagrad at
// lr, DGL-KE's initialisation: transr's projection table within ±1) and
// a client on it.
func kgeStore(t testing.TB, cfg KGEConfig, lr float32) *kv.Client {
	t.Helper()
	ed, rd, err := KGETableDims(cfg)
	if err != nil {
		t.Fatal(err)
	}
	init := kv.Init{Kind: kv.InitUniform, Scale: kv.KGEInitScale(float32(cfg.Gamma), cfg.Hidden), Seed: cfg.Seed}
	specs := []kv.Spec{
		{Name: cfg.EntityTable, Rows: cfg.Entities, Dim: ed, Init: init, Opt: kv.Adagrad(lr, 1e-10), Mode: kv.Async, Bounds: []uint64{0, cfg.Entities}},
		{Name: cfg.RelationTable, Rows: uint64(cfg.Relations), Dim: rd, Init: init, Opt: kv.Adagrad(lr, 1e-10), Mode: kv.Async, Bounds: []uint64{0, uint64(cfg.Relations)}},
	}
	if pd := KGEProjectionDim(cfg); pd > 0 {
		init.Scale = KGEProjectionInitScale
		specs = append(specs, kv.Spec{Name: cfg.ProjectionTable, Rows: uint64(cfg.Relations), Dim: pd, Init: init, Opt: kv.Adagrad(lr, 1e-10), Mode: kv.Async,
			Bounds: []uint64{0, uint64(cfg.Relations)}})
	}
	s, err := kv.New(kv.Config{Part: 0, Tables: specs})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kv.NewClient(specs, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func kgeTestConfig(model string, n int) KGEConfig {
	cfg := DefaultKGEConfig()
	cfg.Model, cfg.Hidden, cfg.Gamma = model, 16, 6
	cfg.BatchSize, cfg.NegSize = 60, 20
	cfg.Entities, cfg.Relations = uint64(n), 3
	cfg.Epochs, cfg.StepsPerEpoch, cfg.EvalEvery = 40, 6, 40
	cfg.Seed, cfg.EvalBlock = 3, 16
	return cfg
}

// TestKGELearns: every model fits the test graph: the filtered MRR of its
// training triples rises from near chance (1/n·ln n) to near 1, and the
// loss falls.
func TestKGELearns(t *testing.T) {
	const n = 40
	ts := kgeTestGraph(n)
	for _, model := range kgeModelNames() {
		t.Run(model, func(t *testing.T) {
			cfg := kgeTestConfig(model, n)
			k, err := NewKGE(cfg, kgeStore(t, cfg, 0.1), NoSync{})
			if err != nil {
				t.Fatal(err)
			}
			f := NewKGEFilter(ts)
			before, err := k.evaluate(context.Background(), ts, f)
			if err != nil {
				t.Fatal(err)
			}
			stats, err := k.Run(context.Background(), KGEData{Train: ts, Eval: ts, Filter: f}, nil)
			if err != nil {
				t.Fatal(err)
			}
			first, last := stats[0], stats[len(stats)-1]
			t.Logf("%s: MRR %.3f -> %.3f, hits@1 %.3f, loss %.4f -> %.4f", model, before.MRR, last.Eval.MRR, last.Eval.Hits1, first.Loss, last.Loss)
			if !last.Evaluated || last.Eval.Ranks != 2*len(ts) {
				t.Fatalf("last epoch evaluated %v with %d ranks, want %d", last.Evaluated, last.Eval.Ranks, 2*len(ts))
			}
			if before.MRR > 0.35 || last.Eval.MRR < 0.8 || last.Loss >= first.Loss {
				t.Errorf("MRR %.3f -> %.3f (want <= 0.35 then >= 0.8), loss %.4f -> %.4f", before.MRR, last.Eval.MRR, first.Loss, last.Loss)
			}
			for _, s := range stats[:len(stats)-1] {
				if s.Evaluated {
					t.Errorf("epoch %d evaluated; EvalEvery is %d", s.Epoch, cfg.EvalEvery)
				}
			}
		})
	}
}

// TestKGEDeterministic: one trainer with a seed trains the same losses
// twice; another seed does not.
func TestKGEDeterministic(t *testing.T) {
	ts := kgeTestGraph(30)
	run := func(seed uint64) []float64 {
		cfg := kgeTestConfig("transe_l2", 30)
		cfg.Epochs, cfg.Seed = 3, seed
		k, err := NewKGE(cfg, kgeStore(t, cfg, 0.1), NoSync{})
		if err != nil {
			t.Fatal(err)
		}
		stats, err := k.Run(context.Background(), KGEData{Train: ts}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var l []float64
		for _, s := range stats {
			l = append(l, s.Loss)
		}
		return l
	}
	a, b, c := run(1), run(1), run(2)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 1 twice: %v and %v", a, b)
		}
	}
	if a[0] == c[0] {
		t.Errorf("seeds 1 and 2 gave the same first loss %v", a[0])
	}
}

// TestKGETwoTrainers: two trainers share one store and split the
// evaluation; both report the same merged metrics, over every triple, and
// the positives of both.
func TestKGETwoTrainers(t *testing.T) {
	const n = 30
	ts := kgeTestGraph(n)
	cfg := kgeTestConfig("distmult", n)
	cfg.Epochs, cfg.EvalEvery = 2, 1
	params := kgeStore(t, cfg, 0.1)
	syncs := NewLocalSync(2)
	f := NewKGEFilter(ts)
	var wg sync.WaitGroup
	out := make([][]KGEEpochStats, 2)
	errs := make([]error, 2)
	for r := range 2 {
		c := cfg
		c.Rank, c.World = r, 2
		k, err := NewKGE(c, params, syncs[r])
		if err != nil {
			t.Fatal(err)
		}
		half := ts[r*len(ts)/2 : (r+1)*len(ts)/2]
		wg.Go(func() { out[r], errs[r] = k.Run(context.Background(), KGEData{Train: half, Eval: ts, Filter: f}, nil) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for e := range 2 {
		a, b := out[0][e], out[1][e]
		if a.Eval != b.Eval || a.Loss != b.Loss || a.Triples != b.Triples {
			t.Errorf("epoch %d: rank 0 %+v / %v, rank 1 %+v / %v", e+1, a.Eval, a.Loss, b.Eval, b.Loss)
		}
		if a.Eval.Ranks != 2*len(ts) || a.Triples != int64(2*cfg.StepsPerEpoch*cfg.BatchSize) {
			t.Errorf("epoch %d: %d ranks, %d triples; want %d and %d", e+1, a.Eval.Ranks, a.Triples, 2*len(ts), 2*cfg.StepsPerEpoch*cfg.BatchSize)
		}
	}
}

func TestKGERank(t *testing.T) {
	row := []float32{0.5, 2, 1, 3, 1, -1}
	nan := []float32{0.5, float32(math.NaN()), 1, float32(math.NaN())}
	for _, c := range []struct {
		row    []float32
		target uint64
		known  []uint64
		want   int
	}{
		{row, 2, nil, 4},            // 2, 3 and the tie at 4 score at least 1
		{row, 2, []uint64{1, 2}, 3}, // 1 is known: left out; 2 is the target
		{row, 3, []uint64{1}, 1},    // the best
		{row, 5, []uint64{0, 1, 2, 3, 4}, 1},
		{row, 5, nil, 6},
		{row, 2, []uint64{1, 2, 6, 1 << 40}, 3}, // ids outside the row are no candidates: ignored
		{nan, 1, nil, 4},                        // a NaN true score ranks last
		{nan, 1, []uint64{0, 1, 9}, 3},          // last of the candidates left
		{nan, 2, nil, 1},                        // a NaN candidate does not beat a number
	} {
		if got := kgeRank(c.row, c.target, c.known); got != c.want {
			t.Errorf("rank of %d in %v (known %v) = %d, want %d", c.target, c.row, c.known, got, c.want)
		}
	}
	var m KGEMetrics
	for _, r := range []int{1, 2, 4, 20} {
		m.add(r)
	}
	m = m.mean()
	want := KGEMetrics{Ranks: 4, MRR: (1 + 0.5 + 0.25 + 0.05) / 4, MR: 27.0 / 4, Hits1: 0.25, Hits3: 0.5, Hits10: 0.75}
	if math.Abs(m.MRR-want.MRR) > 1e-12 || m.MR != want.MR || m.Hits1 != want.Hits1 || m.Hits3 != want.Hits3 || m.Hits10 != want.Hits10 {
		t.Errorf("metrics %+v, want %+v", m, want)
	}
	v := make([]float32, kgeMetricsLen)
	m.vector(v)
	if got := kgeMetricsFrom(v, 1); got.Ranks != 4 || math.Abs(got.MRR-want.MRR) > 1e-9 || got.MR != want.MR || got.Hits10 != 0.75 {
		t.Errorf("round trip through the sync vector: %+v", got)
	}
}

func TestKGEFilter(t *testing.T) {
	f := NewKGEFilter([]Triple{{1, 2, 0}, {1, 3, 0}, {1, 2, 0}}, []Triple{{4, 2, 1}, {1, 2, 5}})
	for _, c := range []struct {
		e    uint64
		r    uint32
		head bool
		want []uint64
	}{{1, 0, false, []uint64{2, 3}}, {1, 5, false, []uint64{2}}, {2, 0, true, []uint64{1}}, {2, 1, true, []uint64{4}}, {9, 0, true, nil}} {
		got := f.known(c.e, c.r, c.head)
		if len(got) != len(c.want) || len(got) > 0 && got[0] != c.want[0] || len(got) > 1 && got[1] != c.want[1] {
			t.Errorf("known(%d, %d, head %v) = %v, want %v", c.e, c.r, c.head, got, c.want)
		}
	}
	var nilF *KGEFilter
	if nilF.known(1, 0, false) != nil {
		t.Error("a nil filter knows something")
	}
}

// TestKGELossGrad checks the score gradients of the loss against central
// differences, with and without self-adversarial weights (whose weights
// are held constant, as DGL-KE detaches them).
func TestKGELossGrad(t *testing.T) {
	const n, N, B = 3, 4, 5
	rng := rand.New(rand.NewPCG(1, 2))
	pos, neg := make([]float32, n), make([]float32, n*N)
	for i := range pos {
		pos[i] = float32(rng.NormFloat64() * 2)
	}
	for i := range neg {
		neg[i] = float32(rng.NormFloat64() * 2)
	}
	gp, gn := make([]float32, n), make([]float32, n*N)
	kgeLossGrad(pos, neg, gp, gn, n, N, B, 0)
	lossAt := func(p, q []float32) float64 {
		return kgeLossGrad(p, q, make([]float32, n), make([]float32, n*N), n, N, B, 0)
	}
	const h = 1e-2
	check := func(name string, x []float32, g []float32) {
		for i := range x {
			old := x[i]
			x[i] = old + h
			up := lossAt(pos, neg)
			x[i] = old - h
			down := lossAt(pos, neg)
			x[i] = old
			if num := (up - down) / (2 * h); math.Abs(num-float64(g[i])) > 1e-4 {
				t.Errorf("%s[%d]: gradient %g, central difference %g", name, i, g[i], num)
			}
		}
	}
	check("pos", pos, gp)
	check("neg", neg, gn)
	// Self-adversarial: weights w_ij = softmax over the chunk; the loss
	// is Σ w·(−log σ(−s)) per positive, and the gradient uses w as given.
	ga := make([]float32, n*N)
	la := kgeLossGrad(pos, neg, make([]float32, n), ga, n, N, B, 1)
	var want float64
	for i := range n {
		row := neg[i*N : (i+1)*N]
		var z float64
		for _, x := range row {
			z += math.Exp(float64(x))
		}
		for j, x := range row {
			w := math.Exp(float64(x)) / z
			want -= w * logSigmoid(-float64(x)) / (2 * B)
			if g := w * sigmoid(float64(x)) / (2 * B); math.Abs(g-float64(ga[i*N+j])) > 1e-6 {
				t.Errorf("adversarial gradient [%d,%d] = %g, want %g", i, j, ga[i*N+j], g)
			}
		}
		want -= logSigmoid(float64(pos[i])) / (2 * B)
	}
	if math.Abs(la-want) > 1e-6 {
		t.Errorf("adversarial loss %g, want %g", la, want)
	}
}

func TestKGEConfigValidate(t *testing.T) {
	c := DefaultKGEConfig()
	c.Model, c.Hidden, c.BatchSize, c.Epochs, c.Rank, c.World, c.Entities, c.RelationTable = "transx", 0, 0, -1, 2, 2, 1, c.EntityTable
	err := c.Validate()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"transx", "hidden 0", "batch size 0", "-1 epochs", "rank 2 of world 2", "1 entities", "two distinct names"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "invalid argument: invalid argument") {
		t.Errorf("ErrInvalid said twice:\n%v", err)
	}
	good := kgeTestConfig("rotate", 10)
	if err := good.Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	good.Epochs = 0 // evaluate only
	if err := good.Validate(); err != nil {
		t.Errorf("0 epochs: %v", err)
	}
	// Degree-proportional evaluation negatives join sampled ones only.
	for _, neg := range []int{0, 10} {
		c := kgeTestConfig("distmult", 10)
		c.EvalNegDeg, c.EvalNeg = true, neg
		if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "degree-proportional evaluation negatives beside "+fmt.Sprint(neg)+" sampled ones of 10 entities") {
			t.Errorf("EvalNegDeg with EvalNeg %d of 10 entities: %v", neg, err)
		}
	}
}

// TestKGENegDegEvalRefusesFilter: DGL-KE asserts that degree-based
// evaluation negatives rank raw; Run refuses a filter before it trains.
func TestKGENegDegEvalRefusesFilter(t *testing.T) {
	ts := kgeTestGraph(20)
	cfg := kgeTestConfig("distmult", 20)
	cfg.EvalNeg, cfg.EvalNegDeg = 5, true
	p := &kgeMaxPull{KGEParams: kgeStore(t, cfg, 0.1)}
	k, err := NewKGE(cfg, p, NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = k.Run(context.Background(), KGEData{Train: ts, Eval: ts, Filter: NewKGEFilter(ts)}, nil)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "rank raw") {
		t.Errorf("filtered ranking with degree negatives: %v", err)
	}
	if p.most != 0 {
		t.Errorf("refused after pulling %d rows", p.most)
	}
}

// TestKGEProgress: every step and evaluation block is reported, each
// stage ending at its total.
func TestKGEProgress(t *testing.T) {
	ts := kgeTestGraph(20)
	cfg := kgeTestConfig("distmult", 20)
	cfg.Epochs, cfg.StepsPerEpoch, cfg.EvalEvery, cfg.EvalBlock = 2, 3, 0, 4
	last := map[string][2]int64{}
	calls := 0
	cfg.Progress = func(stage string, done, total int64) {
		calls++
		if p, ok := last[stage]; ok && done < p[0] {
			t.Errorf("%s went back from %d to %d", stage, p[0], done)
		}
		last[stage] = [2]int64{done, total}
	}
	k, err := NewKGE(cfg, kgeStore(t, cfg, 0.1), NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(context.Background(), KGEData{Train: ts, Eval: ts[:10]}, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{"epoch 1": {3, 3}, "epoch 2": {3, 3}, "evaluation": {10, 10}}
	if len(last) != len(want) || calls != 2*3+1+3 {
		t.Errorf("stages %v in %d calls, want %v in 10", last, calls, want)
	}
	for s, w := range want {
		if last[s] != w {
			t.Errorf("%s ended at %v, want %v", s, last[s], w)
		}
	}
}

// TestKGERegularize: coef·Σ|x|^p and its gradient coef·p·|x|^(p−1)·sign(x),
// added to what g holds, for p = 3 (DGL-KE's default) and p = 1; at x = 0
// the gradient is 0 for every p, as torch's (sign(0) = 0: for p = 1 it
// was coef, pushing a zero coordinate to -lr·coef).
func TestKGERegularize(t *testing.T) {
	x := []float32{0.5, -2, 0, 1}
	for _, c := range []struct {
		p        int
		loss     float64
		wantGrad []float32
	}{
		{3, 0.1 * (0.125 + 8 + 0 + 1), []float32{1 + 0.1*3*0.25, 1 - 0.1*3*4, 1, 1 + 0.1*3}},
		{1, 0.1 * 3.5, []float32{1 + 0.1, 1 - 0.1, 1, 1 + 0.1}},
	} {
		g := []float32{1, 1, 1, 1}
		if loss := kgeRegularize(x, g, []float64{1}, len(x), 0.1, c.p); math.Abs(loss-c.loss) > 1e-12 {
			t.Errorf("p=%d: loss %g, want %g", c.p, loss, c.loss)
		}
		for i := range g {
			if math.Abs(float64(g[i]-c.wantGrad[i])) > 1e-6 {
				t.Errorf("p=%d: grad %v, want %v", c.p, g, c.wantGrad)
				break
			}
		}
		// As two rows of 2, the first counted 3 times, the second not at all.
		g = []float32{1, 1, 1, 1}
		var first float64
		for _, v := range x[:2] {
			first += math.Pow(math.Abs(float64(v)), float64(c.p))
		}
		if loss := kgeRegularize(x, g, []float64{3, 0}, 2, 0.1, c.p); math.Abs(loss-0.3*first) > 1e-12 {
			t.Errorf("p=%d, weights 3 and 0: loss %g, want %g", c.p, loss, 0.3*first)
		}
		for i := range g {
			want := float32(1)
			if i < 2 {
				want = 1 + 3*(c.wantGrad[i]-1)
			}
			if math.Abs(float64(g[i]-want)) > 1e-6 {
				t.Errorf("p=%d, weights 3 and 0: grad %v, want %g at %d", c.p, g, want, i)
				break
			}
		}
	}
}

// TestKGERegularizerCountsRows: the regulariser of a step is DGL-KE's
// (KEModel.forward: the norm of curr_emb, every row the step gathered):
// the positives' distinct entities once each, every negative once per
// draw, and a relation row once per positive triple. Each distinct row
// counted once made it 1.378 here instead of 2.448. transr's projection
// table (DGL-KE's projection_emb) is not counted, as DGL-KE's.
func TestKGERegularizerCountsRows(t *testing.T) {
	for _, model := range []string{"distmult", "transr"} {
		t.Run(model, func(t *testing.T) { kgeCheckRegularizer(t, model) })
	}
}

func kgeCheckRegularizer(t *testing.T, model string) {
	cfg := DefaultKGEConfig()
	cfg.Model, cfg.Hidden, cfg.Gamma = model, 3, 2
	cfg.BatchSize, cfg.NegSize = 6, 2
	cfg.Entities, cfg.Relations = 8, 2
	cfg.StepsPerEpoch = 1
	ed, rd, _ := KGETableDims(cfg)
	rng := rand.New(rand.NewPCG(9, 9))
	E, R := kgeRows(rng, int(cfg.Entities), ed), kgeRows(rng, cfg.Relations, rd)
	P := kgeRows(rng, cfg.Relations, KGEProjectionDim(cfg))
	// Relation 0 in five triples, entity 0 and 1 in three, (0, 1, 0) twice.
	batch := []Triple{{0, 1, 0}, {2, 3, 0}, {4, 5, 0}, {1, 0, 0}, {3, 2, 1}, {0, 1, 0}}
	step := func(coef float64) (float64, *KGE) {
		c := cfg
		c.RegCoef, c.RegNorm = coef, 2
		k, err := NewKGE(c, newKGERecParams(c, E, R, P), NoSync{})
		if err != nil {
			t.Fatal(err)
		}
		l, _, err := k.trainStep(context.Background(), batch, false)
		if err != nil {
			t.Fatal(err)
		}
		return l, k
	}
	with, k := step(0.5)
	without, _ := step(0) // the same seed draws the same negatives
	sq := func(x []float32) (s float64) {
		for _, v := range x {
			s += float64(v) * float64(v)
		}
		return s
	}
	var want float64
	pos := map[uint64]bool{}
	for _, tr := range batch {
		pos[tr.Head], pos[tr.Tail] = true, true
		want += sq(R[int(tr.Rel)*rd : (int(tr.Rel)+1)*rd])
	}
	for e := range pos {
		want += sq(E[int(e)*ed : (int(e)+1)*ed])
	}
	for _, s := range k.st.ni { // 3 chunks of 2 negatives
		e := k.st.ents[s]
		want += sq(E[int(e)*ed : (int(e)+1)*ed])
	}
	want *= 0.5
	if got := with - without; math.Abs(got-want) > 1e-6 {
		t.Errorf("regulariser %.6g, DGL-KE's %.6g", got, want)
	}
}

// kgeRecParams is a parameter server over fixed tables that records the
// sum of the gradients pushed to each row.
type kgeRecParams struct {
	tabs   map[string][]float32
	dims   map[string]int
	pushed map[string]map[uint64][]float32
}

// newKGERecParams holds ent, rel and, for a model with a projection
// table, proj (zeros when nil).
func newKGERecParams(cfg KGEConfig, ent, rel, proj []float32) *kgeRecParams {
	ed, rd, _ := KGETableDims(cfg)
	p := &kgeRecParams{
		tabs:   map[string][]float32{cfg.EntityTable: ent, cfg.RelationTable: rel},
		dims:   map[string]int{cfg.EntityTable: ed, cfg.RelationTable: rd},
		pushed: map[string]map[uint64][]float32{},
	}
	if pd := KGEProjectionDim(cfg); pd > 0 {
		if proj == nil {
			proj = make([]float32, cfg.Relations*pd)
		}
		p.tabs[cfg.ProjectionTable], p.dims[cfg.ProjectionTable] = proj, pd
	}
	return p
}

func (p *kgeRecParams) Pull(_ context.Context, table string, ids []uint64, dst []float32) ([]float32, error) {
	d := p.dims[table]
	dst = dst[:0]
	for _, id := range ids {
		dst = append(dst, p.tabs[table][int(id)*d:(int(id)+1)*d]...)
	}
	return dst, nil
}

func (p *kgeRecParams) Push(_ context.Context, table string, ids []uint64, grads []float32) error {
	d := p.dims[table]
	if p.pushed[table] == nil {
		p.pushed[table] = map[uint64][]float32{}
	}
	for i, id := range ids {
		g := p.pushed[table][id]
		if g == nil {
			g = make([]float32, d)
		}
		for j := range d {
			g[j] += grads[i*d+j]
		}
		p.pushed[table][id] = g
	}
	return nil
}

// TestKGEStepGradient checks the gradient a step pushes (gathered by
// slot, scattered back, regulariser included) against central
// differences of the loss it returns; the same seed draws the same
// negatives. Self-adversarial weights are detached (DGL-KE), so adv = 0.
// Under NegDeg the masked pairs are constants of the loss: a gradient
// through them would show here.
func TestKGEStepGradient(t *testing.T) {
	type stepCase struct {
		head, negDeg bool
		scale        float64 // of the initial rows, uniform in ±scale
	}
	for _, name := range kgeModelNames() {
		cases := []stepCase{{false, false, 1}, {true, false, 1}, {false, true, 1}, {true, true, 1}}
		if name == "simple" {
			// Rows this large put some scores past the clamp (±20) and
			// leave others within it: the step must hand NegGrad the
			// scores of its negatives for it to cut the right pairs.
			// One chunk (NegSize 5) of 5 × 5 scores, all of them in
			// k.st.neg afterwards.
			cases = append(cases, stepCase{false, false, 4.5}, stepCase{true, true, 4.5})
		}
		for _, c := range cases {
			head := c.head
			t.Run(fmt.Sprintf("%s/head=%v/negdeg=%v/scale=%g", name, head, c.negDeg, c.scale), func(t *testing.T) {
				cfg := DefaultKGEConfig()
				cfg.Model, cfg.Hidden, cfg.Gamma = name, 3, 2
				cfg.BatchSize, cfg.NegSize, cfg.NegDeg = 5, 2, c.negDeg
				if c.scale > 1 {
					cfg.NegSize = 5
				}
				cfg.Entities, cfg.Relations = 6, 2
				cfg.StepsPerEpoch = 1
				cfg.RegCoef, cfg.RegNorm = 0.01, 3
				ed, rd, _ := KGETableDims(cfg)
				pd := KGEProjectionDim(cfg)
				rng := rand.New(rand.NewPCG(9, 9))
				E := make([]float64, int(cfg.Entities)*ed)
				R := make([]float64, cfg.Relations*rd)
				P := make([]float64, cfg.Relations*pd) // transr's M_r
				for _, x := range [][]float64{E, R, P} {
					for i := range x {
						x[i] = (rng.Float64()*2 - 1) * c.scale
					}
				}
				batch := []Triple{{0, 1, 0}, {2, 3, 1}, {4, 5, 0}, {1, 0, 1}, {3, 2, 0}}
				f32 := func(x []float64) []float32 {
					y := make([]float32, len(x))
					for i, v := range x {
						y[i] = float32(v)
					}
					return y
				}
				var k *KGE
				run := func() (float64, *kgeRecParams) {
					p := newKGERecParams(cfg, f32(E), f32(R), f32(P))
					var err error
					if k, err = NewKGE(cfg, p, NoSync{}); err != nil {
						t.Fatal(err)
					}
					loss, _, err := k.trainStep(context.Background(), batch, head)
					if err != nil {
						t.Fatal(err)
					}
					return loss, p
				}
				_, p := run()
				if c.scale > 1 {
					var cut, kept int
					for _, v := range k.st.neg {
						if v == kgeSimplEClamp || v == -kgeSimplEClamp {
							cut++
						} else if v != 0 {
							kept++
						}
					}
					if cut == 0 || kept == 0 {
						t.Fatalf("last chunk's negative scores %v: want some clamped and some not", k.st.neg)
					}
				}
				check := func(tab string, x []float64, d int) {
					const h = 1e-3
					for i := range x {
						v := x[i]
						x[i] = v + h
						up, _ := run()
						x[i] = v - h
						down, _ := run()
						x[i] = v
						fd := (up - down) / (2 * h)
						var an float64
						if g := p.pushed[tab][uint64(i/d)]; g != nil {
							an = float64(g[i%d])
						}
						if math.Abs(an-fd) > 2e-3*max(1, math.Abs(fd)) {
							t.Errorf("%s[%d] (row %d col %d): pushed %.6g, central difference %.6g", tab, i, i/d, i%d, an, fd)
						}
					}
				}
				check(cfg.EntityTable, E, ed)
				check(cfg.RelationTable, R, rd)
				if pd > 0 {
					check(cfg.ProjectionTable, P, pd)
				}
			})
		}
	}
}

// TestKGENonFiniteNotPushed: a step whose loss or gradient is not finite
// fails, naming the step and the value, before it pushes anything: the
// tables are shared, and one Inf poisons a row for every trainer.
func TestKGENonFiniteNotPushed(t *testing.T) {
	cfg := DefaultKGEConfig()
	cfg.Model, cfg.Hidden = "distmult", 2
	cfg.BatchSize, cfg.NegSize, cfg.Entities, cfg.Relations, cfg.StepsPerEpoch = 2, 2, 4, 1, 1
	huge := func(n int, x float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = x
		}
		return v
	}
	for _, c := range []struct {
		name     string
		ent, rel float32
		regCoef  float64
		want     string
	}{
		// Scores of 2e60 overflow float32: the loss is +Inf.
		{"loss", 1e20, 1e20, 0, "train: kge: epoch 1 step 0: loss is +Inf: lower the learning rate or gamma: invalid argument"},
		// Scores 0 and a regulariser of 1e60 keep the float64 loss
		// finite; its gradient 3e40 is +Inf as a float32.
		{"gradient", 1e20, 0, 1, "train: kge: epoch 1 step 0: gradient of kge.entity row 0 is +Inf: lower the learning rate or gamma: invalid argument"},
	} {
		cfg := cfg
		cfg.RegCoef = c.regCoef
		p := newKGERecParams(cfg, huge(8, c.ent), huge(2, c.rel), nil)
		k, err := NewKGE(cfg, p, NoSync{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = k.Run(context.Background(), KGEData{Train: []Triple{{0, 1, 0}, {2, 3, 0}}}, nil)
		if !errors.Is(err, ErrInvalid) || err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
		if len(p.pushed) != 0 {
			t.Errorf("%s: the failed step pushed to %d tables", c.name, len(p.pushed))
		}
	}
}

// TestKGEEvalOutOfRange: an evaluation triple outside the tables is an
// error naming it and its field, before any training, not a panic of the
// evaluation after it.
func TestKGEEvalOutOfRange(t *testing.T) {
	for _, c := range []struct {
		bad  Triple
		want string
	}{
		{Triple{Head: 16, Tail: 1, Rel: 0}, "train: kge: evaluation triple 1: head 16 outside the 16 entities: invalid argument"},
		{Triple{Head: 1, Tail: 40, Rel: 0}, "train: kge: evaluation triple 1: tail 40 outside the 16 entities: invalid argument"},
		{Triple{Head: 1, Tail: 1, Rel: 3}, "train: kge: evaluation triple 1: relation 3 outside the 3 relations: invalid argument"},
	} {
		cfg := kgeTestConfig("distmult", 16)
		cfg.Epochs, cfg.StepsPerEpoch, cfg.EvalEvery = 1, 1, 1
		steps := 0
		cfg.Progress = func(stage string, _, _ int64) { steps++ }
		k, err := NewKGE(cfg, kgeStore(t, cfg, 0.1), NoSync{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = k.Run(context.Background(), KGEData{Train: kgeTestGraph(16), Eval: []Triple{{0, 4, 0}, c.bad}}, nil)
		if !errors.Is(err, ErrInvalid) || err.Error() != c.want {
			t.Errorf("eval triple %+v: %v, want %s", c.bad, err, c.want)
		}
		if steps != 0 {
			t.Errorf("eval triple %+v: %d steps ran before the error", c.bad, steps)
		}
	}
}

// TestKGEConfigNonFinite: Validate refuses NaN and infinite
// hyperparameters, naming the field (gamma as the float32 the models
// hold).
func TestKGEConfigNonFinite(t *testing.T) {
	for _, c := range []struct {
		set  func(*KGEConfig)
		want string
	}{
		{func(c *KGEConfig) { c.Gamma = math.NaN() }, "train: kge: gamma NaN: must be finite (as a float32): invalid argument"},
		{func(c *KGEConfig) { c.Gamma = math.Inf(-1) }, "train: kge: gamma -Inf: must be finite (as a float32): invalid argument"},
		{func(c *KGEConfig) { c.Gamma = 1e300 }, "train: kge: gamma 1e+300: must be finite (as a float32): invalid argument"},
		{func(c *KGEConfig) { c.AdvTemp = math.Inf(1) }, "train: kge: adversarial temperature +Inf: must be finite: invalid argument"},
		{func(c *KGEConfig) { c.AdvTemp = math.NaN() }, "train: kge: adversarial temperature NaN: must be finite: invalid argument"},
		{func(c *KGEConfig) { c.RegCoef = math.NaN() }, "train: kge: regularisation coefficient NaN: must be finite: invalid argument"},
		{func(c *KGEConfig) { c.RegCoef = math.Inf(1) }, "train: kge: regularisation coefficient +Inf: must be finite: invalid argument"},
	} {
		cfg := kgeTestConfig("transe_l2", 16)
		c.set(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalid) || err.Error() != c.want {
			t.Errorf("%v, want %s", err, c.want)
		}
	}
}

// TestKGERankSampled: a sampled candidate counts when it scores at least
// the true entity's score, unless known (filtered); the true entity drawn
// as a candidate counts in raw ranking (a tie, whatever the rounding of
// its two scores) and is left out in filtered ranking; a NaN true score
// ranks after every candidate left.
func TestKGERankSampled(t *testing.T) {
	neg := []uint64{7, 2, 9, 4, 5}
	scores := []float32{0.5, 2, 1, 3, 0.99}
	for _, c := range []struct {
		pos    float32
		target uint64
		known  []uint64
		want   int
	}{
		{1, 3, nil, 4},               // 2, 1 (a tie) and 3 score at least 1
		{1, 3, []uint64{2, 3, 4}, 2}, // 2 and 4 known: left out
		{1, 9, nil, 4},               // the target drawn (score 1) counts once, as a tie
		{1.5, 9, nil, 4},             // ... even when its candidate score rounds lower
		{1.5, 9, []uint64{3, 9}, 3},  // filtered: the target among the known, left out
		{float32(math.NaN()), 3, nil, 6},
		{float32(math.NaN()), 3, []uint64{7, 9}, 4},
		{5, 3, nil, 1},
	} {
		if got := kgeRankSampled(c.pos, scores, neg, c.target, c.known); got != c.want {
			t.Errorf("rank of score %g (target %d, known %v) = %d, want %d", c.pos, c.target, c.known, got, c.want)
		}
	}
}

// TestKGENegDegLoss: a step under NegDeg has DGL-KE's loss for
// --neg_deg_sample, computed here from the formulas (kgeRef): each chunk
// of positives is scored against its own heads (tails), then its uniform
// negatives, positive i against its own entity taken as a score of 0, the
// mean (or self-adversarial sum) over all n+N of them; the last chunk is
// short (5 positives in chunks of 2).
func TestKGENegDegLoss(t *testing.T) {
	for _, name := range []string{"transe_l2", "distmult", "complex", "rescal"} {
		for _, adv := range []float64{0, 0.7} {
			for _, head := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/adv=%v/head=%v", name, adv, head), func(t *testing.T) {
					cfg := DefaultKGEConfig()
					cfg.Model, cfg.Hidden, cfg.Gamma = name, 3, 2
					cfg.BatchSize, cfg.NegSize, cfg.NegDeg, cfg.AdvTemp, cfg.RegCoef = 5, 2, true, adv, 0
					cfg.Entities, cfg.Relations, cfg.StepsPerEpoch = 7, 2, 1
					ed, rd, _ := KGETableDims(cfg)
					rng := rand.New(rand.NewPCG(4, 4))
					E, R := kgeRows(rng, int(cfg.Entities), ed), kgeRows(rng, cfg.Relations, rd)
					batch := []Triple{{0, 1, 0}, {2, 3, 1}, {4, 5, 0}, {1, 6, 1}, {3, 2, 0}}
					k, err := NewKGE(cfg, newKGERecParams(cfg, E, R, nil), NoSync{})
					if err != nil {
						t.Fatal(err)
					}
					loss, _, err := k.trainStep(context.Background(), batch, head)
					if err != nil {
						t.Fatal(err)
					}
					score := func(h, r, t uint64) float64 {
						s, _ := kgeRef(name, kgeF64(kgeRow(E, int(h), ed)), kgeF64(kgeRow(R, int(r), rd)), kgeF64(kgeRow(E, int(t), ed)), cfg.Hidden, cfg.Gamma)
						return s
					}
					const B, N, C = 5, 2, 2
					var want float64
					for lo := 0; lo < B; lo += C {
						chunk := batch[lo:min(B, lo+C)]
						var cands []uint64
						for _, tr := range chunk {
							e, _ := tr.predicted(head)
							cands = append(cands, e)
						}
						for _, s := range k.st.ni[lo/C*N : (lo/C+1)*N] {
							cands = append(cands, k.st.ents[s])
						}
						for i, tr := range chunk {
							want -= logSigmoid(score(tr.Head, uint64(tr.Rel), tr.Tail)) / (2 * B)
							scores := make([]float64, len(cands))
							for j, e := range cands {
								switch {
								case j == i:
									scores[j] = 0 // DGL-KE's mask
								case head:
									scores[j] = score(e, uint64(tr.Rel), tr.Tail)
								default:
									scores[j] = score(tr.Head, uint64(tr.Rel), e)
								}
							}
							var z float64
							for _, x := range scores {
								z += math.Exp(adv * x)
							}
							for _, x := range scores {
								w := 1 / float64(len(scores))
								if adv > 0 {
									w = math.Exp(adv*x) / z
								}
								want -= w * logSigmoid(-x) / (2 * B)
							}
						}
					}
					if math.Abs(loss-want) > 1e-5*max(1, math.Abs(want)) {
						t.Errorf("loss %.7g, DGL-KE's with --neg_deg_sample %.7g", loss, want)
					}
				})
			}
		}
	}
}

// TestKGERankDeg: the block's own entities as evaluation candidates
// (DGL-KE's --neg_deg_sample_eval): the triple's own is masked to a
// score of 0, another triple's entity equal to the target is a tie, a
// NaN score ranks below all.
func TestKGERankDeg(t *testing.T) {
	blk := []Triple{{Head: 1, Tail: 10}, {Head: 2, Tail: 11}, {Head: 1, Tail: 10}, {Head: 3, Tail: 12}}
	scores := []float32{9, 0.5, -1, 2} // triple 0's row: candidates 10, 11, 10, 12
	for _, c := range []struct {
		pos  float32
		head bool
		want int
	}{
		{1, false, 2},    // own masked (0 < 1); 11 scores 0.5; 10 again: a tie; 12 scores 2
		{-0.5, false, 4}, // own masked to 0 ≥ -0.5; 11's 0.5; the tie; 12's 2
		{3, false, 1},    // only the duplicate of the target
		{3, true, 1},     // heads 1, 2, 1, 3: triple 2's head 1 is the target
		{float32(math.NaN()), false, 4},
	} {
		if got := kgeRankDeg(c.pos, scores, blk, 0, c.head); got != c.want {
			t.Errorf("pos %g head %v: %d candidates at or above, want %d", c.pos, c.head, got, c.want)
		}
	}
}

// TestKGEEvalBlock: ranking against every entity gives the same metrics
// for any block size, and a block's scores stay within
// kgeEvalScoreBytes (DGL-KE's --batch_size_eval 1000 on Freebase's 86 M
// entities would be 344 GB of them).
func TestKGEEvalBlock(t *testing.T) {
	for _, c := range []struct{ want, n, got int }{{64, 14541, 64}, {100000, 14541, 4615}, {1000, 86054151, 1}, {0, 10, 1}} {
		if b := kgeEvalBlock(c.want, c.n); b != c.got {
			t.Errorf("block of %d against %d entities: %d, want %d", c.want, c.n, b, c.got)
		}
	}
	const n = 40
	ts := kgeTestGraph(n)
	cfg := kgeTestConfig("complex", n)
	cfg.Epochs, cfg.StepsPerEpoch = 1, 4
	k, err := NewKGE(cfg, kgeStore(t, cfg, 0.1), NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(context.Background(), KGEData{Train: ts}, nil); err != nil {
		t.Fatal(err)
	}
	var first KGEMetrics
	for i, block := range []int{1, 7, 64, 1000} {
		k.cfg.EvalBlock = block
		m, err := k.evaluate(context.Background(), ts, NewKGEFilter(ts))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = m
		} else if m.Ranks != first.Ranks || math.Abs(m.MRR-first.MRR) > 1e-12 || m.MR != first.MR || m.Hits10 != first.Hits10 {
			t.Errorf("blocks of %d: %+v, blocks of 1: %+v", block, m, first)
		}
	}
}

// TestKGEDistinct: n distinct ids below m, the same for the same stream;
// n = m is every id.
func TestKGEDistinct(t *testing.T) {
	for _, c := range []struct {
		m uint64
		n int
	}{{10, 3}, {10, 10}, {1 << 40, 1000}, {5, 0}} {
		got := kgeDistinct(rand.New(rand.NewPCG(1, 2)), c.m, c.n, nil)
		again := kgeDistinct(rand.New(rand.NewPCG(1, 2)), c.m, c.n, nil)
		seen := map[uint64]bool{}
		for _, x := range got {
			if x >= c.m || seen[x] {
				t.Fatalf("m %d n %d: %v has %d out of range or twice", c.m, c.n, got, x)
			}
			seen[x] = true
		}
		if len(got) != c.n || !slices.Equal(got, again) {
			t.Errorf("m %d n %d: %d ids %v, then %v", c.m, c.n, len(got), got, again)
		}
	}
}

// TestKGEEvalSampled: ranking against EvalNeg sampled entities gives, for
// every triple, the rank its true entity has among those candidates in
// the scores against every entity (the reference below redraws the
// block's candidates from the same stream), while pulling only the
// block's rows: no pull of the whole entity table. transr's blocks join
// the relation rows with the projection table's.
func TestKGEEvalSampled(t *testing.T) {
	const n = 40
	ts := kgeTestGraph(n)
	for _, model := range []string{"distmult", "transe_l2", "simple", "transr"} {
		for _, v := range []struct{ filtered, negDeg bool }{{false, false}, {true, false}, {false, true}} {
			filtered := v.filtered
			t.Run(fmt.Sprintf("%s/filtered=%v/negdeg=%v", model, filtered, v.negDeg), func(t *testing.T) {
				cfg := kgeTestConfig(model, n)
				cfg.Epochs, cfg.StepsPerEpoch, cfg.EvalNeg, cfg.EvalNegDeg = 2, 3, 12, v.negDeg
				var f *KGEFilter
				if filtered {
					f = NewKGEFilter(ts)
				}
				ed, rd, err := KGETableDims(cfg)
				if err != nil {
					t.Fatal(err)
				}
				kvc := kgeStore(t, cfg, 0.1)
				rec := &kgeMaxPull{KGEParams: kvc}
				k, err := NewKGE(cfg, rec, NoSync{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := k.Run(context.Background(), KGEData{Train: ts}, nil); err != nil {
					t.Fatal(err)
				}
				rec.most = 0
				got, err := k.evaluate(context.Background(), ts, f)
				if err != nil {
					t.Fatal(err)
				}
				if want := 2*cfg.EvalBlock + cfg.EvalNeg; rec.most != want {
					t.Errorf("the largest entity pull held %d ids, want %d (a block's heads, tails and negatives)", rec.most, want)
				}

				E, R, P, err := k.Embeddings(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				m := k.model
				var want KGEMetrics
				row, pos := make([]float32, n), make([]float32, 1)
				for b, lo := 0, 0; lo < len(ts); b, lo = b+1, lo+cfg.EvalBlock {
					rng := rand.New(rand.NewPCG(cfg.Seed^kgeEvalSeed, uint64(b)))
					neg := kgeDistinct(rng, n, cfg.EvalNeg, nil)
					blk := ts[lo:min(len(ts), lo+cfg.EvalBlock)]
					for i, tr := range blk {
						h, tl := E[tr.Head*uint64(ed):][:ed], E[tr.Tail*uint64(ed):][:ed]
						r := relRows(nil, R, P, []Triple{tr}, rd, KGEProjectionDim(cfg)) // transr: [r | M_r]
						m.Pos(h, r, tl, 1, pos)
						for _, head := range []bool{false, true} {
							m.Neg(h, r, tl, E, 1, n, head, row)
							target, from := tr.Tail, tr.Head
							if head {
								target, from = tr.Head, tr.Tail
							}
							known := f.known(from, tr.Rel, head)
							rank := 1
							for _, e := range neg {
								if _, ok := slices.BinarySearch(known, e); !ok && (e == target || row[e] >= pos[0]) {
									rank++
								}
							}
							if v.negDeg {
								// DGL-KE's degree candidates: the block's
								// true heads (tails), its own masked to 0.
								for j, o := range blk {
									e := o.Tail
									if head {
										e = o.Head
									}
									if j == i && pos[0] <= 0 || j != i && (e == target || row[e] >= pos[0]) {
										rank++
									}
								}
							}
							want.add(rank)
						}
					}
				}
				want = want.mean()
				// The same ranks; the sums of 1/rank differ in order only.
				close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }
				if got.Ranks != 2*len(ts) || got.Ranks != want.Ranks || !close(got.MRR, want.MRR) || got.MR != want.MR ||
					got.Hits1 != want.Hits1 || got.Hits3 != want.Hits3 || got.Hits10 != want.Hits10 {
					t.Errorf("sampled ranking %+v, want %+v", got, want)
				}
				full := k.cfg
				full.EvalNeg = 0
				k.cfg = full
				all, err := k.evaluate(context.Background(), ts, f)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("MRR against %d sampled entities %.3f, against all %d %.3f", cfg.EvalNeg, got.MRR, n, all.MRR)
				if v.negDeg {
					return // the block's entities are extra candidates: no bound against all
				}
				if filtered && (got.MRR < all.MRR || got.MR > all.MR) {
					t.Errorf("filtered ranks among a subset of the entities are worse than among all: %+v against %+v", got, all)
				}
			})
		}
	}
}

// kgeMaxPull records the most ids of one pull of the entity table.
type kgeMaxPull struct {
	KGEParams
	most int
}

func (p *kgeMaxPull) Pull(ctx context.Context, table string, ids []uint64, dst []float32) ([]float32, error) {
	if table == "kge.entity" {
		p.most = max(p.most, len(ids))
	}
	return p.KGEParams.Pull(ctx, table, ids, dst)
}

// TestKGEEvalBytes: EvalBytes is within a third of what an evaluation
// of one block allocates (every buffer of evaluate and evaluateSampled
// is made in the call; the pulls of the test's params and gonum's
// workers add a little), against every entity and against sampled ones,
// for every model.
func TestKGEEvalBytes(t *testing.T) {
	for _, name := range kgeModelNames() {
		for _, tc := range []struct {
			neg int
			deg bool
		}{{0, false}, {1000, false}, {1000, true}} {
			cfg := DefaultKGEConfig()
			cfg.Model, cfg.Hidden = name, 8
			cfg.Entities, cfg.Relations, cfg.StepsPerEpoch = 8000, 20, 1
			cfg.EvalBlock, cfg.EvalNeg, cfg.EvalNegDeg = 200, tc.neg, tc.deg
			ed, rd, _ := KGETableDims(cfg)
			p := newKGERecParams(cfg, make([]float32, int(cfg.Entities)*ed), make([]float32, cfg.Relations*rd), nil)
			k, err := NewKGE(cfg, p, NoSync{})
			if err != nil {
				t.Fatal(err)
			}
			eval := make([]Triple, cfg.EvalBlock)
			for i := range eval {
				eval[i] = Triple{Head: uint64(3 * i), Rel: uint32(i % cfg.Relations), Tail: uint64(3*i + 1)}
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if _, err := k.evaluate(context.Background(), eval, nil); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			got := float64(after.TotalAlloc - before.TotalAlloc)
			if est := cfg.EvalBytes(len(eval)); est < got/1.5 || est > 1.5*got {
				t.Errorf("%s, --eval-neg %d, --eval-neg-deg %v: an evaluation allocated %.0f bytes, EvalBytes %.0f", name, tc.neg, tc.deg, got, est)
			}
		}
	}
	// The share of one trainer in blocks: 1000 triples over 4 trainers
	// are blocks of at most 250, whatever --eval-batch.
	cfg := DefaultKGEConfig()
	cfg.Model, cfg.Hidden, cfg.Entities, cfg.Relations, cfg.EvalNeg, cfg.World = "distmult", 8, 1_000_000, 1, 10_000, 4
	cfg.EvalBlock = 250
	want := cfg.EvalBytes(1000)
	cfg.EvalBlock = 100_000
	if got := cfg.EvalBytes(1000); got != want {
		t.Errorf("blocks of 100000 of a share of 250: EvalBytes %.0f, blocks of 250 %.0f", got, want)
	}
	// Against every entity the table is held whole: 10^8 entities of 400
	// values are 160 GB before any score.
	cfg.EvalNeg, cfg.Hidden, cfg.Entities = 0, 400, 100_000_000
	if got := cfg.EvalBytes(1000); got < 1.6e11 {
		t.Errorf("every entity of 10^8 rows of 400: EvalBytes %.0f, want at least the table's 1.6e11", got)
	}
}

// TestKGEStepBytes: StepBytes bounds what a step's buffers hold once it
// has run (the slot maps' entries aside, which it counts too), within a
// factor that keeps it an estimate of them rather than a guard that
// refuses sizes that fit; and Validate refuses a step of more entities
// than int32 slots count.
func TestKGEStepBytes(t *testing.T) {
	for _, name := range kgeModelNames() {
		for _, negDeg := range []bool{false, true} {
			cfg := DefaultKGEConfig()
			cfg.Model, cfg.Hidden, cfg.BatchSize, cfg.NegSize, cfg.NegDeg = name, 8, 64, 16, negDeg
			cfg.Entities, cfg.Relations, cfg.StepsPerEpoch = 100_000, 50, 1
			ed, rd, _ := KGETableDims(cfg)
			p := newKGERecParams(cfg, make([]float32, int(cfg.Entities)*ed), make([]float32, cfg.Relations*rd), nil)
			k, err := NewKGE(cfg, p, NoSync{})
			if err != nil {
				t.Fatal(err)
			}
			batch := make([]Triple, cfg.BatchSize)
			for i := range batch {
				batch[i] = Triple{Head: uint64(2 * i), Rel: uint32(i % cfg.Relations), Tail: uint64(2*i + 1)}
			}
			if _, _, err := k.trainStep(context.Background(), batch, negDeg); err != nil {
				t.Fatal(err)
			}
			st := &k.st
			var held int
			for _, s := range [][]float32{st.E, st.R, st.P, st.gE, st.gR, st.gP, st.h, st.r, st.t, st.e, st.dh, st.dr, st.dt, st.de, st.pos, st.neg, st.gpos, st.gng} {
				held += 4 * cap(s)
			}
			for _, s := range [][]int32{st.hi, st.ri, st.ti, st.ni, st.nd} {
				held += 4 * cap(s)
			}
			held += 8 * (cap(st.ents) + cap(st.rels) + cap(st.entW) + cap(st.relW))
			if got := cfg.StepBytes(); float64(held) > got || got > 4*float64(held)+48*cfg.StepEntities() {
				t.Errorf("%s, negdeg %v: a step holds %d bytes of buffers, StepBytes %.0f", name, negDeg, held, got)
			}
		}
	}
	cfg := kgeTestConfig("distmult", 10)
	cfg.BatchSize, cfg.NegSize = 1<<30, 1<<30
	if err := cfg.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "batch size 1073741824 and negatives 1073741824: a step gathers up to 3221225472 entities, more than its int32 slots count") {
		t.Errorf("a step of 3·2^30 entities: %v", err)
	}
}
