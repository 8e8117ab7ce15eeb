package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// loaderHandler adds LoaderHandler to testHandler. A loader's options are
// "<records> <mode>": each sub-ring streams that many records (record i of
// sub-ring s is recordBytes(id, s, i)); mode "fail" fails each sub-ring
// after 2 records, "tear" fails the read of record 2's second piece,
// "cut" the read of record 2's first,
// "block" streams without end, "panic" panics in OpenLoader and "spanic"
// in StreamLoader after 2 records. ended receives each StreamLoader's
// result; gone receives a loader's id when its connection ends. piece is
// the largest piece send asked for.
type loaderHandler struct {
	testHandler
	mu      sync.Mutex
	next    uint64
	loaders map[uint64]loaderSpec
	ended   chan error
	gone    chan uint64
	piece   atomic.Int64
}

type loaderSpec struct {
	peer    string
	records int
	mode    string
}

func newLoaderHandler() *loaderHandler {
	return &loaderHandler{testHandler: testHandler{rowSize: 16}, loaders: map[uint64]loaderSpec{},
		ended: make(chan error, 16), gone: make(chan uint64, 16)}
}

func (h *loaderHandler) OpenLoader(_, conn context.Context, peer string, options []byte) (uint64, []byte, error) {
	var sp loaderSpec
	if _, err := fmt.Sscanf(string(options), "%d %s", &sp.records, &sp.mode); err != nil {
		return 0, nil, fmt.Errorf("options %q: %v", options, err)
	}
	sp.peer = peer
	if sp.mode == "panic" {
		panic("open boom")
	}
	h.mu.Lock()
	h.next++
	id := h.next
	h.loaders[id] = sp
	h.mu.Unlock()
	context.AfterFunc(conn, func() { h.gone <- id })
	return id, fmt.Appendf(nil, "loader %d for %s", id, peer), nil
}

// recordBytes is record i of sub-ring sub of loader id: every third one
// is 1 MiB, to take more than one stream frame.
func recordBytes(id uint64, sub, i int) []byte {
	head := fmt.Sprintf("loader %d sub %d record %d;", id, sub, i)
	if i%3 == 2 {
		return append([]byte(head), bytes.Repeat([]byte{byte(i)}, 1<<20)...)
	}
	return []byte(head)
}

// sendRecord sends rec whole with send, noting its pieces' largest in
// h.piece; with torn set the read of its second piece fails.
func (h *loaderHandler) sendRecord(ctx context.Context, send RecordSender, rec []byte, torn, cut bool) error {
	return send(ctx, len(rec), func(off int, dst []byte) error {
		if torn && off > 0 || cut {
			return errTorn
		}
		for {
			if m := h.piece.Load(); int64(len(dst)) <= m || h.piece.CompareAndSwap(m, int64(len(dst))) {
				break
			}
		}
		copy(dst, rec[off:])
		return nil
	})
}

// errTorn is the read error of a "tear" loader's record.
var errTorn = errors.New("ring file truncated under the record")

func (h *loaderHandler) StreamLoader(ctx context.Context, peer string, id uint64, sub int, send RecordSender) (err error) {
	defer func() { h.ended <- err }()
	h.mu.Lock()
	sp, ok := h.loaders[id]
	h.mu.Unlock()
	if !ok || sp.peer != peer {
		return fmt.Errorf("no loader %d of %s", id, peer)
	}
	for i := 0; sp.mode == "block" || i < sp.records; i++ {
		if sp.mode == "fail" && i == 2 {
			return errors.New("sampler 1 exited with status 2")
		}
		if sp.mode == "spanic" && i == 2 {
			panic("stream boom")
		}
		if err := h.sendRecord(ctx, send, recordBytes(id, sub, i), sp.mode == "tear" && i == 2, sp.mode == "cut" && i == 2); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

var _ LoaderHandler = (*loaderHandler)(nil)

func loaderPair(t *testing.T) (*Client, *loaderHandler, *testNode) {
	dir := writeTestCluster(t, testCluster, "host0", "host1", "host2")
	h := newLoaderHandler()
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) { c.Handler = h })
	plain := startServer(t, dir, "host2", 2, "127.0.0.1:0", nil) // no LoaderHandler
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer(), 2: plain.peer()}, nil)
	return c, h, srv
}

