package kv

import (
	"testing"
)

// TestExitSaveOrigin: the origin an exit save leaves a table with is
// what its file records (its own table's coordinated save), the key a
// load of that file gives: a store-wide one (0 once a table lacked a
// coordinated file) made a marker written after the exit save name
// another save than the file the next start loads.
func TestExitSaveOrigin(t *testing.T) {
	dir := t.TempDir()
	sp := spec("w", 8, 2, SGD(1), Async, 1)
	other := spec("other", 4, 2, SGD(1), Async, 1)
	s := newStore(t, 0, sp)
	pushAll(t, s, 1)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(other); err != nil {
		t.Fatal(err)
	}
	pushAll(t, s, 1)
	if _, err := s.SaveExit(dir); err != nil {
		t.Fatal(err)
	}
	o, _, _ := s.Origin("w")
	r := newStore(t, 0, sp, other)
	if err := r.Load(dir); err != nil {
		t.Fatal(err)
	}
	lo, _, _ := r.Origin("w")
	if o.Generation() != lo.Generation() {
		t.Fatalf("origin after the exit save %q, after loading that file %q", o.Generation(), lo.Generation())
	}
}
