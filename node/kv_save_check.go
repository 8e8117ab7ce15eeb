package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"graphnode/kv"
)

// With kv.load, a table's shards must come back from one save on every
// node: node 0's rows of one save beside node 1's of another are a model
// no training produced. Each node picks its file (kv.Store.Load: its exit
// save when newer than its part of the last coordinated save, that part
// otherwise); the exit saves of every node, after one coordinated save,
// are the cluster's shutdown checkpoint and agree. Nor may a node that
// lost its training since a save (killed, then restarted) serve that
// save, or its initial rows, beside peers that kept theirs
// (kv_trained.go). A trainer's kv_create of a table (with kv.load or a
// checkpoint directory), a kv_save, and a node's start (for the tables
// it loaded or whose training it lost) then ask every peer whether its
// shard is of the same point of training: the same origin (kv.Origin:
// the save its rows last equalled, or its initial rows), and not one
// changed since while the other lost what it trained since (phase
// "check" of a peer kv_save, carrying the asker's shardState). A peer
// whose shard differs answers an error naming both files and saves, and
// the table is dropped on every node: it is refused, not served mixed. A
// peer of an earlier build answers that it does not know the phase; it
// cannot tell, and the check passes with a warning.

// describeShard says, in an error, what who's shard holds (st).
func describeShard(who string, st shardState) string {
	var d string
	switch {
	case st.Key == "none":
		d = who + " holds its initial rows (no checkpoint loaded or saved since its node started)"
	case st.Key == "legacy":
		d = fmt.Sprintf("%s loaded %s, of the legacy save (written before save ids)", who, st.File)
	case strings.HasPrefix(st.Key, "exit after ") && st.Loaded:
		d = fmt.Sprintf("%s loaded %s, its exit save (%s)", who, st.File, st.Key)
	case strings.HasPrefix(st.Key, "exit after "):
		d = fmt.Sprintf("%s wrote %s, its exit save (%s)", who, st.File, st.Key)
	case st.Loaded:
		d = fmt.Sprintf("%s loaded %s, of save %s", who, st.File, st.Key)
	default:
		d = fmt.Sprintf("%s holds save %s (its file %s)", who, st.Key, st.File)
	}
	switch {
	case st.Changed:
		d += ", and trained its rows since"
	case st.Lost:
		d += ", and lost the rows trained since when its node last stopped (killed before a save)"
	}
	return d
}

