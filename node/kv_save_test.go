package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"graphnode/kv"
	"graphnode/node/control"
	"graphnode/partition"
)

// savePeer stands in for part 1 of two in a kv_save's broadcasts: it
// records each phase and fails the one named by fail.
type savePeer struct {
	fail   string
	mu     sync.Mutex
	phases []string
}

func (p *savePeer) send(ctx context.Context, part int, req []byte) ([]byte, error) {
	var r peerSaveRequest
	if err := json.Unmarshal(req, &r); err != nil || part != 1 || r.Save == "" {
		return nil, fmt.Errorf("stub: part %d: %s: %v", part, req, err)
	}
	p.mu.Lock()
	p.phases = append(p.phases, r.Phase)
	p.mu.Unlock()
	if r.Phase == p.fail {
		return nil, errors.New("no space left on device")
	}
	return kv.AppendAck(nil, &kv.Ack{}), nil
}

// savingKVServer is part 0 of two with table "w" and a checkpoint dir,
// its broadcasts going to a savePeer, and the checkpoint files of a
// first save.
func savingKVServer(t *testing.T, fail string) (*kvServer, *savePeer, string, map[string]string) {
	t.Helper()
	s, _, ts := twoPartKVServer(t)
	peer := &savePeer{fail: "none"}
	s.send = peer.send
	dir := t.TempDir()
	s.cfg.KV.CheckpointDir = dir
	if _, err := s.create(context.Background(), &ts, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.save(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if err := s.store.Push("w", []uint64{1}, []float32{1, 1}); err != nil {
		t.Fatal(err)
	}
	peer.phases, peer.fail = nil, fail
	return s, peer, dir, readDir(t, dir)
}

// readDir is the files in dir and their contents. A file removed between
// the listing and its read (a prepared save's temporary, dropped when its
// hold ends) is not there.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

// TestKVSaveAllOrNone: when a peer cannot prepare its save (a full
// disk), the node a trainer asked keeps its previous checkpoint byte for
// byte and tells the peers to abort; when every peer prepares, it
// commits its own and then theirs.
func TestKVSaveAllOrNone(t *testing.T) {
	s, peer, dir, before := savingKVServer(t, savePrepare)
	_, err := s.save(context.Background(), true)
	if err == nil || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "no node's checkpoint changed") {
		t.Fatalf("save with a peer that cannot prepare: %v", err)
	}
	if after := readDir(t, dir); !maps.Equal(after, before) {
		t.Errorf("this node's checkpoint changed though a peer failed: %v, was %v", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
	}
	if want := []string{savePrepare, saveAbort}; !slices.Equal(peer.phases, want) {
		t.Errorf("phases sent %v, want %v", peer.phases, want)
	}

	// This node's own disk failing: the same outcome, said the same way.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	peer.phases = nil
	s.cfg.KV.CheckpointDir = file
	_, err = s.save(context.Background(), true)
	s.cfg.KV.CheckpointDir = dir
	if err == nil || !strings.Contains(err.Error(), "no node's checkpoint changed") {
		t.Fatalf("save failing on this node: %v", err)
	}
	if len(peer.phases) != 0 {
		t.Errorf("phases sent %v, want none", peer.phases)
	}

	peer.phases, peer.fail = nil, "none"
	if _, err := s.save(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if after := readDir(t, dir); maps.Equal(after, before) {
		t.Error("a save every node prepared left the checkpoint as it was")
	}
	if want := []string{savePrepare, saveCommit}; !slices.Equal(peer.phases, want) {
		t.Errorf("phases sent %v, want %v", peer.phases, want)
	}
}

// TestKVSaveJournalUnwritten: when this node cannot write the journal
// that commits its save (a disk full at that step), no node's
// checkpoint changed, and the error says so: it said only that the other
// nodes keep theirs, as if this node held the new one.
func TestKVSaveJournalUnwritten(t *testing.T) {
	s, peer, dir, before := savingKVServer(t, "none")
	// Once this node has prepared (which removes a stale journal
	// temporary), a directory where the journal's temporary goes: the
	// journal cannot be created.
	trap := filepath.Join(dir, kv.JournalName(0)+".tmp")
	send := s.send
	s.send = func(ctx context.Context, part int, req []byte) ([]byte, error) {
		if err := os.Mkdir(trap, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		return send(ctx, part, req)
	}
	_, err := s.save(context.Background(), true)
	if err == nil || !kv.Uncommitted(err) || !strings.Contains(err.Error(), "no node's checkpoint changed: each keeps its previous one") {
		t.Fatalf("save whose journal cannot be written: %v", err)
	}
	if err := os.Remove(trap); err != nil {
		t.Fatal(err)
	}
	if after := readDir(t, dir); !maps.Equal(after, before) {
		t.Errorf("this node's checkpoint changed though its save did not commit: %v, was %v", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
	}
	if want := []string{savePrepare, saveAbort}; !slices.Equal(peer.phases, want) {
		t.Errorf("phases sent %v, want %v", peer.phases, want)
	}
}

// TestKVSavePeerPhases: on a peer, a prepared save is in place only once
// committed; an aborted one, or one whose commit never comes within the
// hold, leaves the previous checkpoint, and a commit then fails saying
// nothing is prepared. A node stopping drops what it holds.
func TestKVSavePeerPhases(t *testing.T) {
	s, _, dir, before := savingKVServer(t, "none")
	ctx := context.Background()
	phase := func(p, id string) error {
		b, _ := json.Marshal(peerSaveRequest{Op: "kv_save", Phase: p, Save: id})
		_, err := s.peerSave(ctx, b)
		return err
	}
	if err := phase(savePrepare, "a"); err != nil {
		t.Fatal(err)
	}
	if err := phase(saveAbort, "a"); err != nil {
		t.Fatal(err)
	}
	if after := readDir(t, dir); !maps.Equal(after, before) {
		t.Fatalf("aborted save changed the checkpoint: %v", slices.Sorted(maps.Keys(after)))
	}
	if err := phase(saveCommit, "a"); err == nil || !strings.Contains(err.Error(), "nothing prepared on this node to commit") {
		t.Fatalf("commit after abort: %v", err)
	}

	if err := phase(savePrepare, "b"); err != nil {
		t.Fatal(err)
	}
	if err := phase(saveCommit, "b"); err != nil {
		t.Fatal(err)
	}
	committed := readDir(t, dir)
	if maps.Equal(committed, before) {
		t.Fatal("committed save left the checkpoint as it was")
	}

	s.prepareHold = 20 * time.Millisecond
	if err := s.store.Push("w", []uint64{1}, []float32{1, 1}); err != nil {
		t.Fatal(err)
	}
	if err := phase(savePrepare, "c"); err != nil {
		t.Fatal(err)
	}
	// The prepared save's temporary file goes when the hold drops it.
	for deadline := time.Now().Add(10 * time.Second); len(readDir(t, dir)) != len(committed) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if err := phase(saveCommit, "c"); err == nil || !strings.Contains(err.Error(), "nothing prepared") {
		t.Fatalf("commit after the hold: %v", err)
	}
	if after := readDir(t, dir); !maps.Equal(after, committed) {
		t.Fatal("a save dropped after its hold changed the checkpoint")
	}

	s.prepareHold = time.Hour
	if err := phase(savePrepare, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.save(ctx, false); err != nil { // the node stopping: it must not wait an hour
		t.Fatal(err)
	}
	if err := phase(saveCommit, "d"); err == nil {
		t.Fatal("commit of a save dropped by the node stopping succeeded")
	}
}

// TestKVSaveOneStepFromAPeer: a kv_save without phase (a node of an
// earlier build asking) saves at once and leaves the saves other peers
// prepared here alone.
func TestKVSaveOneStepFromAPeer(t *testing.T) {
	s, _, dir, before := savingKVServer(t, "none")
	ctx := context.Background()
	b, _ := json.Marshal(peerSaveRequest{Op: "kv_save", Phase: savePrepare, Save: "x"})
	if _, err := s.peerSave(ctx, b); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.peerSave(ctx, []byte(`{"op":"kv_save"}`))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("one-step save ran while another was prepared: %v", err)
	case <-time.After(50 * time.Millisecond): // it waits for the prepared one
	}
	b, _ = json.Marshal(peerSaveRequest{Op: "kv_save", Phase: saveCommit, Save: "x"})
	if _, err := s.peerSave(ctx, b); err != nil {
		t.Fatalf("commit of the prepared save: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("one-step save: %v", err)
	}
	if maps.Equal(readDir(t, dir), before) {
		t.Fatal("no save changed the checkpoint")
	}
}

// TestKVSaveCommitsAfterTheTrainerLeft: a trainer that hangs up once
// every node prepared its save (its kv_save's context ends) still gets
// the save committed everywhere. The commit to the peers went out with
// the ended context and failed at once, after this node had committed:
// the peers dropped their prepared save and kept their previous
// checkpoint, this node its new one, which a later load would mix.
func TestKVSaveCommitsAfterTheTrainerLeft(t *testing.T) {
	s, peer, dir, before := savingKVServer(t, "none")
	ctx, hangUp := context.WithCancel(context.Background())
	s.send = func(ctx context.Context, part int, req []byte) ([]byte, error) {
		if err := ctx.Err(); err != nil { // as a mesh call with an ended context
			return nil, err
		}
		resp, err := peer.send(ctx, part, req)
		var r peerSaveRequest
		if json.Unmarshal(req, &r) == nil && r.Phase == savePrepare {
			hangUp() // once the peer has prepared
		}
		return resp, err
	}
	if _, err := s.save(ctx, true); err != nil {
		t.Fatal(err)
	}
	if want := []string{savePrepare, saveCommit}; !slices.Equal(peer.phases, want) {
		t.Errorf("phases sent %v, want %v", peer.phases, want)
	}
	if after := readDir(t, dir); maps.Equal(after, before) {
		t.Error("this node's checkpoint is as it was: the save was not committed here")
	}
}

// TestKVSavePrepareSupersedes: a coordinator that died after its peers
// prepared a save, and came back, gets its next save prepared at once:
// the prepare of a new save drops the one held for the dead save instead
// of waiting for its hold, and a late commit of the dropped one fails.
// A prepare from a node of an earlier build, where every node
// coordinated, drops nothing: the save held may be another's, still
// running.
func TestKVSavePrepareSupersedes(t *testing.T) {
	s, _, dir, before := savingKVServer(t, "none")
	phase := func(ctx context.Context, p, id string) error {
		b, _ := json.Marshal(peerSaveRequest{Op: "kv_save", Phase: p, Save: id, Coordinated: true})
		_, err := s.peerSave(ctx, b)
		return err
	}
	if err := phase(context.Background(), savePrepare, "dead"); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	old, _ := json.Marshal(peerSaveRequest{Op: "kv_save", Phase: savePrepare, Save: "old-build"})
	if _, err := s.peerSave(short, old); err == nil || !strings.Contains(err.Error(), "waiting for another save") {
		t.Fatalf("prepare from an earlier build while a save is held: %v, want it to wait for that save", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := phase(ctx, savePrepare, "next"); err != nil {
		t.Fatalf("prepare of the next save while the dead one is held: %v", err)
	}
	if after := readDir(t, dir); len(after) != len(before)+1 {
		t.Errorf("%d files after the second prepare, want the checkpoint's %d and one temporary file", len(after), len(before))
	}
	if err := phase(context.Background(), saveCommit, "dead"); err == nil || !strings.Contains(err.Error(), "nothing prepared") {
		t.Fatalf("commit of the superseded save: %v", err)
	}
	if err := phase(context.Background(), saveCommit, "next"); err != nil {
		t.Fatal(err)
	}
	if after := readDir(t, dir); maps.Equal(after, before) || len(after) != len(before) {
		t.Errorf("after the commit: %d files (changed: %v), want the %d of the new checkpoint", len(after), !maps.Equal(after, before), len(before))
	}
}

// TestKVExitSaveOfNoTables: a node that holds no kv table when it stops
// (here its one table was dropped) writes no exit save and says there
// was nothing to save. It logged "kv exit save written" of a save that
// followed save "legacy", which no file of this node was.
func TestKVExitSaveOfNoTables(t *testing.T) {
	dir := t.TempDir()
	var logged bytes.Buffer
	cfg := &Config{KV: KVConfig{CheckpointDir: dir, SyncTimeout: "5s"}}
	s, err := newKVServer(cfg, slog.New(slog.NewTextHandler(&logged, nil)), partition.Book{Bounds: []uint64{0, 10}}, numbering{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ts := control.TableSpec{Name: "w", Rows: control.Rows{N: 4}, Dim: 2, Optimizer: "sgd", LR: 1, Mode: "async"}
	if err := ts.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.create(ctx, &ts, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.drop(ctx, "w", false); err != nil {
		t.Fatal(err)
	}
	logged.Reset()
	info, err := s.save(ctx, false) // the node stops
	if err != nil || info == nil || info.Dir != dir || info.Tables == nil || len(info.Tables) != 0 {
		t.Fatalf("exit save of no tables: %+v, %v; want dir %s and tables []", info, err, dir)
	}
	log := logged.String()
	if !strings.Contains(log, `msg="kv exit save: nothing to save, this node holds no kv table" dir=`+dir) ||
		strings.Contains(log, "exit save written") || strings.Contains(log, "after=") {
		t.Errorf("exit save of no tables logged:\n%s\nwant only that there was nothing to save", log)
	}
	if files := readDir(t, dir); len(files) != 0 {
		t.Errorf("exit save of no tables left files %v", slices.Sorted(maps.Keys(files)))
	}
}
