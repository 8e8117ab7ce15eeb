package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"graphnode/kv"
)

// A node killed while its trainers train (kill -9, the OOM killer, a
// power cut) loses what its shards learned since the last save; the
// other nodes keep theirs. Restarted with kv.load it loads its part of
// that save, and without kv.load it starts from the initial rows: either
// way its shard is of an earlier point of training than its peers', and
// served beside them the table holds rows no training produced. The save
// check (kv_save_check.go) compares what each node's rows last equalled
// (a save, or the initial rows) and whether they changed since; that
// alone cannot tell a node whose training was lost from one whose shard
// no trainer touched since the save (a table trained on some shards
// only). So each node records, in its checkpoint directory, that its
// shard of a table has changed since its origin: <table>.part<K>.trained,
// holding the origin's key (originKey). A node that starts and finds one
// for the origin it now holds knows that its shard lost training; its
// peers then refuse to serve their shards, changed since that origin,
// beside it.
//
// The marker is written within markerPeriod of the first change after
// an origin (a node killed sooner is not told apart from one never
// trained), kept while the node holds that origin, rewritten when a
// save moves the origin and the rows change again, removed when a save
// moves it and they have not (the marker of a previous run for the
// origin the node holds is kept: it says what was lost), and removed
// with the table (kv_drop), or when a check at start finds every peer's
// shard at that origin unchanged: the whole cluster went back to it
// together, and the training lost is lost everywhere.

// markerPeriod is how often the markers follow the shards' changes.
const markerPeriod = time.Second

// markerSuffix ends a marker file's name.
const markerSuffix = ".trained"

// markerName is the marker file of table's shard of part.
func markerName(table string, part int) string {
	return table + ".part" + strconv.Itoa(part) + markerSuffix
}

// markers is the state of a node's marker files. Guarded by
// kvServer.markMu.
type markers struct {
	// onDisk is, per table, the origin key its marker file holds.
	onDisk map[string]string
	// lost is, per table, the origin key of the marker a previous run
	// of this node left: training since that origin was lost when it
	// stopped, if the shard now holds that origin.
	lost map[string]string
	// warned is the last write error logged per table.
	warned map[string]string
}

// readMarkers finds the marker files a previous run of this node left
// in the checkpoint directory (none without one).
func (s *kvServer) readMarkers() error {
	s.mark = markers{onDisk: map[string]string{}, lost: map[string]string{}, warned: map[string]string{}}
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
		key, ok := strings.CutSuffix(string(b), "\n")
		if !ok || key == "" || strings.Contains(key, "\n") {
			return fmt.Errorf("node: kv.checkpoint_dir: %s: not a marker of trained rows (one line, the key of a save), %q: remove it if it is not this node's", filepath.Join(dir, name), b)
		}
		s.mark.onDisk[table], s.mark.lost[table] = key, key
	}
	if len(s.mark.lost) > 0 {
		s.log.Info("kv: this node's shards had been trained when it last stopped", "dir", dir, "tables", len(s.mark.lost))
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

// shardState is what a check says of a node's shard of a table.
type shardState struct {
	Key     string // originKey
	File    string // the file of the origin; "" for the initial rows
	Loaded  bool   // the origin is a file the node loaded, not one it saved
	Changed bool   // the rows changed since the origin
	Lost    bool   // rows trained since the origin were lost when the node last stopped
}

// shardState is this node's state of table's shard; a table it does
// not hold is "none", unchanged.
func (s *kvServer) shardState(table string) shardState {
	o, changed, err := s.store.Origin(table)
	if err != nil {
		return shardState{Key: "none"}
	}
	st := shardState{Key: originKey(o), File: o.Path, Loaded: o.FromLoad, Changed: changed}
	s.markMu.Lock()
	st.Lost = s.mark.lost[table] == st.Key
	s.markMu.Unlock()
	return st
}

// mixesLost reports whether shards a and b, of one origin, are of two
// points of training: one changed since the origin, the other back at
// it after losing what it was trained since.
func mixesLost(a, b shardState) bool {
	return a.Changed && !b.Changed && b.Lost || b.Changed && !a.Changed && a.Lost
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
		o, changed, err := s.store.Origin(table)
		if err != nil {
			continue // dropped meanwhile
		}
		key := originKey(o)
		s.markMu.Lock()
		want := ""
		if changed || s.mark.lost[table] == key {
			want = key
		}
		if s.mark.onDisk[table] != want {
			err := writeMarker(filepath.Join(dir, markerName(table, s.part)), want)
			if err == nil {
				s.mark.onDisk[table] = want
				delete(s.mark.warned, table)
			} else if msg := err.Error(); s.mark.warned[table] != msg {
				s.mark.warned[table] = msg
				s.log.Warn("kv: cannot record that the shard was trained since its last save; if this node is killed, its restart will not be told apart from one whose shard no trainer touched", "table", table, "err", err)
			}
		}
		s.markMu.Unlock()
	}
}

// forgetMarker removes table's marker (the table is dropped on this
// node) and what it said of a previous run.
func (s *kvServer) forgetMarker(table string) {
	dir := s.cfg.KV.CheckpointDir
	if s.store == nil || dir == "" {
		return
	}
	s.markMu.Lock()
	defer s.markMu.Unlock()
	delete(s.mark.lost, table)
	if s.mark.onDisk[table] == "" {
		return
	}
	if err := writeMarker(filepath.Join(dir, markerName(table, s.part)), ""); err != nil {
		s.log.Warn("kv: marker of the dropped table not removed", "table", table, "err", err)
		return
	}
	delete(s.mark.onDisk, table)
}

// settleLost forgets that table's shard lost training when every
// peer's shard is back at its origin too (a check at start passed with
// Lost set and every peer of this build answering).
func (s *kvServer) settleLost(table string) {
	s.markMu.Lock()
	key, ok := s.mark.lost[table]
	if ok {
		delete(s.mark.lost, table)
	}
	s.markMu.Unlock()
	if ok {
		s.log.Info("kv: every node's shard is back at the save this node's lost training followed; the table is served", "table", table, "save", key)
		s.syncMarkers()
	}
}

// writeMarker makes path hold key and a newline, durably (a temporary
// file, fsynced and renamed, then the directory fsynced); key "" removes
// it.
func writeMarker(path, key string) error {
	if key == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return syncDirOf(path)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
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
	return syncDirOf(path)
}

// syncDirOf fsyncs the directory holding path.
func syncDirOf(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
