package main

import (
	"strings"
	"testing"

	"graphnode/kv"
	"graphnode/node/client"
	"graphnode/train"
)

// TestKGEModelName: node kge takes DGL-KE's spellings of the models it
// implements (--model_name TransE_l2, ComplEx, RotatE, RESCAL, SimplE, TransR;
// TransE is TransE_l2 in DGL-KE) and passes the others on as given, for
// train to refuse with the list.
func TestKGEModelName(t *testing.T) {
	for in, want := range map[string]string{
		"transe_l2": "transe_l2", "TransE_l2": "transe_l2", "TransE": "transe_l2", "transe": "transe_l2",
		"TransE_l1": "transe_l1", "DistMult": "distmult", "ComplEx": "complex", "RotatE": "rotate",
		"RESCAL": "rescal", "SimplE": "simple", "simple": "simple", "TransR": "transr", "transr": "transr", "TransH": "TransH", "transx": "transx",
	} {
		if got := kgeModelName(in); got != want {
			t.Errorf("kgeModelName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestKGEJobTables: the tables --epochs 0 drops again and the drop
// hints name are the job's: <prefix>.projection for transr, and for a
// job whose record names transr (its projections are the prefix's too),
// beside the entity, relation and record tables.
func TestKGEJobTables(t *testing.T) {
	for _, c := range []struct {
		model, also string
		want        string
	}{
		{"distmult", "", "j.entity j.relation j.model"},
		{"transr", "", "j.entity j.relation j.projection j.model"},
		{"distmult", "transr", "j.entity j.relation j.projection j.model"},
		{"transr", "rescal", "j.entity j.relation j.projection j.model"},
	} {
		f := &kgeFlags{socket: "s", prefix: "j", cfg: train.KGEConfig{Model: c.model}}
		var also []string
		if c.also != "" {
			also = []string{c.also}
		}
		if got := strings.Join(f.jobTables(also...), " "); got != c.want {
			t.Errorf("--model %s, record %q: tables %s, want %s", c.model, c.also, got, c.want)
		}
		if got, want := f.dropCommand(also...), "node kv drop --socket s "+c.want; got != want {
			t.Errorf("--model %s, record %q: %q, want %q", c.model, c.also, got, want)
		}
	}
}

// TestKGEModelRecord: the record of <prefix>.model reads back as written,
// and a row that is no record (zeros: new tables, or of a build before the
// record) reads as none.
func TestKGEModelRecord(t *testing.T) {
	for _, c := range []struct {
		model  string
		hidden int
	}{{"transe_l2", 400}, {"distmult", 1}, {"rotate", 1 << 20}} {
		v := kgeModelRecord(c.model, c.hidden)
		if len(v) != client.SyncDim {
			t.Fatalf("record of %d values, want a row of %d", len(v), client.SyncDim)
		}
		m, h, ok := parseKGEModelRecord(v)
		if !ok || m != c.model || h != c.hidden {
			t.Errorf("%s %d read back as %q %d %v", c.model, c.hidden, m, h, ok)
		}
	}
	if m, h, ok := parseKGEModelRecord(make([]float32, client.SyncDim)); ok {
		t.Errorf("zeros read as a record: %q %d", m, h)
	}
	bad := kgeModelRecord("distmult", 100)
	bad[1] = 100.5
	if _, _, ok := parseKGEModelRecord(bad); ok {
		t.Error("a hidden of 100.5 read as a record")
	}
}

// TestKGEExportDoubles: config.json's double_ent and double_rel (DGL-KE's
// -de and -dr, which its inference reads to lay out the rows) say which
// models' rows are twice the hidden size, for every model of train: they
// were derived from the widths, and RESCAL of hidden 2 (relation rows of
// 2² = 2·2) would have read as double_rel.
func TestKGEExportDoubles(t *testing.T) {
	for model := range dglkeModels {
		for _, hidden := range []int{2, 3} {
			ed, rd, err := train.KGETableDims(train.KGEConfig{Model: model, Hidden: hidden, Gamma: 12})
			if err != nil {
				t.Fatal(err)
			}
			wantRel := rd == 2*hidden && model != "rescal"
			if dglkeDoubleEnt[model] != (ed == 2*hidden) || dglkeDoubleRel[model] != wantRel {
				t.Errorf("%s, hidden %d: entity rows %d, relation rows %d; double_ent %v, double_rel %v",
					model, hidden, ed, rd, dglkeDoubleEnt[model], dglkeDoubleRel[model])
			}
		}
	}
}

// TestHyperClash: a table that exists with another --lr or --seed (the
// optimiser or the initialiser) is told apart from one of another shape,
// so that the refusal says which flags to pass rather than blaming the
// model or size.
func TestHyperClash(t *testing.T) {
	spec := kv.Spec{Name: "e", Rows: 4, Dim: 2, Bounds: []uint64{0, 4}, Opt: kv.Adagrad(0.1, 1e-10), Mode: kv.Async,
		Init: kv.Init{Kind: kv.InitUniform, Scale: 0.1, Seed: 1}}
	s, err := kv.New(kv.Config{Part: 0, Tables: []kv.Spec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		f     func(*kv.Spec)
		hyper bool
	}{
		{"lr", func(s *kv.Spec) { s.Opt = kv.Adagrad(0.05, 1e-10) }, true},
		{"seed", func(s *kv.Spec) { s.Init.Seed = 2 }, true},
		{"lr and seed", func(s *kv.Spec) { s.Opt, s.Init.Seed = kv.Adagrad(0.05, 1e-10), 2 }, true},
		{"dim", func(s *kv.Spec) { s.Dim = 4 }, false},
		{"dim and seed", func(s *kv.Spec) { s.Dim, s.Init.Seed = 4, 2 }, false},
		{"rows", func(s *kv.Spec) { s.Rows, s.Bounds = 8, []uint64{0, 8} }, false},
	} {
		other := spec
		c.f(&other)
		_, err := s.Create(other)
		if !tableClash(err) || hyperClash(err) != c.hyper {
			t.Errorf("%s: %v: clash %v, hyper %v; want a clash, hyper %v", c.name, err, tableClash(err), hyperClash(err), c.hyper)
		}
	}
}

// TestCheckPartTriples: a part without training triples is refused when
// there is training to do, saying how to partition again; evaluation
// alone (--epochs 0) needs none.
func TestCheckPartTriples(t *testing.T) {
	err := checkPartTriples(0, 1, 1, "parts")
	if err == nil || !strings.Contains(err.Error(), "part 1 of parts holds no training triples") || !strings.Contains(err.Error(), "--balance nodes,edges") {
		t.Errorf("no triples, 1 epoch: %v", err)
	}
	if err := checkPartTriples(0, 0, 1, "parts"); err != nil {
		t.Errorf("no triples, --epochs 0: %v", err)
	}
	if err := checkPartTriples(5, 1, 1, "parts"); err != nil {
		t.Errorf("5 triples: %v", err)
	}
}
