package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"graphnode/kv"
	"graphnode/node/control"
	"graphnode/partition"
)

// TestKVSaveAgainAfterASplitCommit: a commit that never reached the
// peer says "run kv_save again before loading it"; that kv_save must
// succeed. The shards' origins differed then (one node committed, the
// other not), and a check that compared origins before every save
// refused it for good.
func TestKVSaveAgainAfterASplitCommit(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, _ := coordinatedSaveLoad(t, dirs, false)
	train(t, ss, 2)
	orig := ss[0].send
	ss[0].send = func(ctx context.Context, part int, req []byte) ([]byte, error) {
		var r peerSaveRequest
		if json.Unmarshal(req, &r) == nil && r.Phase == saveCommit {
			return nil, errors.New("connection reset")
		}
		return orig(ctx, part, req)
	}
	_, err := ss[0].save(context.Background(), true)
	if err == nil {
		t.Fatal("a save whose commit never reached the peer succeeded")
	}
	ss[0].send = orig
	// the peer's prepared save is dropped (as after savePrepareHold)
	for id := range ss[1].prepared {
		if ps := ss[1].takePrepared(id); ps != nil {
			ps.timer.Stop()
			ps.p.Abort()
		}
	}
	train(t, ss, 3)
	if _, err := ss[0].save(context.Background(), true); err != nil {
		t.Fatalf("kv_save again after a split commit, as the error says: %v", err)
	}
}

// oldPeer answers phase "check" as a build of before the markers did
// (checkLoaded of what the node loaded), and knows no phase "lost".
func oldPeer(s *kvServer, ctx context.Context, req []byte) ([]byte, error) {
	var r peerSaveRequest
	if json.Unmarshal(req, &r) == nil && r.Op == "kv_save" && r.Phase == saveCheck {
		key, file := "none", ""
		if l, ok := s.store.Loaded(r.Table); ok {
			key = l.Generation()
			if l.Save.Exit && l.Sync {
				key += " at step " + strconv.FormatUint(l.Version, 10)
			}
			file = l.Path
		}
		if key == r.Save {
			return kv.AppendAck(nil, &kv.Ack{}), nil
		}
		return kv.AppendErrorMsg(nil, kv.NewErrorMsg(fmt.Errorf("node: table %q: part %d loaded %s (%s); the node that asked %s (%s): different saves", r.Table, s.part, key, file, r.Save, r.File))), nil
	}
	return s.KV(ctx, req)
}

// TestKVSaveBesideAnEarlierBuild: a coordinator of this build beside a
// peer of the build before: every kv_save succeeds (a check sending
// what the shard last equalled, a save's id after any kv_save, to a
// peer comparing what it loaded refused the second).
func TestKVSaveBesideAnEarlierBuild(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts := kvPair(t, dirs, false)
	ss[0].send = func(ctx context.Context, part int, req []byte) ([]byte, error) { return oldPeer(ss[1], ctx, req) }
	ctx := context.Background()
	if _, err := ss[0].create(ctx, &ts, true, false); err != nil {
		t.Fatal(err)
	}
	train(t, ss, 1)
	if _, err := ss[0].save(ctx, true); err != nil {
		t.Fatalf("first save: %v", err)
	}
	train(t, ss, 1)
	if _, err := ss[0].save(ctx, true); err != nil {
		t.Fatalf("second save beside a peer of the previous build: %v", err)
	}
}

// killedWholeCluster is a pair of nodes without kv.load that created
// table "w" at run time and trained it, then were killed and restarted
// (the markers' tick ran before): both lost the same training.
func killedWholeCluster(t *testing.T) ([2]*kvServer, control.TableSpec) {
	t.Helper()
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts := kvPair(t, dirs, false)
	if _, err := ss[0].create(context.Background(), &ts, true, false); err != nil {
		t.Fatal(err)
	}
	train(t, ss, 1)
	markAll(ss)
	for p := range ss {
		ss = restartPart(t, ss, dirs, p, false)
	}
	return ss, ts
}

