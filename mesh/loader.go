package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// LoaderHandler is an optional extension of Handler for server-client
// mode: a Handler that implements it opens loaders for peers that sample
// nothing themselves and streams their records; one that does not answers
// the loader types CodeUnsupported.
//
// A remote loader belongs to the connection that opened it: conn (passed
// to OpenLoader) ends when that connection closes, and the handler must
// then close the loader. StreamLoader is called once per sub-ring, on a
// stream of the same connection; it calls send with each record in order
// until the sub-ring's last, and returns. Its context ends when the peer
// cancels the stream or the connection closes; send blocks while the peer
// does not read (flow control is the backpressure) and fails once the
// stream is gone, or, resetting the stream, when send's own context ends
// (a handler that closes the loader). A returned error is sent to the
// peer as an Error message after the records already sent, when the
// stream is still whole.
type LoaderHandler interface {
	OpenLoader(ctx, conn context.Context, peer string, options []byte) (id uint64, info []byte, err error)
	StreamLoader(ctx context.Context, peer string, id uint64, sub int, send RecordSender) error
}

// RecordSender sends one record of size bytes (1 to MaxRecordMessage) on
// a sub-ring's stream, in pieces of at most RecordPiece bytes: for each,
// in order, it calls read(off, dst) to copy the record's bytes [off,
// off+len(dst)) into dst, a buffer of the stream's, and writes dst. read
// runs on the caller's goroutine, which may guard its access to mapped
// memory (shm's Guard); the stream's goroutines only ever read the
// buffer. A read that fails after the record's header went out tears the
// record: the stream is reset, and the peer sees it broken, never a
// record of the wrong bytes.
type RecordSender func(ctx context.Context, size int, read func(off int, dst []byte) error) error

// LoaderOpenTimeout bounds the opening of a remote loader (the peer
// resolves its seeds, possibly asking its own peers, and starts its
// samplers) on both sides.
const LoaderOpenTimeout = 60 * time.Second

// openLoader answers a LoaderOpenRequest.
func (s *Server) openLoader(ctx, conn context.Context, peer string, p []byte) (msg []byte) {
	defer s.catch(TypeLoaderOpenRequest, &msg, nil)
	h, ok := s.cfg.Handler.(LoaderHandler)
	if !ok {
		return errorMessage(CodeUnsupported, fmt.Sprintf("mesh: %s: this node serves no remote loaders", TypeLoaderOpenRequest))
	}
	var req LoaderOpen
	if err := DecodeLoaderOpen(p, &req); err != nil {
		return errorMessage(CodeMalformed, err.Error())
	}
	id, info, err := h.OpenLoader(ctx, conn, peer, req.Options)
	if err != nil {
		return handlerError(TypeLoaderOpenRequest, err)
	}
	if len(info) == 0 {
		return errorMessage(CodeInternal, fmt.Sprintf("mesh: %s handler: empty loader description", TypeLoaderOpenRequest))
	}
	b, start := beginMessage(nil, TypeLoaderOpenResponse)
	b = AppendLoaderOpened(b, &LoaderOpened{ID: id, Info: info})
	return s.finish(b, start, 0)
}

