package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"graphnode/kv"
	"graphnode/node/control"
)

// A trainer's kv_save changes the checkpoint of every node or of none.
// The node it asked (the coordinator) prepares its own save
// (kv.Store.PrepareSave: every table written to a temporary file and
// fsynced, which is where a full disk fails) and asks every peer to
// prepare theirs; only when all have, each of the tables it holds
// (kv_save_tables.go), does it commit its own and ask them to commit.
// When one fails it aborts its own and asks the others to abort, and
// every node keeps its previous checkpoint: a cluster's
// checkpoint is never some parts of one save and some of the previous
// one, which a later load would mix. What can still split it is a commit
// that fails after others succeeded (a rename or directory fsync
// failing, the coordinator dying between commits); the error then names
// the parts left behind.
//
// A peer that prepared and hears neither commit nor abort within
// savePrepareHold aborts on its own (its coordinator died), and so does
// one asked to prepare the next save (its coordinator died and came
// back); one that is stopping aborts what it holds before its own
// shutdown checkpoint.
//
// One node coordinates every save: the node of part saveCoordinator. A
// trainer's kv_save on another node (or on a client node) is forwarded
// to it (phase "coordinate"), and it runs one save at a time. Two nodes
// coordinating at once would each hold their own shards' save while
// asking the other to prepare, and both would fail after
// savePrepareWait: every rank of a job asking for kv_save as it ends
// (node train --save on every host) did exactly that.

const (
	// savePrepareHold bounds how long a peer keeps a save it prepared
	// for a coordinator that does not come back (its other saves and
	// loads wait meanwhile).
	savePrepareHold = 2 * time.Minute
	// savePrepareWait bounds how long a peer's prepare waits for a save
	// or load of its own under way: two coordinators preparing at once
	// would otherwise wait on each other.
	savePrepareWait = 30 * time.Second
	// saveAbortTimeout bounds the abort sent to the peers after a failed
	// prepare, even when the trainer's request has ended.
	saveAbortTimeout = 10 * time.Second
	// saveCommitTimeout bounds the commit sent to the peers once this
	// node committed, even when the trainer's request has ended: a
	// trainer that hangs up then must not leave the peers to drop their
	// prepared save while this node keeps its new one.
	saveCommitTimeout = 30 * time.Second
)

// Phases of a forwarded kv_save.
const (
	savePrepare    = "prepare"
	saveCommit     = "commit"
	saveAbort      = "abort"
	saveCoordinate = "coordinate"  // to the coordinator: run a save for the sender
	saveCheck      = "check"       // does the peer hold table Table of save Save? (kv_save_check.go)
	saveVerify     = "verify"      // from a client node: check table Table on every node (kv_save_check.go)
	saveLost       = "lost"        // is the peer's shard of Table at Save, unchanged? (kv_trained.go)
	saveLostVerify = "lost_verify" // run your check of Table if your shard lost its training (kv_trained.go)
	saveSpec       = "spec"        // does the peer hold Spec's table with another spec? (kv_create.go)
)

// saveCoordinator is the part whose node coordinates every save.
const saveCoordinator = 0

// peerSaveRequest is a kv_save forwarded to a peer. Phase "" (a node of
// an earlier build) saves at once, in one step.
type peerSaveRequest struct {
	Op    string `json:"op"`
	Phase string `json:"phase,omitempty"`
	Save  string `json:"save,omitempty"` // id of the save the phase belongs to
	// Coordinated marks the phases of the node of part saveCoordinator,
	// which runs one save at a time; an earlier build had every node
	// coordinate its own saves and sends none.
	Coordinated bool `json:"coordinated,omitempty"`
	// ListTables asks a prepare to answer the tables it prepared, and a
	// coordinate the tables every node saved (a saveAnswer,
	// kv_save_tables.go); an earlier build sends none and reads an Ack.
	ListTables bool `json:"list_tables,omitempty"`
	// Table and File are a check's (phase "check"): the table and what
	// the sender loaded it from (Save is that save's key, loadedKey); of
	// phase "lost", the table and the file of the save the sender's shard
	// went back to (Save is its key, originKey).
	Table string `json:"check_table,omitempty"` // not "table": node-level requests share control.Request's keys
	File  string `json:"check_file,omitempty"`
	// Known is a check's saves the sender's shard held since it loaded
	// (saves committed since, the last maxKnownSaves), and CheckLost
	// says that the sender runs phase "lost" after the check: a receiver
	// accepts a save either held only then (an earlier build sends
	// neither, and is compared by what it loaded alone).
	Known     []string `json:"check_known,omitempty"`
	CheckLost bool     `json:"check_lost,omitempty"`
	// Loaded, PrevKey and PrevTrained describe a phase "lost" sender's
	// shard: whether its origin is a file it loaded, and what its
	// marker said it held when its node last stopped.
	Loaded      bool   `json:"check_loaded,omitempty"`
	PrevKey     string `json:"check_prev,omitempty"`
	PrevTrained bool   `json:"check_prev_trained,omitempty"`
	// PrevExitFailed is why the sender's exit save failed when its node
	// last stopped (markerState.ExitFailed); an earlier build sends none.
	PrevExitFailed string `json:"check_prev_exit_failed,omitempty"`
	// PrevDropped says that a kv_drop removed what the marker says
	// (markerState.Dropped); an earlier build sends none.
	PrevDropped bool `json:"check_prev_dropped,omitempty"`
	// Compared marks a commit of a save whose tables every peer listed
	// and the coordinator found alike: the dropped markers of tables no
	// node holds are moot (settleDropped). An earlier build sends none.
	Compared bool `json:"compared,omitempty"`
	// Spec is phase "spec"'s: a table of the sender's [[kv.tables]].
	Spec *control.TableSpec `json:"check_spec,omitempty"`
}

