package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"graphnode/kv"
	"graphnode/node/control"
)

// KV is a trainer's connection to the parameter server through its own
// node (docs/control.md, "kv"): the node forwards every request to the
// shards that own the rows, over the mesh. Trainers hold no certificates.
// Requests on one KV are sent one at a time (a mutex orders them); open
// several for concurrent calls. When the connection drops without Done,
// the node tells every shard that the ranks this connection pushed
// synchronous steps for have left, so their steps fail for the others.
type KV struct {
	session
	// dims is the dim of each table pulled on this connection, which
	// sizes its pulls' requests. Guarded by session.mu.
	dims map[string]int
}

// DialKV connects to the node listening on socket.
func DialKV(ctx context.Context, socket string) (*KV, error) {
	s, err := dial(ctx, socket)
	if err != nil {
		return nil, err
	}
	return &KV{session: s, dims: map[string]int{}}, nil
}

// session is a control connection whose requests are sent one at a time,
// with a buffer for encoding them.
type session struct {
	mu   *sync.Mutex
	conn net.Conn // nil once closed
	buf  []byte
	// broke is the error of the call that left the stream at an unknown
	// point (see exchange), after which the session closed conn.
	broke error
	// raw is the connection as dialled, which Close closes without
	// waiting for mu: a call in progress (a synchronous push waiting
	// for the other trainers) holds mu until its answer comes.
	raw    net.Conn
	closed *atomic.Bool
	// frame is the most bytes a request or an answer holds, which sizes
	// the pulls of many ids: control.MaxFrame (tests lower it).
	frame int
}

func dial(ctx context.Context, socket string) (session, error) {
	conn, err := dialNode(ctx, socket)
	if err != nil {
		return session{}, err
	}
	return session{mu: new(sync.Mutex), conn: conn, raw: conn, closed: new(atomic.Bool), frame: control.MaxFrame}, nil
}

// Close closes the connection, ending a call in progress with an error.
// Idempotent.
func (s *session) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	err := s.raw.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil // the session closed it after an interrupted call
	}
	s.mu.Lock()
	s.conn = nil
	s.mu.Unlock()
	return err
}

// usable returns nil while the session's connection can carry a request,
// and otherwise why not. The caller holds mu.
func (s *session) usable() error {
	switch {
	case s.closed.Load():
		return errors.New("connection closed")
	case s.broke != nil:
		return fmt.Errorf("connection closed after an interrupted call (%v)", s.broke)
	case s.conn == nil:
		return errors.New("connection closed")
	}
	return nil
}

// failed records the error of an exchange; when it broke the stream, the
// session closes its connection, so that no later call reads a stale
// answer as its own. The caller holds mu.
func (s *session) failed(err error, broken bool) {
	if broken && s.conn != nil {
		s.conn.Close()
		s.conn, s.broke = nil, err
	}
}

func (k *KV) request(ctx context.Context, req *control.Request) (*control.Response, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.usable(); err != nil {
		return nil, fmt.Errorf("client: %s: %w", req.Op, err)
	}
	resp, broken, err := roundTrip(ctx, k.conn, req)
	if err != nil {
		k.failed(err, broken)
	}
	return resp, err
}

// Create declares a table on every node (kv_create): a no-op when it
// exists with an equal spec, an error naming the field that differs
// otherwise.
func (k *KV) Create(ctx context.Context, spec control.TableSpec) (*control.TableInfo, error) {
	resp, err := k.request(ctx, &control.Request{Op: control.OpKVCreate, Table: &spec})
	if err != nil {
		return nil, err
	}
	if resp.KVTable == nil {
		return nil, fmt.Errorf("client: kv_create response without a table: %w", control.ErrProtocol)
	}
	return resp.KVTable, nil
}

// CreateReplacingResized is Create of a table whose size follows a model
// (node train --save's parameters): with [kv] load, a checkpoint file
// that holds the table with another number of rows, every other field
// alike, is not loaded, and the next kv_save replaces it; until then a
// node's exit save leaves the table out, and its files stay what a
// restart loads (control.Request.ReplaceResized). A node of an earlier
// build refuses the request's field.
func (k *KV) CreateReplacingResized(ctx context.Context, spec control.TableSpec) (*control.TableInfo, error) {
	resp, err := k.request(ctx, &control.Request{Op: control.OpKVCreate, Table: &spec, ReplaceResized: true})
	if err != nil {
		return nil, err
	}
	if resp.KVTable == nil {
		return nil, fmt.Errorf("client: kv_create response without a table: %w", control.ErrProtocol)
	}
	return resp.KVTable, nil
}

