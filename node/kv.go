package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"graphnode/kv"
	"graphnode/mesh"
	"graphnode/node/control"
	"graphnode/partition"
)

// kvServer is the node's shard of every kv table and its way to the
// other shards. Trainers reach it only through their own node (control
// socket); the node forwards each request to the owners (its own shard
// straight from the Store) with one kv.Client per table. A client node
// (node.role = "client") has no shard: store is nil and every request
// goes to the sampling nodes.
type kvServer struct {
	cfg *Config
	log *slog.Logger
	// stopping reports whether the node is draining (nil: never): a
	// trainer's request cut by it is said to be, not blamed on the peer
	// it was forwarded to ("peer h0: kv push: context canceled").
	stopping func() bool
	part     int // -1 on a client node
	book     partition.Book
	// numbering tags the node ids of the partition set, the kv.Spec.IDSet
	// and IDSetBefore of "nodes" tables, and gives the relations of
	// "relations" tables.
	numbering numbering
	store     *kv.Store   // nil on a client node
	handler   *kv.Handler // nil on a client node
	tr        *kv.WireTransport
	cli       atomic.Pointer[mesh.Client] // the node's mesh client; nil without a mesh

	mu      sync.Mutex
	clients map[string]*kv.Client

	// createMu serialises the local part of kv_create (Store.Create, the
	// checkpoint load and its undo) and of kv_drop, so that a kv_create
	// of a table that another one is still loading waits until the table
	// is loaded or gone, instead of answering with its initial rows. Never
	// held across a broadcast: two nodes creating at once would each wait
	// for the other's peer request. Taken before mu.
	createMu sync.Mutex
	// creating is, per table, the trainer's kv_create that created the
	// table on this node and is still broadcasting it: until its outcome
	// is known the table may be dropped again. Guarded by createMu.
	creating map[string]*pendingCreate
	// specLeftOut names the tables of [[kv.tables]] this node left out at
	// start for a peer of a lower part holding them with another spec
	// (checkDeclaredAtStart), until created again. Its peers' check of
	// loaded saves takes such a table for none held, not for initial
	// rows beside their loaded ones. Guarded by createMu.
	specLeftOut map[string]bool

	// send carries a node-level request to a peer (broadcast): s.call;
	// tests replace it.
	send func(ctx context.Context, part int, req []byte) ([]byte, error)
	// createWaits, when set (tests only), runs when a kv_create starts
	// waiting for another kv_create of the same table to end.
	createWaits func(name string)

	// prepared holds, by save id, the saves a peer prepared on this node
	// and has not yet committed or aborted (kv_save.go). Guarded by mu.
	prepared map[string]*preparedSave
	// prepareHold is how long a prepared save waits for its commit:
	// savePrepareHold; tests shorten it.
	prepareHold time.Duration
	// saving admits one coordinated save at a time on the coordinator
	// (part saveCoordinator's node; kv_save.go): a buffered channel of
	// one, so that a waiting save can give up with its context.
	saving chan struct{}

	// markMu guards mark, the files that say what each shard holds (its
	// last save, trained since or not) and the saves it held (kv_trained.go).
	markMu sync.Mutex
	mark   markers
}

