package kv

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// dirFiles is the name and bytes of every file in dir.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

// TestPrepareSaveAbort: an aborted prepared save leaves the checkpoint in
// place byte for byte and no temporary file; Commit after Abort fails
// with ErrSaveEnded, and the store saves again afterwards.
func TestPrepareSaveAbort(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, 1, ckTables()...)
	train(t, s, 0, 3)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	before := dirFiles(t, dir)
	train(t, s, 3, 6)
	p, err := s.PrepareSave(context.Background(), dir, NewSaveID())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(dirFiles(t, dir)); n != 2*len(before) {
		t.Fatalf("%d files while prepared, want the %d in place and a temporary of each", n, len(before))
	}
	p.Abort()
	p.Abort() // a second Abort does nothing
	if after := dirFiles(t, dir); !maps.Equal(after, before) {
		t.Fatalf("after Abort the directory holds %v, want the checkpoint as it was (%v)", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
	}
	if err := p.Commit(); !errors.Is(err, ErrSaveEnded) {
		t.Fatalf("Commit after Abort: %v, want ErrSaveEnded", err)
	}
	want := snapshot(t, s)
	if err := s.Save(dir); err != nil {
		t.Fatalf("Save after an aborted save: %v", err)
	}
	r := newStore(t, 1, ckTables()...)
	if err := r.Load(dir); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, r); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatal("the save after the aborted one does not load back what was saved")
	}
}

// TestPrepareSaveCommit: a committed prepared save is what Save writes,
// and a Load waits for the prepared save to end instead of reading the
// checkpoint half replaced.
func TestPrepareSaveCommit(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, 1, ckTables()...)
	train(t, s, 0, 4)
	want := snapshot(t, s)
	p, err := s.PrepareSave(context.Background(), dir, NewSaveID())
	if err != nil {
		t.Fatal(err)
	}
	loaded := make(chan error, 1)
	go func() { loaded <- s.Load(dir) }()
	select {
	case err := <-loaded:
		t.Fatalf("Load ran during a prepared save: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-loaded; err != nil {
		t.Fatalf("Load after the commit: %v", err)
	}
	if err := p.Commit(); !errors.Is(err, ErrSaveEnded) {
		t.Fatalf("second Commit: %v, want ErrSaveEnded", err)
	}
	if got := snapshot(t, s); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatal("the committed save does not load back what was saved")
	}
}

// TestPrepareSaveSpecs: a prepared save lists the tables it writes,
// with their specs, in name order: those held at PrepareSave, not a
// table created or dropped since.
func TestPrepareSaveSpecs(t *testing.T) {
	dir := t.TempDir()
	tables := ckTables()
	s := newStore(t, 1, tables...)
	p, err := s.PrepareSave(context.Background(), dir, NewSaveID())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Abort()
	if _, err := s.Create(spec("later", 40, 4, SGD(0.1), Async, 2)); err != nil {
		t.Fatal(err)
	}
	s.Drop("sgd")
	got := p.Specs()
	slices.SortFunc(tables, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	if len(got) != len(tables) {
		t.Fatalf("prepared save lists %d tables, want the %d held at prepare", len(got), len(tables))
	}
	for i := range got {
		if got[i].Name != tables[i].Name || specDiff(&got[i], &tables[i]) != "" {
			t.Errorf("table %d: %+v, want %+v", i, got[i], tables[i])
		}
	}
	got[0].Bounds[0] = 99 // the caller's copy
	if again := p.Specs(); again[0].Bounds[0] == 99 {
		t.Error("Specs hands out the table's own bounds")
	}
}

// TestPrepareSaveWaitsUntilCtx: a prepare while another save is prepared
// fails when its context ends, naming the wait, instead of blocking.
func TestPrepareSaveWaitsUntilCtx(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, 1, ckTables()...)
	p, err := s.PrepareSave(context.Background(), dir, NewSaveID())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Abort()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := s.PrepareSave(ctx, dir, NewSaveID()); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for another save or load of part 1 to end") {
		t.Fatalf("second prepare: %v, want it to give up at its deadline", err)
	}
}
