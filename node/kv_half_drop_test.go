package node

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"graphnode/node/control"
)

// halfDropped is a kvPair whose table "w" both nodes created (initial:
// each's rows then) and trained (trained: each's rows then), after
// which a trainer's kv_drop of it through part dropped failed to reach
// the other (the mesh failed), and says to run it again. With restart,
// that node then restarted without kv.load.
func halfDropped(t *testing.T, dirs [2]string, dropped int, restart bool) (ss [2]*kvServer, ts control.TableSpec, initial, trained [2][]float32) {
	t.Helper()
	ss, ts = kvPair(t, dirs, false)
	ctx := context.Background()
	for p, s := range ss {
		if _, err := s.create(ctx, &ts, false, false); err != nil {
			t.Fatal(err)
		}
		initial[p], _ = shard(t, s)
	}
	train(t, ss, 1)
	markAll(ss)
	for p := range ss {
		trained[p], _ = shard(t, ss[p])
	}
	wired := ss[dropped].send
	ss[dropped].send = func(c context.Context, part int, req []byte) ([]byte, error) {
		var r control.Request
		if json.Unmarshal(req, &r) == nil && r.Op == control.OpKVDrop {
			return nil, fmt.Errorf("mesh: part %d: connection refused", part)
		}
		return wired(c, part, req)
	}
	_, err := ss[dropped].drop(ctx, "w", true)
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "kv_drop it again once the cause is fixed, which finishes the drop") {
		t.Fatalf("kv_drop through part %d, the other unreachable: %v, want it to say to run it again", dropped, err)
	}
	ss[dropped].send = wired
	if served(ss[dropped]) || !served(ss[1-dropped]) {
		t.Fatalf("after the kv_drop that failed part-way: part 0 serves %v, part 1 %v; want part %d alone", served(ss[0]), served(ss[1]), 1-dropped)
	}
	if restart {
		ss = restartPart(t, ss, dirs, dropped, false)
	}
	return ss, ts, initial, trained
}

// wantMarkers fails t unless part p's marker of "w" is want[p].
func wantMarkers(t *testing.T, dirs [2]string, what string, want [2]string) {
	t.Helper()
	for p := range dirs {
		if m := marker(t, dirs, p); m != want[p] {
			t.Errorf("%s: part %d's marker %q, want %q", what, p, m, want[p])
		}
	}
}