// newKVServer builds the store with the tables of [kv] and, with
// kv.load, restores them from the checkpoint directory.
func newKVServer(cfg *Config, log *slog.Logger, book partition.Book, numbering numbering) (*kvServer, error) {
	s := &kvServer{cfg: cfg, log: log, part: cfg.ownPart(), book: book, numbering: numbering, clients: map[string]*kv.Client{}, creating: map[string]*pendingCreate{}, prepared: map[string]*preparedSave{}, prepareHold: savePrepareHold, saving: make(chan struct{}, 1)}
	s.send = s.call
	specs := make([]kv.Spec, 0, len(cfg.KV.Tables))
	for i := range cfg.KV.Tables {
		if err := numbering.checkRows(&cfg.KV.Tables[i]); err != nil {
			return nil, fmt.Errorf("node: kv.tables[%d]: %w", i, err)
		}
		sp := s.resolve(&cfg.KV.Tables[i])
		// Config.Validate checked the counted tables; "nodes" and
		// "relations" ones take their rows from the graph.
		if err := checkSyncPush(sp); err != nil {
			return nil, fmt.Errorf("node: kv.tables[%d]: %w", i, err)
		}
		specs = append(specs, sp)
	}
	s.tr = kv.NewWireTransport(s.call)
	if cfg.Client() {
		for _, sp := range specs {
			if _, err := s.client(sp); err != nil {
				return nil, fmt.Errorf("node: kv.tables: %w", err)
			}
		}
		return s, nil
	}
	store, err := kv.New(kv.Config{Part: s.part, Tables: specs, SyncTimeout: cfg.SyncTimeoutDuration(), MaxBytes: cfg.kvMaxBytes()})
	if err != nil {
		return nil, fmt.Errorf("node: kv.tables: %w", err)
	}
	s.store, s.handler = store, kv.NewHandler(store)
	if dir := cfg.KV.CheckpointDir; dir != "" {
		rec, err := store.Recover(dir)
		if err != nil {
			return nil, fmt.Errorf("node: kv.checkpoint_dir: %w", err)
		}
		if len(rec.Finished) > 0 {
			log.Warn("kv: finished a checkpoint save that a crash interrupted", "dir", dir, "files", rec.Finished)
		}
		if len(rec.Removed) > 0 {
			log.Info("kv: removed the temporary files of a checkpoint save that did not complete", "dir", dir, "files", rec.Removed)
		}
	}
	if err := s.readMarkers(); err != nil {
		return nil, err
	}
	for _, sp := range specs {
		if _, err := s.client(sp); err != nil {
			return nil, fmt.Errorf("node: kv.tables: %w", err)
		}
	}
	if cfg.KV.Load && len(specs) > 0 {
		if err := store.Load(cfg.KV.CheckpointDir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("node: kv.load: %w (%s)", err, missingFilesAdvice(cfg.KV.CheckpointDir, specs, s.part))
			}
			return nil, fmt.Errorf("node: kv.load: %w", err)
		}
		// name=version: the step each table resumes at, which should be
		// the same on every node for a synchronous table.
		loaded := store.Tables()
		for i, name := range loaded {
			v, _ := store.Version(name)
			loaded[i] = name + "=" + strconv.FormatUint(v, 10)
		}
		log.Info("kv tables loaded", "dir", cfg.KV.CheckpointDir, "versions", loaded)
	}
	return s, nil
}

// resolve gives a checked TableSpec its shape under the node's book (see
// resolveSpec).
func (s *kvServer) resolve(t *control.TableSpec) kv.Spec { return resolveSpec(s.book, s.numbering, t) }

// numbering tags the node ids of a partition set (graph.toml's
// Numbering), and the tag builds before gave them (LegacyNumbering; 0:
// the same), whose checkpoints are of the same rows; and, of a knowledge
// graph, counts its relations and tags their ids (RelationNumbering).
type numbering struct {
	tag, before uint32
	relations   uint64 // 0: not a knowledge graph
	relTag      uint32
}

// manifestNumbering is m's numbering.
func manifestNumbering(m *partition.Manifest) numbering {
	return numbering{tag: m.Numbering(), before: m.LegacyNumbering(),
		relations: uint64(m.Relations), relTag: m.RelationNumbering()}
}

// resolveSpec gives a checked TableSpec its shape: "nodes" tables follow
// the partition book, and their rows are the node ids of numbering (a
// checkpoint of another partitioning is refused: its rows would be other
// nodes'); dense ones are split evenly over the parts, "relations" ones
// of numbering's relations, tagged as theirs. The rows of a "relations"
// table of a graph without relations are 0, which checkRows refuses.
func resolveSpec(book partition.Book, numbering numbering, t *control.TableSpec) kv.Spec {
	switch {
	case t.Rows.Nodes:
		sp := kvSpec(t, book.NumNodes(), slices.Clone(book.Bounds))
		sp.IDSet, sp.IDSetBefore = numbering.tag, numbering.before
		return sp
	case t.Rows.Relations:
		sp := kvSpec(t, numbering.relations, kv.EvenBounds(numbering.relations, book.Parts()))
		sp.IDSet, sp.IDSetRelations = numbering.relTag, true
		return sp
	}
	return kvSpec(t, t.Rows.N, kv.EvenBounds(t.Rows.N, book.Parts()))
}

// checkRows refuses a "relations" table where the partition set is not a
// knowledge graph.
func (n numbering) checkRows(t *control.TableSpec) error {
	if t.Rows.Relations && n.relations == 0 {
		return fmt.Errorf(`table %q: rows = "relations", but graph.toml lists no relations: the partitioning is not of a knowledge graph (node partition --format kg)`, t.Name)
	}
	return nil
}

// client is the kv.Client of a table, made on first use.
func (s *kvServer) client(sp kv.Spec) (*kv.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[sp.Name]; ok {
		return c, nil
	}
	c, err := kv.NewClient([]kv.Spec{sp}, s.store, s.tr)
	if err != nil {
		return nil, err
	}
	s.clients[sp.Name] = c
	return c, nil
}

