package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"graphnode/kv"
)

// With kv.load, a table's shards must come back from one save on every
// node: node 0's rows of one save beside node 1's of another are a model
// no training produced. Each node picks its file (kv.Store.Load: its exit
// save when newer than its part of the last coordinated save, that part
// otherwise); the exit saves of every node, after one coordinated save,
// are the cluster's shutdown checkpoint and agree. A trainer's kv_create of a loaded
// table then asks every peer whether its shard came from the same save
// (phase "check" of a peer kv_save, carrying the save's key and file).
// A peer that holds another answers an error naming both files and
// saves, and the table is dropped on every node: it is refused, not
// served mixed. A peer of an earlier build answers that it does not know
// the phase; it cannot tell, and the check passes with a warning.

// loadedKey is what table's shard on this node was loaded from: its
// generation (kv.Loaded.Generation: a coordinated save's id, "exit after
// <id>", "legacy"; for the exit save of a synchronous table, " at step
// <version>" after it: the nodes' exit saves after one coordinated save
// agree only at one step), or "none" (its initial rows), and the file.
func (s *kvServer) loadedKey(table string) (key, file string) {
	l, ok := s.store.Loaded(table)
	if !ok {
		return "none", ""
	}
	key = l.Generation()
	if l.Save.Exit && l.Sync {
		key += " at step " + strconv.FormatUint(l.Version, 10)
	}
	return key, l.Path
}

// saveText is a save's key (loadedKey, originKey) as errors and logs
// word it: an exit save after "legacy" followed no kv_save (or one of a
// build before save ids), which "exit after legacy" left a reader to
// decode.
func saveText(key string) string {
	switch {
	case key == "legacy":
		return "legacy (written before save ids)"
	case strings.HasPrefix(key, "exit after legacy"):
		return "exit after no kv_save" + strings.TrimPrefix(key, "exit after legacy")
	}
	return key
}

// describeLoaded says, in an error, that who loaded key from file.
func describeLoaded(who, key, file string) string {
	switch key {
	case "none":
		return who + " loaded no checkpoint file (its rows are its initial ones and what was trained into them since it started)"
	case "legacy":
		return fmt.Sprintf("%s loaded %s, of the legacy save (written before save ids)", who, file)
	}
	if strings.HasPrefix(key, "exit after ") {
		return fmt.Sprintf("%s loaded %s, its exit save (%s)", who, file, saveText(key))
	}
	return fmt.Sprintf("%s loaded %s, of save %s", who, file, saveText(key))
}

// checkSaves asks every peer whether its shard of table was loaded from
// the save this node's was. A peer's refusal (a mismatch) is returned as
// a kv.ErrMixedSaves error naming each node's file and save and what to
// do; a peer that cannot be asked (the mesh, the request's end) as an
// errSavesUnchecked one: nothing is known to be mixed then.
func (s *kvServer) checkSaves(ctx context.Context, table string) error {
	key, file := s.loadedKey(table)
	body, err := json.Marshal(peerSaveRequest{Op: "kv_save", Phase: saveCheck, Save: key, Table: table, File: file, Known: s.knownSaves(table), CheckLost: true})
	if err != nil {
		return err
	}
	var refusals, failures []error
	for _, p := range s.peers() {
		err := s.sendAck(ctx, p, body)
		var remote *kv.RemoteError
		switch {
		case err == nil:
		case unknownPhase(err, saveCheck):
			// Said on every kv_create: a warning only where loads are
			// in play here (kv.load, or a save loaded), not from a node
			// whose cluster may load nothing.
			level := slog.LevelDebug
			if key != "none" || s.cfg.KV.Load {
				level = slog.LevelWarn
			}
			s.log.Log(ctx, level, "kv: a peer of an earlier build cannot tell which save its shard was loaded from: not checked", "part", p, "table", table)
		case errors.As(err, &remote) && strings.HasSuffix(remote.Text, differentSaves):
			refusals = append(refusals, err)
		default:
			failures = append(failures, err)
		}
	}
	who := describeLoaded(fmt.Sprintf("part %d", s.part), key, file)
	switch {
	case len(refusals) > 0:
		return fmt.Errorf("table %q: the nodes' checkpoint files are of different saves, which loaded together would mix rows no training produced: %s; %v: %w",
			table, who, errors.Join(refusals...), kv.ErrMixedSaves)
	case len(failures) > 0:
		return fmt.Errorf("table %q: %s, and not every peer could be asked which save its shard was loaded from: %v: %w",
			table, who, errors.Join(failures...), errSavesUnchecked)
	}
	if key == "legacy" {
		s.log.Info("kv: table loaded from checkpoint files written before save ids: every node's are taken as one legacy save", "table", table, "path", file)
	}
	return nil
}

