package node

// The markers: a file per shard in the checkpoint directory that says what
// the shard held when the node last stopped (its save, or trained since),
// read at the start and kept up to date while the node runs.

import (
	"context"
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

// keepMarkers follows the shards' changes with their markers every
// markerPeriod until ctx ends.
func (s *kvServer) keepMarkers(ctx context.Context) {
	if s.store == nil || s.cfg.KV.CheckpointDir == "" {
		return
	}
	every(ctx, markerPeriod, s.syncMarkers)
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