// tableClient is the client of an existing table.
func (s *kvServer) tableClient(name string) (*kv.Client, error) {
	s.mu.Lock()
	c, ok := s.clients[name]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("node: kv: table %q (create it with kv_create or [[kv.tables]]): %w", name, kv.ErrUnknownTable)
	}
	return c, nil
}

// call carries one kv message to the node serving part: pulls may be
// retried by the mesh, everything else is sent once.
func (s *kvServer) call(ctx context.Context, part int, req []byte) ([]byte, error) {
	cli := s.cli.Load()
	if cli == nil {
		return nil, fmt.Errorf("node: kv: part %d: this node has no mesh", part)
	}
	if k, _ := kv.PeekKind(req); k == kv.KindPullRequest {
		return cli.KVPull(ctx, part, req)
	}
	return cli.KVSend(ctx, part, kvOpName(req), req)
}

// kvOpName names a request to a peer in errors: the op (and phase) of a
// node-level JSON request, else the kv message's kind.
func kvOpName(req []byte) string {
	if len(req) > 0 && req[0] == '{' {
		var r struct{ Op, Phase string }
		if json.Unmarshal(req, &r) == nil && r.Op != "" {
			if r.Phase != "" {
				return r.Op + " (" + r.Phase + ")"
			}
			return r.Op
		}
		return "kv request"
	}
	switch k, _ := kv.PeekKind(req); k {
	case kv.KindPushRequest:
		return "kv push"
	case kv.KindPushSyncRequest:
		return "kv push_sync"
	case kv.KindLeaveRequest:
		return "kv leave"
	default:
		return "kv " + k.String()
	}
}

// peers lists every part but this node's.
func (s *kvServer) peers() []int {
	var ps []int
	for p := range s.book.Parts() {
		if p != s.part {
			ps = append(ps, p)
		}
	}
	return ps
}

// broadcast sends a node-level JSON request (kv_create) to
// every peer and waits for their kv answers.
func (s *kvServer) broadcast(ctx context.Context, req *control.Request) error {
	body, err := control.MarshalKVRequest(req)
	if err != nil {
		return err
	}
	return s.broadcastBody(ctx, body)
}

// broadcastBody sends body to every peer and waits for their acks; the
// error names each part that failed.
func (s *kvServer) broadcastBody(ctx context.Context, body []byte) error {
	_, _, err := s.broadcastAcks(ctx, body)
	return err
}

// broadcastAcks sends body to every peer and waits for their acks: the
// peers' parts, and the Version of the ack of each that answered one; the
// error names each part that failed.
func (s *kvServer) broadcastAcks(ctx context.Context, body []byte) ([]int, []uint64, error) {
	acks := make([]uint64, len(s.peers()))
	ps, err := s.sendAll(ctx, body, func(i, p int, resp []byte) (err error) {
		acks[i], err = ackOf(p, resp)
		return err
	})
	return ps, acks, err
}

// sendAll sends body to every peer at once and hands each answer to
// answer (i: the peer's index in the parts returned); the error names
// each part whose send or answer failed.
func (s *kvServer) sendAll(ctx context.Context, body []byte, answer func(i, part int, resp []byte) error) ([]int, error) {
	ps := s.peers()
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			resp, err := s.send(ctx, p, body)
			if err == nil {
				err = answer(i, p, resp)
			}
			if err != nil {
				errs[i] = fmt.Errorf("part %d: %w", p, err)
			}
		})
	}
	wg.Wait()
	return ps, errors.Join(errs...)
}

// sendAck sends body to the node of part and decodes its Ack.
func (s *kvServer) sendAck(ctx context.Context, part int, body []byte) error {
	resp, err := s.send(ctx, part, body)
	if err != nil {
		return err
	}
	return ackError(part, resp)
}

// ackError decodes a kv answer that should be an Ack.
func ackError(part int, resp []byte) error {
	_, err := ackOf(part, resp)
	return err
}

// ackOf decodes a kv answer that should be an Ack, and returns its
// Version.
func ackOf(part int, resp []byte) (uint64, error) {
	k, err := kv.PeekKind(resp)
	if err != nil {
		return 0, err
	}
	if k == kv.KindError {
		var m kv.ErrorMsg
		if err := kv.DecodeErrorMsg(resp, &m); err != nil {
			return 0, err
		}
		return 0, &kv.RemoteError{Part: part, Code: m.Code, Text: m.Text}
	}
	var a kv.Ack
	err = kv.DecodeAck(resp, &a)
	return a.Version, err
}

