package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"graphnode/kv"
	"graphnode/node/control"
)

// pendingCreate is a trainer's kv_create between its local create and
// the end of its broadcast.
//
// A trainer's kv_create of a table that is pending waits for done and
// then runs on its own: it answers "created": false after a success, and
// after a failure creates the table (and loads and broadcasts it) itself,
// as a retry would. It does not fail with the first one's error: that may
// have been the first trainer's own (its connection dropped, which ends
// the broadcast), and a cause that lasts (a peer holding another spec)
// fails the retry with an error of its own.
//
// A kv_create forwarded by a peer never waits: the peer's broadcast may
// be what this one's broadcast waits for, the other way round (two nodes
// creating one table at once). It answers that the table exists and sets
// accepted, so that the table is kept on this node when the pending
// create fails: the peer's trainer relies on it.
type pendingCreate struct {
	done     chan struct{} // closed once the table is kept or dropped again
	accepted bool          // guarded by kvServer.createMu
}

// create declares a table on this node and, when forward is set, on
// every peer, so that it exists on every shard when the trainer's
// kv_create returns. With kv.load, a new table resumes from its
// checkpoint file when there is one. A trainer's kv_create of a table
// that another trainer's is still creating waits for its outcome
// (pendingCreate). With replace, a checkpoint file of the table at
// another number of rows is not loaded (control.Request.ReplaceResized),
// here and on the peers.
func (s *kvServer) create(ctx context.Context, t *control.TableSpec, forward, replace bool) (*control.TableInfo, error) {
	if err := s.numbering.checkRows(t); err != nil {
		return nil, &control.Error{Key: "table.rows", Msg: err.Error()}
	}
	sp := s.resolve(t)
	if err := checkSyncPush(sp); err != nil {
		return nil, &control.Error{Key: "table.rows", Msg: err.Error()}
	}
	if s.store == nil { // a client node: the sampling nodes hold every shard
		return s.createRemote(ctx, t, sp, replace)
	}
	created, pc, err := s.createLocal(ctx, sp, forward, replace)
	if err != nil {
		return nil, &control.Error{Key: "table", Msg: err.Error(), KVCode: kv.ErrorCode(err)}
	}
	if forward {
		err := s.broadcast(ctx, &control.Request{Op: control.OpKVCreate, Table: t, ReplaceResized: replace})
		undo := ""
		if pc != nil {
			switch s.endCreate(sp.Name, pc, err == nil) {
			case createDropped:
				// Not kept half made: a retry with the spec the peers
				// have, or another, starts clean here.
				undo = " (the table this request created on this node is dropped again; nodes that accepted it keep it: " + retryCreate + ")"
			case createKeptForPeer:
				undo = " (the table this request created on this node stays: another node's kv_create of it was accepted here meanwhile; " + retryCreate + ")"
			}
		}
		if err != nil {
			return nil, &control.Error{Key: "table", Msg: fmt.Sprintf("create on the other nodes: %v%s", err, undo), KVCode: kv.ErrorCode(err)}
		}
		if err := s.refuseMixed(ctx, sp.Name); err != nil {
			return nil, &control.Error{Key: "table", Msg: err.Error()}
		}
		if err := s.refuseLost(ctx, sp.Name); err != nil {
			return nil, &control.Error{Key: "table", Msg: err.Error()}
		}
	}
	v, _ := s.store.Version(sp.Name)
	return &control.TableInfo{Name: sp.Name, Rows: sp.Rows, Dim: sp.Dim, Bounds: sp.Bounds, Created: created, Version: v}, nil
}

// retryCreate says what to do with a table that a kv_create failing on
// some peers left on others only (kv_save refuses the tables some nodes
// lack). Its peers are not told to drop it again: one that had it before
// may hold trained rows, and one that cannot be reached would keep it
// anyway. The same kv_create again creates it where it is missing, and
// the nodes that hold it keep their rows.
const retryCreate = "run this kv_create again once the cause is fixed, which creates it where it is missing, or kv_drop it"

