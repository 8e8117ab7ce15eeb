package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
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
		if strings.Contains(err.Error(), "run kv_create for table") {
			t.Errorf("restarted %d, asked %d: kv_save advises a kv_create again of a table whose shard part %d lost: %v", tc.restarted, tc.asked, tc.restarted, err)
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
		if _, err := ss[tc.asked].create(ctx, &ts, true, false); err != nil {
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

// TestKVSaveAfterAHalfCreatedTable: a trainer's kv_create through one
// node reaches the other, which creates table "w", but its answer is
// lost (the mesh fails): the node asked drops its own copy again, the
// other keeps its (it may be one its trainers train: a peer that cannot
// be reached must not have trained rows dropped), and a trainer there
// trains it. Every kv_save was then refused with the advice for a node
// that lost its shard (restart every node with kv.load), until someone
// ran kv_drop, and node train --save failed at the job's end. The
// kv_create's error and kv_save's refusal now say to run the kv_create
// again or kv_drop the table, whether the node that lacks it coordinates
// the save or answers a peer's prepare; kv_create again, through either
// node, creates it where it is missing and keeps the trained rows, and
// kv_save goes through.
func TestKVSaveAfterAHalfCreatedTable(t *testing.T) {
	for _, tc := range []struct{ via, retry int }{{0, 0}, {0, 1}, {1, 0}, {1, 1}} {
		lacks, holds := tc.via, 1-tc.via
		dirs := [2]string{t.TempDir(), t.TempDir()}
		ss, ts := kvPair(t, dirs, false)
		ctx := context.Background()
		wired := ss[lacks].send
		ss[lacks].send = func(c context.Context, part int, req []byte) ([]byte, error) {
			resp, err := wired(c, part, req)
			var r control.Request
			if err == nil && json.Unmarshal(req, &r) == nil && r.Op == control.OpKVCreate {
				return nil, fmt.Errorf("mesh: part %d: stream reset", part)
			}
			return resp, err
		}
		_, err := ss[lacks].create(ctx, &ts, true, false)
		if err == nil || !strings.Contains(err.Error(), "nodes that accepted it keep it") ||
			!strings.Contains(err.Error(), "run this kv_create again once the cause is fixed, which creates it where it is missing, or kv_drop it") {
			t.Fatalf("%+v: kv_create whose answer from part %d was lost: %v, want it to say to run it again or kv_drop the table", tc, holds, err)
		}
		if served(ss[lacks]) || !served(ss[holds]) {
			t.Fatalf("%+v: after the kv_create that failed part-way: part 0 serves %v, part 1 %v; want part %d alone", tc, served(ss[0]), served(ss[1]), holds)
		}
		ss[lacks].send = wired
		lo := uint64(5 * holds)
		if err := ss[holds].store.Push("w", []uint64{lo, lo + 4}, []float32{1, -1, 2, 1}); err != nil { // a trainer
			t.Fatal(err)
		}
		markAll(ss)
		trained, _ := shard(t, ss[holds])
		before := pairFiles(t, dirs)
		for asked := range ss {
			_, err := ss[asked].save(ctx, true)
			for _, want := range []string{
				"nothing saved (every node keeps its checkpoint)",
				fmt.Sprintf(`table "w": part %d holds no shard of it (part %d does)`, lacks, holds),
				`run kv_create for table "w" again, with the spec it was created with`,
				"or kv_drop it",
			} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("%+v: kv_save through node %d with table \"w\" on part %d alone: %v\nwant it to say %q", tc, asked, holds, err, want)
				}
			}
			if strings.Contains(err.Error(), "load = true") {
				t.Errorf("%+v: kv_save through node %d advises a restart with kv.load for a table part %d never held: %v", tc, asked, lacks, err)
			}
		}
		wantPairFiles(t, dirs, before, "the refused kv_save")

		info, err := ss[tc.retry].create(ctx, &ts, true, false)
		if err != nil || info.Created != (tc.retry == lacks) {
			t.Fatalf("%+v: kv_create again through node %d: %+v, %v; want created %v", tc, tc.retry, info, err, tc.retry == lacks)
		}
		if !served(ss[lacks]) {
			t.Fatalf("%+v: kv_create again: part %d still holds no shard", tc, lacks)
		}
		if rows, _ := shard(t, ss[holds]); !slices.Equal(rows, trained) {
			t.Errorf("%+v: kv_create again: part %d holds %v, want its trained rows %v", tc, holds, rows, trained)
		}
		saved, err := ss[1-tc.retry].save(ctx, true)
		if err != nil || !slices.Equal(saved.Tables, []string{"w"}) {
			t.Fatalf("%+v: kv_save once kv_create ran again: %+v, %v; want table w saved", tc, saved, err)
		}
		for p, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, kv.FileName("w", p))); err != nil {
				t.Errorf("%+v: part %d: %v", tc, p, err)
			}
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
	if _, err := ss[1].create(ctx, &v, true, false); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{}
	cfg.Node.Role = RoleClient
	client, err := newKVServer(cfg, slog.New(slog.DiscardHandler), partition.Book{Bounds: []uint64{0, 5, 10}}, numbering{})
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
// another spec is named with the parts on each side, and what to do: a
// table that no part lacking it held rows of (a kv_create that failed
// part-way) is created again, one whose rows such a part held comes back
// from the last save, one whose rows a kv_drop removed there (a kv_drop
// that failed part-way) is dropped again, whatever the other parts
// without it say, and of a part of an earlier build, which does not
// say, both of the first are said. Nodes that prepared the same tables
// (or none) pass.
func TestCompareSaveTables(t *testing.T) {
	w := preparedTable{Name: "w", Rows: 10, Dim: 2, Mode: "async", Optimizer: "sgd"}
	v := preparedTable{Name: "v", Rows: 4, Dim: 3, Mode: "sync", Optimizer: "average"}
	w4 := w
	w4.Dim = 4
	none := []string{} // a part that says it lacks no table it held rows of
	const (
		during  = "If a kv_create or kv_drop of a table ran during this save, run kv_save again"
		again   = `run kv_create for table "w" again, with the spec it was created with (it creates the table where it is missing and keeps the rows of the nodes that hold it), or kv_drop it`
		restart = "restart every node with [kv] load = true and kv_create the table"
	)
	for _, tc := range []struct {
		name   string
		nodes  []partTables
		want   []string // nil: no error
		unsaid []string
	}{
		{"same", []partTables{{0, []preparedTable{v, w}, none, nil}, {1, []preparedTable{v, w}, none, nil}, {2, []preparedTable{v, w}, none, nil}}, nil, nil},
		{"none", []partTables{{0, []preparedTable{}, none, nil}, {1, nil, none, nil}}, nil, nil},
		{"one node lacks, never held it", []partTables{{0, []preparedTable{w}, none, nil}, {1, nil, none, nil}, {2, []preparedTable{w}, none, nil}},
			[]string{`table "w": part 1 holds no shard of it (parts 0, 2 do)`, during,
				`Otherwise no part without a shard of table "w" held rows of it but its initial ones: ` +
					`a kv_create of it failed part-way (a node unreachable, say) and left it on some nodes only, or a kv_drop did that removed only initial rows: ` + again},
			[]string{restart}},
		{"one node lacks, held it", []partTables{{0, []preparedTable{w}, none, nil}, {1, nil, []string{"w"}, nil}, {2, []preparedTable{w}, none, nil}},
			[]string{`table "w": part 1 holds no shard of it (parts 0, 2 do)`, during,
				`Otherwise a part without a shard of table "w" held rows of it, which it holds no more (its node restarted since, without loading it): ` + restart},
			[]string{"run kv_create for table"}},
		{"two lack, one held it", []partTables{{0, []preparedTable{w}, none, nil}, {1, nil, none, nil}, {2, nil, []string{"v", "w"}, nil}},
			[]string{`table "w": parts 1, 2 hold no shard of it (part 0 does)`, `a part without a shard of table "w" held rows of it`},
			[]string{"run kv_create for table"}},
		{"one node lacks, dropped it", []partTables{{0, []preparedTable{w}, none, nil}, {1, nil, []string{"w"}, []string{"w"}}, {2, []preparedTable{w}, none, nil}},
			[]string{`table "w": part 1 holds no shard of it (parts 0, 2 do)`, during,
				`Otherwise a kv_drop of table "w" failed part-way: it removed the shards of the parts without one, which held rows of it but their initial ones, and not the others': ` +
					"kv_drop it again, which removes it from every node. Do not run kv_create for it", restart[:len("restart every node with [kv] load = true and kv_create")]},
			[]string{"run kv_create for table", "Otherwise a part without a shard of table"}},
		{"two lack, one lost it, one dropped it", []partTables{{0, []preparedTable{w}, none, nil}, {1, nil, []string{"w"}, none}, {2, nil, []string{"w"}, []string{"w"}}},
			[]string{`table "w": parts 1, 2 hold no shard of it (part 0 does)`, `Otherwise a kv_drop of table "w" failed part-way`},
			[]string{"run kv_create for table", "Otherwise a part without a shard of table"}},
		{"two lack, an earlier build and one dropped it", []partTables{{0, []preparedTable{w}, none, nil}, {1, nil, nil, nil}, {2, nil, []string{"w"}, []string{"w"}}},
			[]string{`Otherwise a kv_drop of table "w" failed part-way`},
			[]string{"run kv_create for table", "a part of an earlier build does not say"}},
		{"one node lacks, an earlier build", []partTables{{0, []preparedTable{w}, none, nil}, {1, nil, nil, nil}, {2, []preparedTable{w}, none, nil}},
			[]string{`table "w": part 1 holds no shard of it (parts 0, 2 do)`, during, `Otherwise, of table "w", a part of an earlier build does not say whether it held rows`,
				"run kv_create for it again, with the spec it was created with, or kv_drop it. If one did, it holds them no more (its node restarted since, without loading it, " +
					"or a kv_drop of it failed part-way, which kv_drop again finishes): " + restart},
			nil},
		{"one node has one more", []partTables{{0, []preparedTable{w}, none, nil}, {1, []preparedTable{v, w}, none, nil}, {2, []preparedTable{w}, none, nil}},
			[]string{`table "v": parts 0, 2 hold no shard of it (part 1 does)`, `run kv_create for table "v" again`}, nil},
		{"tables of each kind", []partTables{{0, []preparedTable{v, w}, []string{"v"}, nil}, {1, []preparedTable{}, []string{"v"}, nil}},
			[]string{`table "v": part 1 holds no shard of it (part 0 does); table "w": part 1 holds no shard of it (part 0 does)`,
				`a part without a shard of table "v" held rows of it`, `run kv_create for table "w" again`},
			nil},
		{"specs", []partTables{{0, []preparedTable{w}, none, nil}, {1, []preparedTable{w4}, none, nil}, {2, []preparedTable{w}, none, nil}},
			[]string{`table "w": parts 0, 2 hold it as 10 rows × 2, async, sgd, part 1 holds it as 10 rows × 4, async, sgd`, "give every node the same spec"},
			[]string{during}},
		{"both", []partTables{{0, []preparedTable{v, w}, none, nil}, {1, []preparedTable{w4}, none, nil}},
			[]string{`table "v": part 1 holds no shard of it (part 0 does); table "w": part 0 holds it as`, `run kv_create for table "v" again`, "same spec"}, nil},
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
		for _, unsaid := range tc.unsaid {
			if strings.Contains(err.Error(), unsaid) {
				t.Errorf("%s: %v\nsays %q", tc.name, err, unsaid)
			}
		}
	}
}