// A peer's Ack of a forwarded kv_drop says in its Version whether the
// peer held the table; a node built before it answers 0, which says
// neither.
const (
	dropAckAbsent uint64 = 1
	dropAckHeld   uint64 = 2
)

// drop removes a table from this node's store and clients and, when
// forward is set, from every peer. A node that does not hold it is not an
// error: a drop repeated after a partial failure finishes the job. The
// marker of a shard that held trained rows says the drop until the table
// is created alike everywhere (forgetDropped).
func (s *kvServer) drop(ctx context.Context, name string, forward bool) (*control.DropInfo, error) {
	s.createMu.Lock()
	dropped := s.forgetDropped(name)
	s.createMu.Unlock()
	if dropped {
		s.log.Info("kv table dropped", "table", name)
	}
	info := &control.DropInfo{Name: name, Dropped: dropped}
	if !forward {
		return info, nil
	}
	body, err := control.MarshalKVRequest(&control.Request{Op: control.OpKVDrop, Name: name})
	if err != nil {
		return nil, err
	}
	ps, acks, err := s.broadcastAcks(ctx, body)
	if err != nil {
		return nil, &control.Error{Key: "name", Msg: fmt.Sprintf("drop %q on the other nodes: %v (the parts named may still hold it: kv_drop it again once the cause is fixed, "+
			"which finishes the drop; a kv_create of it meanwhile is refused where a node kept trained rows)", name, err)}
	}
	for i, p := range ps {
		switch acks[i] {
		case dropAckHeld:
			info.DroppedParts = append(info.DroppedParts, p)
		case dropAckAbsent:
		default:
			info.UnknownParts = append(info.UnknownParts, p)
		}
	}
	slices.Sort(info.DroppedParts)
	slices.Sort(info.UnknownParts)
	return info, nil
}

// forget drops table name from this node's store (none on a client
// node) and its client; it reports whether either held it.
func (s *kvServer) forget(name string) bool {
	dropped := s.store != nil && s.store.Drop(name)
	s.markMu.Lock()
	delete(s.mark.known, name) // the saves a dropped shard held are no longer held here
	s.markMu.Unlock()
	s.mu.Lock()
	_, had := s.clients[name]
	delete(s.clients, name)
	s.mu.Unlock()
	return dropped || s.store == nil && had
}

// leave tells every shard that trainer rank is gone from the Sync table
// named table ("": from every Sync table), so that a step it belongs to
// fails for the others at once instead of timing out. session is the
// departed connection's (0: any; never with table ""): a shard that
// counts another session as the rank ignores it.
func (s *kvServer) leave(ctx context.Context, table string, rank int, session uint64) {
	s.sendLeave(ctx, &kv.LeaveRequest{Trainer: uint32(rank), Table: table, Session: session})
}

// finish tells every shard of table that the session's rank finished its
// job cleanly (the trainer said kv_done): no departure, but the rank is
// free at once for another session, a rerun's (kv.Store.
// FinishTableSession), which the shards otherwise refused as a second
// job's, the finished one holding the rank.
func (s *kvServer) finish(ctx context.Context, table string, rank int, session uint64) {
	s.sendLeave(ctx, &kv.LeaveRequest{Trainer: uint32(rank), Table: table, Session: session, Done: true})
}

// sendLeave applies m to this node's shards and sends it to every peer.
func (s *kvServer) sendLeave(ctx context.Context, m *kv.LeaveRequest) {
	table, rank := m.Table, int(m.Trainer)
	if s.store != nil {
		switch {
		case table == "":
			s.store.Leave(rank)
		case m.Done:
			s.store.FinishTableSession(table, rank, m.Session)
		default:
			s.store.LeaveTableSession(table, rank, m.Session)
		}
	}
	req := kv.AppendLeaveRequest(nil, m)
	var wg sync.WaitGroup
	for _, p := range s.peers() {
		wg.Go(func() {
			resp, err := s.call(ctx, p, req)
			if err == nil {
				err = ackError(p, resp)
			}
			if err != nil {
				s.log.Warn("kv leave not delivered", "part", p, "table", table, "trainer", rank, "err", err)
			}
		})
	}
	wg.Wait()
}

