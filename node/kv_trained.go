package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"graphnode/kv"
	"graphnode/partition"
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

// markerPeriod is how often the markers follow the shards' changes.
const markerPeriod = time.Second

// markerSuffix ends a marker file's name.
const markerSuffix = ".trained"

// markerName is the marker file of table's shard of part.
func markerName(table string, part int) string {
	return table + ".part" + strconv.Itoa(part) + markerSuffix
}

// markerState is what a marker says of a shard: it held save Key (or,
// "none", its initial rows), and had been trained since (Trained); its
// node's exit save then failed with ExitFailed ("": it did not fail, or
// the node was killed before one). Dropped: a kv_drop then removed it
// (ExitFailed is then "").
type markerState struct {
	Key        string
	Trained    bool
	ExitFailed string
	Dropped    bool
}

// exitFailedTag starts a marker's third line, which says why its node's
// exit save failed.
const exitFailedTag = "exit save failed: "

// droppedTag starts the first line of a dropped marker, before the key.
// No originKey starts so, and a build before dropped markers reads the
// line as the key of a save it never held (parseMarkerLines): to it the
// shard lost what it held, and a kv_create of the table is checked
// against every peer.
const droppedTag = "dropped: "

// text is the marker file's contents: the key (after droppedTag when
// dropped), then "trained" or "held", then, when the exit save failed,
// exitFailedTag and why; a line each.
func (m markerState) text() string {
	tag := "held"
	if m.Trained {
		tag = "trained"
	}
	key := m.Key
	if m.Dropped {
		key = droppedTag + key
	}
	t := key + "\n" + tag + "\n"
	if m.ExitFailed != "" && !m.Dropped {
		t += exitFailedTag + m.ExitFailed + "\n"
	}
	return t
}

// parseMarker reads a marker file's contents, of this build or an
// earlier one (without dropped markers, without the third line, or of
// the first format).
func parseMarker(b []byte) (markerState, bool) {
	m, ok := parseMarkerLines(b)
	if !ok {
		return markerState{}, false
	}
	if key, dropped := strings.CutPrefix(m.Key, droppedTag); dropped {
		if key == "" || m.ExitFailed != "" {
			return markerState{}, false
		}
		m.Key, m.Dropped = key, true
	}
	return m, true
}

// parseMarkerLines reads a marker file's lines as a build before
// dropped markers did: a dropped marker's first line is its key.
func parseMarkerLines(b []byte) (markerState, bool) {
	lines := strings.Split(string(b), "\n")
	if len(lines) == 2 && lines[0] != "" && lines[1] == "" {
		// The first format (one line, the key): the shard had been
		// trained since that save.
		return markerState{Key: lines[0], Trained: true}, true
	}
	var m markerState
	if len(lines) == 4 {
		why, ok := strings.CutPrefix(lines[2], exitFailedTag)
		if !ok || why == "" {
			return markerState{}, false
		}
		m.ExitFailed, lines = why, append(lines[:2], lines[3])
	}
	if len(lines) != 3 || lines[0] == "" || lines[2] != "" || lines[1] != "trained" && lines[1] != "held" {
		return markerState{}, false
	}
	m.Key, m.Trained = lines[0], lines[1] == "trained"
	return m, true
}

// stopped says how a node whose shard lost the rows trained since m.Key
// stopped.
func (m markerState) stopped() string {
	if m.ExitFailed != "" {
		return "its exit save failed: " + m.ExitFailed
	}
	return "killed before a save"
}

// markers is the state of a node's marker files. Guarded by
// kvServer.markMu.
type markers struct {
	// onDisk is, per table, what its marker file holds (text).
	onDisk map[string]string
	// prev is, per table, the marker a previous run of this node left,
	// until settled: what its shard held when that run stopped.
	prev map[string]markerState
	// warned is the last write error logged per table.
	warned map[string]string
	// known is, per table, the last maxKnownSaves saves its shard held
	// in this process (loaded, or saved and put in place), oldest first:
	// the save check accepts a peer that loaded one of them
	// (kv_save_check.go).
	known map[string][]string
	// exitFailed is why this node's exit save failed (markExitFailed),
	// "" before: the markers of shards trained since their origin say it.
	exitFailed string
}

// maxKnownSaves bounds markers.known per table, which every save check
// carries (check_known). A node restarted loads its newest save, or the
// one before when a save split between prepare and commit; a shard
// loaded from a save further back beside peers that held it and trained
// on is refused as a different save, which it is.
const maxKnownSaves = 16

