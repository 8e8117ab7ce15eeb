package kv

import (
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// ckTables are one table per optimiser and mode, sharded over 2 parts.
func ckTables() []Spec {
	ent := entSpec(40, 4, 2)
	sgd := spec("sgd", 40, 4, SGD(0.1), Async, 2)
	sgd.Init = Init{Kind: InitNormal, Scale: 0.1, Seed: 5}
	adam := spec("adam", 40, 4, Adam(0.01, 0.9, 0.999, 1e-8), Async, 2)
	dense := spec("dense", 6, 4, Adam(0.05, 0.8, 0.9, 1e-6), Sync, 2)
	return []Spec{ent, sgd, adam, dense}
}

// train runs steps [from, to) of a fixed workload against part 1's store:
// sparse pushes to the async tables, a 2-trainer step of the dense one.
func train(t *testing.T, s *Store, from, to int) {
	t.Helper()
	for step := from; step < to; step++ {
		ids := []uint64{20, uint64(21 + step%19), 39, uint64(20 + (step*7)%20)}
		grads := make([]float32, len(ids)*4)
		for i := range grads {
			grads[i] = float32((step*31+i*17)%13) - 6.5
		}
		for _, name := range []string{"ent", "sgd", "adam"} {
			if err := s.Push(name, ids, grads); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for k := range 2 {
			wg.Go(func() {
				if err := s.PushSync(context.Background(), "dense", uint64(step), k, 2, grads[:3*4]); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
}

func snapshot(t *testing.T, s *Store) map[string][]float32 {
	t.Helper()
	out := make(map[string][]float32)
	for _, name := range s.Tables() {
		sp, _ := s.Spec(name)
		lo, hi := sp.Range(s.Part())
		rows, err := s.Pull(name, idRange(lo, hi), nil)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = rows
	}
	return out
}

// TestCheckpointResumesIdentically: train, save, load into a fresh store,
// train on: the same bits as training without the interruption.
func TestCheckpointResumesIdentically(t *testing.T) {
	const k = 6
	straight := newStore(t, 1, ckTables()...)
	train(t, straight, 0, 2*k)

	first := newStore(t, 1, ckTables()...)
	train(t, first, 0, k)
	dir := t.TempDir()
	if err := first.Save(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"adam.part1.kvt", "dense.part1.kvt", "ent.part1.kvt", "sgd.part1.kvt"}
	if !slices.Equal(names, want) {
		t.Fatalf("checkpoint files %v, want %v (no temporaries left)", names, want)
	}
	resumed := newStore(t, 1, ckTables()...)
	if err := resumed.Load(dir); err != nil {
		t.Fatal(err)
	}
	if v, _ := resumed.Version("dense"); v != k {
		t.Fatalf("dense version %d after load, want %d", v, k)
	}
	train(t, resumed, k, 2*k)
	a, b := snapshot(t, straight), snapshot(t, resumed)
	for name := range a {
		if !slices.Equal(a[name], b[name]) {
			t.Errorf("table %s: resumed training differs from uninterrupted training", name)
		}
	}
	// Saving again replaces the files in place.
	if err := resumed.Save(dir); err != nil {
		t.Fatal(err)
	}
	again := newStore(t, 1, ckTables()...)
	if err := again.Load(dir); err != nil {
		t.Fatal(err)
	}
	if c := snapshot(t, again); !slices.Equal(c["adam"], b["adam"]) {
		t.Fatal("second save did not replace the first")
	}
}

func TestCheckpointRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, 1, ckTables()...)
	train(t, s, 0, 3)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ent.part1.kvt")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(off int) []byte { b := slices.Clone(good); b[off] ^= 0x10; return b }
	cases := []struct {
		name   string
		file   []byte
		tables []Spec
		want   error
		text   string
	}{
		{"header byte", flip(33), nil, ErrCorrupt, "header CRC"},
		{"row byte", flip(ckHeaderLen + 5), nil, ErrCorrupt, "body CRC"},
		{"state byte", flip(len(good) - 6), nil, ErrCorrupt, "body CRC"},
		{"crc byte", flip(len(good) - 1), nil, ErrCorrupt, "body CRC"},
		{"magic", flip(0), nil, ErrCorrupt, "magic"},
		{"major", flip(8), nil, ErrVersion, "major version 17"},
		{"truncated", good[:len(good)-4], nil, ErrCorrupt, "file is"},
		{"short", good[:100], nil, ErrCorrupt, "header"},
		{"dim", good, withEnt(func(s *Spec) { s.Dim = 8 }), ErrMismatch, "field dim: file has 4, table has 8"},
		{"optimiser", good, withEnt(func(s *Spec) { s.Opt = SGD(1) }), ErrMismatch, "field optimiser: file has adagrad, table has sgd"},
		{"rows", good, withEnt(func(s *Spec) { s.Rows, s.Bounds = 44, []uint64{0, 20, 44} }), ErrResized, "field rows: file has 40, table has 44: checkpoint does not match the configured table"},
		{"rows and dim", good, withEnt(func(s *Spec) { s.Rows, s.Bounds, s.Dim = 44, []uint64{0, 20, 44}, 8 }), ErrMismatch, "field rows"},
		{"bounds", good, withEnt(func(s *Spec) { s.Bounds = []uint64{0, 10, 40} }), ErrMismatch, "field shard start"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(path, c.file, 0o644); err != nil {
				t.Fatal(err)
			}
			tables := c.tables
			if tables == nil {
				tables = ckTables()
			}
			fresh := newStore(t, 1, tables...)
			before := snapshot(t, fresh)
			err := fresh.Load(dir)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("err %v, want %v naming %s and %q", err, c.want, path, c.text)
			}
			// ErrResized is a file of the table at another number of rows
			// alone: kv_create may replace it (node train --save of a model
			// of another size), never a file of another table.
			if resized := c.name == "rows"; errors.Is(err, ErrResized) != resized || (c.want == ErrResized && !errors.Is(err, ErrMismatch)) {
				t.Fatalf("err %v: errors.Is(ErrResized) = %v, want %v (and ErrMismatch)", err, errors.Is(err, ErrResized), resized)
			}
			// A node reports a kv_create's refused load with its code: the
			// trainer tells a mismatched checkpoint from other failures.
			if re := (&RemoteError{Code: NewErrorMsg(err).Code}); errors.Is(err, ErrMismatch) && !errors.Is(re, ErrMismatch) {
				t.Fatalf("code %d does not carry ErrMismatch", re.Code)
			}
			if after := snapshot(t, fresh); !slices.Equal(after["ent"], before["ent"]) {
				t.Fatal("a refused checkpoint left the table changed")
			}
		})
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := newStore(t, 1, ckTables()...).Load(dir); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestCheckpointIDSet: a checkpoint records the numbering of its rows
// (Spec.IDSet), and a table of another numbering refuses it: another
// partitioning of the graph into the same ranges gives its ids to other
// nodes, and its checkpoint loaded without a word. A side that names no
// numbering (0: a table of its own rows, or a file older than minor 2)
// does not refuse.
func TestCheckpointIDSet(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, 1, withEnt(func(s *Spec) { s.IDSet = 7 })...)
	train(t, s, 0, 3)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ent.part1.kvt")
	other := newStore(t, 1, withEnt(func(s *Spec) { s.IDSet = 9 })...)
	err := other.Load(dir)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), "field id set: the file's rows are the node ids of partitioning 00000007, this table's of 00000009") {
		t.Fatalf("another numbering: %v, want ErrMismatch naming %s and both id sets", err, path)
	}
	want := snapshot(t, s)
	for _, set := range []uint32{7, 0} {
		same := newStore(t, 1, withEnt(func(s *Spec) { s.IDSet = set })...)
		if err := same.Load(dir); err != nil {
			t.Fatalf("id set %d: %v", set, err)
		}
		if got := snapshot(t, same); !slices.Equal(got["ent"], want["ent"]) {
			t.Fatalf("id set %d: rows differ from the saved ones", set)
		}
	}
	// A file of minor 1 (no id set: bytes 92-96 zero) loads into any.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := le.Uint32(b[ckIDSet:]); got != 7 {
		t.Fatalf("header id set %d, want 7", got)
	}
	le.PutUint16(b[10:], 1)
	le.PutUint32(b[ckIDSet:], 0)
	le.PutUint32(b[ckHeaderCRC:], crc32.Checksum(b[:ckHeaderCRC], crcTable()))
	le.PutUint32(b[ckSaveCRC:], crc32.Checksum(b[:ckSaveCRC], crcTable()))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := newStore(t, 1, withEnt(func(s *Spec) { s.IDSet = 9 })...).Load(dir); err != nil {
		t.Fatalf("a minor 1 file into id set 9: %v", err)
	}
}

