package node

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// wantMarkers fails t unless part p's marker of "w" is want[p].
func wantMarkers(t *testing.T, dirs [2]string, what string, want [2]string) {
	t.Helper()
	for p := range dirs {
		if m := marker(t, dirs, p); m != want[p] {
			t.Errorf("%s: part %d's marker %q, want %q", what, p, m, want[p])
		}
	}
}

// TestKVDropEverywhereThenLoad: a kv_drop that reached every node, of a
// table trained since its last kv_save, leaves a dropped marker on each;
// with kv.load, a kv_create of it loads that save on every node, the
// check finds every node there and the table is served at the save.
func TestKVDropEverywhereThenLoad(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts := coordinatedSaveLoad(t, dirs, true)
	var saved [2][]float32
	for p := range ss {
		saved[p], _ = shard(t, ss[p])
	}
	train(t, ss, 2)
	ctx := context.Background()
	if info, err := ss[1].drop(ctx, "w", true); err != nil || !info.Dropped || !slices.Equal(info.DroppedParts, []int{0}) {
		t.Fatalf("kv_drop through part 1: %+v, %v", info, err)
	}
	for p := range ss {
		if m := marker(t, dirs, p); !strings.HasPrefix(m, droppedTag) || !strings.HasSuffix(m, "\ntrained\n") || m == "dropped: none\ntrained\n" {
			t.Errorf("part %d's marker %q after the kv_drop, want a dropped one of the save and rows trained since", p, m)
		}
	}
	if _, err := ss[0].create(ctx, &ts, true, false); err != nil {
		t.Fatalf("kv_create after the drop reached every node: %v", err)
	}
	markAll(ss)
	for p := range ss {
		if rows, _ := shard(t, ss[p]); !slices.Equal(rows, saved[p]) {
			t.Errorf("part %d holds %v, want the save's %v", p, rows, saved[p])
		}
		if m := marker(t, dirs, p); strings.HasPrefix(m, droppedTag) || !strings.HasSuffix(m, "\nheld\n") {
			t.Errorf("part %d's marker %q once the save is served, want one that it holds it", p, m)
		}
	}
}

// TestKVHalfDropOfInitialRows: a half drop that removed a shard no
// trainer had touched (node 0's alone was trained) lost nothing: no
// marker is kept, kv_save advises the kv_create again, which keeps node
// 0's trained rows beside node 1's initial ones, as after a half create.
func TestKVHalfDropOfInitialRows(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts := kvPair(t, dirs, false)
	ctx := context.Background()
	var initial [2][]float32
	for p, s := range ss {
		if _, err := s.create(ctx, &ts, false, false); err != nil {
			t.Fatal(err)
		}
		initial[p], _ = shard(t, s)
	}
	if err := ss[0].store.Push("w", []uint64{0, 4}, []float32{1, -1, 2, 1}); err != nil {
		t.Fatal(err)
	}
	markAll(ss)
	trained0, _ := shard(t, ss[0])
	if _, err := ss[1].drop(ctx, "w", false); err != nil {
		t.Fatal(err)
	}
	wantMarkers(t, dirs, "after the half drop of initial rows", [2]string{"none\ntrained\n", ""})
	_, err := ss[0].save(ctx, true)
	if err == nil || !strings.Contains(err.Error(), `run kv_create for table "w" again`) || strings.Contains(err.Error(), "Do not run kv_create") {
		t.Fatalf("kv_save after the half drop of initial rows: %v; want it to advise kv_create again", err)
	}
	if _, err := ss[0].create(ctx, &ts, true, false); err != nil {
		t.Fatalf("kv_create again: %v", err)
	}
	if rows, _ := shard(t, ss[0]); !slices.Equal(rows, trained0) {
		t.Errorf("part 0 holds %v, want its trained rows %v", rows, trained0)
	}
	if rows, _ := shard(t, ss[1]); !slices.Equal(rows, initial[1]) {
		t.Errorf("part 1 holds %v, want its initial rows %v", rows, initial[1])
	}
	if _, err := ss[0].save(ctx, true); err != nil {
		t.Errorf("kv_save once kv_create ran again: %v", err)
	}
}

// TestKVDroppedMarkerOfAnEarlierBuild: a dropped marker reads, in a
// build before them, as one of a save no shard holds (its first line is
// the key), so such a node checks a kv_create of the table against
// every peer, as after a loss; and a marker of an earlier build reads
// as no dropped one.
func TestKVDroppedMarkerOfAnEarlierBuild(t *testing.T) {
	rec := markerState{Key: "none", Trained: true, Dropped: true}
	old, ok := parseMarkerLines([]byte(rec.text()))
	if !ok || old.Key != "dropped: none" || !old.Trained {
		t.Fatalf("an earlier build reads %q as %+v, %v", rec.text(), old, ok)
	}
	for _, text := range []string{"none\ntrained\n", "67dc4320c723c382\nheld\n", "67dc4320c723c382\n"} {
		if m, ok := parseMarker([]byte(text)); !ok || m.Dropped {
			t.Errorf("marker %q of an earlier build reads as %+v, %v", text, m, ok)
		}
	}
}

// TestReviewHalfDropThenCreate is the reviewer's reproduction: a
// kv_drop that reached node 1 alone, then the kv_create that kv_save
// advised, served and saved node 0's trained rows beside node 1's
// initial ones. The kv_create is now refused, and nothing is served.
func TestReviewHalfDropThenCreate(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts := kvPair(t, dirs, false)
	ctx := context.Background()
	for _, s := range ss {
		if _, err := s.create(ctx, &ts, false, false); err != nil {
			t.Fatal(err)
		}
	}
	train(t, ss, 1)
	markAll(ss)
	trained0, _ := shard(t, ss[0])
	trained1, _ := shard(t, ss[1])
	if _, err := ss[1].drop(ctx, "w", false); err != nil { // the drop reached node 1 only
		t.Fatal(err)
	}
	_, err := ss[0].save(ctx, true)
	t.Logf("kv_save after the half drop: %v", err)
	if _, err := ss[0].create(ctx, &ts, true, false); err == nil {
		r0, _ := shard(t, ss[0])
		r1, _ := shard(t, ss[1])
		info, err := ss[0].save(ctx, true)
		if err == nil && slices.Equal(r0, trained0) && !slices.Equal(r1, trained1) {
			t.Errorf("a mix of trained (part 0) and initial (part 1) rows served and saved: %+v", info)
		}
		t.Fatalf("kv_create after the half drop served the table")
	}
	for p := range ss {
		if served(ss[p]) {
			t.Errorf("part %d serves the table after the refused kv_create", p)
		}
	}
}