// readMarkers finds the marker files a previous run of this node left
// in the checkpoint directory (none without one).
func (s *kvServer) readMarkers() error {
	s.mark = markers{onDisk: map[string]string{}, prev: map[string]markerState{}, warned: map[string]string{}, known: map[string][]string{}}
	dir := s.cfg.KV.CheckpointDir
	if dir == "" || s.store == nil {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("node: kv.checkpoint_dir: %w", err)
	}
	suffix := ".part" + strconv.Itoa(s.part) + markerSuffix
	for _, e := range ents {
		name := e.Name()
		table, ok := strings.CutSuffix(name, suffix)
		if !ok || table == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("node: kv.checkpoint_dir: %w", err)
		}
		m, ok := parseMarker(b)
		if !ok {
			return fmt.Errorf("node: kv.checkpoint_dir: %s: not a marker of what a shard held (a save's key, after %q if a kv_drop removed the shard, then \"trained\" or \"held\", then, if its exit save failed, %q and why, a line each): %q: remove it if it is not this node's", filepath.Join(dir, name), droppedTag, exitFailedTag, b)
		}
		s.mark.onDisk[table], s.mark.prev[table] = m.text(), m
	}
	if len(s.mark.prev) > 0 {
		s.log.Info("kv: markers of what this node's shards held when it last stopped", "dir", dir, "tables", len(s.mark.prev))
	}
	return nil
}

// originKey is the key under which the nodes compare what a shard's
// rows last equalled (kv.Origin): "none" for the initial rows, else the
// save's generation (kv.Loaded.Generation); for the exit save of a
// synchronous table, " at step <version>" after it: the nodes' exit
// saves after one coordinated save agree only at one step.
func originKey(o kv.Origin) string {
	if o.Initial() {
		return "none"
	}
	key := o.Generation()
	if o.Save.Exit && o.Sync {
		key += " at step " + strconv.FormatUint(o.Version, 10)
	}
	return key
}

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

// keepMarkers follows the shards' changes with their markers every
// markerPeriod until ctx ends.
func (s *kvServer) keepMarkers(ctx context.Context) {
	if s.store == nil || s.cfg.KV.CheckpointDir == "" {
		return
	}
	t := time.NewTicker(markerPeriod)
	defer t.Stop()
	for {
		s.syncMarkers()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// syncMarkers writes or removes each table's marker as its shard now
// says (see above). A marker that cannot be written is logged, once per
// error: training goes on, and a restart after a crash is then not told
// apart from one of an untouched shard.
func (s *kvServer) syncMarkers() {
	dir := s.cfg.KV.CheckpointDir
	if s.store == nil || dir == "" {
		return
	}
	for _, table := range s.store.Tables() {
		s.markMu.Lock()
		// Read under markMu: a drop (forgetDropped) between the read and
		// the write would leave a marker of a table that is gone.
		o, changed, err := s.store.Origin(table)
		if err != nil {
			s.markMu.Unlock()
			continue // dropped meanwhile
		}
		key := originKey(o)
		if key != "none" {
			if k := s.mark.known[table]; !slices.Contains(k, key) {
				s.mark.known[table] = append(k[max(0, len(k)+1-maxKnownSaves):], key)
			}
		}
		if prev, ok := s.mark.prev[table]; ok {
			if prev.Key != key || prev.Trained {
				// The previous run's marker says what was lost: kept
				// until a check settles it (or the table is dropped).
				s.markMu.Unlock()
				continue
			}
			delete(s.mark.prev, table) // the shard holds what it held
		}
		want := ""
		if key != "none" || changed {
			m := markerState{Key: key, Trained: changed}
			if changed {
				m.ExitFailed = s.mark.exitFailed
			}
			want = m.text()
		}
		if s.mark.onDisk[table] != want {
			err := writeMarker(filepath.Join(dir, markerName(table, s.part)), want)
			if err == nil {
				s.mark.onDisk[table] = want
				delete(s.mark.warned, table)
			} else if msg := err.Error(); s.mark.warned[table] != msg {
				s.mark.warned[table] = msg
				s.log.Warn("kv: cannot record what the shard holds; if this node is killed, its restart will not be told apart from one that lost nothing", "table", table, "err", err)
			}
		}
		s.markMu.Unlock()
	}
}

// markExitFailed records, in the marker of each shard trained since its
// origin, that this node's exit save failed, and why (err, on one line):
// the check of lost training at the next start then says so, where it
// said the node was killed before a save.
func (s *kvServer) markExitFailed(err error) {
	s.markMu.Lock()
	s.mark.exitFailed = strings.Join(strings.Fields(err.Error()), " ")
	s.markMu.Unlock()
	s.syncMarkers()
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

// writeMarker makes path hold text, durably (a temporary file, fsynced
// and renamed, then the directory fsynced); text "" removes it.
func writeMarker(path, text string) error {
	if text == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return partition.SyncDir(filepath.Dir(path))
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return partition.SyncDir(filepath.Dir(path))
}