// streamLoader answers a LoaderStreamRequest on st: one LoaderRecord per
// record the handler sends, without a deadline (a trainer may take its
// time; a dead peer ends the connection by the idle timeout), then the
// end of the stream, or an Error message when the handler fails.
//
// A record is bounded by its loader's ring, which both ends know (the
// client made a ring of the same shape), not by MaxMessage: a batch of
// wide features passes 256 MiB. So records up to the frame's limit
// (MaxRecordMessage) are sent; the client reads each with its ring's
// largest record as the limit (RemoteLoader.Stream). A client that reads
// with MaxMessage (before this was so) refuses a larger record
// (ErrTooLarge) and stops the stream, which fails this send: an error on
// both ends, not a hang. A record goes out in pieces (RecordSender), one
// LoaderRecord message all the same.
//
// The stream is one request, counted when it ends, as its client counts
// it (RecordStream): failed when it broke or the handler failed, not when
// its reader stopped reading. Its records' bytes are counted as they go.
func (s *Server) streamLoader(connCtx context.Context, peer string, st *quic.Stream, p []byte, received int) {
	st.SetDeadline(time.Time{})
	ctx, cancel := context.WithCancel(connCtx)
	defer cancel()
	stopWatch := context.AfterFunc(st.Context(), cancel)
	defer stopWatch()
	m := s.in.peer(peer)
	hdr := make([]byte, 0, HeaderSize)
	var piece []byte // grows to RecordPiece at most, kept for the stream's records
	send := func(ctx context.Context, size int, read func(off int, dst []byte) error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		stop := context.AfterFunc(ctx, func() { st.CancelWrite(streamCancel) })
		defer stop()
		if size <= 0 || int64(size) > MaxRecordMessage {
			return fmt.Errorf("record of %d bytes: want 1 to %d (a message's 32-bit length): %w", size, int64(MaxRecordMessage), ErrTooLarge)
		}
		if n := min(size, RecordPiece); cap(piece) < n {
			piece = make([]byte, n)
		}
		// The first piece is read before the header goes out: a read that
		// fails there (a ring file truncated under it) is answered with
		// an Error message naming why; past it the header has promised
		// size bytes, and only a reset of the stream can follow.
		first := piece[:min(size, cap(piece))]
		if err := read(0, first); err != nil {
			return err
		}
		hdr = AppendHeader(hdr[:0], Header{Type: TypeLoaderRecord, Len: uint32(size)})
		if _, err := st.Write(hdr); err != nil {
			return err
		}
		for off := 0; off < size; {
			dst := piece[:min(size-off, cap(piece))]
			if off > 0 {
				if err := read(off, dst); err != nil {
					st.CancelWrite(streamCancel)
					return fmt.Errorf("record of %d bytes torn after %d: %w", size, off, err)
				}
			}
			if _, err := st.Write(dst); err != nil {
				return err
			}
			off += len(dst)
		}
		m.transfer(HeaderSize+size, 0)
		return nil
	}
	var fail []byte
	h, ok := s.cfg.Handler.(LoaderHandler)
	var req LoaderStream
	switch {
	case !ok:
		fail = errorMessage(CodeUnsupported, fmt.Sprintf("mesh: %s: this node serves no remote loaders", TypeLoaderStreamRequest))
	default:
		if err := DecodeLoaderStream(p, &req); err != nil {
			fail = errorMessage(CodeMalformed, err.Error())
		} else {
			fail = s.callStream(ctx, h, peer, &req, send)
		}
	}
	failed := fail != nil
	sent := 0
	if fail != nil && st.Context().Err() == nil {
		if _, err := st.Write(fail); err == nil {
			sent = len(fail)
		}
	}
	if st.Context().Err() != nil {
		st.CancelWrite(streamCancel)
		// A reader that stopped reading (its loader closed, as every
		// client-node loader's does) ended the stream; a failure is the
		// handler's, whose Error went out before its reader stopped (the
		// client counts that stream failed), or the connection's (lost,
		// not closed). A handler that failed because its reader stopped
		// wrote no Error.
		failed = sent > 0 || !readerStopped(st.Context())
	} else {
		st.Close()
	}
	m.count(sent, received, failed)
}

// readerStopped reports whether a loader stream's context ended because
// the peer stopped reading it: it cancelled its reading with
// streamCancel, or closed the loader's connection (appClosing: its
// RemoteLoader.Close or its Client's), which a client node's relay does
// right after closing its streams, before their stops go out.
func readerStopped(ctx context.Context) bool {
	var se *quic.StreamError
	var ae *quic.ApplicationError
	cause := context.Cause(ctx)
	return errors.As(cause, &se) && se.Remote && se.ErrorCode == streamCancel ||
		errors.As(cause, &ae) && ae.Remote && ae.ErrorCode == appClosing
}

