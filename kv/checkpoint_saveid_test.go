package kv

import (
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pushAll adds g to every row of part's shard of table "w".
func pushAll(t *testing.T, s *Store, g float32) {
	t.Helper()
	sp, _ := s.Spec("w")
	lo, hi := sp.Range(s.Part())
	ids := idRange(lo, hi)
	grads := make([]float32, len(ids)*sp.Dim)
	for i := range grads {
		grads[i] = g
	}
	if err := s.Push("w", ids, grads); err != nil {
		t.Fatal(err)
	}
}

// rowsOf is part's shard of "w".
func rowsOf(t *testing.T, s *Store) []float32 {
	t.Helper()
	sp, _ := s.Spec("w")
	lo, hi := sp.Range(s.Part())
	rows, err := s.Pull("w", idRange(lo, hi), nil)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestSaveExitBeside: an exit save is written beside the part's file of
// the last coordinated save, which stays byte for byte, and records the
// save it follows. Load takes the exit save, newer, and says so
// (Loaded: its generation "exit after" the coordinated save, which the
// nodes compare). The next coordinated save supersedes the exit save
// and removes it; an exit save older than the coordinated one in place
// is never loaded.
func TestSaveExitBeside(t *testing.T) {
	for _, parts := range []int{2, 1} {
		sp := spec("w", 8, 2, SGD(1), Async, parts)
		dir := t.TempDir()
		s := newStore(t, 0, sp)
		pushAll(t, s, 1)
		if err := s.Save(dir); err != nil {
			t.Fatal(err)
		}
		coordRows := rowsOf(t, s)
		main := filepath.Join(dir, FileName("w", 0))
		coord, err := os.ReadFile(main)
		if err != nil {
			t.Fatal(err)
		}
		ci, _, err := peekSave(main)
		if err != nil || ci.ID == 0 || ci.Exit {
			t.Fatalf("coordinated file records %v (err %v)", ci, err)
		}
		pushAll(t, s, 2)
		exitRows := rowsOf(t, s)
		info, err := s.SaveExit(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Exit || info.Base != ci.ID || info.ID == ci.ID || info.ID == 0 {
			t.Fatalf("exit save %+v after save %v", info, ci.ID)
		}
		if after, _ := os.ReadFile(main); string(after) != string(coord) {
			t.Fatalf("parts %d: the exit save changed %s", parts, main)
		}
		exit := filepath.Join(dir, ExitFileName("w", 0))
		if ei, ok, err := peekSave(exit); err != nil || !ok || ei != info {
			t.Fatalf("parts %d: %s records %+v (found %v, err %v), want %+v", parts, exit, ei, ok, err, info)
		}

		fresh := newStore(t, 0, sp)
		if err := fresh.Load(dir); err != nil {
			t.Fatal(err)
		}
		l, ok := fresh.Loaded("w")
		v, _ := fresh.Version("w") // an async table's pushes applied, as saved
		if want := (Loaded{Path: exit, Save: info, Version: v}); !ok || l != want || v != 2 || l.Generation() != "exit after "+ci.ID.String() {
			t.Errorf("parts %d: loaded %+v (%s), want %+v", parts, l, l.Generation(), want)
		}
		if got := rowsOf(t, fresh); !slices.Equal(got, exitRows) {
			t.Errorf("parts %d: rows %v, want the exit save's %v (coordinated %v)", parts, got, exitRows, coordRows)
		}

		exitFile, _ := os.ReadFile(exit)
		if err := s.Save(dir); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(exit); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("parts %d: the exit save outlived the coordinated save after it: %v", parts, err)
		}
		if err := os.WriteFile(exit, exitFile, 0o644); err != nil { // as if its removal failed
			t.Fatal(err)
		}
		again := newStore(t, 0, sp)
		if err := again.Load(dir); err != nil {
			t.Fatal(err)
		}
		if l, _ := again.Loaded("w"); l.Path != main || !slices.Equal(rowsOf(t, again), exitRows) {
			t.Errorf("parts %d: with an older exit save beside the coordinated one, loaded %+v", parts, l)
		}
	}
}

// legacyFile rewrites a checkpoint file as version 1.0 wrote it: minor
// 0, no save fields.
func legacyFile(b []byte) []byte {
	b = slices.Clone(b)
	le.PutUint16(b[10:], 0)
	le.PutUint32(b[12:], le.Uint32(b[12:])&^flagExit)
	clear(b[ckHeaderCRC+4 : ckHeaderLen])
	le.PutUint32(b[ckHeaderCRC:], crc32.Checksum(b[:ckHeaderCRC], crcTable()))
	return b
}

// TestLoadLegacyAndMixed: files written before save ids load as one
// legacy save; a node whose tables' files are of different saves is
// refused before any table changes, naming each file and its save.
func TestLoadLegacyAndMixed(t *testing.T) {
	a, b := spec("w", 8, 2, SGD(1), Async, 2), spec("x", 8, 2, SGD(1), Async, 2)
	dir := t.TempDir()
	s := newStore(t, 1, a, b)
	pushAll(t, s, 1)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	want := rowsOf(t, s)
	for _, name := range []string{"w", "x"} {
		path := filepath.Join(dir, FileName(name, 1))
		f, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, legacyFile(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fresh := newStore(t, 1, a, b)
	if err := fresh.Load(dir); err != nil {
		t.Fatalf("legacy files: %v", err)
	}
	if l, ok := fresh.Loaded("w"); !ok || l.Save != (SaveInfo{}) || !strings.HasSuffix(l.Path, FileName("w", 1)) {
		t.Fatalf("legacy file loaded as %+v (%v)", l, ok)
	}
	if got := rowsOf(t, fresh); !slices.Equal(got, want) {
		t.Fatalf("legacy rows %v, want %v", got, want)
	}

	// x of a newer save, w of the legacy one.
	only := newStore(t, 1, b)
	pushAll := func() {
		if err := only.Push("x", []uint64{4}, []float32{5, 5}); err != nil {
			t.Fatal(err)
		}
	}
	pushAll()
	if err := only.Save(dir); err != nil {
		t.Fatal(err)
	}
	mixed := newStore(t, 1, a, b)
	before := snapshot(t, mixed)
	err := mixed.Load(dir)
	if !errors.Is(err, ErrMixedSaves) || !strings.Contains(err.Error(), FileName("w", 1)+": legacy save") || !strings.Contains(err.Error(), FileName("x", 1)+": save ") {
		t.Fatalf("mixed saves: %v", err)
	}
	if after := snapshot(t, mixed); !slices.Equal(after["w"], before["w"]) || !slices.Equal(after["x"], before["x"]) {
		t.Fatal("a refused load changed a table")
	}
}

// TestDecodeSaveInfo: the save fields are checked: a second CRC, a
// save id, no base save on a coordinated save, zero padding and no exit
// flag in a version 1.0 header.
func TestDecodeSaveInfo(t *testing.T) {
	s := newStore(t, 0, spec("w", 8, 2, SGD(1), Async, 2))
	tab, _ := s.table("w")
	good := tab.header(0, SaveInfo{ID: 7, Exit: true, Base: 3})
	if info, err := decodeSaveInfo(good); err != nil || info != (SaveInfo{ID: 7, Exit: true, Base: 3}) {
		t.Fatalf("decoded %+v, %v", info, err)
	}
	cases := map[string]func(h []byte){
		"save CRC":             func(h []byte) { h[ckSaveID]++ },
		"save id 0":            func(h []byte) { clear(h[ckSaveID : ckSaveID+8]); putCRC2(h) },
		"a coordinated save":   func(h []byte) { le.PutUint32(h[12:], 0); putCRC2(h) },
		"version 1.0 header":   func(h []byte) { le.PutUint16(h[10:], 0) },
		"an exit save in a ve": func(h []byte) { le.PutUint16(h[10:], 0); clear(h[ckHeaderCRC+4:]) },
	}
	for text, bad := range cases {
		h := slices.Clone(good)
		bad(h)
		if _, err := decodeSaveInfo(h); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), text) {
			t.Errorf("%s: %v", text, err)
		}
	}
}

func putCRC2(h []byte) { le.PutUint32(h[ckSaveCRC:], crc32.Checksum(h[:ckSaveCRC], crcTable())) }

// TestLoadRefusesUnreadableExitSave: an exit save that cannot be read
// beside a good file of the last coordinated save is an error naming
// it, not passed over for the older save: it was the newer checkpoint.
func TestLoadRefusesUnreadableExitSave(t *testing.T) {
	sp := spec("w", 8, 2, SGD(1), Async, 1)
	dir := t.TempDir()
	s := newStore(t, 0, sp)
	pushAll(t, s, 1)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	exit := filepath.Join(dir, ExitFileName("w", 0))
	if err := os.WriteFile(exit, []byte("GNODEKVT but not a header"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := newStore(t, 0, sp).Load(dir)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), exit) || !strings.Contains(err.Error(), "move it aside") {
		t.Fatalf("load beside an unreadable exit save: %v, want ErrCorrupt naming %s and what to do", err, exit)
	}
}

// TestSaveExitTableCreatedAfterTheSave: a table created after the last
// coordinated save has no file of it; the node's exit save must still
// be taken over the coordinated files of the other tables. Each exit
// file recorded one base for the whole store, 0 when any table lacked
// a coordinated file, and the next load preferred the older
// coordinated file of every table: the training since the save was
// lost without a word (and the next exit save overwrote it). The
// origin the exit save leaves each table with is what its file records,
// the key a load of it gives (a marker written after the exit save names
// the save the next start loads).
func TestSaveExitTableCreatedAfterTheSave(t *testing.T) {
	dir := t.TempDir()
	sp := spec("w", 8, 2, SGD(1), Async, 1)
	other := spec("other", 4, 2, SGD(1), Async, 1)
	s := newStore(t, 0, sp)
	pushAll(t, s, 1)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	pushAll(t, s, 1)
	trained := rowsOf(t, s)
	if _, err := s.Create(other); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveExit(dir); err != nil {
		t.Fatal(err)
	}
	r := newStore(t, 0, sp, other)
	if err := r.Load(dir); err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(t, r); !slices.Equal(got, trained) {
		t.Fatalf("loaded rows %v, want the exit save's %v", got, trained)
	}
	for _, name := range []string{"w", "other"} {
		if l, _ := r.Loaded(name); l.Path != filepath.Join(dir, ExitFileName(name, 0)) {
			t.Errorf("table %s loaded from %s, want its exit file", name, l.Path)
		}
		o, _, _ := s.Origin(name)
		lo, _, _ := r.Origin(name)
		if o.Generation() != lo.Generation() {
			t.Errorf("table %s: origin after the exit save %q, after loading its file %q", name, o.Generation(), lo.Generation())
		}
	}
}
