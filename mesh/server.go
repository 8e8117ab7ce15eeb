package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// Handler serves a node's partition to peers; the daemon implements it
// over the sampler and the partition. Methods are called concurrently,
// one goroutine per request, with a context that ends at the request's
// deadline or when the peer's connection or the Server closes; they must
// return soon after it ends. A returned error is sent to the caller as
// an Error message (CodeHandler, CodeTimeout for a context deadline,
// CodeTooLarge for ErrTooLarge); a panic is recovered and sent as
// CodeInternal. A handler should refuse, with ErrTooLarge, a request whose
// answer would exceed AnswerLimit(ctx) before it builds that answer: the
// server refuses it anyway, after the fact. The request and its
// slices are valid only during the call; the response may alias memory
// that stays valid (an mmap'd partition) and is not retained.
type Handler interface {
	SampleNeighbors(ctx context.Context, req *SampleRequest) (*SampleResponse, error)
	PullFeatures(ctx context.Context, req *PullRequest) (*PullResponse, error)
}

// RowsReleaser is implemented by a Handler that wants the Rows of each
// PullResponse it returned handed back once they are written to the
// stream (or the write failed): the server no longer reads them, so the
// handler may reuse their memory for the next pull.
type RowsReleaser interface {
	ReleaseRows(rows []byte)
}

// SampleReleaser is implemented by a Handler that wants each
// SampleResponse it returned handed back once the server has encoded it,
// to reuse its slices.
type SampleReleaser interface {
	ReleaseSample(resp *SampleResponse)
}

// idleMessages is how many encoded answers' buffers a Server keeps for
// reuse: answers to sample requests run to megabytes, and a fresh buffer
// is fresh pages to fault in. Only buffers of at least minIdleMessage
// bytes are kept: the small ones (errors, stats, the heads of pull
// answers) are cheap to allocate, and kept they would be handed to the
// next sample answer, which would then grow a fresh buffer after all.
const (
	idleMessages   = 32
	minIdleMessage = 64 << 10
)

// ServerConfig configures Listen.
type ServerConfig struct {
	Identity *Identity // this node's certificate and the cluster CA
	Cluster  string    // must equal Identity.Cluster and every peer's
	Checksum string    // partition-set checksum; peers must present the same
	Part     int       // the partition this node serves
	// Owners names the node configured for each part, this node's
	// included ([[mesh.peers]]): a peer whose hello claims a part is
	// refused unless it is that part's node (a node given another's part
	// served diverging rows of it to whoever asked, without a word).
	// A hello of no part (a client node) is not checked; nil checks none.
	Owners  map[int]string
	Handler Handler
	// MaxMessage caps a request's and a response's payload; 0 means
	// DefaultMaxMessage.
	MaxMessage int
	// RequestTimeout bounds one request (read and handler; the answer
	// has AnswerGrace more to be written); 0 means
	// DefaultServerRequestTimeout.
	RequestTimeout time.Duration
	// KVTimeout bounds one kv request (a synchronous push waits for every
	// trainer of the step: it must exceed the kv sync timeout); 0 means
	// DefaultKVTimeout.
	KVTimeout time.Duration
	// Outbound, when set, adds this node's outbound stats (its Client's
	// Metrics) to the StatsResponse.
	Outbound func() []PeerStats
	// Logger receives refused peers and handler panics; nil discards.
	Logger *slog.Logger

	alpn string // tests only: "" means ALPN
}

// Validate reports every problem of c, joined.
func (c *ServerConfig) Validate() error {
	var errs []error
	if c.Identity == nil {
		errs = append(errs, errors.New("mesh: server: Identity is nil"))
	} else if c.Identity.Cluster != c.Cluster {
		errs = append(errs, fmt.Errorf("mesh: server: cluster %q, but the CA certificate names %q", c.Cluster, c.Identity.Cluster))
	}
	if c.Handler == nil {
		errs = append(errs, errors.New("mesh: server: Handler is nil"))
	}
	if c.Part < 0 {
		errs = append(errs, fmt.Errorf("mesh: server: part %d < 0", c.Part))
	}
	if c.MaxMessage < 0 || int64(c.MaxMessage) > 1<<32-1 {
		errs = append(errs, fmt.Errorf("mesh: server: MaxMessage %d: want 0 (default) to 4 GiB-1", c.MaxMessage))
	}
	if c.RequestTimeout < 0 || c.KVTimeout < 0 {
		errs = append(errs, fmt.Errorf("mesh: server: RequestTimeout %v, KVTimeout %v: must not be negative", c.RequestTimeout, c.KVTimeout))
	}
	return errors.Join(errs...)
}

