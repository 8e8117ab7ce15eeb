package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"graphnode/node/client"
	"graphnode/node/control"
	"graphnode/train"
)

// kgeModelName is the model's name as train knows it, from DGL-KE's
// spelling of the models node kge implements (dglke_train --model_name
// TransE_l2, DistMult, ComplEx, RotatE, RESCAL, SimplE, TransR; its
// TransE is TransE_l2). Other names are returned as given, for train to
// refuse with the list.
func kgeModelName(name string) string {
	l := strings.ToLower(name)
	if l == "transe" {
		return "transe_l2"
	}
	if _, ok := dglkeModels[l]; ok {
		return l
	}
	return name
}

// <prefix>.model records which model and hidden size the job's entity
// and relation tables hold, so that a later job on them (the tables stay
// in the nodes, and come back from a checkpoint with [kv] load) goes on
// only with the same ones: a table's spec knows its rows and width, not
// the model, and a ComplEx model of hidden 100 (rows of 200) read a
// TransE model of hidden 200 as its own, without a word.
//
// The table is one asynchronous row of client.SyncDim values, zeros when
// new, with SGD at rate 1, so that rank 0's push of -record sets the row
// to the record exactly. Rank 0 writes it when the row is zeros; every
// rank compares a row that holds a record with its own flags.
const (
	kgeModelMagic   = 0x4b4745 // "KGE": a row of zeros, or of anything else, is no record
	kgeModelNameMax = client.SyncDim - 3
)

// kgeModelTable is the record's table name.
func (f *kgeFlags) kgeModelTable() string { return f.prefix + ".model" }

// kgeProjectionTable is the projection table's name, a table the job
// has when its model has one (transr's M_r).
func (f *kgeFlags) kgeProjectionTable() string { return f.prefix + ".projection" }

// hasProjection reports whether model (train's name) keeps a
// projection table.
func hasProjection(model string) bool {
	return train.KGEProjectionDim(train.KGEConfig{Model: model, Hidden: 1}) > 0
}

// jobTables are the tables of a job of --model's (and of any of also's)
// with this --table-prefix: entity, relation, projection for a model
// that has one, and the model's record.
func (f *kgeFlags) jobTables(also ...string) []string {
	tables := []string{f.prefix + ".entity", f.prefix + ".relation"}
	if hasProjection(f.cfg.Model) || slices.ContainsFunc(also, hasProjection) {
		tables = append(tables, f.kgeProjectionTable())
	}
	return append(tables, f.kgeModelTable())
}

// dropCommand is the command that removes the job's tables, and those of
// the models also names (a record's, which left its tables).
func (f *kgeFlags) dropCommand(also ...string) string {
	return fmt.Sprintf("node kv drop --socket %s %s", f.socket, strings.Join(f.jobTables(also...), " "))
}

// kgeModelRecord encodes model and hidden as the row: magic, hidden, the
// name's length, then its bytes, one per value (each exact in a float32).
func kgeModelRecord(model string, hidden int) []float32 {
	v := make([]float32, client.SyncDim)
	n := min(len(model), kgeModelNameMax)
	v[0], v[1], v[2] = kgeModelMagic, float32(hidden), float32(n)
	for i := range n {
		v[3+i] = float32(model[i])
	}
	return v
}

// parseKGEModelRecord decodes a row written by kgeModelRecord; ok is
// false for a row that holds none.
func parseKGEModelRecord(v []float32) (model string, hidden int, ok bool) {
	whole := func(x float32, lo, hi float64) bool {
		f := float64(x)
		return f == math.Trunc(f) && f >= lo && f <= hi
	}
	if len(v) < 3 || v[0] != kgeModelMagic || !whole(v[1], 1, 1<<24) || !whole(v[2], 1, kgeModelNameMax) || len(v) < 3+int(v[2]) {
		return "", 0, false
	}
	b := make([]byte, int(v[2]))
	for i := range b {
		if !whole(v[3+i], 0x21, 0x7e) {
			return "", 0, false
		}
		b[i] = byte(v[3+i])
	}
	return string(b), int(v[1]), true
}

// kgeRecordWait bounds how long a rank other than 0 waits for rank 0 to
// record the job's model in tables that hold no record yet; a variable
// for tests.
var kgeRecordWait = kgeReadyTimeout

// checkModelRecord refuses tables that hold another model or hidden size
// than cfg's, and has rank 0 record cfg's in tables that hold no record.
// Another rank finding no record waits for rank 0's (up to
// kgeRecordWait): it passed at once, so a rank started before rank 0
// with another --model of the same width trained it on the same tables
// without a word.
func (f *kgeFlags) checkModelRecord(ctx context.Context, kvc *client.KV, cfg train.KGEConfig) error {
	name := f.kgeModelTable()
	spec := control.TableSpec{Name: name, Rows: control.Rows{N: 1}, Dim: client.SyncDim, Init: "zeros", Optimizer: "sgd", LR: 1, Mode: "async"}
	if _, err := kvc.Create(ctx, spec); err != nil {
		if tableClash(err) {
			return fmt.Errorf("create kv table %s: %w (not the record of a node kge job: pass another --table-prefix)", name, err)
		}
		return fmt.Errorf("create kv table %s: %w", name, err)
	}
	row, err := kvc.Pull(ctx, name, []uint64{0}, nil)
	if err != nil {
		return fmt.Errorf("read the model kv table %s records: %w", name, err)
	}
	model, hidden, ok := parseKGEModelRecord(row)
	for deadline := time.Now().Add(kgeRecordWait); !ok && cfg.Rank != 0; {
		if time.Now().After(deadline) {
			return fmt.Errorf("rank %d: rank 0 has not recorded the job's --model and --hidden in kv table %s within %v: start rank 0 of the job (with the same --table-prefix)", cfg.Rank, name, kgeRecordWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if row, err = kvc.Pull(ctx, name, []uint64{0}, row[:0]); err != nil {
			return fmt.Errorf("read the model kv table %s records: %w", name, err)
		}
		model, hidden, ok = parseKGEModelRecord(row)
	}
	if ok {
		if model != cfg.Model || hidden != cfg.Hidden {
			return fmt.Errorf("the tables %s.entity and %s.relation hold a %s model of --hidden %d (%s records it: rank 0's of this job, an earlier job's, or a checkpoint's), "+
				"not --model %s --hidden %d: pass --model %s --hidden %d to go on training it, or another --table-prefix to start afresh "+
				"(%s removes them from the nodes, but with [kv] load their checkpoint files bring them back)", f.prefix, f.prefix, model, hidden, name, cfg.Model, cfg.Hidden, model, hidden, f.dropCommand(model))
		}
		return nil
	}
	rec := kgeModelRecord(cfg.Model, cfg.Hidden)
	for i := range rec {
		rec[i] = -rec[i] // w -= 1·g
	}
	if err := kvc.Push(ctx, name, []uint64{0}, rec); err != nil {
		return fmt.Errorf("record the model in kv table %s: %w", name, err)
	}
	return nil
}