// KV serves a peer's kv message (mesh.KVHandler): kv requests go to this
// node's shards; a body starting with '{' is a node-level kv_create or
// kv_save forwarded by the peer that a trainer asked. The answer is a kv
// message, or, to a kv_save phase that asks for one, a JSON body (a
// saveAnswer, kv_save_tables.go).
func (s *kvServer) KV(ctx context.Context, req []byte) ([]byte, error) {
	if req[0] != '{' {
		return s.handler.Handle(ctx, req, nil), nil
	}
	var r control.Request
	var ack kv.Ack // Version: a kv_drop's dropAck
	err := json.Unmarshal(req, &r)
	switch {
	case err != nil:
		err = fmt.Errorf("node: kv request from a peer: %v: %w", err, kv.ErrMalformed)
	case r.Op == control.OpKVCreate && r.Table != nil:
		if err = r.Table.Validate(); err == nil {
			_, err = s.create(ctx, r.Table, false, r.ReplaceResized)
		}
	case r.Op == control.OpKVSave:
		var answer []byte
		if answer, err = s.peerSave(ctx, req); err == nil && answer != nil {
			return answer, nil
		}
	case r.Op == control.OpKVDrop && r.Name != "":
		var info *control.DropInfo
		if info, err = s.drop(ctx, r.Name, false); err == nil {
			ack.Version = dropAckAbsent
			if info.Dropped {
				ack.Version = dropAckHeld
			}
		}
	default:
		err = fmt.Errorf("node: kv request from a peer: op %q: %w", r.Op, kv.ErrMalformed)
	}
	if err != nil {
		return kv.AppendErrorMsg(nil, kv.NewErrorMsg(err)), nil
	}
	return kv.AppendAck(nil, &ack), nil
}

// meshHandler is what the mesh server calls: the partition's handler
// plus the kv shards and the remote loaders.
type meshHandler struct {
	*handler
	kv   *kvServer
	node *Node // remote loaders (remote_loader.go)
}

// ReadFile implements mesh.FileHandler (fetch.go).
func (h meshHandler) ReadFile(ctx context.Context, path string, off int64, dst []byte) (int64, int, error) {
	return h.node.ReadFile(ctx, path, off, dst)
}

// KV implements mesh.KVHandler.
func (h meshHandler) KV(ctx context.Context, req []byte) ([]byte, error) { return h.kv.KV(ctx, req) }

// missingFilesAdvice says what to do when kv.load finds no checkpoint
// file for a table of [[kv.tables]] at start: a first start when none of
// them has one, else the tables without one, added since the last save.
func missingFilesAdvice(dir string, specs []kv.Spec, part int) string {
	var missing, found []string
	for _, sp := range specs {
		has := false
		for _, f := range []string{kv.FileName(sp.Name, part), kv.ExitFileName(sp.Name, part)} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				has = true
			}
		}
		if has {
			found = append(found, sp.Name)
		} else {
			missing = append(missing, sp.Name)
		}
	}
	if len(found) == 0 {
		return "with kv.load, every table of [[kv.tables]] resumes from its checkpoint file at start: " +
			"start the first time with load = false, and save (node kv save) before a restart with load = true; or give checkpoint_dir the files of a save"
	}
	return fmt.Sprintf("tables of [[kv.tables]] without a checkpoint file, added since the last save: %s (the others have theirs: %s); "+
		"take them out of [[kv.tables]] for this start and let a trainer's kv_create make them (with kv.load a table without a file starts from its initial rows), then save; "+
		"do not start with load = false: the tables that have files would start from their initial rows, and the check of lost training would refuse them",
		strings.Join(missing, ", "), strings.Join(found, ", "))
}

// tableStats describes the tables this node holds a shard of, by name
// (a table dropped meanwhile is left out); nil on a client node.
func (s *kvServer) tableStats() []control.KVTableStats {
	if s.store == nil {
		return nil
	}
	var out []control.KVTableStats
	for _, name := range s.store.Tables() {
		sp, err := s.store.Spec(name)
		if err != nil {
			continue
		}
		v, err := s.store.Version(name)
		if err != nil {
			continue
		}
		o, changed, err := s.store.Origin(name)
		if err != nil {
			continue
		}
		lo, hi := sp.Range(s.part)
		out = append(out, control.KVTableStats{
			Name: name, Rows: sp.Rows, Dim: sp.Dim, Mode: sp.Mode.String(), Optimizer: sp.Opt.String(),
			ShardLo: lo, ShardHi: hi, Version: v, Checkpoint: o.Path, Loaded: o.FromLoad, Changed: changed,
		})
	}
	slices.SortFunc(out, func(a, b control.KVTableStats) int { return strings.Compare(a.Name, b.Name) })
	return out
}