// TestKVRestartWholeClusterRuntimeTable: a table created at run time,
// and the whole cluster killed and restarted: every node lost the same
// training, the kv_create check passes and settles it, and a later
// kv_create while only one shard has changed again is not refused.
func TestKVRestartWholeClusterRuntimeTable(t *testing.T) {
	ss, ts := killedWholeCluster(t)
	ctx := context.Background()
	if _, err := ss[0].create(ctx, &ts, true, false); err != nil {
		t.Fatalf("create after whole-cluster restart: %v", err)
	}
	// rank 0 trains; only part 0's shard has changed yet
	if err := ss[0].store.Push("w", []uint64{0}, []float32{1, 1}); err != nil {
		t.Fatal(err)
	}
	// rank 1's kv_create on node 1
	if _, err := ss[1].create(ctx, &ts, true, false); err != nil {
		t.Errorf("rank 1's kv_create after the whole cluster restarted: %v", err)
	}
	if !served(ss[0]) {
		t.Errorf("table dropped on node 0 under rank 0's training")
	}
}

// TestKVCreateDuringSaveCommit: another rank's kv_create checked
// between the coordinator's commit and its peer's is served: the nodes
// compare what they loaded, which a save does not move.
func TestKVCreateDuringSaveCommit(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts := coordinatedSaveLoad(t, dirs, false)
	train(t, ss, 2)
	ctx := context.Background()
	orig := ss[0].send
	var cerr error
	ran := false
	ss[0].send = func(c context.Context, part int, req []byte) ([]byte, error) {
		var r peerSaveRequest
		if !ran && json.Unmarshal(req, &r) == nil && r.Phase == saveCommit {
			ran = true
			_, cerr = ss[1].create(ctx, &ts, true, false) // another rank's kv_create
		}
		return orig(c, part, req)
	}
	if _, err := ss[0].save(ctx, true); err != nil {
		t.Errorf("kv_save: %v", err)
	}
	if cerr != nil {
		t.Errorf("kv_create during a save's commit: %v", cerr)
	}
	if !served(ss[0]) || !served(ss[1]) {
		t.Errorf("table dropped: %v %v", served(ss[0]), served(ss[1]))
	}
}