// QUIC application error codes closing a connection or cancelling a
// stream. Append-only.
const (
	appClosing    quic.ApplicationErrorCode = 1 // the server or client is closing
	appRefused    quic.ApplicationErrorCode = 2 // hello mismatch; the text says what
	appNoHello    quic.ApplicationErrorCode = 3 // no valid hello in time
	streamCancel  quic.StreamErrorCode      = 1 // the caller gave up (deadline, cancel)
	streamRefused quic.StreamErrorCode      = 2 // the request was refused (too large)
)

// Server answers peers' requests. Create it with Listen; Close releases
// the socket. Its methods are safe for concurrent use.
type Server struct {
	cfg     ServerConfig
	udp     *net.UDPConn
	tr      *quic.Transport
	ln      *quic.Listener
	in      *metrics
	stopCtx func() bool
	bufs    chan []byte // idle message buffers (see idleMessages)

	wg        sync.WaitGroup
	closeOnce sync.Once
	mu        struct {
		sync.Mutex
		closed  bool
		conns   map[*quic.Conn]struct{}
		refused map[string]loggedRefusal // by peer: the refusal last logged
	}
}

// loggedRefusal is a refused peer's last logged reason, when, and how many
// times it was refused for it since.
type loggedRefusal struct {
	problem string
	at      time.Time
	repeats int
}

// Listen binds addr (UDP, "host:port"; port 0 picks one) and serves
// until Close or until ctx ends, whichever is first.
func Listen(ctx context.Context, addr string, cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultServerRequestTimeout
	}
	if cfg.KVTimeout == 0 {
		cfg.KVTimeout = DefaultKVTimeout
	}
	if cfg.alpn == "" {
		cfg.alpn = ALPN
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("mesh: listen %s: %w", addr, err)
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("mesh: listen %s: %w", addr, err)
	}
	key := quic.StatelessResetKey(cfg.Identity.resetKey)
	s := &Server{cfg: cfg, udp: udp, in: newMetrics(Inbound), bufs: make(chan []byte, idleMessages)}
	s.tr = &quic.Transport{Conn: udp, StatelessResetKey: &key, ConnectionIDLength: ConnectionIDLength}
	s.mu.conns = make(map[*quic.Conn]struct{})
	s.ln, err = s.tr.Listen(serverTLS(cfg.Identity, cfg.alpn), quicConfig())
	if err != nil {
		s.tr.Close()
		udp.Close()
		return nil, fmt.Errorf("mesh: listen %s: %w", addr, err)
	}
	s.stopCtx = context.AfterFunc(ctx, func() { s.Close() })
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// quicConfig is shared by both sides; only a dead peer hits the idle
// timeout, since keep-alives flow on live connections.
func quicConfig() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:       HandshakeIdleTimeout,
		MaxIdleTimeout:             MaxIdleTimeout,
		KeepAlivePeriod:            KeepAlivePeriod,
		MaxIncomingStreams:         MaxIncomingStreams,
		MaxIncomingUniStreams:      -1,
		MaxStreamReceiveWindow:     MaxStreamReceiveWindow,
		MaxConnectionReceiveWindow: MaxConnectionReceiveWindow,
	}
}

// loaderQuicConfig is quicConfig for the connection of a loader streamed
// over the mesh (OpenLoader). Its sub-rings' streams share it and the
// trainer reads them in turn: streams whose sub-rings are full on this
// side go unread while the trainer waits on another, and with a shared
// window smaller than theirs together their unread bytes used it up and
// the awaited stream got no credit — the trainer waited for ever. Here
// the connection's window is every stream's window together, so only a
// stream's own window ever stops it; memory stays bounded by those.
func loaderQuicConfig() *quic.Config {
	c := quicConfig()
	c.InitialConnectionReceiveWindow = MaxLoaderStreams * MaxStreamReceiveWindow
	c.MaxConnectionReceiveWindow = MaxLoaderStreams * MaxStreamReceiveWindow
	return c
}