// createLocal creates sp in this node's store and its client and, with
// kv.load, restores it from its checkpoint file when there is one. A
// table it created whose load fails is dropped again: kept, it would hold
// its initial rows at version 0, and a retried kv_create would answer that
// it exists. A trainer's request (forward) first waits for a pending one
// of the table to end, and returns the pendingCreate that its broadcast
// must end (endCreate) when it created the table. With replace, a
// checkpoint file of the table at another number of rows is not loaded.
func (s *kvServer) createLocal(ctx context.Context, sp kv.Spec, forward, replace bool) (bool, *pendingCreate, error) {
	for {
		s.createMu.Lock()
		pc := s.creating[sp.Name]
		if pc == nil || !forward {
			break
		}
		s.createMu.Unlock()
		if s.createWaits != nil {
			s.createWaits(sp.Name)
		}
		select {
		case <-pc.done:
		case <-ctx.Done():
			return false, nil, fmt.Errorf("node: kv: table %q: waiting for another kv_create of it on this node to end: %w", sp.Name, ctx.Err())
		}
	}
	defer s.createMu.Unlock()
	created, err := s.store.Create(sp)
	if err != nil {
		return false, nil, err
	}
	if !created {
		if pc := s.creating[sp.Name]; pc != nil { // a peer's request (forward is false)
			pc.accepted = true
		}
		_, err := s.client(sp)
		return false, nil, err
	}
	delete(s.specLeftOut, sp.Name)
	s.log.Info("kv table created", "table", sp.Name, "rows", sp.Rows, "dim", sp.Dim, "mode", sp.Mode.String(), "optimizer", sp.Opt.Kind.String())
	if err := s.loadCreated(sp, replace); err != nil {
		s.forget(sp.Name)
		if !forward {
			// A peer's request: the trainer's node, whose broadcast
			// this fails, says what each node keeps (create).
			return false, nil, err
		}
		return false, nil, fmt.Errorf("%w (the table this request created on this node is dropped again)", err)
	}
	if _, err := s.client(sp); err != nil {
		s.forget(sp.Name)
		return false, nil, err
	}
	if pc := s.creating[sp.Name]; pc != nil {
		// A peer's request re-created a table that kv_drop removed under
		// a pending create: the peer relies on it as on one it found.
		pc.accepted = true
	}
	if !forward {
		return true, nil, nil
	}
	pc := &pendingCreate{done: make(chan struct{})}
	s.creating[sp.Name] = pc
	return true, pc, nil
}

// loadCreated restores a table just created from its checkpoint file,
// with kv.load and when there is one. With replace, a file that holds
// the table at another number of rows (kv.ErrResized) is left alone:
// the table keeps its initial rows, and the next kv_save replaces the
// file. The files of the earlier size stay until then, so a job that
// fails before its save loses nothing that was saved: this node's exit
// save leaves the table out meanwhile (kv.Store.KeepFiles), for its exit
// file would be loaded over them. s.createMu must be held.
func (s *kvServer) loadCreated(sp kv.Spec, replace bool) error {
	if !s.cfg.KV.Load {
		return nil
	}
	found := false
	for _, name := range []string{kv.FileName(sp.Name, s.part), kv.ExitFileName(sp.Name, s.part)} {
		if _, err := os.Stat(filepath.Join(s.cfg.KV.CheckpointDir, name)); err == nil {
			found = true
		} else if !errors.Is(err, fs.ErrNotExist) {
			// A file that may be there but cannot be looked at is no
			// absent one: the initial rows would pass for resumed ones.
			return fmt.Errorf("kv: load: %w", err)
		}
	}
	if !found {
		return nil
	}
	if err := s.store.LoadTable(s.cfg.KV.CheckpointDir, sp.Name); err != nil {
		if replace && errors.Is(err, kv.ErrResized) {
			s.log.Warn("kv table's checkpoint holds it with another number of rows: not loaded, as the kv_create asked; the next kv_save replaces it, and until then this node's exit save leaves the table out",
				"table", sp.Name, "rows", sp.Rows, "err", err)
			return s.store.KeepFiles(sp.Name)
		}
		return err
	}
	l, _ := s.store.Loaded(sp.Name)
	s.log.Info("kv table loaded", "table", sp.Name, "path", l.Path, "save", l.Save.String())
	return nil
}

// createOutcome is what endCreate did with the table.
type createOutcome int

const (
	createKept        createOutcome = iota // the broadcast succeeded
	createDropped                          // it failed: dropped again
	createKeptForPeer                      // it failed, but a peer's kv_create accepted the table
)

// endCreate ends pending create pc of table name, whose broadcast
// succeeded (ok) or not, and releases the kv_creates waiting for it.
func (s *kvServer) endCreate(name string, pc *pendingCreate, ok bool) createOutcome {
	s.createMu.Lock()
	delete(s.creating, name)
	out := createKept
	switch {
	case ok:
	case pc.accepted:
		out = createKeptForPeer
	default:
		s.forget(name)
		out = createDropped
	}
	s.createMu.Unlock()
	close(pc.done)
	return out
}