// callStream calls h.StreamLoader and returns the Error message that ends
// the stream, nil when the handler finished.
func (s *Server) callStream(ctx context.Context, h LoaderHandler, peer string, req *LoaderStream, send RecordSender) (fail []byte) {
	defer s.catch(TypeLoaderStreamRequest, &fail, nil)
	if err := h.StreamLoader(ctx, peer, req.ID, int(req.Sub), send); err != nil {
		return handlerError(TypeLoaderStreamRequest, err)
	}
	return nil
}

// RemoteLoader is a loader that a peer opened for this client
// (OpenLoader) on a connection of its own: its streams have their own
// flow-control windows, so a trainer that stops reading holds up no other
// loader and no other call to that peer. It lives on the peer until Close
// (which closes the connection), or until every sub-ring's stream has
// ended.
type RemoteLoader struct {
	c    *Client
	p    *peerConn
	conn *quic.Conn
	// ID names the loader on the peer; Info is the peer's description
	// of it (the daemon's format).
	ID   uint64
	Info []byte
}

// OpenLoader dials a new connection to the peer serving part (the hello
// included) and asks it to open a loader with the given options (the
// daemon's format). It is not retried: the peer's loader belongs to the
// connection, so one that broke took its loader with it. Close the
// RemoteLoader when done.
func (c *Client) OpenLoader(ctx context.Context, part int, options []byte) (*RemoteLoader, error) {
	const op = "open loader"
	p := c.peers[part]
	if p == nil {
		return nil, fmt.Errorf("mesh: %s: part %d: %w", op, part, ErrUnknownPart)
	}
	if len(options) == 0 || len(options) > c.cfg.MaxMessage {
		return nil, p.err(op, fmt.Errorf("options of %d bytes: want 1 to %d: %w", len(options), c.cfg.MaxMessage, ErrTooLarge))
	}
	b, start := beginMessage(nil, TypeLoaderOpenRequest)
	b = AppendLoaderOpen(b, &LoaderOpen{Options: options})
	b, _ = endMessage(b, start, 0)
	ctx, st, cancel := withStall(ctx, LoaderOpenTimeout)
	defer cancel()
	m := c.out.peer(p.name)
	began := time.Now()
	conn, err := c.dialWith(ctx, p, loaderQuicConfig())
	var payload []byte
	if err == nil {
		payload, err = c.exchange(ctx, st, conn, b, TypeLoaderOpenResponse, nil)
	}
	var got LoaderOpened
	if err == nil {
		err = DecodeLoaderOpened(payload, &got)
	}
	m.record(len(b), HeaderSize+len(payload), time.Since(began), err != nil)
	if err != nil {
		if conn != nil {
			conn.CloseWithError(appClosing, "loader not opened")
		}
		return nil, p.err(op, err)
	}
	return &RemoteLoader{c: c, p: p, conn: conn, ID: got.ID, Info: got.Info}, nil
}

// Close closes the loader's connection: the peer closes the loader, and
// its streams end.
func (l *RemoteLoader) Close() {
	l.conn.CloseWithError(appClosing, "loader closed")
}

// MaxRecordMessage is the largest LoaderRecord a server sends: what the
// header's 32-bit payload length can say.
const MaxRecordMessage = math.MaxUint32

// RecordStream is one sub-ring of a RemoteLoader, record by record.
//
// The stream is one request of the client's counters for the peer (dir
// out), as the peer counts it (dir in): counted once, when it ends,
// failed when the peer broke it (an Error message, a reset, a connection
// gone, a malformed or oversized record), not when its reader closed it
// or its context ended. The bytes of its records are counted as they
// come.
type RecordStream struct {
	l     *RemoteLoader
	sub   int
	st    *quic.Stream
	m     *peerMetrics
	sent  int // the stream request's bytes
	head  [HeaderSize]byte
	piece []byte // NextInto's reads, up to RecordPiece
	buf   []byte // Next's record; an Error's payload
	limit int    // the largest record read
	stop  func() bool
	// cancelled: the stream's context ended, and it was reset by this
	// end; counted: the request is counted (end).
	cancelled, counted atomic.Bool
}