// TestRemoteLoader: a loader opened on a peer streams each sub-ring's
// records in order, small and large, then ends; sub-rings stream at once
// on one connection.
func TestRemoteLoader(t *testing.T) {
	c, h, srv := loaderPair(t)
	ctx := context.Background()
	l, err := c.OpenLoader(ctx, 1, []byte("7 ok"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if want := fmt.Sprintf("loader %d for host0", l.ID); string(l.Info) != want {
		t.Fatalf("info %q, want %q", l.Info, want)
	}
	var wg sync.WaitGroup
	for sub := range 3 {
		wg.Go(func() {
			rs, err := l.Stream(ctx, sub, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer rs.Close()
			for i := 0; ; i++ {
				rec, err := rs.Next()
				if errors.Is(err, io.EOF) && i == 7 {
					return
				}
				if err != nil || !bytes.Equal(rec, recordBytes(l.ID, sub, i)) {
					t.Errorf("sub-ring %d record %d: %d bytes, %v", sub, i, len(rec), err)
					return
				}
			}
		})
	}
	wg.Wait()
	for range 3 {
		if err := <-h.ended; err != nil {
			t.Errorf("StreamLoader returned %v", err)
		}
	}
	// The open is a request with a latency; a stream, which lasts as
	// long as its loader, is one request on each end, outside the latency
	// histogram, however many records it carried.
	if m := c.Metrics(); len(m) != 1 || m[0].Requests != 1+3 || m[0].Latency.Count() != 1 {
		t.Errorf("client metrics %+v: want 4 requests (the open, 3 streams), 1 latency", m)
	}
	if m := waitRequests(srv.srv, 1+3); len(m) != 1 || m[0].Requests != 4 || m[0].Latency.Count() != 1 {
		t.Errorf("server metrics %+v: want 4 requests (the open, 3 streams), 1 latency", m)
	}
	// Records over RecordPiece went out in pieces of it.
	if p := h.piece.Load(); p != RecordPiece {
		t.Errorf("the largest piece read of a record: %d bytes, want RecordPiece (%d)", p, RecordPiece)
	}
	l.Close()
	select {
	case id := <-h.gone:
		if id != l.ID {
			t.Errorf("closing loader %d ended the connection of loader %d", l.ID, id)
		}
	case <-time.After(5 * time.Second):
		t.Error("Close did not end the loader's connection on the peer")
	}
	if _, err := c.OpenLoader(ctx, 2, []byte("1 ok")); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "serves no remote loaders") {
		t.Errorf("open on a node without LoaderHandler: %v", err)
	}
	if _, err := c.OpenLoader(ctx, 1, []byte("x")); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "options") {
		t.Errorf("open refused by the handler: %v", err)
	}
}

// TestRemoteLoaderFailures: a handler's error reaches the stream after the
// records sent before it; a stream of another connection's loader is
// refused; a reader that closes its stream ends the handler's wait; a
// server that closes ends the stream with an error naming it, and the
// loader's connection context.
// sumStats adds up the requests and errors of every peer.
func sumStats(m []PeerStats) (s PeerStats) {
	for _, p := range m {
		s.Requests += p.Requests
		s.Errors += p.Errors
	}
	return s
}

func TestRemoteLoaderFailures(t *testing.T) {
	c, h, srv := loaderPair(t)
	ctx := context.Background()

	l, err := c.OpenLoader(ctx, 1, []byte("5 fail"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := l.Stream(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if rec, err := rs.Next(); err != nil || !bytes.Equal(rec, recordBytes(l.ID, 0, i)) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	_, err = rs.Next()
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Name != "host1" || !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "sampler 1 exited with status 2") {
		t.Fatalf("after a handler error: %v", err)
	}
	rs.Close()
	<-h.ended

	// A handler that panics is answered CodeInternal, as any handler's.
	var re *RemoteError
	if _, err := c.OpenLoader(ctx, 1, []byte("1 panic")); !errors.As(err, &re) || re.Code != CodeInternal || !strings.Contains(err.Error(), "panicked: open boom") {
		t.Fatalf("OpenLoader that panics: %v", err)
	}
	sl, err := c.OpenLoader(ctx, 1, []byte("5 spanic"))
	if err != nil {
		t.Fatal(err)
	}
	srs, err := sl.Stream(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := srs.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srs.Next(); !errors.As(err, &re) || re.Code != CodeInternal || !strings.Contains(err.Error(), "panicked: stream boom") {
		t.Fatalf("StreamLoader that panics: %v", err)
	}
	srs.Close()
	<-h.ended
	sl.Close()
	select {
	case id := <-h.gone:
		if id != sl.ID {
			t.Fatalf("closing loader %d ended loader %d", sl.ID, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing the loader did not end its connection")
	}

	bad := &RemoteLoader{c: l.c, p: l.p, conn: l.conn, ID: 999}
	rs, err = bad.Stream(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Next(); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "no loader 999") {
		t.Fatalf("stream of an unknown loader: %v", err)
	}
	rs.Close()
	<-h.ended

	// The six requests so far, four of them failed, are counted when the
	// server is done with them, which can be after their client saw the
	// answer: a count taken at once missed the last one on a busy host.
	before := sumStats(waitRequests(srv.srv, 6))
	for deadline := time.Now().Add(5 * time.Second); before.Errors < 4 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		before = sumStats(srv.srv.Metrics())
	}
	if before.Requests != 6 || before.Errors != 4 {
		t.Fatalf("server before the blocking loader: %d requests, %d errors; want 6, 4", before.Requests, before.Errors)
	}
	l, err = c.OpenLoader(ctx, 1, []byte("0 block"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err = l.Stream(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Next(); err != nil {
		t.Fatal(err)
	}
	rs.Close()
	select {
	case err := <-h.ended:
		if err == nil {
			t.Fatal("StreamLoader of a closed stream returned nil")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing the stream did not end StreamLoader")
	}
	// A reader that stops reading (its loader closed) is no failure of
	// the server's: every client-node loader that closed counted one.
	after := sumStats(waitRequests(srv.srv, before.Requests+2))
	if after.Requests != before.Requests+2 || after.Errors != before.Errors {
		t.Errorf("server after the open and a stream its reader closed: %d requests, %d errors; want %d, %d",
			after.Requests, after.Errors, before.Requests+2, before.Errors)
	}

	rs, err = l.Stream(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Next(); err != nil {
		t.Fatal(err)
	}
	srv.srv.Close()
	for {
		_, err := rs.Next()
		if err == nil {
			continue
		}
		if !errors.As(err, &pe) || pe.Name != "host1" || errors.Is(err, io.EOF) {
			t.Fatalf("stream after the server closed: %v", err)
		}
		t.Logf("stream after the server closed: %v", err)
		break
	}
	rs.Close()
	seen := map[uint64]bool{}
	for len(seen) < 2 {
		select {
		case id := <-h.gone:
			seen[id] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("loaders whose connection ended: %v, want both", seen)
		}
	}
}

// connHandler is loaderHandler noting the connection of each loader.
type connHandler struct {
	*loaderHandler
	conns chan context.Context
}

func (h *connHandler) OpenLoader(ctx, conn context.Context, peer string, options []byte) (uint64, []byte, error) {
	h.conns <- conn
	return h.loaderHandler.OpenLoader(ctx, conn, peer, options)
}

// TestRemoteLoaderClientGoneReset: a client node whose loader connection
// ended without a word (its idle timeout while the sampling node was
// paused; here its transport destroyed) answers the sampling node's next
// packets on it with a stateless reset, from the same socket, so the
// loader ends at once. Without a reset key the client dropped them: a
// sampling node resumed after a SIGSTOP kept the loader, its samplers and
// its ring for minutes (an idle timeout stretched by the pause's RTT).
func TestRemoteLoaderClientGoneReset(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	h := &connHandler{loaderHandler: newLoaderHandler(), conns: make(chan context.Context, 4)}
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) { c.Handler = h })
	id := loadID(t, dir, "host0")
	local := freeUDPAddr(t)
	at := func(c *ClientConfig) { c.LocalAddr = local }
	peers := map[int]Peer{1: srv.peer()}
	c1 := newTestClient(t, id, peers, at)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := c1.OpenLoader(ctx, 1, []byte("0 block"))
	if err != nil {
		t.Fatal(err)
	}
	conn := <-h.conns
	rs, err := l.Stream(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	reading := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			if i == 6 {
				close(reading)
			}
			if _, err := rs.Next(); err != nil {
				return
			}
		}
	}()
	<-reading
	// The client's process gone mid-stream: no CONNECTION_CLOSE.
	c1.tr.Close()
	c1.udp.Close()
	// Its successor (the client node restarted, or its other
	// connections) holds the socket.
	c2 := newTestClient(t, id, peers, at)
	if err := c2.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-conn.Done():
	case <-ctx.Done():
		t.Fatal("the loader's connection outlived the client")
	}
	var reset *quic.StatelessResetError
	if cause := context.Cause(conn); !errors.As(cause, &reset) {
		t.Errorf("loader connection ended by %v, want a stateless reset from the client's socket", cause)
	}
}

// TestRemoteLoaderRecordsOverMaxMessage: a loader's records are bounded
// by its ring, not by MaxMessage: with a MaxMessage of 64 KiB on both
// ends, a stream that reads records up to 2 MiB gets the 1 MiB ones
// whole. A reader that reads with MaxMessage (0, as a client node did
// before) refuses the first of them with ErrTooLarge, naming its size,
// after the records before it, and the server's sends fail: an error
// at both ends, no hang. So does a record over the reader's own limit.
func TestRemoteLoaderRecordsOverMaxMessage(t *testing.T) {
	const maxMsg = 64 << 10
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	h := newLoaderHandler()
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) { c.Handler, c.MaxMessage = h, maxMsg })
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, func(c *ClientConfig) { c.MaxMessage = maxMsg })
	ctx := context.Background()
	for _, tc := range []struct {
		options   string
		maxRecord int64
		ok        int // records read before the error; 6: all, then EOF
	}{{"6 ok", 2 << 20, 6}, {"0 block", 0, 2}, {"0 block", 1 << 20, 2}} {
		l, err := c.OpenLoader(ctx, 1, []byte(tc.options))
		if err != nil {
			t.Fatal(err)
		}
		rs, err := l.Stream(ctx, 0, tc.maxRecord)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tc.ok {
			if rec, err := rs.Next(); err != nil || !bytes.Equal(rec, recordBytes(l.ID, 0, i)) {
				t.Fatalf("largest record %d: record %d: %d bytes, %v", tc.maxRecord, i, len(rec), err)
			}
		}
		_, err = rs.Next()
		size := len(recordBytes(l.ID, 0, 2))
		switch {
		case tc.ok == 6 && !errors.Is(err, io.EOF):
			t.Errorf("largest record %d: after the last record: %v, want EOF", tc.maxRecord, err)
		case tc.ok < 6 && (!errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("payload of %d bytes exceeds the limit", size))):
			t.Errorf("largest record %d: the record of %d bytes: %v, want ErrTooLarge naming its size", tc.maxRecord, size, err)
		}
		// The refused stream's handler, sending without end, fails at
		// once, not when the loader closes.
		select {
		case err := <-h.ended:
			if (err == nil) != (tc.ok == 6) {
				t.Errorf("largest record %d: StreamLoader returned %v", tc.maxRecord, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("largest record %d: StreamLoader did not end", tc.maxRecord)
		}
		rs.Close()
		if _, err := l.Stream(ctx, 1, -1); !errors.Is(err, ErrMalformed) {
			t.Errorf("a stream of largest record -1: %v, want ErrMalformed", err)
		}
		l.Close()
	}
}

// TestRecordStreamNextInto: NextInto asks for room once per record, of
// the record's size, and hands it the record in order in pieces of at
// most RecordPiece bytes, so a relay holds no record on its heap. A record
// over the stream's largest fails with ErrTooLarge, naming its size,
// before any room is asked for; the caller's errors come back as they
// are.
func TestRecordStreamNextInto(t *testing.T) {
	c, h, _ := loaderPair(t)
	ctx := context.Background()
	l, rs := openStream(t, c, "4 ok")
	for i := 0; ; i++ {
		var room []byte
		reserves, next := 0, 0
		n, err := rs.NextInto(func(n int) error {
			reserves++
			room = make([]byte, n)
			return nil
		}, func(off int, piece []byte) error {
			if off != next || len(piece) == 0 || len(piece) > RecordPiece {
				return fmt.Errorf("piece of %d bytes at %d, want at %d, 1 to %d bytes", len(piece), off, next, RecordPiece)
			}
			next += copy(room[off:], piece)
			return nil
		})
		if errors.Is(err, io.EOF) && i == 4 {
			break
		}
		if err != nil || reserves != 1 || n != len(room) || next != n || !bytes.Equal(room, recordBytes(l.ID, 0, i)) {
			t.Fatalf("record %d: %d bytes, %d reservations, %d written: %v", i, n, reserves, next, err)
		}
	}
	<-h.ended

	full := errors.New("no room")
	for _, tc := range []struct {
		maxRecord int64
		reserve   error
		want      error
	}{{1 << 10, nil, ErrTooLarge}, {2 << 20, full, full}} {
		rs, err := l.Stream(ctx, 1+int(tc.maxRecord>>20), tc.maxRecord)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if rec, err := rs.Next(); err != nil || !bytes.Equal(rec, recordBytes(l.ID, 1+int(tc.maxRecord>>20), i)) {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		asked := 0
		_, err = rs.NextInto(func(int) error { asked++; return tc.reserve }, func(int, []byte) error { return errors.New("written") })
		size := len(recordBytes(l.ID, 0, 2))
		switch {
		case !errors.Is(err, tc.want):
			t.Errorf("largest record %d: the record of %d bytes: %v, want %v", tc.maxRecord, size, err, tc.want)
		case tc.want == ErrTooLarge && (asked != 0 || !strings.Contains(err.Error(), fmt.Sprintf("payload of %d bytes exceeds the limit of %d", size, tc.maxRecord))):
			t.Errorf("largest record %d: %v after %d reservations, want ErrTooLarge naming the size, none asked", tc.maxRecord, err, asked)
		case tc.want == full && err != full:
			t.Errorf("the reservation's error came back as %v, want it as it is", err)
		}
		rs.Close()
		<-h.ended
	}
}

// TestRemoteLoaderTornRecord: a record whose read fails after its header
// went out (the sampling node's ring file truncated under it) resets the
// stream: the reader gets an error naming the peer, never the record with
// bytes missing, and the handler the read's error.
func TestRemoteLoaderTornRecord(t *testing.T) {
	c, h, srv := loaderPair(t)
	rs := twoRecords(t, c, "5 tear")
	rec, err := rs.Next()
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Name != "host1" || errors.Is(err, io.EOF) || errors.Is(err, ErrRemote) {
		t.Fatalf("the torn record: %d bytes, %v; want the stream broken, naming host1", len(rec), err)
	}
	t.Logf("the torn record: %v", err)
	select {
	case err := <-h.ended:
		if !errors.Is(err, errTorn) {
			t.Errorf("StreamLoader of the torn record returned %v, want the read's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("StreamLoader did not end")
	}
	if m := sumStats(waitRequests(srv.srv, 2)); m.Requests != 2 || m.Errors != 1 {
		t.Errorf("server: %d requests, %d failed; want the open and the failed stream", m.Requests, m.Errors)
	}
}

// TestRemoteLoaderRecordCutAtItsStart: a record whose first piece cannot
// be read (the ring file truncated before it) reaches the client as the
// handler's error, naming why, not as a stream cut: the header waits for
// the first piece. Only a read failing past it tears the stream
// (TestRemoteLoaderTornRecord).
func TestRemoteLoaderRecordCutAtItsStart(t *testing.T) {
	c, _, _ := loaderPair(t)
	rs := twoRecords(t, c, "5 cut")
	_, err := rs.Next()
	if !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), errTorn.Error()) {
		t.Fatalf("a record cut at its start: %v, want the handler's error naming it", err)
	}
}

// openStream opens a loader of options on c's peer (part 1) and streams
// its sub-ring 0, records of up to 2 MiB; both are closed after the test.
func openStream(t *testing.T, c *Client, options string) (*RemoteLoader, *RecordStream) {
	t.Helper()
	ctx := context.Background()
	l, err := c.OpenLoader(ctx, 1, []byte(options))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	rs, err := l.Stream(ctx, 0, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rs.Close)
	return l, rs
}

// twoRecords opens a loader of options on c's peer, streams its sub-ring
// 0 and reads its first two records, checked.
func twoRecords(t *testing.T, c *Client, options string) *RecordStream {
	t.Helper()
	l, rs := openStream(t, c, options)
	for i := range 2 {
		if rec, err := rs.Next(); err != nil || !bytes.Equal(rec, recordBytes(l.ID, 0, i)) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	return rs
}

// TestRemoteLoaderStreamCounts: a loader stream is one request at both
// ends (the client's dir out, the server's dir in), counted once when it
// ends: failed at both when the handler fails it or the server goes,
// at neither when its reader closes it or its context ends. A stream
// read to its end carries as many bytes at one end as at the other. The
// client counted every record as a request, the server each stream once.
func TestRemoteLoaderStreamCounts(t *testing.T) {
	c, h, srv := loaderPair(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, options string
		read          int    // records read, then the stream ends as how says
		how           string // "eof": read to its end; "error": read on to its error; "close"; "cancel": its context ends, then Next; "close loader": the stream, then the loader; "error, close loader": both once the error is read
		failed        bool
	}{
		{"read to the end", "3 ok", 3, "eof", false},
		{"the handler fails", "5 fail", 2, "error", true},
		{"the reader closes", "0 block", 2, "close", false},
		{"the reader's context ends", "0 block", 1, "cancel", false},
		// A client node's relay stops so: it closes its streams and then
		// the loader, whose connection closes before the stream's stop
		// reaches the server, which counted a failed stream.
		{"the reader closes, then its loader", "0 block", 1, "close loader", false},
		// The handler's Error read, the reader closes at once: the
		// server's stream may end by that close before the server counts
		// it, which then counted no failure where the client counted one.
		{"the handler fails, then its loader closes", "5 fail", 2, "error, close loader", true},
	} {
		out, in := peerStats(c.Metrics(), "host1"), peerStats(srv.srv.Metrics(), "host0")
		l, err := c.OpenLoader(ctx, 1, []byte(tc.options))
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		rs, err := l.Stream(sctx, 0, 2<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tc.read {
			if rec, err := rs.Next(); err != nil || !bytes.Equal(rec, recordBytes(l.ID, 0, i)) {
				t.Fatalf("%s: record %d: %v", tc.name, i, err)
			}
		}
		if mid := peerStats(c.Metrics(), "host1"); mid.Requests != out.Requests+1 {
			t.Errorf("%s: %d requests counted while the stream runs, want %d (the open)", tc.name, mid.Requests-out.Requests, 1)
		}
		switch tc.how {
		case "eof":
			if _, err := rs.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("%s: after the last record: %v", tc.name, err)
			}
		case "error":
			if _, err := rs.Next(); err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("%s: after the last record: %v, want an error", tc.name, err)
			}
		case "cancel":
			cancel() // the stream's reset runs on a goroutine of its own
			for {
				if _, err := rs.Next(); err != nil {
					break
				}
			}
		case "close loader":
			rs.Close()
			l.Close()
		case "error, close loader":
			if _, err := rs.Next(); err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("%s: after the last record: %v, want an error", tc.name, err)
			}
			rs.Close()
			l.Close()
		}
		rs.Close()
		rs.Close()
		cancel()
		<-h.ended
		var errs uint64
		if tc.failed {
			errs = 1
		}
		gotOut := peerStats(c.Metrics(), "host1")
		var gotIn PeerStats
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			gotIn = peerStats(srv.srv.Metrics(), "host0")
			if gotIn.Requests >= in.Requests+2 && gotIn.Errors >= in.Errors+errs || time.Now().After(deadline) {
				break
			}
		}
		if d := gotOut.Requests - out.Requests; d != 2 || gotOut.Errors-out.Errors != errs {
			t.Errorf("%s: the client counts %d requests, %d failed; want 2 (the open, the stream), %d", tc.name, d, gotOut.Errors-out.Errors, errs)
		}
		if d := gotIn.Requests - in.Requests; d != 2 || gotIn.Errors-in.Errors != errs {
			t.Errorf("%s: the server counts %d requests, %d failed; want 2 (the open, the stream), %d", tc.name, d, gotIn.Errors-in.Errors, errs)
		}
		if tc.how == "eof" || tc.how == "error" {
			if sent, got := gotIn.BytesSent-in.BytesSent, gotOut.BytesReceived-out.BytesReceived; sent != got {
				t.Errorf("%s: the server sent %d bytes, the client received %d", tc.name, sent, got)
			}
			if sent, got := gotOut.BytesSent-out.BytesSent, gotIn.BytesReceived-in.BytesReceived; sent != got {
				t.Errorf("%s: the client sent %d bytes, the server received %d", tc.name, sent, got)
			}
		}
		l.Close()
	}

	// The server goes mid-stream (its node stops): the stream breaks,
	// a failed request.
	out := peerStats(c.Metrics(), "host1")
	_, rs := openStream(t, c, "0 block")
	if _, err := rs.Next(); err != nil {
		t.Fatal(err)
	}
	srv.srv.Close()
	for {
		if _, err := rs.Next(); err != nil {
			break
		}
	}
	rs.Close()
	if got := peerStats(c.Metrics(), "host1"); got.Requests-out.Requests != 2 || got.Errors-out.Errors != 1 {
		t.Errorf("a stream its server broke: the client counts %d requests, %d failed; want 2, 1", got.Requests-out.Requests, got.Errors-out.Errors)
	}
}

// peerStats is the stats of peer in m (zero when absent).
func peerStats(m []PeerStats, peer string) PeerStats {
	for _, p := range m {
		if p.Peer == peer {
			return p
		}
	}
	return PeerStats{}
}