// TestKVHalfDropThenCreate: a kv_drop of a trained table that reached
// one node only (the other unreachable) removed that node's marker with
// its shard, so that node looked like one that never held the table:
// kv_save advised a kv_create again, which gave it its initial rows
// beside the other's trained ones, and the next kv_save saved the mix.
// The marker now says the drop (also after a restart), kv_save says to
// kv_drop the table again and not to create it, and a kv_create,
// through either node, is refused naming the half drop and drops the
// table on every node: the drop is done. Created again, every node
// holds its initial rows, and a save goes through.
func TestKVHalfDropThenCreate(t *testing.T) {
	for _, tc := range []struct {
		dropped, asked int
		restart        bool
	}{{1, 0, false}, {1, 1, false}, {0, 0, false}, {0, 1, false}, {1, 0, true}, {0, 1, true}} {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		ss, ts, initial, trained := halfDropped(t, dirs, tc.dropped, tc.restart)
		ctx := context.Background()
		kept := 1 - tc.dropped
		var want [2]string
		want[tc.dropped] = "dropped: none\ntrained\n"
		want[kept] = "none\ntrained\n"
		wantMarkers(t, dirs, "after the half drop", want)

		before := pairFiles(t, dirs)
		info, err := ss[tc.asked].save(ctx, true)
		for _, want := range []string{
			"nothing saved (every node keeps its checkpoint)",
			`table "w": part ` + string(rune('0'+tc.dropped)) + ` holds no shard of it (part ` + string(rune('0'+kept)) + ` does)`,
			`Otherwise a kv_drop of table "w" failed part-way: it removed the shards of the parts without one, which held rows of it but their initial ones, and not the others'`,
			"kv_drop it again, which removes it from every node. Do not run kv_create for it",
		} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%+v: kv_save after the half drop: %+v, %v\nwant it to say %q", tc, info, err, want)
			}
		}
		for _, unsaid := range []string{`run kv_create for table "w" again`, "Otherwise a part without a shard of table"} {
			if strings.Contains(err.Error(), unsaid) {
				t.Errorf("%+v: kv_save after the half drop says %q: %v", tc, unsaid, err)
			}
		}
		wantPairFiles(t, dirs, before, "the refused kv_save")

		// What kv_save advised before: kv_create again.
		_, err = ss[tc.asked].create(ctx, &ts, true, false)
		for _, want := range []string{
			"part " + string(rune('0'+tc.dropped)) + " holds its initial rows (no checkpoint loaded or saved since its node started), created again since a kv_drop removed what it held (its initial rows and rows trained since)",
			"part " + string(rune('0'+kept)) + " holds its initial rows (no checkpoint loaded or saved since its node started), and trained its rows since",
			"(a kv_drop of the table failed part-way: it removed part " + string(rune('0'+tc.dropped)) + "'s shard and not the others')",
			errLostTraining.Error(),
			"The table is not served",
		} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%+v: kv_create after the half drop: %v\nwant it to say %q", tc, err, want)
			}
		}
		for p := range ss {
			if served(ss[p]) {
				rows, _ := shard(t, ss[p])
				t.Fatalf("%+v: part %d serves the table after the refused kv_create (rows %v; trained %v, initial %v)", tc, p, rows, trained[p], initial[p])
			}
		}
		// The refusal finished the drop: each node's marker says it.
		wantMarkers(t, dirs, "after the refused kv_create", [2]string{"dropped: none\ntrained\n", "dropped: none\ntrained\n"})

		// Created again: every shard is fresh, the check passes and
		// settles the markers.
		createdAfresh(t, ss, dirs, tc.asked, ts, initial, fmt.Sprintf("%+v: kv_create once the drop reached every node", tc))
		saved, err := ss[tc.asked].save(ctx, true)
		if err != nil || !slices.Equal(saved.Tables, []string{"w"}) {
			t.Errorf("%+v: kv_save of the table created afresh: %+v, %v", tc, saved, err)
		}
	}
}

// TestKVHalfDropThenDropAgain: what kv_save now advises after a half
// drop, kv_drop again, removes the table everywhere; the next kv_save,
// which finds no node holding it, makes the dropped markers moot and
// removes them, and a kv_create afterwards (or without that save in
// between, checked) starts the table afresh on every node.
func TestKVHalfDropThenDropAgain(t *testing.T) {
	for _, saveBetween := range []bool{true, false} {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		ss, ts, initial, _ := halfDropped(t, dirs, 1, false)
		ctx := context.Background()
		info, err := ss[0].drop(ctx, "w", true)
		if err != nil || !info.Dropped || len(info.DroppedParts) != 0 {
			t.Fatalf("kv_drop again through part 0: %+v, %v; want dropped here, on no other part", info, err)
		}
		wantMarkers(t, dirs, "after kv_drop again", [2]string{"dropped: none\ntrained\n", "dropped: none\ntrained\n"})
		if saveBetween {
			saved, err := ss[1].save(ctx, true)
			if err != nil || len(saved.Tables) != 0 {
				t.Fatalf("kv_save once no node holds the table: %+v, %v", saved, err)
			}
			wantMarkers(t, dirs, "after a kv_save that no node saved the table in", [2]string{})
		}
		createdAfresh(t, ss, dirs, 1, ts, initial, fmt.Sprintf("save between %v: kv_create after kv_drop again", saveBetween))
	}
}

// createdAfresh creates ts through part asked, a kv_create that what
// names, and wants the table new there, every part at its initial rows,
// and, once the shards are marked, no marker left on either node.
func createdAfresh(t *testing.T, ss [2]*kvServer, dirs [2]string, asked int, ts control.TableSpec, initial [2][]float32, what string) {
	t.Helper()
	got, err := ss[asked].create(context.Background(), &ts, true, false)
	if err != nil || !got.Created {
		t.Fatalf("%s: %+v, %v", what, got, err)
	}
	for p := range ss {
		if rows, _ := shard(t, ss[p]); !slices.Equal(rows, initial[p]) {
			t.Errorf("%s: part %d holds %v, want its initial rows %v", what, p, rows, initial[p])
		}
	}
	markAll(ss)
	wantMarkers(t, dirs, "once the table is created afresh everywhere", [2]string{})
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
