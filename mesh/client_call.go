package mesh

// The exchange under every call of Client: retries with backoff, one
// attempt on a peer's connection, the stall timer that a peer's progress
// resets, and which failures are worth another attempt.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/quic-go/quic-go"
)

// response is one successful exchange.
type response struct {
	peer    *peerConn
	payload []byte
}

// call sends the message begun at start in b (its length is set here) to
// the peer of part and returns the payload of the answer of type want.
// Transient failures are retried with backoff until the call's deadline
// or the retry budget is spent; the error names the peer.
func (c *Client) call(ctx context.Context, part int, op string, b []byte, start int, want Type) (response, error) {
	return c.callWith(ctx, part, op, b, start, want, c.cfg.Timeout, c.cfg.Retries, nil, false)
}

// callWith is call with its own bound and retry budget, reading the
// answer into buf's memory when it is large enough. With halvable set,
// the peer's refusal of the answer's size (CodeTooLarge), or this
// client's of the request's, is not counted as a failed request: the
// caller asks again in parts.
func (c *Client) callWith(ctx context.Context, part int, op string, b []byte, start int, want Type, timeout time.Duration, retries int, buf []byte, halvable bool) (response, error) {
	p := c.peers[part]
	if p == nil {
		return response{}, fmt.Errorf("mesh: %s: part %d: %w", op, part, ErrUnknownPart)
	}
	m := c.out.peer(p.name)
	if n := len(b) - start - HeaderSize; n > c.cfg.MaxMessage {
		// A request never sent: counted as one, not as an error alone
		// (errors outnumbered requests), out of the latency histogram,
		// as it took none, and, halvable, no failure, as the peer's
		// refusal of its answer's size is none.
		m.count(0, 0, !halvable)
		return response{}, p.err(op, fmt.Errorf("request of %d bytes exceeds the limit of %d: %w", n, c.cfg.MaxMessage, ErrTooLarge))
	}
	b, _ = endMessage(b, start, 0)
	ctx, st, cancel := withStall(ctx, timeout)
	defer cancel()
	began, backoff := time.Now(), c.cfg.Backoff
	resent := false
	for attempt := 1; ; attempt++ {
		payload, reached, err := c.attempt(ctx, st, p, b, want, buf)
		if err == nil {
			m.record(len(b), HeaderSize+len(payload), time.Since(began), false)
			return response{p, payload}, nil
		}
		select {
		case <-c.done:
			err = ErrClosed
		default:
		}
		if !resent && statelessReset(err) && ctx.Err() == nil {
			// The connection was one the peer no longer knows (its process
			// restarted, or it timed the connection out): no live process
			// handled the request, and whatever a crashed one did died with
			// it. So it goes once more on a new connection, outside the
			// retry budget: a kv push, never retried, failed at its first
			// call after a peer's restart.
			resent = true
			attempt--
			continue
		}
		// A call with a longer bound than Timeout (kv) waits that long
		// for its answer, not for a peer it cannot reach.
		unreachable := !reached && time.Since(began) >= c.cfg.Timeout
		if !transient(err) || attempt > retries || unreachable || !c.sleep(ctx, &backoff) {
			m.record(len(b), 0, time.Since(began), !(halvable && sizeRefusal(err)))
			if transient(err) && !errors.Is(context.Cause(ctx), context.Canceled) {
				err = &unavailableError{attempts: attempt, elapsed: time.Since(began), last: err}
			}
			return response{}, p.err(op, err)
		}
	}
}

// sleep waits the backoff (with up to 25% jitter) and doubles it, or
// returns false when ctx or the client ends first, or when the wait
// would outlast ctx's deadline anyway.
func (c *Client) sleep(ctx context.Context, backoff *time.Duration) bool {
	d := *backoff + time.Duration(rand.Int64N(int64(*backoff)/4+1))
	*backoff = min(2**backoff, MaxBackoff)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-c.done:
	}
	return false
}

// attempt makes one exchange on one stream of the peer's connection;
// reached says whether it had a connection to make it on.
func (c *Client) attempt(ctx context.Context, stall *stall, p *peerConn, msg []byte, want Type, buf []byte) (payload []byte, reached bool, err error) {
	conn, err := c.connect(ctx, p)
	if err != nil {
		return nil, false, err
	}
	payload, err = c.exchange(ctx, stall, conn, msg, want, buf)
	if statelessReset(err) {
		// The reset ends the connection, but its context may end just
		// after the stream's error: wait for it, so that the next
		// attempt dials anew instead of taking the dead connection again.
		select {
		case <-conn.Context().Done():
		case <-ctx.Done():
		}
	}
	return payload, true, err
}

