package kv

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSaveExitKeepFiles: a table created over the checkpoint of the
// name's earlier table at another number of rows, not loaded
// (ErrResized) and marked with KeepFiles, is left out of the exit save
// until a coordinated save writes it: its files, and the earlier table's
// exit file beside them, stay byte for byte, and a load at the earlier
// size finds the saved rows. Its exit file, whose base is the files'
// save, was loaded over them: the saved model became the new table's
// initial rows, and a load at the earlier size was refused. The other
// tables' exit files are written as before, and once a coordinated save
// has written the table, the exit save writes it too.
func TestSaveExitKeepFiles(t *testing.T) {
	dir := t.TempDir()
	old := spec("w", 8, 2, SGD(1), Async, 1)
	resized := spec("w", 4, 2, SGD(1), Async, 1)
	other := spec("other", 4, 2, SGD(1), Async, 1)
	s := newStore(t, 0, old, other)
	pushAll(t, s, 1)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	pushAll(t, s, 1)
	if _, err := s.SaveExit(dir); err != nil {
		t.Fatal(err)
	}
	saved := rowsOf(t, s)
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mainFile, exitFile := read(FileName("w", 0)), read(ExitFileName("w", 0))
	otherExit := read(ExitFileName("other", 0))

	r := newStore(t, 0, other)
	if _, err := r.Create(resized); err != nil {
		t.Fatal(err)
	}
	if err := r.LoadTable(dir, "w"); !errors.Is(err, ErrResized) {
		t.Fatalf("load of w at 4 rows over its checkpoint of 8: %v, want ErrResized", err)
	}
	if err := r.KeepFiles("w"); err != nil {
		t.Fatal(err)
	}
	if err := r.KeepFiles("x"); !errors.Is(err, ErrUnknownTable) {
		t.Errorf("KeepFiles of a table the store lacks: %v, want ErrUnknownTable", err)
	}
	if got := r.KeptFiles(); !slices.Equal(got, []string{"w"}) {
		t.Fatalf("KeptFiles %v, want [w]", got)
	}
	if _, err := r.SaveExit(dir); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(FileName("w", 0)), mainFile) || !bytes.Equal(read(ExitFileName("w", 0)), exitFile) {
		t.Errorf("the exit save of the store that keeps w's files changed them")
	}
	if bytes.Equal(read(ExitFileName("other", 0)), otherExit) {
		t.Errorf("the exit save left out table other, whose files it does not keep")
	}
	again := newStore(t, 0, old)
	if err := again.LoadTable(dir, "w"); err != nil {
		t.Fatalf("load of w at its saved size after the exit save: %v", err)
	}
	if got := rowsOf(t, again); !slices.Equal(got, saved) {
		t.Errorf("w loaded at its saved size: %v, want the saved rows %v", got, saved)
	}

	// A store holding only kept tables writes no exit file at all.
	only := newStore(t, 0)
	if _, err := only.Create(resized); err != nil {
		t.Fatal(err)
	}
	if err := only.KeepFiles("w"); err != nil {
		t.Fatal(err)
	}
	if _, err := only.SaveExit(dir); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(ExitFileName("w", 0)), exitFile) {
		t.Errorf("the exit save of a store whose only table's files it keeps changed them")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// The coordinated save replaces the files: from then on the exit
	// save writes the table.
	pushAll(t, r, 3)
	if err := r.Save(dir); err != nil {
		t.Fatal(err)
	}
	if got := r.KeptFiles(); len(got) != 0 {
		t.Fatalf("KeptFiles after a coordinated save: %v, want none", got)
	}
	pushAll(t, r, 3)
	if _, err := r.SaveExit(dir); err != nil {
		t.Fatal(err)
	}
	last := newStore(t, 0, resized)
	if err := last.LoadTable(dir, "w"); err != nil {
		t.Fatal(err)
	}
	if l, _ := last.Loaded("w"); l.Path != filepath.Join(dir, ExitFileName("w", 0)) {
		t.Errorf("w loaded from %s after the coordinated save and an exit save, want its exit file", l.Path)
	}
	if got, want := rowsOf(t, last), rowsOf(t, r); !slices.Equal(got, want) {
		t.Errorf("w loaded from its exit save: %v, want %v", got, want)
	}
}
