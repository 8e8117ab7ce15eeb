package mesh

import (
	"context"
	"errors"
	"fmt"
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
