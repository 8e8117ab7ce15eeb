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

// kvPair is parts 0 and 1 of a two-part cluster, each with its own
// checkpoint directory, each's messages to its peer served by the
// other's KV (as the mesh would), and table "w" (rows 0–4 on part 0,
// 5–9 on part 1) created on both.
func kvPair(t *testing.T, dirs [2]string, load bool) ([2]*kvServer, control.TableSpec) {
	t.Helper()
	var ss [2]*kvServer
	for p := range ss {
		ss[p] = pairNode(t, dirs, p, load)
	}
	wirePair(t, ss)
	ts := control.TableSpec{Name: "w", Rows: control.Rows{N: 10}, Dim: 2, Optimizer: "sgd", LR: 1, Mode: "async"}
	if err := ts.Validate(); err != nil {
		t.Fatal(err)
	}
	return ss, ts
}

// pairNode is part p of a kvPair (not yet wired), with kv.load as load
// and tables as [[kv.tables]].
func pairNode(t *testing.T, dirs [2]string, p int, load bool, tables ...control.TableSpec) *kvServer {
	t.Helper()
	cfg := &Config{KV: KVConfig{CheckpointDir: dirs[p], Load: load, SyncTimeout: "5s", Tables: tables}}
	cfg.Node.Part = p
	s, err := newKVServer(cfg, slog.New(slog.DiscardHandler), partition.Book{Bounds: []uint64{0, 5, 10}}, numbering{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wirePair serves each node's messages to its peer by the other's KV.
func wirePair(t *testing.T, ss [2]*kvServer) {
	for p, s := range ss {
		peer := ss[1-p]
		if s == nil || peer == nil {
			continue // wired once both are there
		}
		s.send = func(ctx context.Context, part int, req []byte) ([]byte, error) {
			if part != 1-p {
				t.Errorf("part %d sent to part %d", p, part)
			}
			return peer.KV(ctx, req)
		}
	}
}

// train pushes a gradient of g to every row of each node's shard.
func train(t *testing.T, ss [2]*kvServer, g float32) {
	t.Helper()
	for p, s := range ss {
		ids := []uint64{uint64(5 * p), uint64(5*p + 4)}
		if err := s.store.Push("w", ids, []float32{g, -g, 2 * g, g}); err != nil {
			t.Fatal(err)
		}
	}
}

// shard is part p's rows of "w" and its version.
func shard(t *testing.T, s *kvServer) ([]float32, uint64) {
	t.Helper()
	lo := uint64(5 * s.part)
	rows, err := s.store.Pull("w", []uint64{lo, lo + 1, lo + 2, lo + 3, lo + 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := s.store.Version("w")
	return rows, v
}

// coordinatedSave makes a kvPair, creates "w" on both nodes, trains it
// once and saves it (kv_save, coordinated by part 0).
func coordinatedSave(t *testing.T, dirs [2]string) [2]*kvServer {
	t.Helper()
	ss, _ := coordinatedSaveLoad(t, dirs, false)
	return ss
}

// coordinatedSaveLoad is coordinatedSave of nodes with kv.load as load.
func coordinatedSaveLoad(t *testing.T, dirs [2]string, load bool) ([2]*kvServer, control.TableSpec) {
	t.Helper()
	ss, ts := kvPair(t, dirs, load)
	ctx := context.Background()
	if _, err := ss[0].create(ctx, &ts, true, false); err != nil {
		t.Fatal(err)
	}
	train(t, ss, 1)
	if _, err := ss[0].save(ctx, true); err != nil {
		t.Fatal(err)
	}
	return ss, ts
}

// TestKVExitSaveKeepsTheCoordinatedSave: node 1 stopped (SIGTERM) while
// trainers trained, after a coordinated save, writes its checkpoint at
// exit; that must not replace its part of the coordinated save, which
// node 0 keeps. A restart with load = true must not serve node 0's rows
// of that save with node 1's newer ones: the table is refused, naming
// both files, and once node 1's exit save is moved aside both nodes
// load the coordinated save.
func TestKVExitSaveKeepsTheCoordinatedSave(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss := coordinatedSave(t, dirs)
	ctx := context.Background()
	var saved [2][]float32
	var savedV [2]uint64
	for p := range ss {
		saved[p], savedV[p] = shard(t, ss[p])
	}
	coord1, err := os.ReadFile(filepath.Join(dirs[1], kv.FileName("w", 1)))
	if err != nil {
		t.Fatal(err)
	}

	train(t, ss, 3)
	exitRows, _ := shard(t, ss[1])
	if _, err := ss[1].save(ctx, false); err != nil { // node 1 stopping
		t.Fatal(err)
	}
	if after, err := os.ReadFile(filepath.Join(dirs[1], kv.FileName("w", 1))); err != nil || string(after) != string(coord1) {
		t.Fatalf("node 1's part of the coordinated save was replaced by its exit save (err %v)", err)
	}
	if _, err := os.Stat(filepath.Join(dirs[1], "w.part1.exit.kvt")); err != nil {
		t.Fatalf("the exit save is not kept beside the coordinated one: %v", err)
	}

	rs, ts := kvPair(t, dirs, true)
	_, err = rs[0].create(ctx, &ts, true, false)
	for _, want := range []string{filepath.Join(dirs[0], kv.FileName("w", 0)), filepath.Join(dirs[1], kv.ExitFileName("w", 1)), "different saves", "move aside the exit saves"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("kv_create with node 1's exit save beside node 0's coordinated save: error %v does not say %q", err, want)
		}
	}
	if err := os.Rename(filepath.Join(dirs[1], kv.ExitFileName("w", 1)), filepath.Join(dirs[1], "aside")); err != nil {
		t.Fatal(err)
	}
	rs, ts = kvPair(t, dirs, true)
	if _, err := rs[1].create(ctx, &ts, true, false); err != nil {
		t.Fatal(err)
	}
	for p := range rs {
		rows, v := shard(t, rs[p])
		if !slices.Equal(rows, saved[p]) || v != savedV[p] {
			t.Errorf("part %d loaded rows %v at version %d, want the coordinated save's %v at %d (exit save's rows %v)", p, rows, v, saved[p], savedV[p], exitRows)
		}
	}
}

// TestKVLoadRefusesASplitSave: a coordinated save that node 0 committed
// and node 1 did not (node 1 killed between prepare and commit) leaves
// the nodes on two saves; a restart with load = true must refuse the
// table with an error naming both files and saves, not serve node 0's
// new rows with node 1's old ones.
func TestKVLoadRefusesASplitSave(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss := coordinatedSave(t, dirs)
	ctx := context.Background()
	train(t, ss, 3)
	deliver := ss[0].send
	ss[0].send = func(ctx context.Context, part int, req []byte) ([]byte, error) {
		var r peerSaveRequest
		if json.Unmarshal(req, &r) == nil && r.Phase == saveCommit {
			// Node 1 dies before the commit reaches it: its prepared
			// save is dropped, its previous checkpoint kept.
			ss[1].abortPrepared("killed", nil)
			return nil, context.Canceled
		}
		return deliver(ctx, part, req)
	}
	if _, err := ss[0].save(ctx, true); err == nil || !strings.Contains(err.Error(), "commit on the other nodes") {
		t.Fatalf("save split between the nodes: %v", err)
	}

	for asked := range 2 {
		rs, ts := kvPair(t, dirs, true)
		_, err := rs[asked].create(ctx, &ts, true, false)
		if err == nil {
			t.Fatalf("kv_create on part %d loaded a checkpoint split between two saves", asked)
		}
		for _, want := range []string{kv.FileName("w", 0), kv.FileName("w", 1), "different saves"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("kv_create on part %d: error %q does not say %q", asked, err, want)
			}
		}
		for p, s := range rs {
			if _, err := s.store.Version("w"); err == nil {
				t.Errorf("kv_create on part %d: part %d still serves the table loaded from a split checkpoint", asked, p)
			}
		}
	}
}

// TestKVLoadRefusesExitSavesOfOtherSteps: every node's exit save follows
// the same coordinated save, but node 1 stopped (killed mid-training)
// at step 2 of a synchronous table and node 0 later, at step 3: loaded
// together they are a model no step produced. The exit saves of a
// synchronous table agree only at one step.
func TestKVLoadRefusesExitSavesOfOtherSteps(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, _ := kvPair(t, dirs, false)
	ts := control.TableSpec{Name: "s", Rows: control.Rows{N: 10}, Dim: 2, Optimizer: "sgd", LR: 1, Mode: "sync"}
	if err := ts.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := ss[0].create(ctx, &ts, true, false); err != nil {
		t.Fatal(err)
	}
	// One trainer (world 1): each of its pushes is a step on a shard.
	step := func(p int) {
		t.Helper()
		v, _ := ss[p].store.Version("s")
		if err := ss[p].store.PushSync(ctx, "s", v, 0, 1, make([]float32, 10)); err != nil {
			t.Fatal(err)
		}
	}
	step(0)
	step(1)
	if _, err := ss[0].save(ctx, true); err != nil {
		t.Fatal(err)
	}
	step(0)
	step(1)
	if _, err := ss[1].save(ctx, false); err != nil { // node 1 killed at step 2
		t.Fatal(err)
	}
	step(0)
	if _, err := ss[0].save(ctx, false); err != nil { // node 0 stopped at step 3
		t.Fatal(err)
	}
	rs, _ := kvPair(t, dirs, true)
	_, err := rs[0].create(ctx, &ts, true, false)
	for _, want := range []string{kv.ExitFileName("s", 0), kv.ExitFileName("s", 1), "different saves", "at step 2", "at step 3"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("kv_create of exit saves at steps 2 and 3: error %v does not say %q", err, want)
		}
	}
}

// TestKVClientNodeCreateRefusesMixedSaves: in server-client mode a
// trainer's kv_create reaches a client node, which holds no shard and
// forwards the create to the sampling nodes. Their shards, loaded from
// node 0's part of the coordinated save and node 1's exit save, must be
// refused as on a sampling node, not served mixed; once the exit save is
// moved aside the client node's kv_create serves the coordinated save.
func TestKVClientNodeCreateRefusesMixedSaves(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss := coordinatedSave(t, dirs)
	ctx := context.Background()
	var saved [2][]float32
	for p := range ss {
		saved[p], _ = shard(t, ss[p])
	}
	train(t, ss, 3)
	if _, err := ss[1].save(ctx, false); err != nil { // node 1 stopping
		t.Fatal(err)
	}

	clientNode := func(rs [2]*kvServer) *kvServer {
		cfg := &Config{}
		cfg.Node.Role = RoleClient
		c, err := newKVServer(cfg, slog.New(slog.DiscardHandler), partition.Book{Bounds: []uint64{0, 5, 10}}, numbering{})
		if err != nil {
			t.Fatal(err)
		}
		c.send = func(ctx context.Context, part int, req []byte) ([]byte, error) { return rs[part].KV(ctx, req) }
		return c
	}
	rs, ts := kvPair(t, dirs, true)
	_, err := clientNode(rs).create(ctx, &ts, true, false)
	for _, want := range []string{kv.FileName("w", 0), kv.ExitFileName("w", 1), "different saves", "move aside the exit saves"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("kv_create through a client node with node 1's exit save beside node 0's coordinated save: error %v does not say %q", err, want)
		}
	}
	for p, s := range rs {
		if _, err := s.store.Version("w"); err == nil {
			t.Errorf("part %d still serves the table loaded from two saves", p)
		}
	}

	if err := os.Rename(filepath.Join(dirs[1], kv.ExitFileName("w", 1)), filepath.Join(dirs[1], "aside")); err != nil {
		t.Fatal(err)
	}
	rs, ts = kvPair(t, dirs, true)
	if _, err := clientNode(rs).create(ctx, &ts, true, false); err != nil {
		t.Fatal(err)
	}
	for p := range rs {
		if rows, _ := shard(t, rs[p]); !slices.Equal(rows, saved[p]) {
			t.Errorf("part %d loaded rows %v, want the coordinated save's %v", p, rows, saved[p])
		}
	}
}

// TestKVCheckWithAnEarlierBuild: a peer of an earlier build answers the
// phases "check" and "verify" as malformed, as it answers any phase it
// does not know. It cannot tell which save its shard came from, so the
// kv_create passes, on a sampling node and on a client node, with a
// warning saying that the loads were not checked.
func TestKVCheckWithAnEarlierBuild(t *testing.T) {
	earlier := func(t *testing.T) func(context.Context, int, []byte) ([]byte, error) {
		return func(_ context.Context, part int, req []byte) ([]byte, error) {
			var r peerSaveRequest
			if err := json.Unmarshal(req, &r); err != nil {
				t.Errorf("request to part %d: %v", part, err)
			}
			if r.Op == control.OpKVSave {
				err := fmt.Errorf("node: kv_save from a peer: phase %q: %w", r.Phase, kv.ErrMalformed)
				return kv.AppendErrorMsg(nil, kv.NewErrorMsg(err)), nil
			}
			return kv.AppendAck(nil, &kv.Ack{}), nil
		}
	}
	ts := control.TableSpec{Name: "w", Rows: control.Rows{N: 10}, Dim: 2, Optimizer: "sgd", LR: 1, Mode: "async"}
	if err := ts.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{RoleServer, RoleClient} {
		var logged strings.Builder
		cfg := &Config{KV: KVConfig{CheckpointDir: t.TempDir(), Load: true, SyncTimeout: "5s"}}
		cfg.Node.Role = role
		s, err := newKVServer(cfg, slog.New(slog.NewTextHandler(&logged, nil)), partition.Book{Bounds: []uint64{0, 5, 10}}, numbering{})
		if err != nil {
			t.Fatal(err)
		}
		s.send = earlier(t)
		if _, err := s.create(context.Background(), &ts, true, false); err != nil {
			t.Fatalf("%s node: kv_create beside a peer of an earlier build: %v", role, err)
		}
		if !strings.Contains(logged.String(), "earlier build") || !strings.Contains(logged.String(), "not checked") {
			t.Errorf("%s node: no warning that the loads were not checked; log:\n%s", role, logged.String())
		}
	}
}

// TestKVSaveRefusesAMixedLoad: shards loaded from different saves and not
// yet checked (each node loaded on a peer's kv_create, whose sender died
// before its check ran) must not be saved: a coordinated save of them
// would make the mix one clean-looking save, which the next load would
// serve. The save is refused, naming both files, and every node keeps
// the files it had.
func TestKVSaveRefusesAMixedLoad(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss := coordinatedSave(t, dirs)
	ctx := context.Background()
	train(t, ss, 3)
	if _, err := ss[1].save(ctx, false); err != nil { // node 1 stopping
		t.Fatal(err)
	}
	snapshot := func() map[string]string {
		files := map[string]string{}
		for _, d := range dirs {
			ents, err := os.ReadDir(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				b, _ := os.ReadFile(filepath.Join(d, e.Name()))
				files[filepath.Join(d, e.Name())] = string(b)
			}
		}
		return files
	}
	before := snapshot()

	rs, ts := kvPair(t, dirs, true)
	for _, s := range rs {
		if _, err := s.create(ctx, &ts, false, false); err != nil { // a peer's kv_create: loads, does not check
			t.Fatal(err)
		}
	}
	_, err := rs[1].save(ctx, true)
	for _, want := range []string{kv.FileName("w", 0), kv.ExitFileName("w", 1), "different saves", "nothing saved"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("kv_save of shards loaded from two saves: error %v does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "not served") {
		t.Errorf("kv_save's refusal says the table is not served, which it still is: %v", err)
	}
	if after := snapshot(); !maps.Equal(after, before) {
		t.Errorf("the refused kv_save changed the checkpoint files: %v → %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
}

// TestDescribeLoaded: a shard that loaded no file is not said to hold its
// initial rows: a node that trained since it started holds trained rows
// that no file has, and the refusal of a mix said "initial rows" of them.
func TestDescribeLoaded(t *testing.T) {
	for _, c := range []struct{ key, file, want string }{
		{"none", "", "part 0 loaded no checkpoint file (its rows are its initial ones and what was trained into them since it started)"},
		{"legacy", "/c/w.part0.kvt", "part 0 loaded /c/w.part0.kvt, of the legacy save (written before save ids)"},
		{"exit after 00000000000000ab", "/c/w.part0.exit.kvt", "part 0 loaded /c/w.part0.exit.kvt, its exit save (exit after 00000000000000ab)"},
		// An exit save that followed no kv_save: "exit after legacy" left
		// a reader to decode it.
		{"exit after legacy at step 151", "/c/w.part0.exit.kvt", "part 0 loaded /c/w.part0.exit.kvt, its exit save (exit after no kv_save at step 151)"},
		{"00000000000000ab", "/c/w.part0.kvt", "part 0 loaded /c/w.part0.kvt, of save 00000000000000ab"},
	} {
		if got := describeLoaded("part 0", c.key, c.file); got != c.want {
			t.Errorf("%q: %q, want %q", c.key, got, c.want)
		}
	}
}

// TestDescribeShard: the check of lost training describes a shard by the
// checkpoint its rows last equalled and what happened to them since.
func TestDescribeShard(t *testing.T) {
	for _, c := range []struct {
		st   shardState
		want string
	}{
		{shardState{Key: "none"}, "part 0 holds its initial rows (no checkpoint loaded or saved since its node started)"},
		{shardState{Key: "none", Changed: true}, "part 0 holds its initial rows (no checkpoint loaded or saved since its node started), and trained its rows since"},
		{shardState{Key: "exit after 00000000000000ab", File: "/c/w.part0.exit.kvt", Loaded: true}, "part 0 loaded /c/w.part0.exit.kvt, its exit save (exit after 00000000000000ab)"},
		{shardState{Key: "00000000000000ab", File: "/c/w.part0.kvt", Loaded: true, Lost: true}, "part 0 loaded /c/w.part0.kvt, of save 00000000000000ab, and lost the rows trained since when its node last stopped (killed before a save)"},
		{shardState{Key: "00000000000000ab", File: "/c/w.part0.kvt", Changed: true}, "part 0 wrote /c/w.part0.kvt, of save 00000000000000ab, and trained its rows since"},
		{shardState{Key: "00000000000000ab", File: "/c/w.part0.kvt", Loaded: true, Lost: true, Prev: markerState{Key: "00000000000000ab", Trained: true, ExitFailed: "kv: save /c/.w.part0.exit.kvt.tmp-1: no space left on device"}},
			"part 0 loaded /c/w.part0.kvt, of save 00000000000000ab, and lost the rows trained since when its node last stopped (its exit save failed: kv: save /c/.w.part0.exit.kvt.tmp-1: no space left on device)"},
		{shardState{Key: "none", Lost: true, Prev: markerState{Key: "00000000000000ab", Trained: true, ExitFailed: "kv: save /c/.w.part0.exit.kvt.tmp-1: no space left on device"}},
			"part 0 holds its initial rows (no checkpoint loaded or saved since its node started), and lost what it held when its node last stopped (save 00000000000000ab and rows trained since; its exit save failed: kv: save /c/.w.part0.exit.kvt.tmp-1: no space left on device)"},
		{shardState{Key: "none", Lost: true, Prev: markerState{Key: "none", Trained: true, Dropped: true}},
			"part 0 holds its initial rows (no checkpoint loaded or saved since its node started), created again since a kv_drop removed what it held (its initial rows and rows trained since), a kv_drop that failed part-way if a peer kept its own"},
		{shardState{Key: "00000000000000ab", File: "/c/w.part0.kvt", Loaded: true, Lost: true, Prev: markerState{Key: "00000000000000ab", Trained: true, Dropped: true}},
			"part 0 loaded /c/w.part0.kvt, of save 00000000000000ab, created again since a kv_drop removed what it held (save 00000000000000ab and rows trained since), a kv_drop that failed part-way if a peer kept its own"},
	} {
		if got := describeShard("part 0", c.st); got != c.want {
			t.Errorf("%+v: %q, want %q", c.st, got, c.want)
		}
	}
}

// TestKVCreateMixedLoadSettings: nodes of one cluster with different
// kv.load settings. After a kv_save, node 0 restarts with kv.load and
// loads its part of the save, node 1 without it, on a checkpoint
// directory of its own that holds nothing (so no marker says what it
// held), and holds initial rows. A kv_create through either node is
// refused, naming both shards, and the table is dropped on both: the
// check ran only from nodes with kv.load, so a kv_create through node 1
// served the mix without a word.
func TestKVCreateMixedLoadSettings(t *testing.T) {
	ctx := context.Background()
	for _, via := range []int{0, 1} {
		t.Run(fmt.Sprintf("via node %d", via), func(t *testing.T) {
			dirs := [2]string{t.TempDir(), t.TempDir()}
			_, ts := coordinatedSaveLoad(t, dirs, true)
			dirs[1] = t.TempDir()
			ss := [2]*kvServer{pairNode(t, dirs, 0, true), pairNode(t, dirs, 1, false)}
			wirePair(t, ss)
			_, err := ss[via].create(ctx, &ts, true, false)
			if err == nil || !strings.Contains(err.Error(), "different saves") || !strings.Contains(err.Error(), "loaded no checkpoint file") {
				t.Fatalf("kv_create through node %d: %v, want different saves naming node 1's initial rows", via, err)
			}
			for p, s := range ss {
				if _, err := s.store.Version("w"); err == nil {
					t.Errorf("node %d still serves the refused table", p)
				}
			}
		})
	}
	// Without kv.load on any node, nothing is loaded and nothing mixed.
	dirs := [2]string{t.TempDir(), t.TempDir()}
	_, ts := coordinatedSaveLoad(t, dirs, false)
	ss := [2]*kvServer{pairNode(t, dirs, 0, false), pairNode(t, dirs, 1, false)}
	wirePair(t, ss)
	if _, err := ss[1].create(ctx, &ts, true, false); err != nil {
		t.Fatalf("kv_create without kv.load on any node: %v", err)
	}
}

// TestKVCreateCheckUnreachableKeepsTable: a kv_create whose check of the
// loaded saves cannot ask a peer (the mesh fails, or the trainer hangs
// up mid-check) keeps the table on every node, trained rows and all, and
// says it was not checked: it dropped the table as "different saves",
// and when the trainer's hang-up cut the drop short, only on the node
// asked, whose next kv_create served initial rows beside the peer's
// trained ones. A cluster without kv.load, where nothing can be mixed.
func TestKVCreateCheckUnreachableKeepsTable(t *testing.T) {
	for _, hangUp := range []bool{false, true} {
		t.Run(fmt.Sprintf("hang up %v", hangUp), func(t *testing.T) {
			dirs := [2]string{t.TempDir(), t.TempDir()}
			ss, ts := kvPair(t, dirs, false)
			ctx := context.Background()
			if _, err := ss[0].create(ctx, &ts, true, false); err != nil {
				t.Fatal(err)
			}
			train(t, ss, 1)
			var trained [2][]float32
			for p := range ss {
				trained[p], _ = shard(t, ss[p])
			}
			tctx, cancel := context.WithCancel(ctx)
			defer cancel()
			wired := ss[1].send
			ss[1].send = func(c context.Context, part int, req []byte) ([]byte, error) {
				var r peerSaveRequest
				if json.Unmarshal(req, &r) == nil && r.Phase == saveCheck {
					if hangUp {
						cancel()
						return nil, context.Canceled
					}
					return nil, errors.New("mesh: part 0: stream reset")
				}
				if err := c.Err(); err != nil {
					return nil, err
				}
				return wired(c, part, req)
			}
			_, err := ss[1].create(tctx, &ts, true, false)
			if err == nil || !strings.Contains(err.Error(), "not every peer could be asked") || !strings.Contains(err.Error(), "the table stays as it is") ||
				strings.Contains(err.Error(), "different saves") {
				t.Fatalf("kv_create whose check met a failure: %v, want not checked, the table kept", err)
			}
			ss[1].send = wired
			if _, err := ss[1].create(ctx, &ts, true, false); err != nil {
				t.Fatalf("kv_create again: %v", err)
			}
			for p := range ss {
				if rows, _ := shard(t, ss[p]); !slices.Equal(rows, trained[p]) {
					t.Errorf("node %d serves %v after the unchecked kv_create, want its trained rows %v", p, rows, trained[p])
				}
			}
		})
	}
}

// TestKVOpName: a request to a peer is named in errors by what it is;
// every one but a pull was said to be a "kv push" (a kv_save forwarded
// while part 0 was down read "…: kv push: peer unavailable").
func TestKVOpName(t *testing.T) {
	save, _ := json.Marshal(peerSaveRequest{Op: "kv_save", Phase: saveCheck})
	create, _ := control.MarshalKVRequest(&control.Request{Op: control.OpKVCreate})
	for _, c := range []struct {
		req  []byte
		want string
	}{
		{save, "kv_save (check)"},
		{create, "kv_create"},
		{kv.AppendPushRequest(nil, &kv.PushRequest{Table: "w"}), "kv push"},
		{kv.AppendPushSyncRequest(nil, &kv.PushSyncRequest{Table: "w"}), "kv push_sync"},
		{kv.AppendLeaveRequest(nil, &kv.LeaveRequest{Table: "w"}), "kv leave"},
		{[]byte("{"), "kv request"},
	} {
		if got := kvOpName(c.req); got != c.want {
			t.Errorf("kvOpName(%.40q) = %q, want %q", c.req, got, c.want)
		}
	}
}

// TestKVDeclaredTablesDiffer: nodes whose [[kv.tables]] give a table
// other settings (lr 0.1 on part 0, 0.5 on part 1), each applying its
// own lr without a word: the lowest part's spec stands whatever order
// the nodes check in. Part 1 leaves its copy out, logging the table and
// key; part 0 keeps its own, warning; a trainer's kv_create with part
// 0's spec makes it on part 1 again. Declared alike, both keep theirs
// and log nothing, and a node restarted alone with another spec leaves
// its copy out. The check creates nothing on a peer that does not hold
// the table.
func TestKVDeclaredTablesDiffer(t *testing.T) {
	spec := func(lr float64) control.TableSpec {
		ts := control.TableSpec{Name: "e", Rows: control.Rows{N: 10}, Dim: 2, Optimizer: "sgd", LR: lr, Mode: "async"}
		if err := ts.Validate(); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	node := func(t *testing.T, dir string, p int, log *strings.Builder, tables ...control.TableSpec) *kvServer {
		cfg := &Config{KV: KVConfig{CheckpointDir: dir, SyncTimeout: "5s", Tables: tables}}
		cfg.Node.Part = p
		s, err := newKVServer(cfg, slog.New(slog.NewTextHandler(log, nil)), partition.Book{Bounds: []uint64{0, 5, 10}}, numbering{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	lrOf := func(s *kvServer) float32 {
		sp, err := s.store.Spec("e")
		if err != nil {
			return -1
		}
		return sp.Opt.LR
	}
	leftOut := func(l *strings.Builder) bool {
		return strings.Contains(l.String(), "left out on this node") && strings.Contains(l.String(), "key=kv.tables[0]")
	}
	ctx := context.Background()
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		t.Run(fmt.Sprintf("lr 0.1 and 0.5, checked in order %v", order), func(t *testing.T) {
			dirs := [2]string{t.TempDir(), t.TempDir()}
			var logs [2]strings.Builder
			ss := [2]*kvServer{node(t, dirs[0], 0, &logs[0], spec(0.1)), node(t, dirs[1], 1, &logs[1], spec(0.5))}
			wirePair(t, ss)
			for _, p := range order {
				ss[p].checkDeclaredAtStart(ctx)
			}
			if lrOf(ss[0]) != 0.1 || lrOf(ss[1]) != -1 {
				t.Errorf("after the checks: part 0 lr %v, part 1 lr %v; want part 0's kept, part 1's left out", lrOf(ss[0]), lrOf(ss[1]))
			}
			// Part 0 meets the clash only when it checks while part 1
			// still holds its copy.
			if leftOut(&logs[0]) || !leftOut(&logs[1]) || !strings.Contains(logs[1].String(), "sgd lr 0.5 differs from the existing table's sgd lr 0.1") ||
				strings.Contains(logs[0].String(), "this node's spec stands") != (order[0] == 0) {
				t.Errorf("logs:\n%s\n%s", logs[0].String(), logs[1].String())
			}
			ts := spec(0.1)
			if _, err := ss[0].create(ctx, &ts, true, false); err != nil || lrOf(ss[1]) != 0.1 {
				t.Fatalf("kv_create with part 0's spec: %v, part 1's lr %v", err, lrOf(ss[1]))
			}
		})
	}
	t.Run("alike, then part 1 restarted with another lr", func(t *testing.T) {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		var logs [2]strings.Builder
		ss := [2]*kvServer{node(t, dirs[0], 0, &logs[0], spec(0.1)), node(t, dirs[1], 1, &logs[1], spec(0.1))}
		wirePair(t, ss)
		for _, s := range ss {
			s.checkDeclaredAtStart(ctx)
		}
		if lrOf(ss[0]) != 0.1 || lrOf(ss[1]) != 0.1 || logs[0].Len() > 0 && strings.Contains(logs[0].String(), "other settings") || strings.Contains(logs[1].String(), "other settings") {
			t.Fatalf("declared alike: lr %v and %v; logs:\n%s\n%s", lrOf(ss[0]), lrOf(ss[1]), logs[0].String(), logs[1].String())
		}
		var l1 strings.Builder
		ss[1] = node(t, dirs[1], 1, &l1, spec(0.5))
		wirePair(t, ss)
		ss[1].checkDeclaredAtStart(ctx)
		if lrOf(ss[1]) != -1 || !leftOut(&l1) || lrOf(ss[0]) != 0.1 {
			t.Errorf("part 1 restarted with lr 0.5: its lr %v (want left out), part 0's %v; log:\n%s", lrOf(ss[1]), lrOf(ss[0]), l1.String())
		}
	})
	t.Run("declared on one node", func(t *testing.T) {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		var logs [2]strings.Builder
		ss := [2]*kvServer{node(t, dirs[0], 0, &logs[0]), node(t, dirs[1], 1, &logs[1], spec(0.5))}
		wirePair(t, ss)
		ss[1].checkDeclaredAtStart(ctx)
		if lrOf(ss[0]) != -1 || lrOf(ss[1]) != 0.5 {
			t.Errorf("part 0 declares nothing: lr %v and %v; want the check to create nothing there", lrOf(ss[0]), lrOf(ss[1]))
		}
	})
}

// TestKVDeclaredClashThenLoadedCheck: with kv.load, part 1 restarted
// with another lr for a saved table leaves its copy out at start; part
// 0's check of loaded saves then takes it for a table part 1 does not
// hold, not for initial rows beside part 0's loaded ones: part 0 keeps
// its table. Both were left out, with the advice to move checkpoint
// files aside.
func TestKVDeclaredClashThenLoadedCheck(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	_, ts := coordinatedSaveLoad(t, dirs, true)
	other := ts
	other.LR = 0.5
	ss := [2]*kvServer{pairNode(t, dirs, 0, true, ts), pairNode(t, dirs, 1, true, other)}
	wirePair(t, ss)
	ctx := context.Background()
	ss[1].checkDeclaredAtStart(ctx)
	ss[0].checkDeclaredAtStart(ctx)
	ss[1].checkLoadedAtStart(ctx)
	ss[0].checkLoadedAtStart(ctx)
	if _, err := ss[0].store.Version("w"); err != nil {
		t.Fatalf("part 0 left out its loaded table after part 1's spec clash: %v", err)
	}
	if _, err := ss[1].store.Version("w"); err == nil {
		t.Fatal("part 1 keeps its copy of another lr")
	}
	if _, err := ss[1].create(ctx, &ts, true, false); err != nil {
		t.Fatalf("kv_create with part 0's spec through part 1: %v", err)
	}
}

// TestKVLoadFirstStart: kv.load with [[kv.tables]] on a checkpoint_dir
// holding none of their files (a first start) is refused saying how to
// begin, not only that a file is missing.
func TestKVLoadFirstStart(t *testing.T) {
	ts := control.TableSpec{Name: "e", Rows: control.Rows{N: 10}, Dim: 2, Optimizer: "sgd", LR: 0.1, Mode: "async"}
	if err := ts.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{KV: KVConfig{CheckpointDir: t.TempDir(), Load: true, SyncTimeout: "5s", Tables: []control.TableSpec{ts}}}
	_, err := newKVServer(cfg, slog.New(slog.DiscardHandler), partition.Book{Bounds: []uint64{0, 5, 10}}, numbering{})
	if err == nil || !strings.Contains(err.Error(), "e.part0.kvt") || !strings.Contains(err.Error(), "start the first time with load = false") {
		t.Fatalf("kv.load on a first start: %v, want the missing file and how to begin", err)
	}
}

// TestKVRequestCutByStopping: a trainer's request that the node's drain
// cuts (its connection's context ends) says the node is stopping, not
// only that the peer it went to answered "context canceled".
func TestKVRequestCutByStopping(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts := kvPair(t, dirs, false)
	if _, err := ss[0].create(context.Background(), &ts, true, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	body := kv.AppendPushRequest(nil, &kv.PushRequest{Table: "w", IDs: []uint64{7}, Dim: 2, Grads: []float32{1, 1}})
	for _, stopping := range []bool{false, true} {
		ss[0].stopping = func() bool { return stopping }
		resp := ss[0].serveTrainer(ctx, body, &kvConn{ranks: map[syncRank]struct{}{}})
		var m kv.ErrorMsg
		if err := kv.DecodeErrorMsg(resp, &m); err != nil {
			t.Fatalf("stopping %v: answer %v, want an error", stopping, err)
		}
		if said := strings.HasPrefix(m.Text, "node is stopping: the request was cut"); said != stopping {
			t.Errorf("stopping %v: %q", stopping, m.Text)
		}
	}
}

// TestKVSaveRacingCreate: a trainer's kv_create that lands between the
// coordinator's prepare and its peers' makes the nodes prepare different
// tables: the save is refused saying to run it again, not with the
// advice for a node that lost its shard (restart every node with
// kv.load, which would fail on the new table's missing file), and the
// next kv_save passes.
func TestKVSaveRacingCreate(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, _ := coordinatedSaveLoad(t, dirs, false)
	ctx := context.Background()
	wired := ss[0].send
	raced := false
	ss[0].send = func(ctx context.Context, part int, req []byte) ([]byte, error) {
		if !raced && strings.Contains(string(req), `"phase":"prepare"`) {
			raced = true
			ts := control.TableSpec{Name: "x", Rows: control.Rows{N: 10}, Dim: 2, Optimizer: "sgd", LR: 0.1, Mode: "async"}
			if err := ts.Validate(); err != nil {
				t.Fatal(err)
			}
			if _, err := ss[1].create(ctx, &ts, true, false); err != nil { // a trainer on node 1, meanwhile
				t.Errorf("concurrent kv_create: %v", err)
			}
		}
		return wired(ctx, part, req)
	}
	_, err := ss[0].save(ctx, true)
	if err == nil || !strings.HasPrefix(err.Error(), "a kv_create or kv_drop ran during the save, so the nodes prepared different tables: run kv_save again; what differed: ") ||
		!strings.Contains(err.Error(), `table "x": part 0 holds no shard of it (part 1 does)`) {
		t.Fatalf("kv_save racing a kv_create: %v, want run kv_save again first, then what differed", err)
	}
	if _, err := ss[0].save(ctx, true); err != nil {
		t.Errorf("kv_save again: %v", err)
	}
}

// TestKVLoadAddedTable: kv.load with a table added to [[kv.tables]]
// since the last save, beside one whose files are there, is no first
// start: the error names the table without a file and does not advise
// load = false, which would start the saved table from its initial rows.
func TestKVLoadAddedTable(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	_, ts := coordinatedSaveLoad(t, dirs, true)
	x := control.TableSpec{Name: "x", Rows: control.Rows{N: 10}, Dim: 2, Optimizer: "sgd", LR: 0.1, Mode: "async"}
	if err := x.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{KV: KVConfig{CheckpointDir: dirs[0], Load: true, SyncTimeout: "5s", Tables: []control.TableSpec{ts, x}}}
	_, err := newKVServer(cfg, slog.New(slog.DiscardHandler), partition.Book{Bounds: []uint64{0, 5, 10}}, numbering{})
	if err == nil || !strings.Contains(err.Error(), "without a checkpoint file, added since the last save: x (the others have theirs: w)") ||
		strings.Contains(err.Error(), "start the first time with load = false") {
		t.Fatalf("kv.load with a table added since the save: %v", err)
	}
}