// checkSaves asks every peer whether its shard of table is of the point
// of training this node's is (see checkShard); on a mismatch the error
// names each node's file and save and what to do. checked is false when
// a peer of an earlier build could not tell.
func (s *kvServer) checkSaves(ctx context.Context, table string) (checked bool, err error) {
	me := s.shardState(table)
	body, err := json.Marshal(peerSaveRequest{Op: "kv_save", Phase: saveCheck, Save: me.Key, Table: table, File: me.File,
		Loaded: me.Loaded, Changed: me.Changed, Lost: me.Lost})
	if err != nil {
		return false, err
	}
	checked = true
	var errs []error
	for _, p := range s.peers() {
		err := s.sendAck(ctx, p, body)
		if unknownPhase(err, saveCheck) {
			s.log.Warn("kv: a peer of an earlier build cannot tell which save its shard was loaded from: not checked", "part", p, "table", table)
			checked = false
			continue
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if me.Key == "legacy" {
			s.log.Info("kv: table loaded from checkpoint files written before save ids: every node's are taken as one legacy save", "table", table, "path", me.File)
		}
		return checked, nil
	}
	return false, fmt.Errorf("table %q: the nodes' shards are of different saves, or of a save and of training since it, which served together would mix rows no training produced: %s; %v: %w",
		table, describeShard(fmt.Sprintf("part %d", s.part), me), errors.Join(errs...), kv.ErrMixedSaves)
}

// mixedLoadFix says how to load one save on every node, after an error
// of checkSaves.
const mixedLoadFix = "move aside the exit saves (<table>.part<K>.exit.kvt, written by a node stopping on its own) on the nodes that loaded one, " +
	"to load the last coordinated save (<table>.part<K>.kvt, kept on every node); a node that lacks the save every other holds " +
	"(a save split between prepare and commit) cannot be loaded with them: remove the files to start afresh; " +
	"a node that lost the rows trained since a save (killed before the next) cannot be served beside nodes that kept theirs: " +
	"every node goes back to that save (with kv.load) or to the initial rows (without), and the training since is lost"

// refused is checkSaves's error for a table that is then not served.
func refused(err error) error {
	return fmt.Errorf("%w. The table is not served: %s; then create the table again", err, mixedLoadFix)
}

// checkBeforeSave runs checkSaves, with kv.load, for every table this
// node loaded, before a coordinated save: shards of different saves that
// no check has refused yet (loaded on a peer's kv_create whose sender
// died before its check) would otherwise become one clean-looking save,
// which the next load serves. A mix fails the save before any node
// prepares it.
func (s *kvServer) checkBeforeSave(ctx context.Context) error {
	for _, name := range s.store.Tables() {
		if _, err := s.checkSaves(ctx, name); err != nil {
			return fmt.Errorf("nothing saved (every node keeps its checkpoint): saving would make the mix one save: %w. kv_drop the table, %s; then create it again", err, mixedLoadFix)
		}
	}
	return nil
}

// checkShard serves a peer's check: nil when this node's shard of
// r.Table is of the point of training the asker's is, an error naming
// both otherwise: their rows last equalled different saves (or one a
// save, the other its initial rows), or the same one while one of them
// has trained since and the other lost what it trained since
// (mixesLost). Shards that both changed since one save are taken as
// one job's training.
func (s *kvServer) checkShard(r *peerSaveRequest) error {
	me := s.shardState(r.Table)
	them := shardState{Key: r.Save, File: r.File, Loaded: r.Loaded, Changed: r.Changed, Lost: r.Lost}
	switch {
	case me.Key != them.Key:
		return fmt.Errorf("node: table %q: %s; %s: different saves", r.Table, describeShard(fmt.Sprintf("part %d", s.part), me), describeShard("the node that asked", them))
	case mixesLost(me, them):
		return fmt.Errorf("node: table %q: %s; %s: rows of a save beside rows trained since it", r.Table, describeShard(fmt.Sprintf("part %d", s.part), me), describeShard("the node that asked", them))
	}
	return nil
}

// checkLoadedAtStart runs checkSaves, once the peers answer, for every
// table that kv.load brought back at start ([[kv.tables]]): those are
// served before any trainer's kv_create, the check's other occasion. A
// table whose shards came from different saves is left out on this node
// (each node checks, so every node leaves it out) and the error logged;
// a trainer's kv_create of it loads it again and is refused with that
// error.
func (s *kvServer) checkLoadedAtStart(ctx context.Context) {
	for _, name := range s.startTables() {
		lost := s.shardState(name).Lost
		checked, err := s.checkSaves(ctx, name)
		if err != nil {
			s.createMu.Lock()
			s.forget(name)
			s.createMu.Unlock()
			s.log.Error("kv: table loaded at start left out", "table", name, "err", refused(err))
			continue
		}
		if lost && checked {
			// No peer's shard changed since the origin (it would
			// have refused): all of them are back at it.
			s.settleLost(name)
		}
	}
}

// startTables lists the tables the check at start covers: those this
// node loaded from its checkpoint files with kv.load, and those whose
// shard lost the training since its origin when the node last stopped
// (with or without kv.load); none on a client node.
func (s *kvServer) startTables() []string {
	if s.store == nil {
		return nil
	}
	var names []string
	for _, name := range s.store.Tables() {
		if _, ok := s.store.Loaded(name); ok && s.cfg.KV.Load || s.shardState(name).Lost {
			names = append(names, name)
		}
	}
	return names
}

// refuseMixed runs checkSaves for table, with kv.load or a checkpoint
// directory (without either no node saves or loads, and none leaves a
// marker), after a trainer's kv_create of it: on a mismatch the table is
// dropped on every node, refused rather than served mixed, and a retry
// checks again.
func (s *kvServer) refuseMixed(ctx context.Context, table string) error {
	if !s.cfg.KV.Load && s.cfg.KV.CheckpointDir == "" {
		return nil
	}
	_, err := s.checkSaves(ctx, table)
	if err == nil {
		return nil
	}
	err = refused(err)
	if _, derr := s.drop(ctx, table, true); derr != nil {
		err = fmt.Errorf("%w (dropping it again on the other nodes failed: %v)", err, derr)
	}
	return err
}

// verifyRemote is a client node's check after a trainer's kv_create: the
// client node holds no shard and may not know kv.load, so the sampling
// node of part saveCoordinator runs refuseMixed (phase "verify") for it.
// A sampling node of an earlier build does not know the phase: the table
// is served unchecked, with a warning, as checkSaves does with such a
// peer.
func (s *kvServer) verifyRemote(ctx context.Context, table string) error {
	body, err := json.Marshal(peerSaveRequest{Op: "kv_save", Phase: saveVerify, Table: table})
	if err != nil {
		return err
	}
	err = s.sendAck(ctx, saveCoordinator, body)
	if unknownPhase(err, saveVerify) {
		s.log.Warn("kv: the sampling node of an earlier build cannot check which saves the shards were loaded from: not checked", "part", saveCoordinator, "table", table)
		return nil
	}
	if err != nil {
		return fmt.Errorf("check of the loaded shards by the node of part %d: %w", saveCoordinator, err)
	}
	return nil
}