// exchange makes one request and reads its answer on a new stream of conn.
func (c *Client) exchange(ctx context.Context, stall *stall, conn *quic.Conn, msg []byte, want Type, buf []byte) ([]byte, error) {
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		st.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() {
		st.CancelRead(streamCancel)
		st.CancelWrite(streamCancel)
	})
	defer stop()
	if _, err := st.Write(msg); err != nil {
		if e := refusal(st, stall, err); e != nil {
			return nil, e
		}
		st.CancelRead(streamCancel)
		return nil, ctxErr(ctx, err)
	}
	st.Close()
	stall.progress()
	h, payload, err := readMessageInto(progressReader{st, stall}, c.cfg.MaxMessage, buf)
	st.CancelRead(0)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			st.CancelRead(streamRefused)
		}
		return nil, ctxErr(ctx, err)
	}
	switch h.Type {
	case want:
		return payload, nil
	case TypeError:
		var e ErrorMessage
		if err := DecodeError(payload, &e); err != nil {
			return nil, err
		}
		return nil, &RemoteError{Code: e.Code, Message: e.Message}
	}
	return nil, fmt.Errorf("mesh: answer is %s, want %s: %w", h.Type, want, ErrMalformed)
}

// refusal returns the Error a peer answered before it stopped reading
// the request whose write failed with werr (a request over the peer's
// MaxMessage: the server answers CodeTooLarge without reading the rest),
// or nil when the write failed otherwise or no Error arrives. The read
// is bounded like the call: by the stream's deadline and ctx's end.
func refusal(st *quic.Stream, stall *stall, werr error) error {
	var se *quic.StreamError
	if !errors.As(werr, &se) || !se.Remote {
		return nil
	}
	h, payload, err := readMessage(progressReader{st, stall}, maxErrorPayload)
	if err != nil || h.Type != TypeError {
		return nil
	}
	var e ErrorMessage
	if err := DecodeError(payload, &e); err != nil {
		return nil
	}
	return &RemoteError{Code: e.Code, Message: e.Message}
}

// ctxErr reports a stream error caused by ctx (its deadline, which the
// stream's deadline mirrors, a stall, or its cancellation) as ctx's error.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		if dl, ok := ctx.Deadline(); !ok || time.Now().Before(dl) {
			return err
		}
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("%w (%v)", context.Cause(ctx), err)
}

// stall is a call's bound: the call fails when timeout passes without
// progress (a request written, bytes of the answer read) rather than
// timeout after it began, so that a large answer from a busy peer is not
// cut off while it streams in, and a peer that stays silent (down,
// unreachable, wedged) still fails the call within timeout of its last
// byte. Its context ends with cause context.DeadlineExceeded.
type stall struct {
	timeout time.Duration
	timer   *time.Timer
}

// withStall derives a context that ends when timeout passes without a
// call of progress, or when ctx ends; cancel releases it.
func withStall(ctx context.Context, timeout time.Duration) (context.Context, *stall, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	s := &stall{timeout: timeout}
	s.timer = time.AfterFunc(timeout, func() { cancel(context.DeadlineExceeded) })
	return ctx, s, func() {
		s.timer.Stop()
		cancel(context.Canceled)
	}
}

// progress restarts the clock.
func (s *stall) progress() { s.timer.Reset(s.timeout) }

// progressReader reports every read that returns bytes as progress.
type progressReader struct {
	r io.Reader
	s *stall
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.s.progress()
	}
	return n, err
}

// fail counts a failed decode against the call it follows and names the peer.
func (c *Client) fail(p *peerConn, op string, err error) error {
	c.out.peer(p.name).errors.Add(1)
	return p.err(op, err)
}

// transient reports whether a failed attempt may succeed if repeated on
// a new connection: lost or reset connections, timeouts of one dial,
// refused UDP. Refusals, peer errors, size limits, bad bytes, closing and
// cancellation are final.
func transient(err error) bool {
	for _, final := range []error{ErrRefused, ErrRemote, ErrTooLarge, ErrMalformed, ErrClosed, ErrCert, context.Canceled} {
		if errors.Is(err, final) {
			return false
		}
	}
	return true
}

// sizeRefusal reports whether err is the peer's refusal of a request or
// its answer as too large.
func sizeRefusal(err error) bool {
	var re *RemoteError
	return errors.As(err, &re) && re.Code == CodeTooLarge
}

// statelessReset reports whether err ended a connection by the peer's
// stateless reset.
func statelessReset(err error) bool {
	var reset *quic.StatelessResetError
	return errors.As(err, &reset)
}