// Addr is the bound UDP address.
func (s *Server) Addr() net.Addr { return s.udp.LocalAddr() }

// Metrics returns the inbound stats of every peer that has called.
func (s *Server) Metrics() []PeerStats { return s.in.snapshot() }

// Close stops accepting, closes every connection (peers see "closing"
// and reconnect elsewhere or later), releases the UDP socket, then waits
// for in-flight handlers, whose contexts are cancelled. Idempotent; the
// port can be bound again as soon as Close returns.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.stopCtx()
		s.mu.Lock()
		s.mu.closed = true
		conns := make([]*quic.Conn, 0, len(s.mu.conns))
		for c := range s.mu.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		s.ln.Close()
		for _, c := range conns {
			c.CloseWithError(appClosing, "server closing")
		}
		s.tr.Close()
		s.udp.Close()
	})
	s.wg.Wait()
	return nil
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept(context.Background())
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			conn.CloseWithError(appClosing, "server closing")
			return
		}
		s.mu.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(conn)
	}
}

// serveConn checks the hello on the first stream, then serves each
// further stream on its own goroutine until the connection ends.
func (s *Server) serveConn(conn *quic.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.mu.conns, conn)
		s.mu.Unlock()
		s.wg.Done()
	}()
	// TLS verified the chain, so the certificate is the cluster's.
	peer := conn.ConnectionState().TLS.PeerCertificates[0].Subject.CommonName
	fetchOnly, ok := s.hello(conn, peer)
	if !ok {
		return
	}
	for {
		st, err := conn.AcceptStream(conn.Context())
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveStream(conn.Context(), peer, st, fetchOnly)
		}()
	}
}

// serveStream answers one request. It never returns an error: failures
// become Error messages or stream resets, and count in the metrics. On a
// fetch-only connection (a hello without a partition-set checksum) it
// answers file requests only.
func (s *Server) serveStream(connCtx context.Context, peer string, st *quic.Stream, fetchOnly bool) {
	start := time.Now()
	st.SetDeadline(start.Add(s.cfg.RequestTimeout))
	defer st.CancelRead(0)
	m := s.in.peer(peer)
	h, p, err := readMessage(st, s.cfg.MaxMessage)
	// The type decides the bound: kv requests may wait for a step; a
	// loader's stream has none (streamLoader).
	deadline := start.Add(s.requestTimeout(h.Type))
	// The handler's context ends at the deadline, the stream AnswerGrace
	// later: a handler that gives up when its time is up answers
	// CodeTimeout, and that answer must still reach the caller. With one
	// deadline for both its write failed, and the caller saw a reset it
	// took for a lost connection and retried, to report the peer
	// unavailable after as many requests of the server's whole budget.
	st.SetDeadline(deadline.Add(AnswerGrace))
	ctx, cancel := context.WithDeadline(connCtx, deadline)
	defer cancel()
	// The stream's context ends when the caller cancels its side: the
	// handler stops waiting for it (a trainer that gave up on a step).
	stopWatch := context.AfterFunc(st.Context(), cancel)
	defer stopWatch()
	received := HeaderSize + len(p)
	var resp, tail []byte
	var halve bool
	switch {
	case errors.Is(err, ErrTooLarge):
		resp = errorMessage(CodeTooLarge, err.Error())
	case errors.Is(err, ErrMalformed):
		resp = errorMessage(CodeMalformed, err.Error())
	case err != nil:
		// The caller reset the stream or went away: nobody to answer.
		st.CancelWrite(streamCancel)
		m.record(0, received, time.Since(start), true)
		return
	case fetchOnly && h.Type != TypeFileRequest:
		resp = errorMessage(CodeRefused, fmt.Sprintf("mesh: %s: peer %s connected without a partition-set checksum, to fetch files only", h.Type, peer))
	case h.Type == TypeLoaderStreamRequest:
		stopWatch()
		s.streamLoader(connCtx, peer, st, p, received)
		return
	case h.Type == TypeLoaderOpenRequest:
		resp = s.openLoader(ctx, connCtx, peer, p)
	default:
		resp, tail, halve = s.dispatch(ctx, h.Type, p)
	}
	// A sample request of several nodes refused for its answer's size is
	// asked again in halves: healthy sampling at fanout -1, no failure.
	failed := msgType(resp) == TypeError && !halve
	_, err = st.Write(resp)
	if err == nil && len(tail) > 0 {
		_, err = st.Write(tail)
	}
	if err != nil {
		st.CancelWrite(streamCancel)
		failed = true
	} else {
		st.Close()
	}
	// The stream copied what it accepted into its frames: both are free.
	if r, ok := s.cfg.Handler.(RowsReleaser); ok && len(tail) > 0 {
		r.ReleaseRows(tail)
	}
	m.record(len(resp)+len(tail), received, time.Since(start), failed)
	s.putBuf(resp)
}

