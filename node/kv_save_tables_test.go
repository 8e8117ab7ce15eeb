package node

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"graphnode/kv"
	"graphnode/node/control"
	"graphnode/partition"
)

// pairFiles is the name and bytes of every file of both nodes'
// checkpoint directories.
func pairFiles(t *testing.T, dirs [2]string) [2]map[string]string {
	t.Helper()
	return [2]map[string]string{readDir(t, dirs[0]), readDir(t, dirs[1])}
}

// wantPairFiles fails t when a node's checkpoint directory is not as it
// was.
func wantPairFiles(t *testing.T, dirs [2]string, before [2]map[string]string, what string) {
	t.Helper()
	after := pairFiles(t, dirs)
	for p := range after {
		if !maps.Equal(after[p], before[p]) {
			t.Errorf("%s changed part %d's checkpoint files: %v, were %v", what, p, slices.Sorted(maps.Keys(after[p])), slices.Sorted(maps.Keys(before[p])))
		}
	}
}

// TestKVSaveRefusesANodeWithoutTheTable: table "w" created at run time,
// trained and saved on both nodes; then one node stops (SIGTERM: its
// exit save) and starts again without kv.load, holding no "w". A kv_save
// then wrote a new save of "w" on the other node only, over its part of
// the last one, while the restarted node kept its file of that save: no
// save of "w" was on every node, and kv.load refused the table or found
// none of it. The save is refused on every node, whichever node the
// trainer asked, naming the part and the table; no node's files change,
// and no prepared save is left held. Then what the error advises (every
// node restarted with kv.load) brings back what each node held.
func TestKVSaveRefusesANodeWithoutTheTable(t *testing.T) {
	for _, tc := range []struct{ restarted, asked int }{{1, 0}, {1, 1}, {0, 0}, {0, 1}} {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		ss, ts := coordinatedSaveLoad(t, dirs, false)
		train(t, ss, 2)
		ctx := context.Background()
		var rows [2][]float32
		rows[tc.restarted], _ = shard(t, ss[tc.restarted])
		if _, err := ss[tc.restarted].save(ctx, false); err != nil { // SIGTERM
			t.Fatal(err)
		}
		ss = restartPart(t, ss, dirs, tc.restarted, false)
		before := pairFiles(t, dirs)

		info, err := ss[tc.asked].save(ctx, true)
		other := 1 - tc.restarted
		for _, want := range []string{
			"nothing saved (every node keeps its checkpoint)",
			errSaveTables.Error(),
			`table "w": part ` + string(rune('0'+tc.restarted)) + ` holds no shard of it (part ` + string(rune('0'+other)) + ` does)`,
			"[kv] load = true",
		} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("restarted %d, asked %d: kv_save answered %+v, %v; want an error saying %q", tc.restarted, tc.asked, info, err, want)
			}
		}
		if tc.asked == saveCoordinator && !errors.Is(err, errSaveTables) {
			t.Errorf("restarted %d: the coordinator's error does not wrap errSaveTables: %v", tc.restarted, err)
		}
		wantPairFiles(t, dirs, before, "the refused kv_save")
		for p, s := range ss {
			s.mu.Lock()
			held := len(s.prepared)
			s.mu.Unlock()
			if held != 0 {
				t.Errorf("restarted %d, asked %d: part %d still holds %d prepared saves: the abort did not reach it", tc.restarted, tc.asked, p, held)
			}
		}

		// The error's way back: every node stopped (SIGTERM) and
		// restarted with kv.load, and the table created, serves what
		// each node held when it last stopped; then a save goes through.
		rows[other], _ = shard(t, ss[other])
		for _, s := range ss {
			if _, err := s.save(ctx, false); err != nil {
				t.Fatal(err)
			}
		}
		for p := range ss {
			ss = restartPart(t, ss, dirs, p, true)
		}
		if _, err := ss[tc.asked].create(ctx, &ts, true); err != nil {
			t.Fatalf("restarted %d, asked %d: kv_create with kv.load, as the refusal says: %v", tc.restarted, tc.asked, err)
		}
		for p, s := range ss {
			if got, _ := shard(t, s); !slices.Equal(got, rows[p]) {
				t.Errorf("restarted %d, asked %d: part %d loaded %v, want %v", tc.restarted, tc.asked, p, got, rows[p])
			}
		}
		if _, err := ss[tc.asked].save(ctx, true); err != nil {
			t.Errorf("restarted %d, asked %d: kv_save once every node holds the table: %v", tc.restarted, tc.asked, err)
		}
	}
}

