package train

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// kgeTieRelations makes the relation rows of 6 transr triples of hidden
// 5 two relations, as the trainer gathers them: rows 2 and 4 copies of
// row 0, row 5 of row 1; row 3 takes row 1's matrix but keeps its own r,
// as no trainer gathers it (groups go by the matrix alone).
func kgeTieRelations(r []float32) {
	const rd = 5 + 25
	row := func(i int) []float32 { return r[i*rd : (i+1)*rd] }
	copy(row(2), row(0))
	copy(row(4), row(0))
	copy(row(5), row(1))
	copy(row(3)[5:], row(1)[5:])
}

// TestKGETransRSharedRelations: triples whose relations share M_r share
// the projection of the candidates, and each row still gets its own
// gradient: Neg against the formula, NegGrad against central
// differences in every row (moving one value of a tied row unties it,
// which must not change the function), heads and tails replaced.
func TestKGETransRSharedRelations(t *testing.T) {
	k := kgeGradCaseOf(t, "transr", 6, 5, kgeTieRelations)
	m := k.m.(*kgeTransR)
	rng := rand.New(rand.NewPCG(4, 4))
	for _, head := range []bool{false, true} {
		t.Run(fmt.Sprintf("head=%v", head), func(t *testing.T) {
			kgeCheckNeg(t, k, "transr", head, rng)
			if got := fmt.Sprint(m.reps, m.first); got != "[0 1] [0 1 0 1 0 1]" {
				t.Errorf("groups (first triples, each triple's first) %s, want [0 1] [0 1 0 1 0 1]", got)
			}
		})
	}
}

// kgeTransRTorch is DGL-KE's TransRScore (score_fun.py) in torch, float64
// autograd: edge_func after prepare for the positives, and
// create_neg_prepare then create_neg for one chunk of negatives, every
// candidate projected by every triple's matrix. Its tail case is
// written with + r: DGL-KE's create_neg(False) reads heads − relations,
// scoring tail negatives as γ − ‖hᵀM − r − eᵀM‖₁ against positives
// scored γ − ‖hᵀM + r − tᵀM‖₁; this package scores both with + r.
const kgeTransRTorch = `import json, sys
import torch as th
a = json.load(sys.stdin)
d, c, n, gamma = a["d"], a["c"], a["n"], a["gamma"]
def leaf(k, *shape):
    return th.tensor(a[k], dtype=th.float64).reshape(*shape).requires_grad_()
def flat(x):
    return x.reshape(-1).tolist()
out = {}
h, r, t = leaf("h", c, d), leaf("r", c, d + d * d), leaf("t", c, d)
rel, proj = r[:, :d], r[:, d:].reshape(-1, d, d)  # projection_emb rows as (entity_dim, relation_dim)
hp, tp = th.einsum('ab,abc->ac', h, proj), th.einsum('ab,abc->ac', t, proj)
pos = gamma - th.norm(hp + rel - tp, p=1, dim=-1)
(pos * th.tensor(a["gpos"], dtype=th.float64)).sum().backward()
out.update(pos=flat(pos), pos_dh=flat(h.grad), pos_dr=flat(r.grad), pos_dt=flat(t.grad))
for side in ("tail", "head"):
    h, r, t, e = leaf("h", c, d), leaf("r", c, d + d * d), leaf("t", c, d), leaf("e", n, d)
    rel = r[:, :d].reshape(1, -1, d)
    proj = r[:, d:].reshape(1, -1, d, d)
    neg = th.matmul(e.reshape(1, 1, -1, d), proj)  # every candidate by every triple's matrix
    if side == "tail":
        kept = th.matmul(h.reshape(1, -1, 1, d), proj).reshape(1, -1, d)
        score = gamma - th.norm((kept + rel).reshape(1, -1, 1, d) - neg, p=1, dim=-1)
    else:
        kept = th.matmul(t.reshape(1, -1, 1, d), proj).reshape(1, -1, d)
        score = gamma - th.norm(neg - (kept - rel).reshape(1, -1, 1, d), p=1, dim=-1)
    (score.reshape(c, n) * th.tensor(a["gneg"], dtype=th.float64).reshape(c, n)).sum().backward()
    a_side = h if side == "tail" else t
    out[side] = flat(score)
    out.update({side + "_da": flat(a_side.grad), side + "_dr": flat(r.grad), side + "_de": flat(e.grad)})
json.dump(out, sys.stdout)
`