// differentSaves ends a peer's refusal in phase "check" (checkLoaded),
// in this build and earlier ones.
const differentSaves = ": different saves"

// errSavesUnchecked: checkSaves could not ask every peer.
var errSavesUnchecked = errors.New("not checked")

// mixedLoadFix says how to load one save on every node, after an error
// of checkSaves.
const mixedLoadFix = "move aside the exit saves (<table>.part<K>.exit.kvt, written by a node stopping on its own) on the nodes that loaded one, " +
	"to load the last coordinated save (<table>.part<K>.kvt, kept on every node); a node that lacks the save every other holds " +
	"(a save split between prepare and commit) cannot be loaded with them: remove the files to start afresh"

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
	for _, name := range s.loadedTables() {
		if err := s.checkSaves(ctx, name); err != nil {
			return fmt.Errorf("nothing saved (every node keeps its checkpoint): saving would make the mix one save: %w. kv_drop the table, %s; then create it again", err, mixedLoadFix)
		}
	}
	return nil
}

// checkLoaded serves a peer's check: nil when this node's shard of
// r.Table was loaded from save r.Save, an error naming both otherwise.
func (s *kvServer) checkLoaded(r *peerSaveRequest) error {
	s.createMu.Lock()
	leftOut := s.specLeftOut[r.Table]
	s.createMu.Unlock()
	if leftOut {
		// Not held: left out at start for a lower part's spec
		// (checkDeclaredAtStart), not initial rows beside loaded ones.
		return nil
	}
	key, file := s.loadedKey(r.Table)
	if key == r.Save || r.CheckLost && (slices.Contains(r.Known, key) || s.knows(r.Table, r.Save)) {
		// The same save, or one the other node's shard held since it
		// loaded its own (a kv_save since; then a node restarted and
		// loaded that one): whether training was lost since is the
		// check of phase "lost" (kv_trained.go).
		return nil
	}
	return fmt.Errorf("node: table %q: %s; %s%s", r.Table, describeLoaded(fmt.Sprintf("part %d", s.part), key, file), describeLoaded("the node that asked", r.Save, r.File), differentSaves)
}

// checkLoadedAtStart runs checkSaves, once the peers answer, for every
// table that kv.load brought back at start ([[kv.tables]]): those are
// served before any trainer's kv_create, the check's other occasion. A
// table whose shards came from different saves is left out on this node
// (each node checks, so every node leaves it out) and the error logged;
// a trainer's kv_create of it loads it again and is refused with that
// error.
func (s *kvServer) checkLoadedAtStart(ctx context.Context) {
	for _, name := range s.loadedTables() {
		if err := s.checkSaves(ctx, name); err != nil {
			s.createMu.Lock()
			s.forget(name)
			s.createMu.Unlock()
			s.log.Error("kv: table loaded at start left out", "table", name, "err", refused(err))
		}
	}
}

// loadedTables lists the tables this node loaded from its checkpoint
// files with kv.load: none without it, or on a client node.
func (s *kvServer) loadedTables() []string {
	if s.store == nil || !s.cfg.KV.Load {
		return nil
	}
	var names []string
	for _, name := range s.store.Tables() {
		if _, ok := s.store.Loaded(name); ok {
			names = append(names, name)
		}
	}
	return names
}

// refuseMixed runs checkSaves for table after a trainer's kv_create of
// it: on a mismatch the table is dropped on every node, refused rather
// than served mixed, and a retry checks again. A node without kv.load
// checks too: its initial rows beside a peer's loaded save are such a
// mix, which a kv_create through this node served unchecked when only
// nodes with kv.load asked (nodes of one cluster may differ in it).
func (s *kvServer) refuseMixed(ctx context.Context, table string) error {
	err := s.checkSaves(ctx, table)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, kv.ErrMixedSaves):
		// A transport failure, or the trainer hanging up, is no
		// mismatch: dropped on some nodes (the trainer's context ended
		// mid-drop), a trained table came back with initial rows beside
		// the others'.
		return fmt.Errorf("%w: the table stays as it is; create it again to check again", err)
	}
	err = refused(err)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveAbortTimeout)
	defer cancel()
	if _, derr := s.drop(dctx, table, true); derr != nil {
		err = fmt.Errorf("%w (dropping it again on the other nodes failed: %v)", err, derr)
	}
	return err
}

// verifyRemote is a client node's check after a trainer's kv_create: the
// client node holds no shard, so the sampling node of part
// saveCoordinator runs refuseMixed (phase "verify") for it.
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