// TestCheckpointIDSetBefore: a table whose numbering's tag changed
// between builds (Spec.IDSetBefore: the tag the build before recorded of
// the same numbering) loads a file of either, refuses any other, and
// records the current one when it saves.
func TestCheckpointIDSetBefore(t *testing.T) {
	dir := t.TempDir()
	old := newStore(t, 1, withEnt(func(s *Spec) { s.IDSet = 7 })...)
	train(t, old, 0, 3)
	if err := old.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := newStore(t, 1, withEnt(func(s *Spec) { s.IDSet, s.IDSetBefore = 9, 8 })...).Load(dir); !errors.Is(err, ErrMismatch) ||
		!strings.Contains(err.Error(), "field id set: the file's rows are the node ids of partitioning 00000007, this table's of 00000009") {
		t.Fatalf("a file of neither tag: %v, want ErrMismatch naming both id sets", err)
	}
	cur := newStore(t, 1, withEnt(func(s *Spec) { s.IDSet, s.IDSetBefore = 9, 7 })...)
	if err := cur.Load(dir); err != nil {
		t.Fatalf("a file of the tag before: %v", err)
	}
	if got, want := snapshot(t, cur), snapshot(t, old); !slices.Equal(got["ent"], want["ent"]) {
		t.Fatal("rows differ from the saved ones")
	}
	if err := cur.Save(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ent.part1.kvt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := le.Uint32(b[ckIDSet:]); got != 9 {
		t.Fatalf("saved again: header id set %d, want 9", got)
	}
}

// withEnt is ckTables with the "ent" table changed by f.
func withEnt(f func(*Spec)) []Spec {
	ts := ckTables()
	f(&ts[0])
	return ts
}

// TestSaveWhileTraining: Save runs while trainers push (race-clean) and
// every file it writes loads.
func TestSaveWhileTraining(t *testing.T) {
	s := newStore(t, 0, entSpec(64, 4, 1))
	dir := t.TempDir()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for k := range 2 {
		wg.Go(func() {
			ids := []uint64{uint64(k), 10, 63}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.Push("ent", ids, make([]float32, 12)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 5 {
		if err := s.Save(dir); err != nil {
			t.Fatal(err)
		}
		if err := newStore(t, 0, entSpec(64, 4, 1)).Load(dir); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