// TestKVRestartWholeClusterSyncTable: node train's sync table (created
// at run time, one row) after the whole cluster was killed: a kv_save
// once it trains again succeeds.
func TestKVRestartWholeClusterSyncTable(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, _ := kvPair(t, dirs, false)
	ctx := context.Background()
	ts := control.TableSpec{Name: "sync", Rows: control.Rows{N: 1}, Dim: 256, Optimizer: "average", Mode: "sync"}
	if err := ts.Validate(); err != nil {
		t.Fatal(err)
	}
	step := func(st int) {
		for p := range ss {
			if _, err := ss[p].store.Spec("sync"); err != nil {
				t.Fatal(err)
			}
		}
		sp, _ := ss[0].store.Spec("sync")
		owner := 0
		if lo, hi := sp.Range(1); hi > lo {
			owner = 1
		}
		if err := ss[owner].store.PushSync(ctx, "sync", uint64(st), 0, 1, make([]float32, 256)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ss[0].create(ctx, &ts, true, false); err != nil {
		t.Fatal(err)
	}
	step(0)
	markAll(ss)
	for p := range ss {
		ss = restartPart(t, ss, dirs, p, false)
	}
	if _, err := ss[0].create(ctx, &ts, true, false); err != nil {
		t.Fatalf("create after whole-cluster restart: %v", err)
	}
	step(0)
	if _, err := ss[0].save(ctx, true); err != nil {
		t.Errorf("kv_save after the whole cluster restarted: %v", err)
	}
}

// TestKVCheckFromAnEarlierBuild: a check from a node of an earlier build
// (no check_lost: it runs no check of lost training after it) is
// compared by what each node loaded alone, as that build compared it:
// a save the answering node only wrote is not accepted from it.
func TestKVCheckFromAnEarlierBuild(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, _ := coordinatedSaveLoad(t, dirs, false) // started afresh, saved Y
	ss[0].syncMarkers()
	ctx := context.Background()
	l := ss[1].store // node 1's save key, as an earlier-build node 1 restarted with kv.load would send it
	o, _, _ := l.Origin("w")
	body, _ := json.Marshal(map[string]string{"op": "kv_save", "phase": "check", "save": o.Generation(), "check_table": "w", "check_file": o.Path})
	resp, err := ss[0].KV(ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	if ackError(0, resp) == nil {
		t.Errorf("node 0 (loaded nothing) accepted an earlier-build peer that loaded save %s: the earlier build answered \"different saves\"", o.Generation())
	}
}

// TestKVMarkerFirstFormat: a marker of the first format (one line, the
// key of the save its shard had been trained since) is read as that,
// not refused at start.
func TestKVMarkerFirstFormat(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, markerName("w", 0)), []byte("67dc4320c723c382\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{KV: KVConfig{CheckpointDir: dir, SyncTimeout: "5s"}}
	_, err := newKVServer(cfg, slog.New(slog.DiscardHandler), partition.Book{Bounds: []uint64{0, 5, 10}}, numbering{})
	if err != nil {
		t.Errorf("start after an upgrade from the one-line marker build: %v", err)
	}
}

// TestParseMarker: a marker reads back as written, with or without why
// its node's exit save failed, dropped or not, and those of earlier
// builds (the key alone; the key and "trained" or "held") read as they
// did.
func TestParseMarker(t *testing.T) {
	const key, why = "67dc4320c723c382", "kv: save /c/.w.part1.exit.kvt.tmp-7: no space left on device"
	for _, c := range []struct {
		text string
		want markerState
		ok   bool
	}{
		{key + "\n", markerState{Key: key, Trained: true}, true}, // the first format
		{key + "\nheld\n", markerState{Key: key}, true},
		{"none\ntrained\n", markerState{Key: "none", Trained: true}, true},
		{key + "\ntrained\nexit save failed: " + why + "\n", markerState{Key: key, Trained: true, ExitFailed: why}, true},
		{droppedTag + key + "\ntrained\n", markerState{Key: key, Trained: true, Dropped: true}, true},
		{droppedTag + "none\ntrained\n", markerState{Key: "none", Trained: true, Dropped: true}, true},
		{droppedTag + key + "\nheld\n", markerState{Key: key, Dropped: true}, true},
		{droppedTag + "\ntrained\n", markerState{}, false},
		{droppedTag + key + "\ntrained\nexit save failed: " + why + "\n", markerState{}, false},
		{key + "\ntrained\nkilled\n", markerState{}, false},
		{key + "\ntrained\nexit save failed: \n", markerState{}, false},
		{key + "\ntrained\nexit save failed: " + why + "\nmore\n", markerState{}, false},
		{key + "\ntrained", markerState{}, false},
		{"\ntrained\n", markerState{}, false},
		{"", markerState{}, false},
	} {
		m, ok := parseMarker([]byte(c.text))
		if ok != c.ok || m != c.want {
			t.Errorf("parseMarker(%q) = %+v, %v; want %+v, %v", c.text, m, ok, c.want, c.ok)
		}
		if ok && strings.Count(c.text, "\n") > 1 && m.text() != c.text {
			t.Errorf("parseMarker(%q).text() = %q", c.text, m.text())
		}
	}
}

// TestKVConcurrentCreatesAfterWholeClusterRestart: two ranks' kv_creates
// after a whole-cluster restart. Rank 0's check of node 0's loss has
// read its state and asks node 1; meanwhile rank 1's kv_create settles
// both nodes and rank 1 trains. Rank 0's check, refused by a node that
// changed since, finds the loss settled and does not drop the table
// under rank 1.
func TestKVConcurrentCreatesAfterWholeClusterRestart(t *testing.T) {
	ss, ts := killedWholeCluster(t)
	ctx := context.Background()
	orig := ss[0].send
	fired := false
	ss[0].send = func(c context.Context, part int, req []byte) ([]byte, error) {
		var r peerSaveRequest
		if !fired && json.Unmarshal(req, &r) == nil && r.Phase == saveLost {
			fired = true
			// rank 1's kv_create runs to its end, then rank 1 pushes
			if _, err := ss[1].create(ctx, &ts, true, false); err != nil {
				t.Errorf("rank 1's kv_create: %v", err)
			}
			if err := ss[1].store.Push("w", []uint64{5}, []float32{1, 1}); err != nil {
				t.Errorf("rank 1's push: %v", err)
			}
		}
		return orig(c, part, req)
	}
	_, err := ss[0].create(ctx, &ts, true, false)
	if err != nil {
		t.Errorf("rank 0's kv_create after the whole cluster restarted: %v", err)
	}
	if !served(ss[1]) {
		t.Errorf("table dropped under rank 1's training")
	}
}

// TestKVCoordinatorMarkerAfterForwardedSave: a kv_save asked of node 1
// is coordinated by node 0, whose marker follows at once (not at the
// next tick): node 0 killed in that second, untouched since the save,
// is served on restart beside node 1, which trained since.
func TestKVCoordinatorMarkerAfterForwardedSave(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts := coordinatedSaveLoad(t, dirs, true)
	train(t, ss, 1)
	markAll(ss)
	before := marker(t, dirs, 0)
	ctx := context.Background()
	if _, err := ss[1].save(ctx, true); err != nil { // forwarded to node 0
		t.Fatal(err)
	}
	if after := marker(t, dirs, 0); after == before {
		t.Errorf("node 0's marker %q not rewritten after the save it coordinated for node 1", after)
	}
	if err := ss[1].store.Push("w", []uint64{5}, []float32{1, 1}); err != nil {
		t.Fatal(err)
	}
	ss = restartPart(t, ss, dirs, 0, true) // node 0 killed before its tick
	if _, err := ss[1].create(ctx, &ts, true, false); err != nil {
		t.Errorf("node 0 lost nothing (untouched since the save) and is refused: %v", err)
	}
}

// TestKVSaveRefusedWhileALossIsUnsettled: node 1, killed after training
// since a save and restarted with kv.load, has the table created by a
// peer's kv_create whose checks have not run (its trainer hung up). A
// kv_save then would make the mix one clean-looking save, after which
// the check of lost training passed: node 1 refuses to prepare, and the
// next kv_create is still refused.
func TestKVSaveRefusedWhileALossIsUnsettled(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts, _ := savedAndTrained(t, dirs, 0, 1)
	ss = restartPart(t, ss, dirs, 1, true)
	ctx := context.Background()
	if _, err := ss[1].create(ctx, &ts, false, false); err != nil { // the broadcast's part, no checks
		t.Fatal(err)
	}
	if _, err := ss[0].save(ctx, true); err == nil || !strings.Contains(err.Error(), "nothing saved") {
		t.Fatalf("kv_save with node 1's loss unsettled: %v", err)
	}
	if _, err := ss[0].create(ctx, &ts, true, false); err == nil || !errors.Is(err, errLostTraining) && !strings.Contains(err.Error(), errLostTraining.Error()) {
		t.Fatalf("kv_create after the refused save: %v", err)
	}
}

// TestKVCreateCheckUnreachable: a late rank's kv_create of a table every
// node holds and trains, whose check cannot reach a peer (its trainer
// hangs up, or the mesh fails once): it fails saying the table was not
// checked, and drops nothing (it dropped the table on every node, or on
// this one alone when the drop could not reach the peer either, under a
// message blaming lost training).
func TestKVCreateCheckUnreachable(t *testing.T) {
	for _, hangUp := range []bool{true, false} {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		ss, ts := kvPair(t, dirs, false)
		if _, err := ss[0].create(context.Background(), &ts, true, false); err != nil {
			t.Fatal(err)
		}
		train(t, ss, 1)
		markAll(ss)
		ctx, cancel := context.WithCancel(context.Background())
		orig := ss[0].send
		ss[0].send = func(c context.Context, part int, req []byte) ([]byte, error) {
			var r peerSaveRequest
			if json.Unmarshal(req, &r) == nil && r.Phase == saveLostVerify {
				if !hangUp {
					return nil, errors.New("mesh: part 1: connection reset")
				}
				cancel()
			}
			if c.Err() != nil {
				return nil, c.Err()
			}
			return orig(c, part, req)
		}
		_, err := ss[0].create(ctx, &ts, true, false)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "not checked") || strings.Contains(err.Error(), errLostTraining.Error()) {
			t.Errorf("hang-up %v: kv_create %v, want it not checked", hangUp, err)
		}
		if !served(ss[0]) || !served(ss[1]) {
			t.Errorf("hang-up %v: served %v %v, want the table kept on both nodes", hangUp, served(ss[0]), served(ss[1]))
		}
	}
}

// TestKVLostAfterAnExitSave: node 1 stopped on its own (SIGTERM: its
// exit save) and restarted without kv.load lost what it held, though it
// was killed before no save: the refusal says what it held.
func TestKVLostAfterAnExitSave(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts := coordinatedSaveLoad(t, dirs, false)
	train(t, ss, 1)
	if _, err := ss[1].save(context.Background(), false); err != nil { // SIGTERM
		t.Fatal(err)
	}
	ss = restartPart(t, ss, dirs, 1, false)
	if err := ss[0].store.Push("w", []uint64{0}, []float32{1, 1}); err != nil {
		t.Fatal(err)
	}
	_, err := ss[0].create(context.Background(), &ts, true, false)
	for _, want := range []string{
		"lost what it held when its node last stopped (save exit after ",
		// node 0's answer to node 1's check, which used to say of node 1
		// that it lost "the rows trained since … (killed before a save)"
		"the node that asked holds its initial rows (no checkpoint loaded or saved since its node started), and lost what it held when its node last stopped (save exit after ",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("kv_create: %v, want %q", err, want)
		}
	}
}

// TestKVLostAfterAFailedExitSave: node 1 trained since the last kv_save,
// and its exit save failed when it stopped (a directory where its save
// journal goes stands here for a full disk: the save fails before it is
// committed, and the last save stays in place). Restarted with kv.load,
// it loads its part of that save beside node 0, which trained since: the
// table is refused, as before, but the refusal, whichever node the
// trainer asked, said node 1 was "killed before a save". Its marker now
// records why the exit save failed, and the refusal says that.
func TestKVLostAfterAFailedExitSave(t *testing.T) {
	for asked := range 2 {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		ss, ts := coordinatedSaveLoad(t, dirs, true)
		train(t, ss, 1)
		markAll(ss)
		obstacle := filepath.Join(dirs[1], kv.JournalName(1)+".tmp")
		if err := os.MkdirAll(filepath.Join(obstacle, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_, exitErr := ss[1].save(ctx, false) // SIGTERM
		if exitErr == nil {
			t.Fatal("exit save with its journal's path taken: no error")
		}
		if m := marker(t, dirs, 1); !strings.HasSuffix(m, "\ntrained\nexit save failed: "+exitErr.Error()+"\n") {
			t.Fatalf("node 1's marker after its exit save failed: %q, want it trained and why the exit save failed (%v)", m, exitErr)
		}
		if err := os.RemoveAll(obstacle); err != nil { // room again
			t.Fatal(err)
		}
		ss = restartPart(t, ss, dirs, 1, true)
		_, err := ss[asked].create(ctx, &ts, true, false)
		const failed = "lost the rows trained since when its node last stopped (its exit save failed: "
		if err == nil || !strings.Contains(err.Error(), errLostTraining.Error()) ||
			!strings.Contains(err.Error(), "part 1 loaded "+filepath.Join(dirs[1], kv.FileName("w", 1))+", of save ") ||
			strings.Count(err.Error(), failed+exitErr.Error()+")") != 2 || strings.Contains(err.Error(), "(killed before a save)") {
			t.Fatalf("kv_create through node %d after node 1's exit save failed: %v\nwant node 1 (and the node that asked, in node 0's answer) said to have %s%v)",
				asked, err, failed, exitErr)
		}
		for p := range ss {
			if served(ss[p]) {
				t.Errorf("asked %d: part %d serves the refused table", asked, p)
			}
		}
	}
}
