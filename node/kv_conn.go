package node

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"graphnode/kv"
	"graphnode/node/control"
	"graphnode/shm"
)

// pullResponseHead is the size of a kv PullResponse before its rows:
// kind, version, version u64, dim u32, n u32.
const pullResponseHead = 2 + 8 + 4 + 4

// pushSyncHead is the size of a kv PushSyncRequest besides its table
// name and gradients: kind, version, name length u8, step u64, trainer
// u32, world u32, n u32.
const pushSyncHead = 2 + 1 + 8 + 4 + 4 + 4

// checkSyncPush refuses a Sync table whose push cannot reach a node: a
// trainer's push of a step carries the gradient of every row of the
// table in one control frame (the node splits it over the shards), and
// no such frame holds more than control.MaxFrame bytes.
func checkSyncPush(sp kv.Spec) error {
	if sp.Mode != kv.Sync || sp.Dim <= 0 {
		return nil
	}
	room := uint64(control.MaxFrame - pushSyncHead - len(sp.Name))
	if most := room / (4 * uint64(sp.Dim)); sp.Rows > most {
		return fmt.Errorf("node: kv: table %q (mode sync): a trainer's push of one step carries all %d rows × dim %d (%s), over the %s a control frame holds; a sync table of dim %d holds at most %d rows",
			sp.Name, sp.Rows, sp.Dim, shm.FormatSize(int64(sp.Rows)*int64(sp.Dim)*4), shm.FormatSize(control.MaxFrame), sp.Dim, most)
	}
	return nil
}

// leaveTimeout bounds telling the peers that a trainer is gone.
const leaveTimeout = 5 * time.Second

// kvConn is the kv state of one trainer connection: the ranks it pushed
// synchronous steps for, per table, which leave those tables' jobs when
// the connection drops unless the trainer said kv_done first.
type kvConn struct {
	ranks map[syncRank]struct{}
	done  bool
	rows  []float32
	// session is the connection's nonce, drawn at its first synchronous
	// push (0 until then): the node sends it with the connection's pushes
	// and departures, so that the shards tell this process's steps from
	// those of another process with the same rank, an earlier job's
	// included (kv.Store.PushSyncSession).
	session uint64
}

// newSession draws a connection's session: random, so that the
// connections of every node (and of a node that restarts) differ, and
// never 0, which means none.
func newSession() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:]) // never fails (crypto/rand)
		if s := binary.LittleEndian.Uint64(b[:]); s != 0 {
			return s
		}
	}
}

// syncRank is a trainer's rank in the job of one Sync table.
type syncRank struct {
	table string
	rank  int
}

// serveTrainer answers one kv wire message from a trainer of this node,
// forwarding it to the shards that own its rows. The answer is always a
// kv message: an ErrorMsg when the request failed.
func (s *kvServer) serveTrainer(ctx context.Context, body []byte, kc *kvConn) []byte {
	resp, err := s.serveTrainerErr(ctx, body, kc)
	if err != nil {
		if ctx.Err() != nil && s.stopping != nil && s.stopping() {
			err = fmt.Errorf("node is stopping: the request was cut (%w)", err)
		}
		return kv.AppendErrorMsg(nil, kv.NewErrorMsg(err))
	}
	return resp
}