// TestKVSaveRefusesAnotherSpec: the nodes' [[kv.tables]] give "w"
// another dim on node 1 than on node 0: the save is refused, naming both
// specs, and no node's files change.
func TestKVSaveRefusesAnotherSpec(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ts := control.TableSpec{Name: "w", Rows: control.Rows{N: 10}, Dim: 2, Optimizer: "sgd", LR: 1, Mode: "async"}
	wide := ts
	wide.Dim = 4
	for _, sp := range []*control.TableSpec{&ts, &wide} {
		if err := sp.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	ss := [2]*kvServer{pairNode(t, dirs, 0, false, ts), pairNode(t, dirs, 1, false, wide)}
	wirePair(t, ss)
	ctx := context.Background()
	before := pairFiles(t, dirs)
	_, err := ss[0].save(ctx, true)
	want := `table "w": part 0 holds it as 10 rows × 2, async, sgd, part 1 holds it as 10 rows × 4, async, sgd`
	if !errors.Is(err, errSaveTables) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "give every node the same spec") {
		t.Fatalf("kv_save of tables of two specs: %v; want it refused saying %q", err, want)
	}
	if strings.Contains(err.Error(), "no shard") {
		t.Errorf("a table both nodes hold is said to lack a shard: %v", err)
	}
	wantPairFiles(t, dirs, before, "the refused kv_save")
}

