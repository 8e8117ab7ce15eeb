package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
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
	StreamLoader(ctx context.Context, peer string, id uint64, sub int, send func(ctx context.Context, record []byte) error) error
}

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
// both ends, not a hang.
func (s *Server) streamLoader(connCtx context.Context, peer string, st *quic.Stream, p []byte, received int) {
	st.SetDeadline(time.Time{})
	ctx, cancel := context.WithCancel(connCtx)
	defer cancel()
	stopWatch := context.AfterFunc(st.Context(), cancel)
	defer stopWatch()
	sent := 0
	send := func(ctx context.Context, rec []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		stop := context.AfterFunc(ctx, func() { st.CancelWrite(streamCancel) })
		defer stop()
		if len(rec) == 0 || int64(len(rec)) > MaxRecordMessage {
			return fmt.Errorf("record of %d bytes: want 1 to %d (a message's 32-bit length): %w", len(rec), int64(MaxRecordMessage), ErrTooLarge)
		}
		hdr, hs := beginMessage(make([]byte, 0, HeaderSize), TypeLoaderRecord)
		hdr, _ = endMessage(hdr, hs, len(rec))
		if _, err := st.Write(hdr); err != nil {
			return err
		}
		if _, err := st.Write(rec); err != nil {
			return err
		}
		sent += len(hdr) + len(rec)
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
	if fail != nil && st.Context().Err() == nil {
		if _, err := st.Write(fail); err == nil {
			sent += len(fail)
		}
	}
	if st.Context().Err() != nil {
		st.CancelWrite(streamCancel)
		// A reader that stopped reading (its loader closed, as every
		// client-node loader's does) ended the stream; a failure is the
		// handler's or the connection's.
		failed = !readerStopped(st.Context())
	} else {
		st.Close()
	}
	s.in.peer(peer).count(sent, received, failed)
}

// readerStopped reports whether a stream's context ended because the peer
// cancelled its reading with streamCancel.
func readerStopped(ctx context.Context) bool {
	var se *quic.StreamError
	return errors.As(context.Cause(ctx), &se) && se.Remote && se.ErrorCode == streamCancel
}

// callStream calls h.StreamLoader and returns the Error message that ends
// the stream, nil when the handler finished.
func (s *Server) callStream(ctx context.Context, h LoaderHandler, peer string, req *LoaderStream, send func(context.Context, []byte) error) (fail []byte) {
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
type RecordStream struct {
	l     *RemoteLoader
	sub   int
	st    *quic.Stream
	buf   []byte
	limit int // the largest record read
	stop  func() bool
}

// Stream starts streaming sub-ring sub of l; ctx bounds the whole stream.
// maxRecord is the largest record the stream reads, the sub-ring's that
// the records go to (0: the client's MaxMessage): a larger one fails the
// stream with ErrTooLarge before its bytes are read. The stream holds
// one record at a time, so it holds at most that much.
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
	if err := l.conn.Context().Err(); err != nil {
		return nil, l.p.err(op, fmt.Errorf("the connection that opened the loader is gone: %w", context.Cause(l.conn.Context())))
	}
	st, err := l.conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, l.p.err(op, err)
	}
	b, start := beginMessage(nil, TypeLoaderStreamRequest)
	b = AppendLoaderStream(b, &LoaderStream{ID: l.ID, Sub: uint32(sub)})
	b, _ = endMessage(b, start, 0)
	if _, err := st.Write(b); err != nil {
		st.CancelRead(streamCancel)
		return nil, l.p.err(op, err)
	}
	st.Close()
	stop := context.AfterFunc(ctx, func() {
		st.CancelRead(streamCancel)
		st.CancelWrite(streamCancel)
	})
	return &RecordStream{l: l, sub: sub, st: st, limit: int(limit), stop: stop}, nil
}

// Next returns the next record of the sub-ring, valid until the next
// call; io.EOF after the last, when the peer ended the stream. Any other
// error names the peer: an Error message from it (*RemoteError: its
// handler failed), a broken connection, or the context's end.
func (r *RecordStream) Next() ([]byte, error) {
	h, payload, err := readMessageInto(r.st, r.limit, r.buf)
	op := fmt.Sprintf("loader %d sub-ring %d", r.l.ID, r.sub)
	switch {
	case errors.Is(err, io.EOF):
		return nil, io.EOF
	case err != nil:
		if errors.Is(err, ErrTooLarge) {
			r.st.CancelRead(streamRefused)
		}
		return nil, r.l.p.err(op, explainStream(err))
	}
	r.l.c.out.peer(r.l.p.name).count(0, HeaderSize+len(payload), false)
	switch h.Type {
	case TypeLoaderRecord:
		if len(payload) == 0 {
			return nil, r.l.p.err(op, fmt.Errorf("mesh: %s: empty record: %w", h.Type, ErrMalformed))
		}
		r.buf = payload
		return payload, nil
	case TypeError:
		var e ErrorMessage
		if err := DecodeError(payload, &e); err != nil {
			return nil, r.l.p.err(op, err)
		}
		return nil, r.l.p.err(op, &RemoteError{Code: e.Code, Message: e.Message})
	}
	return nil, r.l.p.err(op, fmt.Errorf("mesh: answer is %s, want %s: %w", h.Type, TypeLoaderRecord, ErrMalformed))
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

// Close cancels the stream; the peer stops sending.
func (r *RecordStream) Close() {
	r.stop()
	r.st.CancelRead(streamCancel)
	r.st.CancelWrite(streamCancel)
}