// getBuf is an idle message buffer, or nil (append allocates).
func (s *Server) getBuf() []byte {
	select {
	case b := <-s.bufs:
		return b[:0]
	default:
		return nil
	}
}

// putBuf keeps b for a later answer, unless it is small or enough are
// idle.
func (s *Server) putBuf(b []byte) {
	if cap(b) < minIdleMessage {
		return
	}
	select {
	case s.bufs <- b:
	default:
	}
}

// catch, deferred by the code that calls a handler for a request of type
// t, turns the handler's panic into the answer: an internal Error message
// in *msg, nothing in *tail (the rows written after it; nil: none), and a
// log line.
func (s *Server) catch(t Type, msg, tail *[]byte) {
	r := recover()
	if r == nil {
		return
	}
	s.cfg.Logger.Error("mesh: handler panicked", "type", t.String(), "panic", fmt.Sprint(r))
	*msg = errorMessage(CodeInternal, fmt.Sprintf("mesh: %s handler panicked: %v", t, r))
	if tail != nil {
		*tail = nil
	}
}

func errorMessage(code ErrorCode, text string) []byte {
	b, start := beginMessage(nil, TypeError)
	b = AppendError(b, &ErrorMessage{Code: code, Message: text})
	b, _ = endMessage(b, start, 0)
	return b
}