// TestKGETransRTorch: Pos, PosGrad, Neg and NegGrad, tails and heads
// replaced, give what torch's autograd of DGL-KE's TransRScore gives
// (kgeTransRTorch) for the same rows: the layout of M_r (DGL-KE's
// projection_emb rows), the L1 norm and every gradient, with two
// relations shared among the triples. Skipped without /usr/bin/python3
// and torch (failed under CI).
func TestKGETransRTorch(t *testing.T) {
	const hidden, c, n, gamma = 5, 6, 7, 6
	k := newKGECase(t, "transr", 11, hidden, c, n, gamma)
	kgeTieRelations(k.r)
	rng := rand.New(rand.NewPCG(12, 12))
	gpos, gneg := kgeRows(rng, 1, c), kgeRows(rng, c, n)
	in, err := json.Marshal(map[string]any{"d": hidden, "c": c, "n": n, "gamma": gamma,
		"h": k.h, "r": k.r, "t": k.t, "e": k.e, "gpos": gpos, "gneg": gneg})
	if err != nil {
		t.Fatal(err)
	}
	py := exec.Command("/usr/bin/python3", "-c", kgeTransRTorch)
	py.Stdin = strings.NewReader(string(in))
	var stderr strings.Builder
	py.Stderr = &stderr
	b, err := py.Output()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("torch: %v\n%s", err, &stderr)
		}
		t.Skipf("torch not run: %v %s", err, &stderr)
	}
	var want map[string][]float64
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("torch printed %q: %v", b, err)
	}
	compare := func(what string, got []float32) {
		t.Helper()
		w := want[what]
		if len(w) != len(got) {
			t.Fatalf("%s: %d values, torch %d", what, len(got), len(w))
		}
		for i, v := range got {
			if math.Abs(float64(v)-w[i]) > 1e-4*max(1, math.Abs(w[i])) {
				t.Errorf("%s[%d] = %.6g, torch %.6g", what, i, v, w[i])
			}
		}
	}
	m := k.m
	ed, rd := m.EntDim(), m.RelDim()
	s := make([]float32, c)
	m.Pos(k.h, k.r, k.t, c, s)
	compare("pos", s)
	dh, dr, dt := make([]float32, c*ed), make([]float32, c*rd), make([]float32, c*ed)
	m.PosGrad(k.h, k.r, k.t, c, gpos, dh, dr, dt)
	compare("pos_dh", dh)
	compare("pos_dr", dr)
	compare("pos_dt", dt)
	for _, side := range []string{"tail", "head"} {
		head := side == "head"
		s := make([]float32, c*n)
		m.Neg(k.h, k.r, k.t, k.e, c, n, head, s)
		compare(side, s)
		da, dr, de := make([]float32, c*ed), make([]float32, c*rd), make([]float32, n*ed)
		if head {
			m.NegGrad(nil, k.r, k.t, k.e, c, n, head, s, gneg, nil, dr, da, de)
		} else {
			m.NegGrad(k.h, k.r, nil, k.e, c, n, head, s, gneg, da, dr, nil, de)
		}
		compare(side+"_da", da)
		compare(side+"_dr", dr)
		compare(side+"_de", de)
	}
}

// TestKGETransREvalOrder: evaluation against every entity ranks transr's
// triples in relation order, each block projecting the entities once
// per relation in it; the metrics are those of every triple ranked
// alone, in the split's order.
func TestKGETransREvalOrder(t *testing.T) {
	const n = 40
	ts := kgeTestGraph(n)
	// Relations interleaved, as a split lists them.
	slices.SortFunc(ts, func(a, b Triple) int { return cmp.Compare(a.Head, b.Head) })
	cfg := kgeTestConfig("transr", n)
	cfg.Epochs, cfg.StepsPerEpoch, cfg.EvalBlock = 1, 4, 7
	k, err := NewKGE(cfg, kgeStore(t, cfg, 0.1), NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(context.Background(), KGEData{Train: ts}, nil); err != nil {
		t.Fatal(err)
	}
	f := NewKGEFilter(ts)
	got, err := k.evaluate(context.Background(), ts, f)
	if err != nil {
		t.Fatal(err)
	}
	E, R, P, err := k.Embeddings(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m, ed, pd := k.model, k.model.EntDim(), k.model.ProjDim()
	var want KGEMetrics
	row := make([]float32, n)
	for _, tr := range ts {
		h, tl := E[tr.Head*uint64(ed):][:ed], E[tr.Tail*uint64(ed):][:ed]
		r := relRows(nil, R, P, []Triple{tr}, m.RelDim()-pd, pd)
		for _, head := range []bool{false, true} {
			m.Neg(h, r, tl, E, 1, n, head, row)
			target, from := tr.predicted(head)
			want.add(kgeRank(row, target, f.known(from, tr.Rel, head)))
		}
	}
	want = want.mean()
	if got.Ranks != want.Ranks || got.MR != want.MR || got.Hits1 != want.Hits1 || got.Hits10 != want.Hits10 || math.Abs(got.MRR-want.MRR) > 1e-12 {
		t.Errorf("evaluate: %+v; each triple ranked alone: %+v", got, want)
	}
	if got.Ranks != 2*len(ts) || got.MRR < 0.1 {
		t.Errorf("evaluate: %+v: want %d ranks of a model trained an epoch", got, 2*len(ts))
	}
}

// TestKGETransRConfig: transr needs a projection table of its own name;
// KGETableDims and KGEProjectionDim say the tables' widths.
func TestKGETransRConfig(t *testing.T) {
	cfg := kgeTestConfig("transr", 10)
	if ent, rel, err := KGETableDims(cfg); err != nil || ent != 16 || rel != 16 || KGEProjectionDim(cfg) != 256 {
		t.Errorf("transr of hidden 16: tables of %d, %d and %d (%v), want 16, 16 and 256", ent, rel, KGEProjectionDim(cfg), err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	for _, name := range []string{"", cfg.EntityTable, cfg.RelationTable} {
		c := cfg
		c.ProjectionTable = name
		if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("model transr: projection table %q", name)) {
			t.Errorf("projection table %q: %v", name, err)
		}
	}
	c := kgeTestConfig("distmult", 10)
	c.ProjectionTable = ""
	if err := c.Validate(); err != nil || KGEProjectionDim(c) != 0 {
		t.Errorf("distmult without a projection table: %v, width %d", err, KGEProjectionDim(c))
	}
}
