package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// Peer is where a partition is served: the node's name (its certificate's
// CN, checked during the handshake) and its UDP address "host:port".
type Peer struct {
	Name string
	Addr string
}

// ClientConfig configures NewClient.
type ClientConfig struct {
	Identity *Identity // this node's certificate and the cluster CA
	Cluster  string    // must equal Identity.Cluster and every peer's
	// Checksum is the partition-set checksum; every peer must match.
	// "" makes a fetch-only client, for a node that has no graph.toml
	// yet: peers of any checksum accept it and serve it ReadFile only.
	Checksum string
	Part     int // this node's partition, sent in the hello
	Peers    map[int]Peer
	// Timeout bounds how long one call, retries and reconnections
	// included, may go without progress (a request written, bytes of the
	// answer read): a peer that stays silent fails the call this long
	// after its last byte, while a large answer that keeps streaming in is
	// never cut off. The caller's context may end the call sooner.
	// 0 = DefaultCallTimeout.
	Timeout time.Duration
	// KVTimeout bounds one kv call (a synchronous push waits for every
	// trainer of the step, so it must exceed the kv sync timeout); 0 =
	// DefaultKVTimeout. Reaching the peer is bounded by Timeout all the
	// same: a kv pull of a peer that is down ended after its retries'
	// dials (21.8 s with a Timeout of 3 s).
	KVTimeout time.Duration
	// Retries after a transient failure; 0 = DefaultRetries, < 0 = none.
	Retries int
	// Backoff is the first wait between attempts; 0 = DefaultBackoff.
	Backoff time.Duration
	// MaxMessage caps a request's and a response's payload; 0 =
	// DefaultMaxMessage.
	MaxMessage int
	// LocalAddr is the UDP address the client sends from; "" binds an
	// ephemeral port on every interface.
	LocalAddr string

	alpn string // tests only: "" means ALPN
}

// Validate reports every problem of c, joined.
func (c *ClientConfig) Validate() error {
	var errs []error
	if c.Identity == nil {
		errs = append(errs, errors.New("mesh: client: Identity is nil"))
	} else if c.Identity.Cluster != c.Cluster {
		errs = append(errs, fmt.Errorf("mesh: client: cluster %q, but the CA certificate names %q", c.Cluster, c.Identity.Cluster))
	}
	for part, p := range c.Peers {
		if part < 0 {
			errs = append(errs, fmt.Errorf("mesh: client: peer %q: part %d < 0", p.Name, part))
		}
		if err := CheckName("node", p.Name); err != nil {
			errs = append(errs, fmt.Errorf("mesh: client: part %d: %w", part, err))
		}
		if _, _, err := net.SplitHostPort(p.Addr); err != nil {
			errs = append(errs, fmt.Errorf("mesh: client: peer %s: address %q: %w", p.Name, p.Addr, err))
		}
	}
	if c.Timeout < 0 || c.Backoff < 0 || c.KVTimeout < 0 {
		errs = append(errs, fmt.Errorf("mesh: client: Timeout %v, KVTimeout %v, Backoff %v: must not be negative", c.Timeout, c.KVTimeout, c.Backoff))
	}
	if c.MaxMessage < 0 || int64(c.MaxMessage) > 1<<32-1 {
		errs = append(errs, fmt.Errorf("mesh: client: MaxMessage %d: want 0 (default) to 4 GiB-1", c.MaxMessage))
	}
	return errors.Join(errs...)
}

// Client calls peers: one QUIC connection per peer, opened on first use
// (or by WaitReady) and reopened after it breaks, one stream per call.
// Its methods are safe for concurrent use.
type Client struct {
	cfg   ClientConfig
	udp   *net.UDPConn
	tr    *quic.Transport
	peers map[int]*peerConn
	out   *metrics
	done  chan struct{} // closed by Close

	closeOnce sync.Once
}

