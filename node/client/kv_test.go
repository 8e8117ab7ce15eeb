package client

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"graphnode/kv"
	"graphnode/node/control"
)

// kvNode serves a store of one async table "e" (4 rows of dim 2, SGD lr
// 1) through kv's Handler, as a node answers kv frames.
func kvNode(t *testing.T) (socket string, store *kv.Store) {
	t.Helper()
	s, err := kv.New(kv.Config{Tables: []kv.Spec{{Name: "e", Rows: 4, Dim: 2, Opt: kv.SGD(1), Mode: kv.Async, Bounds: []uint64{0, 4}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := kv.NewHandler(s)
	socket, _ = slowNode(t, 0, func(b []byte) []byte { return h.Handle(context.Background(), b, nil) })
	return socket, s
}

// kvNodeClient is a KV dialled to a kvNode (closed with the test) and
// the node's store.
func kvNodeClient(t *testing.T) (*KV, *kv.Store) {
	t.Helper()
	socket, store := kvNode(t)
	k, err := DialKV(context.Background(), socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k, store
}

// TestPushShape: gradients that are not a whole row per id are the
// caller's shape error (kv.ErrShape), refused before anything is sent;
// they used to reach the node as a malformed message ("4 trailing
// bytes"). The session stays usable.
func TestPushShape(t *testing.T) {
	k, store := kvNodeClient(t)
	ctx := context.Background()
	for _, tc := range []struct {
		ids   []uint64
		grads []float32
	}{
		{[]uint64{1, 2}, []float32{1, 2, 3}},
		{nil, []float32{1, 2}},
		{[]uint64{1}, nil},
	} {
		if err := k.Push(ctx, "e", tc.ids, tc.grads); !errors.Is(err, kv.ErrShape) || errors.Is(err, kv.ErrMalformed) {
			t.Errorf("push of %d ids with %d values: %v, want a shape error", len(tc.ids), len(tc.grads), err)
		}
	}
	if err := k.Push(ctx, "e", []uint64{1}, []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	rows, err := store.Pull("e", []uint64{1}, nil)
	if err != nil || len(rows) != 2 || rows[0] != -1 || rows[1] != -2 {
		t.Fatalf("row 1 after the push: %v, %v; want [-1 -2]", rows, err)
	}
}

// TestPushOverFrame: a push whose message would pass the frame is
// refused before it is encoded, naming the table, its ids and dim, and
// how many ids of that dim one push carries; it used to read "client:
// kv push: control: message of 72000014 bytes exceeds 67108864:
// protocol error" after encoding all of it. The session stays usable.
func TestPushOverFrame(t *testing.T) {
	k, store := kvNodeClient(t)
	ctx := context.Background()
	// A push of n ids of dim 2 to "e" is 12 + 16n bytes: 6 ids fit 108.
	k.frame = 108
	ids := []uint64{0, 1, 2, 3, 0, 1, 2}
	err := k.Push(ctx, "e", ids, make([]float32, 2*len(ids)))
	for _, want := range []string{`table "e"`, "7 ids of dim 2", "124-byte message", "108-byte frame", "at most 6 ids"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("push of 7 ids over a 108-byte frame: %v, want an error saying %q", err, want)
		}
	}
	if !errors.Is(err, control.ErrProtocol) {
		t.Errorf("push over the frame: %v, want control.ErrProtocol", err)
	}
	if cap(k.buf) > k.frame {
		t.Errorf("the refused push was encoded: buffer of %d bytes", cap(k.buf))
	}
	if err := k.Push(ctx, "e", ids[:6], []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}); err != nil {
		t.Fatalf("push of 6 ids, which fit: %v", err)
	}
	rows, err := store.Pull("e", []uint64{0, 3}, nil)
	if err != nil || !slices.Equal(rows, []float32{-2, -2, -1, -1}) {
		t.Fatalf("rows 0 and 3 after the push that fit: %v, %v; want [-2 -2 -1 -1]", rows, err)
	}
}

// TestPushRows: distinct rows whose push would pass the frame go in as
// many messages as it needs, each row whole in one, so each takes one
// step; a push that fits is one message.
func TestPushRows(t *testing.T) {
	k, store := kvNodeClient(t)
	ctx := context.Background()
	// A push of n ids of dim 2 to "e" is 12 + 16n bytes: 3 ids fit 60.
	k.frame = 60
	ids := []uint64{3, 0, 2, 1}
	grads := []float32{3, 30, 0, 0, 2, 20, 1, 10}
	if err := k.Push(ctx, "e", ids, grads); !errors.Is(err, control.ErrProtocol) {
		t.Fatalf("Push of 4 ids over a 60-byte frame: %v, want it refused", err)
	}
	if err := k.PushRows(ctx, "e", ids, grads); err != nil {
		t.Fatal(err)
	}
	rows, err := store.Pull("e", []uint64{0, 1, 2, 3}, nil)
	if want := []float32{0, 0, -1, -10, -2, -20, -3, -30}; err != nil || !slices.Equal(rows, want) {
		t.Fatalf("rows after PushRows: %v, %v; want %v (one SGD step each)", rows, err, want)
	}
	if err := k.PushRows(ctx, "e", []uint64{1}, []float32{1}); !errors.Is(err, kv.ErrShape) {
		t.Errorf("PushRows of 1 id with 1 value of a dim-2 table: %v, want a shape error", err)
	}
}

// TestPushSyncTrainerRange: a trainer or world that is not a rank of a
// job of that size is refused, naming both, before it is cut to the
// wire's uint32: trainer -1 read "trainer 4294967295", and trainer 2^32
// pushed as trainer 0.
func TestPushSyncTrainerRange(t *testing.T) {
	k, _ := kvNodeClient(t)
	for _, tc := range []struct{ trainer, world int }{{-1, 2}, {1 << 32, 2}, {0, 0}, {2, 2}, {0, 1<<32 + 1}, {0, -1}} {
		err := k.PushSync(context.Background(), "e", 0, tc.trainer, tc.world, []float32{1, 2, 3, 4, 5, 6, 7, 8})
		if !errors.Is(err, kv.ErrStep) || errors.Is(err, kv.ErrMode) {
			t.Errorf("trainer %d of world %d: %v, want a bad step refused before it is sent", tc.trainer, tc.world, err)
		}
	}
}

// pullNode answers kv pulls of table "wide" (rows rows of dim dim, values
// wantValue) as the node does: refusing a pull whose answer would pass its
// frame, and an id past the table (kv.ErrNotOwner). Each answer's version
// is 10 + the number of pulls before it.
type pullNode struct {
	mu     sync.Mutex
	frame  int // the most bytes of an answer
	dim    int
	rows   uint64
	asked  [][]uint64 // ids of each request
	mins   []uint64   // min_version of each request
	socket string
}

func newPullNode(t *testing.T, frame, dim int, rows uint64) *pullNode {
	p := &pullNode{frame: frame, dim: dim, rows: rows}
	p.socket, _ = slowNode(t, 0, p.answer)
	return p
}

func (p *pullNode) answer(body []byte) []byte {
	if len(body) > 0 && body[0] == '{' { // kv_drop
		b, _ := json.Marshal(&control.Response{KVDrop: &control.DropInfo{Dropped: true}})
		return b
	}
	var m kv.PullRequest
	if err := kv.DecodePullRequest(body, &m); err != nil {
		return kv.AppendErrorMsg(nil, kv.NewErrorMsg(err))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, slices.Clone(m.IDs))
	p.mins = append(p.mins, m.MinVersion)
	if most := (p.frame - 18) / (4 * p.dim); len(m.IDs) > most {
		return kv.AppendErrorMsg(nil, &kv.ErrorMsg{Text: fmt.Sprintf("node: kv: pull of %d ids: pull at most %d ids per request", len(m.IDs), most)})
	}
	for i, id := range m.IDs {
		if id >= p.rows {
			return kv.AppendErrorMsg(nil, kv.NewErrorMsg(fmt.Errorf("kv: ids[%d] = %d: %w", i, id, kv.ErrNotOwner)))
		}
	}
	out := kv.AppendPullResponse(nil, &kv.PullResponse{Version: 10 + uint64(len(p.asked)-1), Dim: uint32(p.dim)})
	binary.LittleEndian.PutUint32(out[len(out)-4:], uint32(len(m.IDs)))
	return appendRows(out, m.IDs, p.dim)
}

// wantValue is value c of the row of id that pullNode and dataNode
// answer: the id in every 4096th column, the column elsewhere.
func wantValue(id uint64, c int) float32 {
	if c%4096 == 0 {
		return float32(1000*id + uint64(c/4096))
	}
	return float32(c % 1000)
}

// appendRows appends the rows of ids (dim float32 values each) to b,
// copying a row of the columns' values and setting the id's (a loop over
// every value takes seconds under the race detector).
func appendRows(b []byte, ids []uint64, dim int) []byte {
	row := make([]byte, 4*dim)
	for c := range dim {
		binary.LittleEndian.PutUint32(row[4*c:], math.Float32bits(wantValue(0, c)))
	}
	for _, id := range ids {
		at := len(b)
		b = append(b, row...)
		for c := 0; c < dim; c += 4096 {
			binary.LittleEndian.PutUint32(b[at+4*c:], math.Float32bits(wantValue(id, c)))
		}
	}
	return b
}

// checkColumns are the columns of a row the tests check: each id's, and
// some between.
func checkColumns(dim int) []int {
	cols := []int{min(1, dim-1), min(999, dim-1), dim - 1}
	for c := 0; c < dim; c += 4096 {
		cols = append(cols, c)
	}
	return cols
}

func (p *pullNode) reset() (asked [][]uint64, mins []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	asked, mins = p.asked, p.mins
	p.asked, p.mins = nil, nil
	return asked, mins
}

// checkRows fails unless got holds the rows of ids (dim values each).
func checkRows(t *testing.T, got []float32, ids []uint64, dim int) {
	t.Helper()
	if len(got) != len(ids)*dim {
		t.Fatalf("%d values for %d ids of dim %d", len(got), len(ids), dim)
	}
	for i, id := range ids {
		for _, c := range checkColumns(dim) {
			if want := wantValue(id, c); got[i*dim+c] != want {
				t.Fatalf("ids[%d] = %d, column %d: %v, want %v", i, id, c, got[i*dim+c], want)
			}
		}
	}
}

// TestPullSplit: a pull whose answer would pass the 64 MiB frame (256
// rows of dim 65536) goes in as many requests as the rows need, the
// table's dim learnt once per connection from a pull of row 0; every
// request carries min_version, and the version is the lowest answered.
func TestPullSplit(t *testing.T) {
	const dim = 1 << 16 // 255 rows fit an answer
	p := newPullNode(t, control.MaxFrame, dim, 400)
	k, err := DialKV(context.Background(), p.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx := context.Background()
	ids := make([]uint64, 256)
	for i := range ids {
		ids[i] = uint64(399 - i%250) // out of order, with repeats
	}
	got, v, err := k.PullVersion(ctx, "wide", 3, ids, []float32{-1, -2})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != -1 || got[1] != -2 {
		t.Fatalf("dst's values became %v", got[:2])
	}
	checkRows(t, got[2:], ids, dim)
	asked, mins := p.reset()
	if want := [][]uint64{{0}, ids[:255], ids[255:]}; !slices.EqualFunc(asked, want, slices.Equal) {
		t.Fatalf("requests of %d ids, want the probe of row 0, then 255 and 1", len(asked))
	}
	if !slices.Equal(mins, []uint64{0, 3, 3}) {
		t.Fatalf("min versions %v, want [0 3 3]: every request of rows waits for 3", mins)
	}
	if v != 11 {
		t.Fatalf("version %d, want 11, the lowest of the requests' (11, 12)", v)
	}
}

// TestPullSplitSmallFrame: the same with a frame of three rows: ids that
// fit one answer go in one request once the dim is known, an error of a
// request of several names the ids it held, and a table made again with
// another dim (by another trainer) is relearnt after the pull that
// found out.
func TestPullSplitSmallFrame(t *testing.T) {
	const dim = 64
	frame := 18 + 4*dim*3
	ctx := context.Background()
	dial := func(t *testing.T) (*pullNode, *KV) {
		p := newPullNode(t, frame, dim, 100)
		k, err := DialKV(ctx, p.socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		k.frame = frame
		return p, k
	}
	t.Run("requests", func(t *testing.T) {
		p, k := dial(t)
		for _, tc := range []struct {
			ids  []uint64
			want [][]uint64
		}{
			{[]uint64{7}, [][]uint64{{7}}}, // one id: no probe
			{[]uint64{9, 1, 4, 4, 7, 0, 2, 8}, [][]uint64{{9, 1, 4}, {4, 7, 0}, {2, 8}}},
			{[]uint64{6, 3}, [][]uint64{{6, 3}}},
			{nil, [][]uint64{{}}},
		} {
			got, err := k.Pull(ctx, "wide", tc.ids, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, got, tc.ids, dim)
			if asked, _ := p.reset(); !slices.EqualFunc(asked, tc.want, slices.Equal) {
				t.Fatalf("pull of %v: requests %v, want %v", tc.ids, asked, tc.want)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		p, k := dial(t)
		dst := []float32{-1}
		for _, tc := range []struct {
			ids  []uint64
			want string // the error's end
		}{
			// One request: the node's index is the caller's.
			{[]uint64{1, 200}, "ids[1] = 200: " + kv.ErrNotOwner.Error()},
			{[]uint64{1, 2, 3, 300, 4, 5, 6}, "ids[0] = 300: " + kv.ErrNotOwner.Error() + " (ids[3:6] of 7, pulled in requests of 3)"},
		} {
			got, err := k.Pull(ctx, "wide", tc.ids, dst)
			if !errors.Is(err, kv.ErrNotOwner) || !strings.HasSuffix(err.Error(), tc.want) {
				t.Fatalf("pull of %v: %v, want an error ending %q", tc.ids, err, tc.want)
			}
			if len(got) != 1 || got[0] != -1 {
				t.Fatalf("a failed pull returned %v, want dst as it was", got)
			}
		}
		// The dim is forgotten after an error (a table made again): each
		// pull of several ids learns it first.
		want := [][]uint64{{0}, {1, 200}, {0}, {1, 2, 3}, {300, 4, 5}}
		if asked, _ := p.reset(); !slices.EqualFunc(asked, want, slices.Equal) {
			t.Fatalf("requests %v, want %v", asked, want)
		}
	})
	for _, tc := range []struct {
		name string
		dim  int
	}{{"wider", 2 * dim}, {"narrower", dim / 2}} {
		t.Run(tc.name, func(t *testing.T) {
			p, k := dial(t)
			if _, err := k.Pull(ctx, "wide", []uint64{1, 2}, nil); err != nil {
				t.Fatal(err)
			}
			p.mu.Lock()
			p.dim = tc.dim
			p.mu.Unlock()
			ids := []uint64{5, 4, 3, 2, 1, 0, 9}
			if _, err := k.Pull(ctx, "wide", ids, nil); err == nil {
				t.Fatal("pull with the dim the table had: no error")
			}
			p.reset()
			got, err := k.Pull(ctx, "wide", ids, nil)
			if err != nil {
				t.Fatalf("pull after the table changed: %v", err)
			}
			checkRows(t, got, ids, tc.dim)
			if asked, _ := p.reset(); !slices.Equal(asked[0], []uint64{0}) {
				t.Fatalf("requests %v, want the probe of row 0 first", asked)
			}
		})
	}
	t.Run("drop", func(t *testing.T) {
		// kv_drop forgets the dim: the table may come back with another.
		p, k := dial(t)
		if _, err := k.Pull(ctx, "wide", []uint64{1, 2}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Drop(ctx, "wide"); err != nil {
			t.Fatal(err)
		}
		p.reset()
		if _, err := k.Pull(ctx, "wide", []uint64{1, 2}, nil); err != nil {
			t.Fatal(err)
		}
		if asked, _ := p.reset(); len(asked) != 2 || !slices.Equal(asked[0], []uint64{0}) {
			t.Fatalf("requests %v after kv_drop, want the probe of row 0 first", asked)
		}
	})
}