// preparedSave is a save a peer prepared on this node.
type preparedSave struct {
	p           *kv.PreparedSave
	timer       *time.Timer
	coordinated bool // peerSaveRequest.Coordinated
}

// save checkpoints the kv shards. Without forward (a node stopping) it
// saves this node's at once, after dropping the saves peers prepared on
// it, as an exit save: beside this node's part of the last coordinated
// save, not over it (kv.Store.SaveExit), for the other nodes keep
// theirs of that save; when it fails, the markers say why
// (markExitFailed). With forward (a trainer's kv_save) it saves every node's, all or
// none (see above), and answers the tables every node saved; on a client
// node, which holds no shard, every sampling node's (Dir is then "").
func (s *kvServer) save(ctx context.Context, forward bool) (*control.SaveInfo, error) {
	if !forward {
		s.abortPrepared("this node is stopping", nil)
		info, err := s.saveExit()
		if err != nil {
			s.markExitFailed(err)
		}
		return info, err
	}
	dir := ""
	if s.store != nil {
		var err error
		if dir, err = s.checkpointDir(); err != nil {
			return nil, err
		}
	}
	var saved []preparedTable
	var err error
	if s.part == saveCoordinator {
		saved, err = s.coordinate(ctx)
	} else {
		saved, err = s.forwardSave(ctx)
	}
	if err != nil {
		return nil, err
	}
	return &control.SaveInfo{Dir: dir, Tables: tableNames(saved)}, nil
}

// forwardSave asks the coordinator to save every node's shards, waits
// for it, and returns the tables every node saved. A coordinator of an
// earlier build does not say which: this node's tables are returned,
// as that build did.
func (s *kvServer) forwardSave(ctx context.Context) ([]preparedTable, error) {
	body, err := json.Marshal(peerSaveRequest{Op: control.OpKVSave, Phase: saveCoordinate, ListTables: true})
	if err != nil {
		return nil, err
	}
	resp, err := s.send(ctx, saveCoordinator, body)
	var a saveAnswer
	listed := false
	if err == nil {
		a, listed, err = saveAnswerOf(saveCoordinator, resp)
	}
	if err != nil {
		return nil, fmt.Errorf("save through the node of part %d, which coordinates saves: %w", saveCoordinator, err)
	}
	if listed {
		return a.Tables, nil
	}
	s.log.Warn("kv save: the node that coordinates saves, of an earlier build, does not say which tables it saved: this node's are answered", "part", saveCoordinator)
	return s.heldTables(), nil
}