// Drop removes a table from every node (kv_drop); Dropped says whether
// this node held it, DroppedParts which peers did (Any: some node).
// Checkpoint files stay on disk.
func (k *KV) Drop(ctx context.Context, name string) (*control.DropInfo, error) {
	k.learn(name, 0)
	resp, err := k.request(ctx, &control.Request{Op: control.OpKVDrop, Name: name})
	if err != nil {
		return nil, err
	}
	if resp.KVDrop == nil {
		return nil, fmt.Errorf("client: kv_drop response without a result: %w", control.ErrProtocol)
	}
	return resp.KVDrop, nil
}

// Save checkpoints every shard of every table (kv_save).
func (k *KV) Save(ctx context.Context) (*control.SaveInfo, error) {
	resp, err := k.request(ctx, &control.Request{Op: control.OpKVSave})
	if err != nil {
		return nil, err
	}
	if resp.KVSave == nil {
		return nil, fmt.Errorf("client: kv_save response without a result: %w", control.ErrProtocol)
	}
	return resp.KVSave, nil
}

// Done tells the node that this trainer finished: closing the connection
// afterwards is not leaving the job.
func (k *KV) Done(ctx context.Context) error {
	_, err := k.request(ctx, &control.Request{Op: control.OpKVDone})
	return err
}

// call sends one kv wire message and returns the answer's bytes, turning
// an ErrorMsg into an error that matches kv's sentinels (errors.Is).
func (k *KV) call(ctx context.Context, op string, enc func([]byte) []byte) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.usable(); err != nil {
		return nil, fmt.Errorf("client: kv %s: %w", op, err)
	}
	k.buf = enc(k.buf[:0])
	resp, broken, err := exchange(ctx, k.conn, k.buf)
	if err != nil {
		k.failed(err, broken)
		return nil, fmt.Errorf("client: kv %s: %w", op, err)
	}
	kind, err := kv.PeekKind(resp)
	if err != nil {
		return nil, fmt.Errorf("client: kv %s: answer: %w", op, err)
	}
	if kind == kv.KindError {
		var m kv.ErrorMsg
		if err := kv.DecodeErrorMsg(resp, &m); err != nil {
			return nil, fmt.Errorf("client: kv %s: answer: %w", op, err)
		}
		re := &kv.RemoteError{Code: m.Code, Text: m.Text}
		return nil, &kvError{text: m.Text, sentinel: re.Unwrap()}
	}
	return resp, nil
}

// kvError is an error the node answered: its text, and the kv sentinel
// its code names (nil for none), so that errors.Is(err, kv.ErrStepFailed)
// works on the trainer's side.
type kvError struct {
	text     string
	sentinel error
}

func (e *kvError) Error() string { return "client: " + e.text }
func (e *kvError) Unwrap() error { return e.sentinel }

func (k *KV) ack(ctx context.Context, op string, enc func([]byte) []byte) (uint64, error) {
	resp, err := k.call(ctx, op, enc)
	if err != nil {
		return 0, err
	}
	var a kv.Ack
	if err := kv.DecodeAck(resp, &a); err != nil {
		return 0, fmt.Errorf("client: kv %s: answer: %w", op, err)
	}
	return a.Version, nil
}

// pullResponseHead is the size of a PullResponse before its rows: kind,
// version, version u64, dim u32, n u32.
const pullResponseHead = 2 + 8 + 4 + 4

// pullPer is how many ids of a table of dim one pull carries: its answer
// and its request must each fit a frame of frame bytes (the node refuses
// a pull whose answer would not). At least one.
func pullPer(frame int, table string, dim int) int {
	request := 2 + 1 + len(table) + 8 + 4 // kind, version, name, min_version, n
	return max(1, min((frame-pullResponseHead)/(4*max(dim, 1)), (frame-request)/8))
}

// dim is the dim of table learnt on this connection, 0 when unknown.
func (k *KV) dim(table string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dims[table]
}

