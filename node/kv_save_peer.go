package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"graphnode/kv"
)

// The peer side of a coordinated kv_save (kv_save.go): prepare,
// commit and abort of a save the coordinator asked for.

// peerSave serves a kv_save forwarded by a peer. Its answer is an Ack
// (answer nil), or, to a prepare or coordinate that asked for the
// tables (ListTables), a saveAnswer.
func (s *kvServer) peerSave(ctx context.Context, req []byte) (answer []byte, _ error) {
	var r peerSaveRequest
	if err := json.Unmarshal(req, &r); err != nil {
		return nil, fmt.Errorf("node: kv_save from a peer: %v: %w", err, kv.ErrMalformed)
	}
	if s.store == nil {
		return nil, errors.New("node: kv_save from a peer: this node holds no kv shard (a client node)")
	}
	switch r.Phase {
	case "":
		_, err := s.saveLocal()
		return nil, err
	case saveCoordinate:
		if s.part != saveCoordinator {
			return nil, fmt.Errorf("node: kv_save from a peer: this node serves part %d, saves are coordinated by part %d's: %w", s.part, saveCoordinator, kv.ErrMalformed)
		}
		saved, err := s.coordinate(ctx)
		if err != nil || !r.ListTables {
			return nil, err
		}
		return json.Marshal(&saveAnswer{Tables: saved})
	case savePrepare:
		return s.prepare(ctx, &r)
	case saveCommit:
		return nil, s.commitPrepared(r.Save, r.Compared)
	case saveAbort:
		if ps := s.takePrepared(r.Save); ps != nil {
			ps.timer.Stop()
			ps.p.Abort()
		}
		return nil, nil
	case saveCheck:
		return nil, s.checkLoaded(&r)
	case saveVerify:
		if err := s.refuseMixed(ctx, r.Table); err != nil {
			return nil, err
		}
		return nil, s.refuseLost(ctx, r.Table)
	case saveLost:
		return nil, s.answerLost(&r)
	case saveSpec:
		return nil, s.compareSpec(r.Spec)
	case saveLostVerify:
		_, err := s.checkLost(ctx, r.Table)
		return nil, err
	}
	return nil, errUnknownPhase(r.Phase)
}

// prepare serves a peer's prepare of save r.Save: this node's shards
// are written and held until the commit or abort, and, when r asks, the
// tables written are answered.
func (s *kvServer) prepare(ctx context.Context, r *peerSaveRequest) ([]byte, error) {
	dir, err := s.checkpointDir()
	if err != nil {
		return nil, err
	}
	if err := s.unsettledLoss(); err != nil {
		return nil, err
	}
	if r.Coordinated {
		// The coordinator runs one save at a time and ends each
		// before the next: a save of it still held here belongs to
		// a coordinator that died before its commit or abort (and
		// has restarted). That commit never comes; holding the save
		// would make this prepare wait out savePrepareWait and fail.
		s.abortSuperseded(r.Save)
	}
	wctx, cancel := context.WithTimeout(ctx, savePrepareWait)
	defer cancel()
	p, err := s.store.PrepareSave(wctx, dir, kv.ParseSaveID(r.Save))
	if err != nil {
		return nil, err
	}
	var answer []byte
	if r.ListTables {
		marked, dropped := s.markedTables(p.Specs())
		if answer, err = json.Marshal(&saveAnswer{Tables: preparedTables(p.Specs()), Marked: marked, Dropped: dropped}); err != nil {
			p.Abort()
			return nil, err
		}
	}
	ps := &preparedSave{p: p, coordinated: r.Coordinated}
	s.mu.Lock()
	if old := s.prepared[r.Save]; old != nil {
		s.mu.Unlock()
		p.Abort()
		return nil, fmt.Errorf("node: kv_save %s: prepared twice: %w", r.Save, kv.ErrMalformed)
	}
	s.prepared[r.Save] = ps
	hold := s.prepareHold
	id := r.Save
	ps.timer = time.AfterFunc(hold, func() {
		if s.takePrepared(id) == ps {
			p.Abort()
			s.log.Warn("kv save: no commit from the node that asked; the prepared save is dropped, the previous checkpoint kept", "save", id, "after", hold)
		}
	})
	s.mu.Unlock()
	return answer, nil
}

// commitPrepared serves a peer's commit of save id (compared: see
// peerSaveRequest.Compared).
func (s *kvServer) commitPrepared(id string, compared bool) error {
	ps := s.takePrepared(id)
	if ps == nil {
		return fmt.Errorf("node: kv_save %s: nothing prepared on this node to commit (dropped after %v without a commit, or the node stopped): its previous checkpoint is kept", id, s.prepareHold)
	}
	ps.timer.Stop()
	if err := ps.p.Commit(); err != nil {
		return err
	}
	s.syncMarkers() // as after coordinate's commit
	if compared {
		s.settleDropped(preparedTables(ps.p.Specs()))
	}
	return nil
}

// errUnknownPhase is peerSave's answer to a phase it does not serve; a
// node of a later build asking a phase this one lacks tells it with
// unknownPhase.
func errUnknownPhase(phase string) error {
	return fmt.Errorf("node: kv_save from a peer: phase %q: %w", phase, kv.ErrMalformed)
}

// unknownPhase reports whether err is a peer's answer that it does not
// serve phase (a peer of an earlier build).
func unknownPhase(err error, phase string) bool {
	return errors.Is(err, kv.ErrMalformed) && strings.Contains(err.Error(), fmt.Sprintf("phase %q", phase))
}

// takePrepared removes and returns the save a peer prepared under id, or
// nil.
func (s *kvServer) takePrepared(id string) *preparedSave {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.prepared[id]
	delete(s.prepared, id)
	return ps
}

// abortSuperseded aborts the saves the coordinator prepared on this node
// before save id.
func (s *kvServer) abortSuperseded(id string) {
	s.abortPrepared("the node that coordinates saves prepares the next one, "+id, func(old string, ps *preparedSave) bool {
		return ps.coordinated && old != id
	})
}

// abortPrepared aborts the saves peers prepared on this node that drop
// selects (nil: every one), each logged with why.
func (s *kvServer) abortPrepared(why string, drop func(id string, ps *preparedSave) bool) {
	s.mu.Lock()
	held := map[string]*preparedSave{}
	for id, ps := range s.prepared {
		if drop == nil || drop(id, ps) {
			held[id] = ps
			delete(s.prepared, id)
		}
	}
	s.mu.Unlock()
	for id, ps := range held {
		ps.timer.Stop()
		ps.p.Abort()
		s.log.Warn("kv save: prepared save dropped, its commit will fail", "save", id, "why", why)
	}
}
