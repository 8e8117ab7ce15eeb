package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"graphnode/kv"
)

// A node killed while its trainers train (kill -9, the OOM killer, a
// power cut) loses what its shards learned since the last save; the
// other nodes keep theirs. Restarted with kv.load it loads its part of
// that save, and without kv.load it starts from the initial rows: either
// way its shard is of an earlier point of training than its peers', and
// served beside them the table holds rows no training produced. The save
// check (kv_save_check.go) compares what each node loaded, which agrees
// here (or, without kv.load, is nothing on every node). Nor can a node
// tell, from its rows, a shard whose training was lost from one that no
// trainer touched since the save (a table trained on some shards only).
// So each node records, in its checkpoint directory, what its shard of a
// table holds beyond its initial rows: <table>.part<K>.trained, holding
// the key of its origin (originKey; kv.Origin: the save its rows last
// equalled, or "none", its initial rows) and whether it was trained
// since ("trained" or "held"), and, when its node's exit save failed as
// it stopped, why: that node was not killed, and what its shard trained
// since its origin is lost all the same. A node that starts and finds a marker
// that says more than it now holds (training since the origin it holds
// again, or another save than the one it holds, or one where it holds
// its initial rows) lost that, and asks every peer whether its shard is
// at the origin it holds now, unchanged since (phase "lost"): at start
// for the tables it holds, and, through every node (phase
// "lost_verify"), on a trainer's kv_create. When all are, the whole
// cluster went back there together and the loss is settled (the marker
// then says what this run holds); when one is not, the table is
// refused, as a mix of saves is.
//
// The marker follows the shard within markerPeriod of a change (a node
// killed sooner after its shard's first change since a save is not told
// apart from one never trained), and at once after a save. A previous
// run's marker is kept until settled; a shard at its initial rows,
// untrained, has none.
//
// A kv_drop that fails part-way (a node unreachable) removes some
// nodes' shards and leaves the others' trained rows. A node whose
// shard it removed then looks like one that never held the table, and
// a kv_create of it there gave it its initial rows beside the others'
// trained ones, unchecked. So kv_drop does not remove the marker of a
// shard that held more than its initial rows (or that a marker said
// held more, unsettled): it becomes a dropped marker
// (markerState.Dropped), kept as a previous run's is until settled. A
// kv_create of the table there is then checked as after a loss (phase
// "lost"): served when every peer's shard is where the new one is,
// unchanged (the drop reached every node, and the table starts afresh
// everywhere), refused and dropped on every node when a peer kept
// trained rows. A kv_save that compared every node's tables and found
// none holding the table settles it too (settleDropped), and kv_save's
// refusal of a table some nodes lack tells a drop that failed part-way
// by it (saveAnswer.Dropped).

// errLostTraining: a shard that lost what it held beside shards that
// kept theirs (checkLost); errLostUnchecked: not every peer could be
// asked.
var (
	errLostTraining  = errors.New("a shard that lost what it held beside shards that kept theirs")
	errLostUnchecked = errors.New("the loss is not checked")
)

// shardState is a node's shard of a table as the check of lost
// training sees it.
type shardState struct {
	Key     string // originKey
	File    string // the file of the origin; "" for the initial rows
	Loaded  bool   // the origin is a file the node loaded, not one it saved
	Changed bool   // the rows changed since the origin
	// Lost: the shard does not hold what it held when its node last
	// stopped (Prev, its marker): rows trained since the origin it holds
	// again, or another save or the initial rows than then.
	Lost bool
	Prev markerState
}

// shardState is this node's state of table's shard; ok is false when it
// does not hold the table.
func (s *kvServer) shardState(table string) (st shardState, ok bool) {
	o, changed, err := s.store.Origin(table)
	if err != nil {
		return shardState{}, false
	}
	st = shardState{Key: originKey(o), File: o.Path, Loaded: o.FromLoad, Changed: changed}
	s.markMu.Lock()
	prev, ok := s.mark.prev[table]
	s.markMu.Unlock()
	st.Lost, st.Prev = ok && (prev.Key != st.Key || prev.Trained), prev
	return st, true
}