func (s *kvServer) serveTrainerErr(ctx context.Context, body []byte, kc *kvConn) ([]byte, error) {
	kind, err := kv.PeekKind(body)
	if err != nil {
		return nil, err
	}
	switch kind {
	case kv.KindPullRequest:
		var m kv.PullRequest
		if err := kv.DecodePullRequest(body, &m); err != nil {
			return nil, err
		}
		c, err := s.tableClient(m.Table)
		if err != nil {
			return nil, err
		}
		dim, err := c.Dim(m.Table)
		if err != nil {
			return nil, err
		}
		// An answer over the frame limit cannot be sent: the connection
		// would close without a word (and its synchronous ranks leave
		// the job). Refuse it before the rows are gathered.
		if most := (control.MaxFrame - pullResponseHead) / (4 * dim); len(m.IDs) > most {
			return nil, fmt.Errorf("node: kv: pull of %d ids of table %q (dim %d): the answer would exceed the %d-byte frame limit; pull at most %d ids per request",
				len(m.IDs), m.Table, dim, control.MaxFrame, most)
		}
		var v uint64
		kc.rows, v, err = c.PullVersion(ctx, m.Table, m.MinVersion, m.IDs, kc.rows[:0])
		if err != nil {
			return nil, err
		}
		return kv.AppendPullResponse(nil, &kv.PullResponse{Version: v, Dim: uint32(dim), Rows: kc.rows}), nil
	case kv.KindPushRequest:
		var m kv.PushRequest
		if err := kv.DecodePushRequest(body, &m); err != nil {
			return nil, err
		}
		c, err := s.tableClient(m.Table)
		if err != nil {
			return nil, err
		}
		if err := c.Push(ctx, m.Table, m.IDs, m.Grads); err != nil {
			return nil, err
		}
		return kv.AppendAck(nil, &kv.Ack{}), nil
	case kv.KindPushSyncRequest:
		var m kv.PushSyncRequest
		if err := kv.DecodePushSyncRequest(body, &m); err != nil {
			return nil, err
		}
		c, err := s.tableClient(m.Table)
		if err != nil {
			return nil, err
		}
		// From here on, this connection speaks for trainer m.Trainer: if it
		// drops, the trainer has left the job. Its pushes go under its
		// session; a session the trainer sent is replaced, since the
		// departures the shards learn of are the connection's.
		kc.ranks[syncRank{m.Table, int(m.Trainer)}] = struct{}{}
		if kc.session == 0 {
			kc.session = newSession()
		}
		if err := c.PushSyncSession(ctx, m.Table, m.Step, int(m.Trainer), int(m.World), kc.session, m.Grads); err != nil {
			return nil, err
		}
		return kv.AppendAck(nil, &kv.Ack{Version: m.Step + 1}), nil
	case kv.KindLeaveRequest:
		var m kv.LeaveRequest
		if err := kv.DecodeLeaveRequest(body, &m); err != nil {
			return nil, err
		}
		s.sendLeave(ctx, &m)
		return kv.AppendAck(nil, &kv.Ack{}), nil
	}
	return nil, fmt.Errorf("node: kv: a %s is not a request: %w", kind, kv.ErrMalformed)
}

// doneConn is kv_done on a trainer connection: every rank it pushed
// steps for finished its job cleanly, which every shard is told before
// the answer (finish), so that a rerun started when kv_done returns is
// not taken for a second job on the running one's table.
func (s *kvServer) doneConn(kc *kvConn) {
	kc.done = true
	if len(kc.ranks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	for _, r := range kc.sortedRanks() {
		s.finish(ctx, r.table, r.rank, kc.session)
	}
}

// sortedRanks are the ranks the connection pushed steps for, by table
// and rank.
func (kc *kvConn) sortedRanks() []syncRank {
	return slices.SortedFunc(maps.Keys(kc.ranks), func(a, b syncRank) int {
		return cmp.Or(strings.Compare(a.table, b.table), cmp.Compare(a.rank, b.rank))
	})
}

// closeConn runs when a trainer connection ends: each rank it pushed
// steps for leaves the table it pushed to, so its peers' steps fail
// naming it. Other tables are untouched: the ranks of another job on the
// same node, numbered alike, have not left (leaving every table failed
// a concurrent job's steps whenever one job's trainer crashed).
func (s *kvServer) closeConn(kc *kvConn) {
	if kc.done || len(kc.ranks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	for _, r := range kc.sortedRanks() {
		s.log.Warn("trainer left without kv_done; failing its synchronous steps", "table", r.table, "trainer", r.rank)
		s.leave(ctx, r.table, r.rank, kc.session)
	}
}