// NewClient binds the client's UDP socket; it dials nobody yet.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultCallTimeout
	}
	if cfg.KVTimeout == 0 {
		cfg.KVTimeout = DefaultKVTimeout
	}
	switch {
	case cfg.Retries == 0:
		cfg.Retries = DefaultRetries
	case cfg.Retries < 0:
		cfg.Retries = 0
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.alpn == "" {
		cfg.alpn = ALPN
	}
	local := &net.UDPAddr{}
	if cfg.LocalAddr != "" {
		var err error
		if local, err = net.ResolveUDPAddr("udp", cfg.LocalAddr); err != nil {
			return nil, fmt.Errorf("mesh: client: local address: %w", err)
		}
	}
	udp, err := net.ListenUDP("udp", local)
	if err != nil {
		return nil, fmt.Errorf("mesh: client: %w", err)
	}
	// With a reset key the transport answers a packet of a connection it
	// no longer has (ended by its idle timeout, say, while the peer was
	// paused) with a stateless reset, so the peer drops it at once: a
	// peer that resumes may otherwise keep it, and the remote loader
	// streamed on it, until an idle timeout stretched by the pause's RTT.
	key := quic.StatelessResetKey(cfg.Identity.resetKey)
	c := &Client{
		cfg:   cfg,
		udp:   udp,
		tr:    &quic.Transport{Conn: udp, StatelessResetKey: &key, ConnectionIDLength: ConnectionIDLength},
		peers: make(map[int]*peerConn, len(cfg.Peers)),
		out:   newMetrics(Outbound),
		done:  make(chan struct{}),
	}
	for part, p := range cfg.Peers {
		c.peers[part] = &peerConn{part: part, name: p.Name, addr: p.Addr}
	}
	return c, nil
}

// Metrics returns the outbound stats of every peer called so far.
func (c *Client) Metrics() []PeerStats { return c.out.snapshot() }

// MaxMessage is the largest payload the client sends or reads (its
// config's, DefaultMaxMessage when that is 0): a caller with more ids
// than one request of that size carries splits them (chunk.go).
func (c *Client) MaxMessage() int { return c.cfg.MaxMessage }

// Close closes every connection and the socket; calls in flight and later
// fail with ErrClosed. Idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		for _, p := range c.peers {
			p.close()
		}
		c.tr.Close()
		c.udp.Close()
	})
	return nil
}

// Sample asks the peer serving part to expand req.IDs, decoding the
// answer into resp (whose slices are reused, as are the buffers resp
// keeps for the request's encoding and the answer's bytes).
func (c *Client) Sample(ctx context.Context, part int, req *SampleRequest, resp *SampleResponse) error {
	want, decode := TypeSampleResponse, DecodeSampleResponse
	if req.Narrow {
		if id, ok := fitU32(req.IDs); !ok {
			return fmt.Errorf("mesh: sample: id %d in a narrow request (ids below 2^32 only): %w", id, ErrMalformed)
		}
		if id, ok := fitU32(req.ExcludeIDs); !ok {
			return fmt.Errorf("mesh: sample: excluded id %d in a narrow request (ids below 2^32 only): %w", id, ErrMalformed)
		}
		want, decode = TypeSampleResponseNarrow, DecodeSampleResponseNarrow
	}
	if len(req.ExcludeAt) > 0 || len(req.ExcludeCounts) > 0 || len(req.ExcludeIDs) > 0 {
		if len(req.ExcludeAt) == 0 {
			return fmt.Errorf("mesh: sample: exclude: %d counts, %d ids for no node: %w", len(req.ExcludeCounts), len(req.ExcludeIDs), ErrMalformed)
		}
		if err := CheckExclusion(req); err != nil {
			return fmt.Errorf("mesh: sample: exclude: %w: %w", err, ErrMalformed)
		}
	}
	b, start := beginMessage(resp.request[:0], TypeSampleRequest)
	b = AppendSampleRequest(b, req)
	resp.request = b
	// A request of several nodes that the peer refuses for its answer's
	// size the caller asks again in halves (fanout -1): no failure.
	p, err := c.callWith(ctx, part, "sample", b, start, want, c.cfg.Timeout, c.cfg.Retries, resp.payload, len(req.IDs) > 1)
	if err != nil {
		return err
	}
	resp.payload = p.payload
	if err := decode(p.payload, resp); err != nil {
		return c.fail(p.peer, "sample", err)
	}
	if len(resp.Counts) != len(req.IDs) {
		return c.fail(p.peer, "sample", fmt.Errorf("%d counts for %d ids: %w", len(resp.Counts), len(req.IDs), ErrMalformed))
	}
	return nil
}

