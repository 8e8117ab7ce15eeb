package kv

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dirNames lists dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// checkpointNames are the files a whole checkpoint of ckTables on part 1 leaves.
func checkpointNames() []string {
	var names []string
	for _, sp := range ckTables() {
		names = append(names, FileName(sp.Name, 1))
	}
	slices.Sort(names)
	return names
}

// interruptedSave saves a first checkpoint of part 1 into a new dir,
// trains on, and starts a second save that stops as a crash would: after
// writing the temporaries, and, with commit, after committing the journal
// and renaming renamed of them into place. It returns the dir and the
// tables at the first and at the second save.
func interruptedSave(t *testing.T, commit bool, renamed int) (dir string, first, second map[string][]float32) {
	t.Helper()
	dir = t.TempDir()
	s := newStore(t, 1, ckTables()...)
	train(t, s, 0, 3)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	first = snapshot(t, s)
	train(t, s, 3, 7)
	second = snapshot(t, s)
	ents, _, err := s.writeAll(dir, SaveInfo{ID: NewSaveID()})
	if err != nil {
		t.Fatal(err)
	}
	if !commit {
		return dir, first, second
	}
	if _, err := commitJournal(dir, 1, ents, syncDir); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents[:renamed] {
		if err := os.Rename(filepath.Join(dir, e.tmp), filepath.Join(dir, e.final)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, first, second
}

// loadSnapshot loads part 1's ckTables from dir into a fresh store.
func loadSnapshot(t *testing.T, dir string) map[string][]float32 {
	t.Helper()
	s := newStore(t, 1, ckTables()...)
	if err := s.Load(dir); err != nil {
		t.Fatal(err)
	}
	return snapshot(t, s)
}

// TestSaveCrashAfterCommit: a save that stops after its journal is
// committed, with none, some or all of its files renamed, is finished by
// the next Load: every table is the second save's, none the first's, and
// the journal is gone.
func TestSaveCrashAfterCommit(t *testing.T) {
	for _, renamed := range []int{0, 1, 3, 4} {
		dir, first, second := interruptedSave(t, true, renamed)
		if got := loadSnapshot(t, dir); !maps.EqualFunc(got, second, slices.Equal) {
			for name := range got {
				if slices.Equal(got[name], second[name]) {
					continue
				}
				t.Errorf("%d renamed: table %s is the second save's: %v, the first's: %v",
					renamed, name, slices.Equal(got[name], second[name]), slices.Equal(got[name], first[name]))
			}
		}
		if names := dirNames(t, dir); !slices.Equal(names, checkpointNames()) {
			t.Errorf("%d renamed: after Load %s holds %v, want %v", renamed, dir, names, checkpointNames())
		}
	}
}

// TestSaveCrashBeforeCommit: a save that stops before its journal is
// committed leaves the first checkpoint whole, and the next Load removes
// its temporaries (and a journal written half way).
func TestSaveCrashBeforeCommit(t *testing.T) {
	dir, first, _ := interruptedSave(t, false, 0)
	half := filepath.Join(dir, JournalName(1)+".tmp")
	if err := os.WriteFile(half, []byte(journalHeader+"part 1\n.sgd.part"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := loadSnapshot(t, dir); !maps.EqualFunc(got, first, slices.Equal) {
		t.Error("Load after a save that did not commit did not give the first checkpoint")
	}
	if names := dirNames(t, dir); !slices.Equal(names, checkpointNames()) {
		t.Errorf("after Load %s holds %v, want %v", dir, names, checkpointNames())
	}
}

// TestSaveDirSyncFailsAfterCommit: when the directory fsync after the
// journal's rename fails, Save reports it and keeps the temporaries the
// journal names, so the next Recover finishes the save: every table the
// second save's. (Removing them left a journal naming missing files, and
// every later Save, Load and Recover refused it as corrupt.)
func TestSaveDirSyncFailsAfterCommit(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, 1, ckTables()...)
	train(t, s, 0, 3)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	train(t, s, 3, 7)
	second := snapshot(t, s)
	injected := errors.New("injected fsync failure")
	s.syncDir = func(string) error { return injected }
	err := s.Save(dir)
	jpath := filepath.Join(dir, JournalName(1))
	want := "kv: save " + jpath + ": committed, but injected fsync failure; the next Save, Load or Recover finishes it"
	if !errors.Is(err, injected) || err.Error() != want {
		t.Fatalf("Save with a failing directory fsync: %v\nwant %s", err, want)
	}
	names := dirNames(t, dir)
	var temps []string
	for _, name := range names {
		if isStaleTemp(name, 1) {
			temps = append(temps, name)
		}
	}
	if len(temps) != len(ckTables()) || !slices.Contains(names, JournalName(1)) {
		t.Fatalf("after the failed save %s holds %v, want the journal and %d temporaries", dir, names, len(ckTables()))
	}
	s.syncDir = syncDir
	rec, err := s.Recover(dir)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if !slices.Equal(rec.Finished, checkpointNames()) || rec.Removed != nil {
		t.Errorf("Recover: %+v, want finished %v and nothing removed", rec, checkpointNames())
	}
	if names := dirNames(t, dir); !slices.Equal(names, checkpointNames()) {
		t.Errorf("after Recover %s holds %v, want %v", dir, names, checkpointNames())
	}
	if got := loadSnapshot(t, dir); !maps.EqualFunc(got, second, slices.Equal) {
		t.Error("Load after Recover did not give the committed save")
	}
	if err := s.Save(dir); err != nil {
		t.Errorf("Save after Recover: %v", err)
	}
}

// TestRecoverReports: Recover says which files it finished and which
// temporaries it removed, leaves other parts' files alone, and a Save
// after it writes the store's tables as usual.
func TestRecoverReports(t *testing.T) {
	dir, _, second := interruptedSave(t, true, 1)
	other := []string{".sgd.part0.kvt.tmp-123", JournalName(0), JournalName(0) + ".tmp", ".sgd.part1.kvt.tmp-x"}
	for _, name := range other {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stale := ".ent.part1.kvt.tmp-99"
	if err := os.WriteFile(filepath.Join(dir, stale), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, 1, ckTables()...)
	rec, err := s.Recover(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Finished, []string{"adam.part1.kvt", "dense.part1.kvt", "ent.part1.kvt", "sgd.part1.kvt"}) {
		t.Errorf("Finished %v, want the 4 tables of part 1 in name order", rec.Finished)
	}
	if !slices.Equal(rec.Removed, []string{stale}) {
		t.Errorf("Removed %v, want [%s]", rec.Removed, stale)
	}
	want := append(checkpointNames(), other...)
	slices.Sort(want)
	if names := dirNames(t, dir); !slices.Equal(names, want) {
		t.Errorf("after Recover %s holds %v, want %v", dir, names, want)
	}
	if got := loadSnapshot(t, dir); !maps.EqualFunc(got, second, slices.Equal) {
		t.Error("Load after Recover did not give the committed save")
	}
	if rec, err := s.Recover(dir); err != nil || rec.Finished != nil || rec.Removed != nil {
		t.Errorf("second Recover: %+v, %v; want nothing to do", rec, err)
	}
}

// TestRecoverRefusesBadJournal: a journal that fails its checks stops
// Save and Load with ErrCorrupt naming it, and nothing in the directory
// changes.
func TestRecoverRefusesBadJournal(t *testing.T) {
	good := encodeJournal(1, []journalEntry{{".sgd.part1.kvt.tmp-1", "sgd.part1.kvt"}})
	flip := []byte(strings.Replace(string(good), "tmp-1", "tmp-2", 1))
	traversal := encodeJournal(1, []journalEntry{{"../../etc/x", "sgd.part1.kvt"}})
	otherPart := encodeJournal(0, []journalEntry{{".sgd.part0.kvt.tmp-1", "sgd.part0.kvt"}})
	for name, b := range map[string][]byte{"flipped byte": flip, "path": traversal, "other part": otherPart, "truncated": good[:len(good)-3]} {
		dir, _, _ := interruptedSave(t, true, 1)
		jpath := filepath.Join(dir, JournalName(1))
		if err := os.WriteFile(jpath, b, 0o644); err != nil {
			t.Fatal(err)
		}
		before := dirNames(t, dir)
		s := newStore(t, 1, ckTables()...)
		for op, err := range map[string]error{"Load": s.Load(dir), "Save": s.Save(dir)} {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), jpath) {
				t.Errorf("%s: %s: %v, want ErrCorrupt naming %s", name, op, err, jpath)
			}
		}
		if after := dirNames(t, dir); !slices.Equal(after, before) {
			t.Errorf("%s: the refused journal changed %s: %v, was %v", name, dir, after, before)
		}
	}
}

// TestJournalRoundTrip: a journal decodes to the entries it was encoded
// from, an empty one included.
func TestJournalRoundTrip(t *testing.T) {
	for _, ents := range [][]journalEntry{
		{},
		{{".a.b.part12.kvt.tmp-0", "a.b.part12.kvt"}, {".z-9.part12.kvt.tmp-4242", "z-9.part12.kvt"}},
	} {
		got, err := decodeJournal(encodeJournal(12, ents), 12)
		if err != nil || !slices.Equal(got, ents) {
			t.Errorf("round trip of %v: %v, %v", ents, got, err)
		}
	}
}

// FuzzJournal: decodeJournal never panics, and a journal it accepts is
// exactly the encoding of the entries it returns, each of which renames a
// temporary file of part 3 within the directory.
func FuzzJournal(f *testing.F) {
	f.Add(encodeJournal(3, []journalEntry{{".sgd.part3.kvt.tmp-17", "sgd.part3.kvt"}, {".e.part3.kvt.tmp-0", "e.part3.kvt"}}))
	f.Add(encodeJournal(3, nil))
	f.Add(encodeJournal(13, nil))
	f.Add([]byte(journalHeader + "part 3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ents, err := decodeJournal(b, 3)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("refused with %v, not ErrCorrupt", err)
			}
			return
		}
		if enc := encodeJournal(3, ents); string(enc) != string(b) {
			t.Fatalf("accepted %q, which encodes as %q", b, enc)
		}
		for _, e := range ents {
			if strings.ContainsRune(e.tmp, '/') || strings.ContainsRune(e.final, '/') || !isStaleTemp(e.tmp, 3) {
				t.Fatalf("accepted entry %+v", e)
			}
		}
	})
}