// coordinate saves every node's shards, all or none, one save at a time,
// and returns the tables every node saved. A node that holds other
// tables than this one fails it before any commit (kv_save_tables.go).
func (s *kvServer) coordinate(ctx context.Context) ([]preparedTable, error) {
	select {
	case s.saving <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another kv_save to end: %w", context.Cause(ctx))
	}
	defer func() { <-s.saving }()
	dir, err := s.checkpointDir()
	if err != nil {
		return nil, err
	}
	if err := s.checkBeforeSave(ctx); err != nil {
		return nil, err
	}
	if err := s.unsettledLoss(); err != nil {
		return nil, err
	}
	id := kv.NewSaveID().String()
	local, err := s.store.PrepareSave(ctx, dir, kv.ParseSaveID(id))
	if err != nil {
		return nil, fmt.Errorf("%w (no node's checkpoint changed: each keeps its previous one)", err)
	}
	saved := preparedTables(local.Specs())
	nodes, err := s.preparePeers(ctx, id)
	compared := err == nil && len(nodes) == len(s.peers()) // every peer listed its tables
	if err == nil {
		marked, dropped := s.markedTables(local.Specs())
		err = compareSaveTables(append(nodes, partTables{s.part, saved, marked, dropped}))
		if err != nil && !slices.Equal(slices.Sorted(slices.Values(tableNames(saved))), slices.Sorted(slices.Values(s.store.Tables()))) {
			// A kv_create or kv_drop ran between this node's prepare and
			// its peers': the sets differ for that, not for a lost
			// shard, and the advice for one would mislead.
			err = fmt.Errorf("a kv_create or kv_drop ran during the save, so the nodes prepared different tables: run kv_save again; what differed: %w", err)
		}
	}
	if err != nil {
		local.Abort()
		s.abortPeers(ctx, id)
		if errors.Is(err, errSaveTables) {
			return nil, err
		}
		return nil, fmt.Errorf("save on the other nodes: %w (no node's checkpoint changed: each keeps its previous one)", err)
	}
	if err := local.Commit(); err != nil {
		s.abortPeers(ctx, id)
		if kv.Uncommitted(err) {
			// Its journal could not be written (a disk full at that
			// step): this node's checkpoint is its previous one too.
			return nil, fmt.Errorf("%w (no node's checkpoint changed: each keeps its previous one)", err)
		}
		return nil, fmt.Errorf("%w (the other nodes keep their previous checkpoint)", err)
	}
	s.syncMarkers() // the commit moved the shards' origins: the markers follow at once
	if compared {
		s.settleDropped(saved)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveCommitTimeout)
	defer cancel()
	if err := s.sendSave(cctx, saveCommit, id, compared); err != nil {
		return nil, fmt.Errorf("commit on the other nodes: %w (the parts not named hold the new checkpoint, those named their previous one: run kv_save again before loading it)", err)
	}
	return saved, nil
}

// saveLocal saves this node's shards at once, in one step.
func (s *kvServer) saveLocal() (*control.SaveInfo, error) {
	dir, err := s.checkpointDir()
	if err != nil {
		return nil, err
	}
	if err := s.store.Save(dir); err != nil {
		return nil, err
	}
	s.syncMarkers() // as after coordinate's commit
	return &control.SaveInfo{Dir: dir, Tables: s.store.Tables()}, nil
}

// saveExit writes this node's exit save (a node stopping). A node that
// holds no table writes none, and says so: there is nothing to save, and
// an exit save of no table, which follows no coordinated save, was
// logged as one written after save "legacy".
func (s *kvServer) saveExit() (*control.SaveInfo, error) {
	dir, err := s.checkpointDir()
	if err != nil {
		return nil, err
	}
	if len(s.store.Tables()) == 0 {
		s.log.Info("kv exit save: nothing to save, this node holds no kv table", "dir", dir)
		return &control.SaveInfo{Dir: dir, Tables: []string{}}, nil
	}
	kept := s.store.KeptFiles()
	if len(kept) > 0 {
		s.log.Warn("kv exit save: tables created over a checkpoint of another size are left out until a kv_save writes them: their files stay what a restart with load finds, and their rows since are lost",
			"dir", dir, "tables", kept)
	}
	info, err := s.store.SaveExit(dir)
	if err != nil {
		return nil, err
	}
	s.syncMarkers() // as after coordinate's commit
	tables := slices.DeleteFunc(s.store.Tables(), func(name string) bool { return slices.Contains(kept, name) })
	after := info.Base.String()
	if info.Base == 0 {
		// Not "legacy" alone: most often no kv_save has been made.
		after = "none (no kv_save yet, or one of a build before save ids)"
	}
	s.log.Info("kv exit save written; this node's files of the last kv_save, if any, stay beside it",
		"dir", dir, "save", info.ID.String(), "after", after, "files", "<table>.part"+strconv.Itoa(s.part)+".exit.kvt", "tables", len(tables))
	return &control.SaveInfo{Dir: dir, Tables: tables}, nil
}

// checkpointDir is [kv] checkpoint_dir, or an error without one.
func (s *kvServer) checkpointDir() (string, error) {
	if s.cfg.KV.CheckpointDir == "" {
		return "", errors.New("kv.checkpoint_dir is not set on this node")
	}
	return s.cfg.KV.CheckpointDir, nil
}

// sendSave sends phase of save id to every peer (compared: see
// peerSaveRequest.Compared).
func (s *kvServer) sendSave(ctx context.Context, phase, id string, compared bool) error {
	body, err := json.Marshal(peerSaveRequest{Op: control.OpKVSave, Phase: phase, Save: id, Coordinated: true, Compared: compared})
	if err != nil {
		return err
	}
	return s.broadcastBody(ctx, body)
}

// abortPeers asks every peer to abort save id, within saveAbortTimeout
// even when ctx has ended; a peer that does not hear it aborts after
// savePrepareHold.
func (s *kvServer) abortPeers(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveAbortTimeout)
	defer cancel()
	if err := s.sendSave(ctx, saveAbort, id, false); err != nil {
		s.log.Warn("kv save: abort not delivered; those peers drop their prepared save on their own", "save", id, "hold", savePrepareHold, "err", err)
	}
}