// describeShard says, in an error, what who's shard holds (st).
func describeShard(who string, st shardState) string {
	var d string
	switch {
	case st.Key == "none":
		d = who + " holds its initial rows (no checkpoint loaded or saved since its node started)"
	case st.Loaded && strings.HasPrefix(st.Key, "exit after "):
		d = fmt.Sprintf("%s loaded %s, its exit save (%s)", who, st.File, saveText(st.Key))
	case st.Loaded:
		d = fmt.Sprintf("%s loaded %s, of save %s", who, st.File, saveText(st.Key))
	default:
		d = fmt.Sprintf("%s wrote %s, of save %s", who, st.File, saveText(st.Key))
	}
	switch {
	case st.Changed:
		d += ", and trained its rows since"
	case st.Lost && st.Prev.Dropped:
		d += ", created again since a kv_drop removed what it held (" + st.Prev.held() + "), a kv_drop that failed part-way if a peer kept its own"
	case st.Lost && (st.Prev.Key == "" || st.Prev.Key == st.Key):
		d += ", and lost the rows trained since when its node last stopped (" + st.Prev.stopped() + ")"
	case st.Lost:
		held := st.Prev.held()
		if st.Prev.ExitFailed != "" {
			held += "; " + st.Prev.stopped()
		}
		d += ", and lost what it held when its node last stopped (" + held + ")"
	}
	return d
}

// held says, in an error, what a marker says its shard held.
func (m markerState) held() string {
	held := "its initial rows"
	if m.Key != "none" {
		held = "save " + saveText(m.Key)
	}
	if m.Trained {
		held += " and rows trained since"
	}
	return held
}

// checkLost checks, when this node's shard of table lost what it held
// when its node last stopped (shardState.Lost), that every peer's shard
// is at what this node holds now and unchanged since (phase "lost"):
// the whole cluster went back there. Then the loss is settled (the
// marker follows the shard again). A peer's refusal is returned as an
// errLostTraining error naming both shards; a peer that cannot be asked
// (the mesh, the request's end) as an errLostUnchecked one: neither is
// settled. checked is false when the shard lost nothing, or a peer of
// an earlier build could not tell (nothing is settled then either).
func (s *kvServer) checkLost(ctx context.Context, table string) (checked bool, err error) {
	if s.store == nil {
		return false, nil
	}
	me, ok := s.shardState(table)
	if !ok || !me.Lost {
		return false, nil
	}
	body, err := json.Marshal(peerSaveRequest{Op: "kv_save", Phase: saveLost, Save: me.Key, Table: table, File: me.File,
		Loaded: me.Loaded, PrevKey: me.Prev.Key, PrevTrained: me.Prev.Trained, PrevExitFailed: me.Prev.ExitFailed, PrevDropped: me.Prev.Dropped})
	if err != nil {
		return false, err
	}
	checked = true
	var refusals, failures []error
	for _, p := range s.peers() {
		err := s.sendAck(ctx, p, body)
		var remote *kv.RemoteError
		switch {
		case err == nil:
		case unknownPhase(err, saveLost):
			s.log.Warn("kv: a peer of an earlier build cannot tell whether its shard is where this node's went back to: not checked", "part", p, "table", table)
			checked = false
		case errors.As(err, &remote):
			refusals = append(refusals, err)
		default:
			failures = append(failures, err)
		}
	}
	if len(refusals) > 0 {
		if st, _ := s.shardState(table); !st.Lost {
			// Settled meanwhile by another check (another trainer's
			// kv_create), whose peers were then where this node is;
			// they changed since, training.
			return false, nil
		}
		halfDrop := ""
		if me.Prev.Dropped {
			halfDrop = fmt.Sprintf(" (a kv_drop of the table failed part-way: it removed part %d's shard and not the others')", s.part)
		}
		return false, fmt.Errorf("table %q: %s; %v: %w%s, which served together would mix rows no training produced",
			table, describeShard(fmt.Sprintf("part %d", s.part), me), errors.Join(refusals...), errLostTraining, halfDrop)
	}
	if len(failures) > 0 {
		return false, fmt.Errorf("table %q: %s, and not every peer could be asked whether its shard is where this node's is: %v: %w",
			table, describeShard(fmt.Sprintf("part %d", s.part), me), errors.Join(failures...), errLostUnchecked)
	}
	if checked {
		s.settleLost(table)
	}
	return checked, nil
}

// answerLost serves a peer's phase "lost": nil when this node's shard of
// r.Table is at the asker's origin r.Save and unchanged since (or this
// node does not hold the table: a client node, or one that has not
// created it), an error naming both otherwise.
func (s *kvServer) answerLost(r *peerSaveRequest) error {
	me, ok := s.shardState(r.Table)
	if !ok || me.Key == r.Save && !me.Changed {
		return nil
	}
	asker := shardState{Key: r.Save, File: r.File, Loaded: r.Loaded, Lost: true,
		Prev: markerState{Key: r.PrevKey, Trained: r.PrevTrained, ExitFailed: r.PrevExitFailed, Dropped: r.PrevDropped}}
	return fmt.Errorf("node: table %q: %s; %s", r.Table, describeShard(fmt.Sprintf("part %d", s.part), me), describeShard("the node that asked", asker))
}