// learn records the dim of table; 0 forgets it (a table dropped, or one
// whose pull failed: made again with another dim, it is learnt anew).
func (k *KV) learn(table string, dim int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if dim == 0 {
		delete(k.dims, table)
		return
	}
	k.dims[table] = dim
}

// Pull appends the rows of ids to dst, in the order of ids; on error dst
// is returned as it was. See PullVersion for pulls of many ids.
func (k *KV) Pull(ctx context.Context, table string, ids []uint64, dst []float32) ([]float32, error) {
	dst, _, err := k.PullVersion(ctx, table, 0, ids, dst)
	return dst, err
}

// PullVersion is Pull once every shard involved reached minVersion (Sync
// tables); it returns the smallest version among them.
//
// One answer must fit a 64 MiB frame (the node refuses a pull whose
// answer would not: 200k rows of dim 128), so ids go in as many requests
// as their rows need, the table's dim learnt once per connection from a
// pull of row 0. Every request waits for minVersion, so every row is of
// a version >= minVersion, and the version returned is the lowest any
// request was answered with (as one request's is the lowest of its
// shards'): each row is of that version or a later one. A Sync table
// steps only once every trainer of its job pushed, so a trainer of the
// job pulling between its own steps (as Sync does) gets the rows of one
// version; a reader outside the job may get rows of the step before and
// of the step after in one pull, as it may from two shards in one
// request. An error of a request of several names the ids it held
// (ids[lo:hi]): the node's indexes then count from lo.
func (k *KV) PullVersion(ctx context.Context, table string, minVersion uint64, ids []uint64, dst []float32) ([]float32, uint64, error) {
	start := len(dst)
	dim := k.dim(table)
	if dim == 0 && len(ids) > 1 {
		var err error
		if _, _, dim, err = k.pull(ctx, table, 0, []uint64{0}, nil); err != nil {
			return dst, 0, err
		}
	}
	per := len(ids)
	if dim > 0 {
		per = pullPer(k.frame, table, dim)
	}
	if len(ids) <= per {
		dst, v, got, err := k.pull(ctx, table, minVersion, ids, dst)
		if err != nil {
			k.learn(table, 0)
			return dst[:start], 0, err
		}
		if len(ids) > 0 {
			k.learn(table, got)
		}
		return dst, v, nil
	}
	dst = slices.Grow(dst, len(ids)*dim)
	var version uint64
	for lo := 0; lo < len(ids); lo += per {
		hi := min(len(ids), lo+per)
		var v uint64
		var got int
		var err error
		if dst, v, got, err = k.pull(ctx, table, minVersion, ids[lo:hi], dst); err == nil && got != dim {
			err = fmt.Errorf("client: kv pull: table %q: rows of dim %d, then %d: the table changed between requests: %w", table, dim, got, kv.ErrShape)
		}
		if err != nil {
			k.learn(table, 0)
			return dst[:start], 0, fmt.Errorf("%w (ids[%d:%d] of %d, pulled in requests of %d)", err, lo, hi, len(ids), per)
		}
		if lo == 0 || v < version {
			version = v
		}
	}
	k.learn(table, dim)
	return dst, version, nil
}

// pull sends one PullRequest and appends its rows to dst; it returns
// their version and dim.
func (k *KV) pull(ctx context.Context, table string, minVersion uint64, ids []uint64, dst []float32) ([]float32, uint64, int, error) {
	resp, err := k.call(ctx, "pull", func(b []byte) []byte {
		return kv.AppendPullRequest(b, &kv.PullRequest{Table: table, MinVersion: minVersion, IDs: ids})
	})
	if err != nil {
		return dst, 0, 0, err
	}
	// The rows are decoded into dst's room, where there is enough.
	m := kv.PullResponse{Rows: dst[len(dst):]}
	if err := kv.DecodePullResponse(resp, &m); err != nil {
		return dst, 0, 0, fmt.Errorf("client: kv pull: answer: %w", err)
	}
	if m.Dim == 0 || len(m.Rows) != len(ids)*int(m.Dim) {
		return dst, 0, 0, fmt.Errorf("client: kv pull: %d values of dim %d for %d ids: %w", len(m.Rows), m.Dim, len(ids), control.ErrProtocol)
	}
	return append(dst, m.Rows...), m.Version, int(m.Dim), nil
}