// Stream starts streaming sub-ring sub of l; ctx bounds the whole stream.
// maxRecord is the largest record the stream reads, the sub-ring's that
// the records go to (0: the client's MaxMessage): a larger one fails the
// stream with ErrTooLarge before its bytes are read.
func (l *RemoteLoader) Stream(ctx context.Context, sub int, maxRecord int64) (*RecordStream, error) {
	op := fmt.Sprintf("loader %d sub-ring %d", l.ID, sub)
	if sub < 0 || int64(sub) > 1<<32-1 {
		return nil, l.p.err(op, fmt.Errorf("sub-ring %d out of range: %w", sub, ErrMalformed))
	}
	limit := int64(l.c.cfg.MaxMessage)
	if maxRecord != 0 {
		limit = min(maxRecord, MaxRecordMessage)
	}
	if limit < 1 {
		return nil, l.p.err(op, fmt.Errorf("largest record of %d bytes: %w", maxRecord, ErrMalformed))
	}
	m := l.c.out.peer(l.p.name)
	// A stream that cannot be asked for is a failed request, unless the
	// caller gave it up first.
	failed := func(err error) error {
		if ctx.Err() == nil {
			m.count(0, 0, true)
		}
		return l.p.err(op, err)
	}
	if err := l.conn.Context().Err(); err != nil {
		return nil, failed(fmt.Errorf("the connection that opened the loader is gone: %w", context.Cause(l.conn.Context())))
	}
	st, err := l.conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, failed(err)
	}
	b, start := beginMessage(nil, TypeLoaderStreamRequest)
	b = AppendLoaderStream(b, &LoaderStream{ID: l.ID, Sub: uint32(sub)})
	b, _ = endMessage(b, start, 0)
	if _, err := st.Write(b); err != nil {
		st.CancelRead(streamCancel)
		return nil, failed(err)
	}
	st.Close()
	r := &RecordStream{l: l, sub: sub, st: st, m: m, sent: len(b), limit: int(limit)}
	r.stop = context.AfterFunc(ctx, func() {
		r.cancelled.Store(true)
		st.CancelRead(streamCancel)
		st.CancelWrite(streamCancel)
	})
	return r, nil
}

// end counts the stream as one request, the first time it is called:
// failed when failed is set and this end did not reset the stream
// itself (its context ended).
func (r *RecordStream) end(failed bool) {
	if r.counted.CompareAndSwap(false, true) {
		r.m.count(r.sent, 0, failed && !r.cancelled.Load())
	}
}

