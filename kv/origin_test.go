package kv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// wantOrigin checks table "w"'s Origin on s.
func wantOrigin(t *testing.T, s *Store, what, path string, save SaveID, exit, fromLoad, changed bool) Origin {
	t.Helper()
	o, ch, err := s.Origin("w")
	if err != nil {
		t.Fatal(err)
	}
	if o.Path != path || (save != 0 && o.Save.ID != save) || o.Save.Exit != exit || o.FromLoad != fromLoad || ch != changed {
		t.Fatalf("%s: origin %+v changed %v, want path %q save %v exit %v from load %v changed %v", what, o, ch, path, save, exit, fromLoad, changed)
	}
	return o
}

// TestStoreOrigin: a shard knows which checkpoint its rows last equalled
// (its initial rows, a file loaded, a save put in place) and whether an
// update has changed them since: what the nodes compare before they
// serve their shards together.
func TestStoreOrigin(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, FileName("w", 0))
	s := newStore(t, 0, spec("w", 8, 2, SGD(1), Async, 2))
	wantOrigin(t, s, "new table", "", 0, false, false, false)
	if err := s.Push("w", nil, nil); err != nil {
		t.Fatal(err)
	}
	wantOrigin(t, s, "empty push", "", 0, false, false, false)
	pushAll(t, s, 1)
	wantOrigin(t, s, "pushed", "", 0, false, false, true)

	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	info, _, err := peekSave(main)
	if err != nil {
		t.Fatal(err)
	}
	o := wantOrigin(t, s, "saved", main, info.ID, false, false, false)
	if v, _ := s.Version("w"); o.Version != v {
		t.Fatalf("origin version %d, table at %d", o.Version, v)
	}
	pushAll(t, s, 1)
	wantOrigin(t, s, "pushed after the save", main, info.ID, false, false, true)

	// A push between prepare and commit: the save holds the rows of
	// before it, so the rows have changed since.
	p, err := s.PrepareSave(context.Background(), dir, NewSaveID())
	if err != nil {
		t.Fatal(err)
	}
	pushAll(t, s, 1)
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	info, _, _ = peekSave(main)
	wantOrigin(t, s, "pushed between prepare and commit", main, info.ID, false, false, true)

	p, err = s.PrepareSave(context.Background(), dir, NewSaveID())
	if err != nil {
		t.Fatal(err)
	}
	p.Abort()
	wantOrigin(t, s, "aborted save", main, info.ID, false, false, true)

	exit, err := s.SaveExit(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantOrigin(t, s, "exit save", filepath.Join(dir, ExitFileName("w", 0)), exit.ID, true, false, false)

	r := newStore(t, 0, spec("w", 8, 2, SGD(1), Async, 2))
	if err := r.Load(dir); err != nil {
		t.Fatal(err)
	}
	wantOrigin(t, r, "loaded", filepath.Join(dir, ExitFileName("w", 0)), exit.ID, true, true, false)
	pushAll(t, r, 1)
	wantOrigin(t, r, "pushed after the load", filepath.Join(dir, ExitFileName("w", 0)), exit.ID, true, true, true)

	// A body that fails its CRC resets the table: its initial rows.
	if err := os.Remove(filepath.Join(dir, ExitFileName("w", 0))); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-5] ^= 1
	if err := os.WriteFile(main, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Load(dir); err == nil {
		t.Fatal("a body that fails its CRC loaded")
	}
	wantOrigin(t, r, "reset by a failed load", "", 0, false, false, false)
}

// TestStoreOriginSync: a synchronous step changes the rows.
func TestStoreOriginSync(t *testing.T) {
	sp := spec("w", 4, 1, SGD(1), Sync, 1)
	s := newStore(t, 0, sp)
	wantOrigin(t, s, "new table", "", 0, false, false, false)
	if err := s.PushSync(context.Background(), "w", 0, 0, 1, f32(1, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	o := wantOrigin(t, s, "one step", "", 0, false, false, true)
	if !o.Sync {
		t.Fatalf("origin of a synchronous table: %+v", o)
	}
}