// TestRecoverRefusesLostTemporary: a committed journal whose temporary
// file is gone while one named before it is still there (renames go in
// journal order, so that one was not renamed but lost: its checkpoint
// file is the previous save's) is refused with ErrCorrupt naming both,
// before anything is renamed, instead of finishing a save that would mix
// the previous save's table with the new ones. A journal naming a file
// that is gone with no checkpoint file in its place is refused the same
// way, with nothing renamed.
func TestRecoverRefusesLostTemporary(t *testing.T) {
	for _, keepFinal := range []bool{true, false} {
		dir, _, _ := interruptedSave(t, true, 0)
		b, err := os.ReadFile(filepath.Join(dir, JournalName(1)))
		if err != nil {
			t.Fatal(err)
		}
		ents, err := decodeJournal(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		lost := ents[2]
		if err := os.Remove(filepath.Join(dir, lost.tmp)); err != nil {
			t.Fatal(err)
		}
		if !keepFinal {
			if err := os.Remove(filepath.Join(dir, lost.final)); err != nil {
				t.Fatal(err)
			}
		}
		before := dirNames(t, dir)
		s := newStore(t, 1, ckTables()...)
		err = s.Load(dir)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), lost.tmp) || !strings.Contains(err.Error(), JournalName(1)) {
			t.Errorf("keep %v: Load with %s lost: %v, want ErrCorrupt naming it and the journal", keepFinal, lost.tmp, err)
		}
		if after := dirNames(t, dir); !slices.Equal(after, before) {
			t.Errorf("keep %v: the refused journal changed %s: %v, was %v", keepFinal, dir, after, before)
		}
	}
}