// dispatch decodes the request, calls the handler and encodes the
// response: a message, and for pulls the rows to write after it. halve
// says that msg refuses a sample request of several nodes as too large
// (CodeTooLarge): its caller asks again in halves (fanout -1 over nodes
// of high degree), which is no failure.
func (s *Server) dispatch(ctx context.Context, t Type, p []byte) (msg, tail []byte, halve bool) {
	defer s.catch(t, &msg, &tail)
	ctx = context.WithValue(ctx, answerLimitKey{}, s.cfg.MaxMessage)
	switch t {
	case TypeSampleRequest:
		var req SampleRequest
		if err := DecodeSampleRequest(p, &req); err != nil {
			return errorMessage(CodeMalformed, err.Error()), nil, false
		}
		several := len(req.IDs) > 1
		resp, err := s.cfg.Handler.SampleNeighbors(ctx, &req)
		if err != nil {
			return handlerError(t, err), nil, several && errors.Is(err, ErrTooLarge)
		}
		if resp == nil || len(resp.Counts) != len(req.IDs) || !sumMatches(resp) {
			return errorMessage(CodeInternal, fmt.Sprintf("mesh: %s handler: response does not match %d ids", t, len(req.IDs))), nil, false
		}
		if r, ok := s.cfg.Handler.(SampleReleaser); ok && sampleFits(resp, s.cfg.MaxMessage) {
			// An answer too large to send goes, not back to the
			// handler to be kept for reuse.
			defer r.ReleaseSample(resp)
		}
		rt, encode := TypeSampleResponse, AppendSampleResponse
		if req.Narrow {
			if id, ok := fitU32(resp.Neighbors); !ok {
				return errorMessage(CodeHandler, fmt.Sprintf("mesh: %s handler: neighbour %d does not fit the narrow answer asked for (ids below 2^32)", t, id)), nil, false
			}
			rt, encode = TypeSampleResponseNarrow, AppendSampleResponseNarrow
		}
		b, start := beginMessage(s.getBuf(), rt)
		msg := s.finish(encode(b, resp), start, 0)
		return msg, nil, several && msgType(msg) == TypeError
	case TypePullRequest:
		var req PullRequest
		if err := DecodePullRequest(p, &req); err != nil {
			return errorMessage(CodeMalformed, err.Error()), nil, false
		}
		resp, err := s.cfg.Handler.PullFeatures(ctx, &req)
		if err != nil {
			return handlerError(t, err), nil, false
		}
		if resp == nil || !validPull(resp) || resp.Count() != len(req.IDs) {
			return errorMessage(CodeInternal, fmt.Sprintf("mesh: %s handler: response is not %d rows of a known dtype", t, len(req.IDs))), nil, false
		}
		b, start := beginMessage(nil, TypePullResponse)
		b = appendPullResponseHead(b, resp, resp.Count())
		msg := s.finish(b, start, len(resp.Rows))
		if msgType(msg) == TypeError {
			return msg, nil, false
		}
		return msg, resp.Rows, false
	case TypeStatsRequest:
		if err := DecodeStatsRequest(p); err != nil {
			return errorMessage(CodeMalformed, err.Error()), nil, false
		}
		r := StatsResponse{Node: s.cfg.Identity.Node, Part: uint32(s.cfg.Part), Peers: s.in.snapshot()}
		if s.cfg.Outbound != nil {
			r.Peers = append(r.Peers, s.cfg.Outbound()...)
		}
		b, start := beginMessage(nil, TypeStatsResponse)
		b = AppendStatsResponse(b, &r)
		return s.finish(b, start, 0), nil, false
	case TypeHello:
		return errorMessage(CodeMalformed, "mesh: Hello sent twice on one connection"), nil, false
	}
	if msg, ok := s.dispatchSplit(ctx, t, p); ok {
		return msg, nil, false
	}
	if msg, ok := s.dispatchKV(ctx, t, p); ok {
		return msg, nil, false
	}
	if msg, ok := s.dispatchFile(ctx, t, p); ok {
		return msg, nil, false
	}
	return errorMessage(CodeUnsupported, fmt.Sprintf("mesh: %s: not served by this node (protocol version %d)", t, ProtocolVersion)), nil, false
}

// finish sets the length of the message begun at start, or replaces it
// with an Error when the payload exceeds MaxMessage.
func (s *Server) finish(b []byte, start, tail int) []byte {
	n := len(b) - start - HeaderSize + tail
	if n > s.cfg.MaxMessage {
		t := msgType(b[start:])
		return errorMessage(CodeTooLarge, fmt.Sprintf("mesh: %s: response of %d bytes exceeds the limit of %d", t, n, s.cfg.MaxMessage))
	}
	b, _ = endMessage(b, start, tail)
	return b
}

// answerLimitKey keys the server's MaxMessage in a handler's context.
type answerLimitKey struct{}

// AnswerLimit is the largest answer payload, in bytes, the server that
// called a Handler method with ctx sends (its MaxMessage); 0 outside one.
func AnswerLimit(ctx context.Context) int {
	n, _ := ctx.Value(answerLimitKey{}).(int)
	return n
}

func handlerError(t Type, err error) []byte {
	code := CodeHandler
	switch {
	case errors.Is(err, ErrTooLarge):
		code = CodeTooLarge
	case errors.Is(err, context.DeadlineExceeded):
		code = CodeTimeout
	case errors.Is(err, ErrNotFound):
		code = CodeNotFound
	}
	return errorMessage(code, fmt.Sprintf("%s handler: %v", t, err))
}

// sampleFits reports whether r's answer (at most 4 bytes of count and 8
// of neighbour each) can fit a payload of limit bytes.
func sampleFits(r *SampleResponse, limit int) bool {
	return 4*int64(len(r.Counts))+8*int64(len(r.Neighbors)) <= int64(limit)
}

func sumMatches(r *SampleResponse) bool {
	var sum uint64
	for _, c := range r.Counts {
		sum += uint64(c)
	}
	return sum == uint64(len(r.Neighbors))
}