// createRemote is create on a client node: every sampling node creates
// its shard. The table's version is theirs, so it reports 0, and whether
// this call created the table is not known here (false).
//
// The table's client is made anew from sp: the sampling nodes hold sp
// now, while a client this node kept may be of a table of that name that
// another node dropped and created again with another spec (a drop is
// not sent to client nodes).
func (s *kvServer) createRemote(ctx context.Context, t *control.TableSpec, sp kv.Spec, replace bool) (*control.TableInfo, error) {
	if err := s.broadcast(ctx, &control.Request{Op: control.OpKVCreate, Table: t, ReplaceResized: replace}); err != nil {
		return nil, &control.Error{Key: "table", Msg: fmt.Sprintf("create on the sampling nodes: %v (those that accepted it keep it: %s)", err, retryCreate), KVCode: kv.ErrorCode(err)}
	}
	if err := s.verifyRemote(ctx, sp.Name); err != nil {
		return nil, &control.Error{Key: "table", Msg: err.Error()}
	}
	c, err := kv.NewClient([]kv.Spec{sp}, nil, s.tr)
	if err != nil {
		return nil, &control.Error{Key: "table", Msg: err.Error(), KVCode: kv.ErrorCode(err)}
	}
	s.mu.Lock()
	s.clients[sp.Name] = c
	s.mu.Unlock()
	return &control.TableInfo{Name: sp.Name, Rows: sp.Rows, Dim: sp.Dim, Bounds: sp.Bounds}, nil
}

// checkDeclaredAtStart asks every peer, once they answer, whether it
// holds a table of [[kv.tables]] with another spec (peer phase "spec";
// a peer that does not hold it creates nothing). A peer that does
// refuses, naming each field. The lowest part's spec stands, whatever
// order the nodes check in: this node leaves its own copy out, logged
// with the table and key, when a peer of a lower part refuses (so that
// no shard trains with settings of its own: nodes given another lr each
// applied theirs without a word), and only warns when only higher parts
// do (they leave theirs out). Its rows were only made or loaded at this
// start; the peers' shards, which trainers may be training, are never
// dropped, and a trainer's kv_create with the standing spec makes the
// table here again. Every sampling node checks at its start (a node
// restarted alone with another spec too).
func (s *kvServer) checkDeclaredAtStart(ctx context.Context) {
	if s.store == nil {
		return
	}
	for i := range s.cfg.KV.Tables {
		ts := s.cfg.KV.Tables[i]
		if _, err := s.store.Version(ts.Name); err != nil {
			continue // not held here (left out by a check)
		}
		body, err := json.Marshal(peerSaveRequest{Op: control.OpKVSave, Phase: saveSpec, Spec: &ts})
		if err != nil {
			s.log.Warn("kv: table of [[kv.tables]] not compared with the peers'", "table", ts.Name, "err", err)
			continue
		}
		var clashes, failures []error
		lower := false // a peer of a lower part refused
		for _, p := range s.peers() {
			err := s.sendAck(ctx, p, body)
			switch {
			case err == nil:
			case unknownPhase(err, saveSpec):
				s.log.Debug("kv: a peer of an earlier build cannot compare tables of [[kv.tables]]", "part", p, "table", ts.Name)
			case len(kv.SpecFields(err)) > 0:
				clashes = append(clashes, err)
				lower = lower || p < s.part
			default:
				failures = append(failures, err)
			}
		}
		switch {
		case lower:
			s.createMu.Lock()
			s.forget(ts.Name)
			if s.specLeftOut == nil {
				s.specLeftOut = map[string]bool{}
			}
			s.specLeftOut[ts.Name] = true
			s.createMu.Unlock()
			s.log.Error("kv: table declared with other settings than a peer of a lower part holds: left out on this node, so that no shard trains with settings of its own; "+
				"make [[kv.tables]] alike on every node (a trainer's kv_create with the lowest part's spec makes it here again)",
				"table", ts.Name, "key", fmt.Sprintf("kv.tables[%d]", i), "err", errors.Join(clashes...))
		case len(clashes) > 0:
			s.log.Warn("kv: peers of higher parts hold a table of [[kv.tables]] with other settings: this node's spec stands, and they leave theirs out; make [[kv.tables]] alike on every node",
				"table", ts.Name, "key", fmt.Sprintf("kv.tables[%d]", i), "err", errors.Join(clashes...))
		case len(failures) > 0:
			s.log.Warn("kv: table of [[kv.tables]] not compared with every peer's", "table", ts.Name, "err", errors.Join(failures...))
		}
	}
}

// compareSpec serves a peer's phase "spec": an error naming each field
// when this node holds ts's table with another spec, nil when it holds
// it alike or not at all (it creates nothing).
func (s *kvServer) compareSpec(ts *control.TableSpec) error {
	if ts == nil || s.store == nil {
		return nil
	}
	if err := ts.Validate(); err != nil {
		return err
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if _, err := s.store.Spec(ts.Name); err != nil {
		return nil // not held here
	}
	// Held: Create compares (no table is made), and refuses another
	// spec naming each field.
	_, err := s.store.Create(s.resolve(ts))
	return err
}