// Next returns the next record of the sub-ring, valid until the next
// call; io.EOF after the last, when the peer ended the stream. Any other
// error names the peer: an Error message from it (*RemoteError: its
// handler failed), a broken connection, or the context's end. The stream
// keeps the largest record read so far on the heap: a caller that writes
// the records somewhere (a ring) reads them there with NextInto.
func (r *RecordStream) Next() ([]byte, error) {
	n, err := r.NextInto(func(n int) error {
		if cap(r.buf) < n {
			r.buf = make([]byte, n)
		}
		r.buf = r.buf[:n]
		return nil
	}, func(off int, piece []byte) error {
		copy(r.buf[off:], piece)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r.buf[:n], nil
}

// NextInto reads the next record of the sub-ring into the caller's room
// and returns its size; io.EOF after the last, when the peer ended the
// stream. Once the record's header has arrived, reserve(n) is called for
// its n bytes (1 to the stream's largest record: a larger one fails with
// ErrTooLarge, reserve not called), then write(off, piece) for each piece
// of it in order, read into a buffer of the stream's of at most
// RecordPiece bytes: write copies it to bytes [off, off+len(piece)) of
// the room, under shm's Guard when the room is a ring's. The room is
// never read into from the stream: quic-go copies what it reads while it
// holds the stream's lock, and a fault there (a ring file truncated by
// another process) would leave the lock held and the connection wedged.
// reserve's and write's errors are returned as they are (the stream is
// not over: the caller closes it); after an error past reserve the room
// is partly written, and the caller abandons it. Other errors are Next's,
// and end the stream.
func (r *RecordStream) NextInto(reserve func(n int) error, write func(off int, piece []byte) error) (int, error) {
	op := fmt.Sprintf("loader %d sub-ring %d", r.l.ID, r.sub)
	broken := func(err error) (int, error) {
		r.end(true)
		return 0, r.l.p.err(op, err)
	}
	if _, err := io.ReadFull(r.st, r.head[:]); err != nil {
		if errors.Is(err, io.EOF) { // nothing read: the stream's end
			r.end(false)
			return 0, io.EOF
		}
		return broken(explainStream(err))
	}
	h, err := DecodeHeader(r.head[:])
	if err != nil {
		return broken(err)
	}
	switch {
	case h.Type == TypeError:
		return broken(r.remoteError(h))
	case h.Type != TypeLoaderRecord:
		return broken(fmt.Errorf("mesh: answer is %s, want %s: %w", h.Type, TypeLoaderRecord, ErrMalformed))
	case h.Len == 0:
		return broken(fmt.Errorf("mesh: %s: empty record: %w", h.Type, ErrMalformed))
	case uint64(h.Len) > uint64(r.limit):
		r.st.CancelRead(streamRefused)
		return broken(fmt.Errorf("mesh: %s: payload of %d bytes exceeds the limit of %d: %w", h.Type, h.Len, r.limit, ErrTooLarge))
	}
	n := int(h.Len)
	if err := reserve(n); err != nil {
		return 0, err
	}
	if k := min(n, RecordPiece); cap(r.piece) < k {
		r.piece = make([]byte, k)
	}
	for off := 0; off < n; {
		piece := r.piece[:min(n-off, cap(r.piece))]
		if _, err := io.ReadFull(r.st, piece); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return broken(explainStream(fmt.Errorf("mesh: %s: payload: %w", h.Type, err)))
		}
		if err := write(off, piece); err != nil {
			return 0, err
		}
		off += len(piece)
	}
	r.m.transfer(0, HeaderSize+n)
	return n, nil
}

// remoteError reads the payload of an Error message of header h (at
// most maxErrorPayload bytes, into the stream's small buffer) and
// returns the peer's error.
func (r *RecordStream) remoteError(h Header) error {
	if h.Len > maxErrorPayload {
		return fmt.Errorf("mesh: %s: payload of %d bytes exceeds the limit of %d: %w", h.Type, h.Len, maxErrorPayload, ErrMalformed)
	}
	r.buf = slices.Grow(r.buf[:0], int(h.Len))[:h.Len]
	if _, err := io.ReadFull(r.st, r.buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return explainStream(fmt.Errorf("mesh: %s: payload: %w", h.Type, err))
	}
	r.m.transfer(0, HeaderSize+len(r.buf))
	var e ErrorMessage
	if err := DecodeError(r.buf, &e); err != nil {
		return err
	}
	return &RemoteError{Code: e.Code, Message: e.Message}
}

// explainStream says why a stream broke when the connection did.
func explainStream(err error) error {
	var ae *quic.ApplicationError
	var ie *quic.IdleTimeoutError
	var se *quic.StreamError
	switch {
	case errors.As(err, &se) && se.Remote && se.ErrorCode == streamCancel:
		return fmt.Errorf("the peer closed the loader (it is stopping, or its loader failed): %w", err)
	case errors.As(err, &ae) && ae.Remote && ae.ErrorCode == appClosing:
		return fmt.Errorf("the peer closed the connection (it is shutting down): %w", err)
	case errors.As(err, &ie):
		return fmt.Errorf("the peer went silent (no packet for %v): %w", MaxIdleTimeout, err)
	}
	return err
}

// Close cancels the stream; the peer stops sending. A stream not over
// yet is counted as a request that did not fail: its reader stopped.
func (r *RecordStream) Close() {
	r.end(false)
	r.stop()
	r.st.CancelRead(streamCancel)
	r.st.CancelWrite(streamCancel)
}