// unsettledLoss is an error naming a table whose shard on this node lost
// what it held and no check has settled yet, nil when there is none: a
// save then would make the mix one clean-looking checkpoint (prepare
// refuses it).
func (s *kvServer) unsettledLoss() error {
	if s.store == nil {
		return nil
	}
	for _, name := range s.store.Tables() {
		if st, ok := s.shardState(name); ok && st.Lost {
			return fmt.Errorf("table %q: %s, and no check has found every node there yet (a trainer's kv_create of the table runs it): nothing saved", name, describeShard(fmt.Sprintf("part %d", s.part), st))
		}
	}
	return nil
}

// refuseLost runs checkLost for table on every node, after a trainer's
// kv_create of it (each node whose shard lost what it held checks it
// against every other; phase "lost_verify"). A refusal drops the table on
// every node, refused rather than served mixed, as refuseMixed does:
// creating it again brings every node back to one point. A node that
// could not be asked fails the kv_create and drops nothing: a retry
// checks again.
func (s *kvServer) refuseLost(ctx context.Context, table string) error {
	var errs []error
	if _, err := s.checkLost(ctx, table); err != nil {
		errs = append(errs, err)
	}
	body, err := json.Marshal(peerSaveRequest{Op: "kv_save", Phase: saveLostVerify, Table: table})
	if err != nil {
		return err
	}
	// Markers live in checkpoint directories: a cluster without one (the
	// nodes' [kv] sections are alike) has none to ask about.
	peers := s.peers()
	if s.cfg.KV.CheckpointDir == "" {
		peers = nil
	}
	for _, p := range peers {
		err := s.sendAck(ctx, p, body)
		if unknownPhase(err, saveLostVerify) {
			continue // an earlier build keeps no marker: it lost nothing it knows of
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	err = errors.Join(errs...)
	if !strings.Contains(err.Error(), errLostTraining.Error()) {
		return fmt.Errorf("%w (not checked: the table stays as it is; create it again to check again)", err)
	}
	err = fmt.Errorf("%w. The table is not served: %s; then create the table again", err, lostFix)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveAbortTimeout)
	defer cancel()
	if _, derr := s.drop(dctx, table, true); derr != nil {
		err = fmt.Errorf("%w (dropping it again on the other nodes failed: %v)", err, derr)
	}
	return err
}

// lostFix says how to serve a table again after checkLost's error.
const lostFix = "a node that lost what its shard held when it last stopped (killed before a save, its exit save failed, or restarted without kv.load), " +
	"or whose shard a kv_drop that failed part-way removed, cannot be served beside nodes that kept theirs: " +
	"every node goes back to one point, the last save (with kv.load) or the initial rows (without), and what was trained since is lost"

// checkLostAtStart runs checkLost, once the peers answer, for every
// table this node holds whose shard lost what it held (the tables of
// [[kv.tables]], created at start): a peer's refusal drops the table on
// every node, as a kv_create's does, and is logged; a check that could
// not ask every peer leaves the table out on this node, logged, and a
// trainer's kv_create of it creates it anew here and checks again.
func (s *kvServer) checkLostAtStart(ctx context.Context) {
	if s.store == nil {
		return
	}
	for _, name := range s.store.Tables() {
		_, err := s.checkLost(ctx, name)
		switch {
		case err == nil:
		case errors.Is(err, errLostTraining):
			// Dropped on every node, as kv_create's refusal does: a
			// peer that kept serving it would save it alone, and the
			// nodes' checkpoints would then be of two saves for good.
			if _, derr := s.drop(ctx, name, true); derr != nil {
				err = fmt.Errorf("%w (dropping it on the other nodes failed: %v)", err, derr)
			}
			s.log.Error("kv: table dropped on every node: its shard here lost what it held", "table", name, "err", fmt.Errorf("%w. The table is not served: %s; then create the table again", err, lostFix))
		default:
			s.createMu.Lock()
			s.forget(name)
			s.createMu.Unlock()
			s.log.Error("kv: table left out: its shard here lost what it held, and not every peer could be asked", "table", name, "err", err)
		}
	}
}

// forgetDropped drops table name from this node (forget), for a kv_drop,
// and keeps its marker as a dropped one when its shard held more than
// its initial rows, or a marker said it did and no check has settled
// that: a peer the kv_drop did not reach may still hold rows trained
// beside them. Otherwise the marker is removed, as it was with the
// table. It reports whether forget dropped anything. s.createMu must be
// held: a kv_create of the table waits until the marker says the drop.
func (s *kvServer) forgetDropped(name string) bool {
	rec, keep := s.droppedMarker(name)
	dropped := s.forget(name)
	dir := s.cfg.KV.CheckpointDir
	if s.store == nil || dir == "" {
		return dropped
	}
	s.markMu.Lock()
	defer s.markMu.Unlock()
	want := ""
	if keep {
		s.mark.prev[name], want = rec, rec.text()
	} else {
		delete(s.mark.prev, name)
	}
	if s.mark.onDisk[name] == want {
		return dropped
	}
	if err := writeMarker(filepath.Join(dir, markerName(name, s.part)), want); err != nil {
		if keep {
			s.log.Warn("kv: cannot record that the dropped table's shard held trained rows; if this node restarts before the table is created again, a kv_create of it is not checked against the peers' rows", "table", name, "err", err)
		} else {
			s.log.Warn("kv: marker of the dropped table not removed", "table", name, "err", err)
		}
		return dropped
	}
	if want == "" {
		delete(s.mark.onDisk, name)
	} else {
		s.mark.onDisk[name] = want
	}
	return dropped
}

// droppedMarker is the dropped marker forgetDropped keeps of table name
// (keep false: none): what its shard holds when it holds more than its
// initial rows; what the previous run's marker says it held, while that
// is lost and unsettled (shardState.Lost) or the table is not held; or,
// of a table not held, what its marker file says.
func (s *kvServer) droppedMarker(name string) (rec markerState, keep bool) {
	if s.store == nil || s.cfg.KV.CheckpointDir == "" {
		return markerState{}, false
	}
	s.markMu.Lock()
	defer s.markMu.Unlock()
	prev, hasPrev := s.mark.prev[name]
	o, changed, err := s.store.Origin(name)
	held := err == nil
	cur := markerState{Key: originKey(o), Trained: changed}
	switch {
	case hasPrev && (!held || prev.Key != cur.Key || prev.Trained):
		rec = prev
	case held && (cur.Key != "none" || cur.Trained):
		rec = cur
	case !held:
		m, ok := parseMarker([]byte(s.mark.onDisk[name]))
		if !ok {
			return markerState{}, false
		}
		rec = m
	default:
		return markerState{}, false
	}
	rec.Dropped, rec.ExitFailed = true, ""
	return rec, true
}

// settleDropped removes the dropped markers of the tables that this node
// does not hold and that are not among saved, the tables of a save whose
// tables every node prepared and the coordinator compared (alike): no
// node holds rows of them, so whatever a kv_create of them makes next
// starts alike everywhere.
func (s *kvServer) settleDropped(saved []preparedTable) {
	dir := s.cfg.KV.CheckpointDir
	if s.store == nil || dir == "" {
		return
	}
	s.markMu.Lock()
	defer s.markMu.Unlock()
	for name, prev := range s.mark.prev {
		if !prev.Dropped || slices.ContainsFunc(saved, func(t preparedTable) bool { return t.Name == name }) {
			continue
		}
		if _, _, err := s.store.Origin(name); err == nil {
			continue // created again since the prepare: its own check settles it
		}
		if err := writeMarker(filepath.Join(dir, markerName(name, s.part)), ""); err != nil {
			s.log.Warn("kv: marker of a table no node holds since a kv_drop not removed", "table", name, "err", err)
			continue
		}
		delete(s.mark.prev, name)
		delete(s.mark.onDisk, name)
	}
}

// knownSaves lists the saves table's shard held in this process (see
// markers.known), as of the markers' last tick or save.
func (s *kvServer) knownSaves(table string) []string {
	s.markMu.Lock()
	defer s.markMu.Unlock()
	return slices.Clone(s.mark.known[table])
}

// knows reports whether table's shard held save key in this process.
func (s *kvServer) knows(table, key string) bool {
	s.markMu.Lock()
	defer s.markMu.Unlock()
	return slices.Contains(s.mark.known[table], key)
}

// settleLost forgets that table's shard lost training: every peer's
// shard is back at its origin too (checkLost passed, every peer of
// this build answering).
func (s *kvServer) settleLost(table string) {
	s.markMu.Lock()
	prev, ok := s.mark.prev[table]
	if ok {
		delete(s.mark.prev, table)
	}
	s.markMu.Unlock()
	if ok {
		s.log.Info("kv: every node's shard is back where this node's is after it lost what it held; the table is served", "table", table, "held", saveText(prev.Key), "trained", prev.Trained)
		s.syncMarkers()
	}
}
