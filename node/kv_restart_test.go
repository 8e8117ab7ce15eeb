package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"graphnode/kv"
	"graphnode/node/control"
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
	if _, err := ss[0].create(ctx, &ts, true); err != nil {
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

// TestKVRestartWholeClusterRuntimeTable: a table created at run time,
// and the whole cluster killed and restarted: every node lost the same
// training, the kv_create check passes and settles it, and a later
// kv_create while only one shard has changed again is not refused.
func TestKVRestartWholeClusterRuntimeTable(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	ss, ts := kvPair(t, dirs, false)
	ctx := context.Background()
	if _, err := ss[0].create(ctx, &ts, true); err != nil {
		t.Fatal(err)
	}
	train(t, ss, 1)
	markAll(ss)
	for p := range ss { // whole cluster killed
		ss = restartPart(t, ss, dirs, p, false)
	}
	if _, err := ss[0].create(ctx, &ts, true); err != nil {
		t.Fatalf("create after whole-cluster restart: %v", err)
	}
	// rank 0 trains; only part 0's shard has changed yet
	if err := ss[0].store.Push("w", []uint64{0}, []float32{1, 1}); err != nil {
		t.Fatal(err)
	}
	// rank 1's kv_create on node 1
	if _, err := ss[1].create(ctx, &ts, true); err != nil {
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
			_, cerr = ss[1].create(ctx, &ts, true) // another rank's kv_create
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
	if _, err := ss[0].create(ctx, &ts, true); err != nil {
		t.Fatal(err)
	}
	step(0)
	markAll(ss)
	for p := range ss {
		ss = restartPart(t, ss, dirs, p, false)
	}
	if _, err := ss[0].create(ctx, &ts, true); err != nil {
		t.Fatalf("create after whole-cluster restart: %v", err)
	}
	step(0)
	if _, err := ss[0].save(ctx, true); err != nil {
		t.Errorf("kv_save after the whole cluster restarted: %v", err)
	}
}