// TestKVSaveAnswersTheTablesSaved: a save of nodes that hold the same
// tables goes through as before, and every node answers the tables every
// node saved: the node asked, a node that forwarded it, and a client
// node, which holds no shard and knows of no table here (it answered
// its own clients' names, none).
func TestKVSaveAnswersTheTablesSaved(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, _ := coordinatedSaveLoad(t, dirs, false)
	ctx := context.Background()
	v := control.TableSpec{Name: "v", Rows: control.Rows{N: 4}, Dim: 3, Optimizer: "adagrad", LR: 0.1, Mode: "async"}
	if err := v.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := ss[1].create(ctx, &v, true); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{}
	cfg.Node.Role = RoleClient
	client, err := newKVServer(cfg, slog.New(slog.DiscardHandler), partition.Book{Bounds: []uint64{0, 5, 10}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	client.send = func(ctx context.Context, part int, req []byte) ([]byte, error) { return ss[part].KV(ctx, req) }
	for _, asked := range []struct {
		name string
		s    *kvServer
		dir  string
	}{{"node 0", ss[0], dirs[0]}, {"node 1", ss[1], dirs[1]}, {"the client node", client, ""}} {
		train(t, ss, 1)
		before := pairFiles(t, dirs)
		info, err := asked.s.save(ctx, true)
		if err != nil {
			t.Fatalf("kv_save through %s: %v", asked.name, err)
		}
		if want := []string{"v", "w"}; !slices.Equal(info.Tables, want) || info.Dir != asked.dir {
			t.Errorf("kv_save through %s answered %+v, want tables %q in %q", asked.name, info, want, asked.dir)
		}
		after := pairFiles(t, dirs)
		for p := range after {
			for _, f := range []string{kv.FileName("v", p), kv.FileName("w", p)} {
				if after[p][f] == before[p][f] {
					t.Errorf("kv_save through %s: part %d's %s is as it was", asked.name, p, f)
				}
			}
		}
	}
}

// earlierBuild serves req on s as a node of the build before the
// prepare's tables: it ignores the request's list_tables, which it does
// not know, and answers an Ack.
func earlierBuild(t *testing.T, s *kvServer, ctx context.Context, req []byte) ([]byte, error) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(req, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "list_tables")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return s.KV(ctx, b)
}

// TestKVSaveTablesBesideAnEarlierBuild: a peer of an earlier build does
// not say which tables it prepared: the save goes through as before
// (its tables are not compared), with a warning. A coordinator of an
// earlier build does not say which tables it saved: the forwarding node
// answers its own, with a warning. And a forwarding node of an earlier
// build, which does not ask, gets the Ack it reads.
func TestKVSaveTablesBesideAnEarlierBuild(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, _ := coordinatedSaveLoad(t, dirs, false)
	ctx := context.Background()
	var logged [2]strings.Builder
	for p, s := range ss {
		s.log = slog.New(slog.NewTextHandler(&logged[p], nil))
	}
	ss[0].send = func(ctx context.Context, _ int, req []byte) ([]byte, error) { return earlierBuild(t, ss[1], ctx, req) }
	ss[1].send = func(ctx context.Context, _ int, req []byte) ([]byte, error) { return earlierBuild(t, ss[0], ctx, req) }
	train(t, ss, 1)
	before := pairFiles(t, dirs)
	for p, s := range ss {
		info, err := s.save(ctx, true)
		if err != nil {
			t.Fatalf("kv_save through node %d beside a node of an earlier build: %v", p, err)
		}
		if !slices.Equal(info.Tables, []string{"w"}) {
			t.Errorf("kv_save through node %d answered tables %q, want [w]", p, info.Tables)
		}
	}
	if after := pairFiles(t, dirs); maps.Equal(after[1], before[1]) {
		t.Error("the save beside a peer of an earlier build left its files as they were")
	}
	if !strings.Contains(logged[0].String(), "does not say which tables it prepared") {
		t.Errorf("no warning that the earlier build's tables were not compared; log:\n%s", logged[0].String())
	}
	if !strings.Contains(logged[1].String(), "does not say which tables it saved") {
		t.Errorf("no warning that the earlier coordinator did not say what it saved; log:\n%s", logged[1].String())
	}

	// a node of an earlier build forwarding a trainer's kv_save
	body, _ := json.Marshal(peerSaveRequest{Op: control.OpKVSave, Phase: saveCoordinate})
	resp, err := ss[0].KV(ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := kv.PeekKind(resp); err != nil || k != kv.KindAck || ackError(0, resp) != nil {
		t.Errorf("coordinate from an earlier build answered %q (%v), want an Ack", resp, err)
	}
}

// TestCompareSaveTables: every table that some node lacks or holds with
// another spec is named with the parts on each side; nodes that prepared
// the same tables (or none) pass.
func TestCompareSaveTables(t *testing.T) {
	w := preparedTable{Name: "w", Rows: 10, Dim: 2, Mode: "async", Optimizer: "sgd"}
	v := preparedTable{Name: "v", Rows: 4, Dim: 3, Mode: "sync", Optimizer: "average"}
	w4 := w
	w4.Dim = 4
	for _, tc := range []struct {
		name  string
		nodes []partTables
		want  []string // "" : no error
	}{
		{"same", []partTables{{0, []preparedTable{v, w}}, {1, []preparedTable{v, w}}, {2, []preparedTable{v, w}}}, nil},
		{"none", []partTables{{0, []preparedTable{}}, {1, nil}}, nil},
		{"one node lacks", []partTables{{0, []preparedTable{w}}, {1, nil}, {2, []preparedTable{w}}},
			[]string{`table "w": part 1 holds no shard of it (parts 0, 2 do)`, "If a kv_create or kv_drop of it ran during this save, run kv_save again. Otherwise a part without a table's shard holds none of its rows"}},
		{"one node has one more", []partTables{{0, []preparedTable{w}}, {1, []preparedTable{v, w}}, {2, []preparedTable{w}}},
			[]string{`table "v": parts 0, 2 hold no shard of it (part 1 does)`}},
		{"specs", []partTables{{0, []preparedTable{w}}, {1, []preparedTable{w4}}, {2, []preparedTable{w}}},
			[]string{`table "w": parts 0, 2 hold it as 10 rows × 2, async, sgd, part 1 holds it as 10 rows × 4, async, sgd`, "give every node the same spec"}},
		{"both", []partTables{{0, []preparedTable{v, w}}, {1, []preparedTable{w4}}},
			[]string{`table "v": part 1 holds no shard of it (part 0 does); table "w": part 0 holds it as`, "holds none of its rows", "same spec"}},
	} {
		err := compareSaveTables(tc.nodes)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want none", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, errSaveTables) {
			t.Fatalf("%s: %v, want errSaveTables", tc.name, err)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v\nwant %q", tc.name, err, want)
			}
		}
	}
}