// Pull asks the peer serving part for the feature rows of req.IDs.
// resp.Rows is valid until the next Pull into resp, which reuses its
// memory: a caller that keeps resp between pulls allocates nothing once
// the buffer has grown to the largest answer.
func (c *Client) Pull(ctx context.Context, part int, req *PullRequest, resp *PullResponse) error {
	b, start := beginMessage(nil, TypePullRequest)
	b = AppendPullRequest(b, req)
	p, err := c.callWith(ctx, part, "pull", b, start, TypePullResponse, c.cfg.Timeout, c.cfg.Retries, resp.payload, false)
	if err != nil {
		return err
	}
	resp.payload = p.payload
	if err := DecodePullResponse(p.payload, resp); err != nil {
		return c.fail(p.peer, "pull", err)
	}
	if resp.Count() != len(req.IDs) {
		return c.fail(p.peer, "pull", fmt.Errorf("%d rows for %d ids: %w", resp.Count(), len(req.IDs), ErrMalformed))
	}
	return nil
}

// Stats asks the peer serving part for its counters.
func (c *Client) Stats(ctx context.Context, part int) (*StatsResponse, error) {
	b, start := beginMessage(nil, TypeStatsRequest)
	p, err := c.call(ctx, part, "stats", b, start, TypeStatsResponse)
	if err != nil {
		return nil, err
	}
	var r StatsResponse
	if err := DecodeStatsResponse(p.payload, &r); err != nil {
		return nil, c.fail(p.peer, "stats", err)
	}
	return &r, nil
}

// WaitReady returns nil once every peer has completed the handshake and
// hello, retrying with backoff (start order does not matter), or, when
// ctx ends first, an error naming each peer not ready. A refusal (another
// cluster, checksum, version, CA) fails at once: waiting does not heal it.
// The other peers then finish the attempt under way (a dial gives up
// within its handshake timeout) without retrying, and WaitReady returns
// the refusals alone: a peer that is not up does not hide them. Errors
// are joined in part order.
func (c *Client) WaitReady(ctx context.Context) error {
	retry, refused := context.WithCancel(ctx)
	defer refused()
	errs := make([]error, c.maxPart()+1)
	var wg sync.WaitGroup
	for part, p := range c.peers {
		wg.Go(func() {
			err := c.waitPeer(ctx, retry, p)
			if err != nil && !transient(err) {
				refused()
			}
			errs[part] = err
		})
	}
	wg.Wait()
	if ctx.Err() == nil && retry.Err() != nil {
		// Stopped by a refusal: the peers not retried are not at fault.
		for i, err := range errs {
			if err != nil && transient(err) {
				errs[i] = nil
			}
		}
	}
	return errors.Join(errs...)
}

// maxPart is the largest part of the configured peers (-1 without any).
func (c *Client) maxPart() int {
	m := -1
	for part := range c.peers {
		m = max(m, part)
	}
	return m
}

// Probe reports, for every configured part, whether its peer is up: the
// client holds a connection to it that completed the TLS handshake and
// the hello and has not ended since. A connection ends when the peer
// closes it (its Server.Close or its node stopping), at its next request
// after the peer restarted (the stateless reset; a keep-alive PING is too
// small to draw one), or after MaxIdleTimeout without a packet from the
// peer: keep-alives flow on a live one, so only a peer that vanished
// (crashed, unreachable, or restarted with no request since) reaches
// it. A peer without such a connection is dialled, as the next call to
// it would (the same shared dial), and is up when that dial and hello
// succeed before ctx ends; a refused hello is down. A dial that outlasts ctx goes on, and
// its connection serves the next call or Probe. A live connection is
// reported without waiting, whatever ctx. After Close every peer is down.
func (c *Client) Probe(ctx context.Context) map[int]bool {
	up := make(map[int]bool, len(c.peers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for part, p := range c.peers {
		wg.Go(func() {
			_, err := c.connect(ctx, p)
			mu.Lock()
			up[part] = err == nil
			mu.Unlock()
		})
	}
	wg.Wait()
	return up
}

// waitPeer connects to p until its hello succeeds or fails for good. An
// attempt runs under ctx; it is retried while retry (ctx, or ended by
// WaitReady at another peer's refusal) lasts.
func (c *Client) waitPeer(ctx, retry context.Context, p *peerConn) error {
	start, backoff := time.Now(), c.cfg.Backoff
	var last error
	for attempt := 1; ; attempt++ {
		_, err := c.connect(ctx, p)
		if err == nil {
			return nil
		}
		last = err
		if !transient(err) {
			return p.err("connect", err)
		}
		if !c.sleep(retry, &backoff) {
			// sleep also gives up when the next wait would pass ctx's
			// deadline: only Close makes it ErrClosed.
			select {
			case <-c.done:
				return p.err("connect", ErrClosed)
			default:
			}
			return p.err("connect", &unavailableError{attempts: attempt, elapsed: time.Since(start), last: last})
		}
	}
}

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