// Push sends gradients of an Async table (len(ids)·dim values) in one
// message, which must fit a 64 MiB frame (12 + len(table) + 8·len(ids) +
// 4·len(grads) bytes: about 2.8 million ids of dim 4); a larger push is
// refused, saying how many ids of its dim fit.
func (k *KV) Push(ctx context.Context, table string, ids []uint64, grads []float32) error {
	// The message carries dim = len(grads)/len(ids): values that are not
	// a whole row per id would reach the node as a malformed message.
	if len(ids) == 0 && len(grads) > 0 || len(ids) > 0 && (len(grads) == 0 || len(grads)%len(ids) != 0) {
		return fmt.Errorf("client: kv push: table %q: %d ids with %d gradient values, want a row of dim values per id: %w", table, len(ids), len(grads), kv.ErrShape)
	}
	dim := len(grads) / max(len(ids), 1)
	// A push is not split: a row in two pushes would take two optimiser
	// steps (one of Adagrad or Adam differs from one of the summed
	// gradient), so the caller chooses where to cut.
	if size := pushRequestHead + len(table) + 8*len(ids) + 4*len(grads); size > k.frame {
		return fmt.Errorf("client: kv push: table %q: %d ids of dim %d make a %d-byte message, over the %d-byte frame: push at most %d ids of dim %d per call: %w",
			table, len(ids), dim, size, k.frame, pushPer(k.frame, table, dim), dim, control.ErrProtocol)
	}
	_, err := k.ack(ctx, "push", func(b []byte) []byte {
		return kv.AppendPushRequest(b, &kv.PushRequest{Table: table, Dim: uint32(dim), IDs: ids, Grads: grads})
	})
	return err
}

// PushRows is Push for ids that are distinct rows, in as many messages as
// the frame needs: each row's gradient goes in one message whole, so each
// row still takes one optimiser step, as Python's Embedding.step pushes
// its merged rows. ids must not repeat (a row in two messages would take
// two steps). An error of a push of several names the ids it held
// (ids[lo:hi]); the pushes before it were applied.
func (k *KV) PushRows(ctx context.Context, table string, ids []uint64, grads []float32) error {
	if len(ids) == 0 || len(grads)%len(ids) != 0 {
		return k.Push(ctx, table, ids, grads) // Push refuses a mismatch, naming it
	}
	dim := len(grads) / len(ids)
	per := pushPer(k.frame, table, dim)
	if len(ids) <= per {
		return k.Push(ctx, table, ids, grads)
	}
	for lo := 0; lo < len(ids); lo += per {
		hi := min(len(ids), lo+per)
		if err := k.Push(ctx, table, ids[lo:hi], grads[lo*dim:hi*dim]); err != nil {
			return fmt.Errorf("%w (ids[%d:%d] of %d, pushed in messages of %d; the ones before were applied)", err, lo, hi, len(ids), per)
		}
	}
	return nil
}

// pushPer is how many ids of dim one push to table carries within a
// frame of frame bytes. At least one.
func pushPer(frame int, table string, dim int) int {
	return max(1, (frame-pushRequestHead-len(table))/(8+4*dim))
}

// pushRequestHead is the size of a PushRequest besides its table name,
// ids and gradients: kind, version, name length, dim u32, n u32.
const pushRequestHead = 2 + 1 + 4 + 4

// PushSync contributes trainer's gradient (every row of the table) to a
// synchronous step and blocks until every shard applied the step. A
// trainer outside 0..world-1 is refused (kv.ErrStep) before anything is
// sent.
func (k *KV) PushSync(ctx context.Context, table string, step uint64, trainer, world int, grads []float32) error {
	// The wire carries both as uint32: trainer -1 would reach the shards
	// as 4294967295, and trainer 2^32 as trainer 0.
	if world < 1 || world > math.MaxUint32 || trainer < 0 || trainer >= world {
		return fmt.Errorf("client: kv push_sync: table %q step %d: trainer %d of world %d: want a world of 1..%d and a trainer of 0..world-1: %w",
			table, step, trainer, world, uint32(math.MaxUint32), kv.ErrStep)
	}
	_, err := k.ack(ctx, "push_sync", func(b []byte) []byte {
		return kv.AppendPushSyncRequest(b, &kv.PushSyncRequest{Table: table, Step: step, Trainer: uint32(trainer), World: uint32(world), Grads: grads})
	})
	return err
}
