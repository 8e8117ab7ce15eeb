package mesh

import "time"

// Protocol identity. ProtocolVersion is carried in ALPN (ALPN) and again
// in the hello; a peer speaking another version fails the TLS handshake.
const (
	ProtocolVersion = 1
	ALPN            = "graphnode/1"
)

// Tunables, in one place. Every duration of the mesh is bounded by one of
// these or by a field of ClientConfig / ServerConfig that defaults to one.
const (
	// DefaultCallTimeout bounds one client call, retries included, when
	// ClientConfig.Timeout is zero.
	DefaultCallTimeout = 10 * time.Second
	// DefaultRetries is how many times a call is retried after a transient
	// failure (connection lost, peer restarting, idle timeout).
	DefaultRetries = 3
	// DefaultBackoff is the first wait before a retry; it doubles per
	// retry up to MaxBackoff, with up to 25% jitter.
	DefaultBackoff = 100 * time.Millisecond
	// MaxBackoff caps the wait between two attempts.
	MaxBackoff = 2 * time.Second
	// DialTimeout bounds one connection attempt (QUIC + TLS handshake and
	// the hello), so a peer that does not answer costs at most this much
	// of a call's budget per attempt.
	DialTimeout = 3 * time.Second
	// HandshakeIdleTimeout is quic-go's handshake idle timeout.
	HandshakeIdleTimeout = 2 * time.Second
	// HelloTimeout is how long a server waits for the first stream and
	// its hello after the TLS handshake before it drops the connection.
	HelloTimeout = 5 * time.Second
	// MaxIdleTimeout closes a connection that has heard nothing from its
	// peer for this long; KeepAlivePeriod keeps live, quiet connections
	// open, so only a dead peer hits the idle timeout.
	MaxIdleTimeout  = 15 * time.Second
	KeepAlivePeriod = 5 * time.Second
	// DefaultServerRequestTimeout bounds one request on the server: read
	// and handler, when ServerConfig.RequestTimeout is zero.
	DefaultServerRequestTimeout = 30 * time.Second
	// AnswerGrace is how long past a request's deadline its stream stays
	// open on the server, so that the answer of a handler stopped by the
	// deadline (CodeTimeout) is written rather than cut off.
	AnswerGrace = 2 * time.Second
	// DefaultKVTimeout bounds one kv request on both sides when the config
	// leaves it zero: longer than kv's default sync timeout (60 s), since
	// a synchronous push waits for every trainer of its step.
	DefaultKVTimeout = 90 * time.Second
	// DefaultMaxMessage caps a message's payload on both sides when the
	// config leaves it zero; the payload length is a uint32, so MaxMessage
	// can never exceed 4 GiB − 1.
	DefaultMaxMessage = 256 << 20
	// MaxIncomingStreams is how many requests one peer may have in flight
	// on one connection; further streams wait in quic-go's flow control.
	MaxIncomingStreams = 1024
	// Flow-control windows: large enough that one stream moving a 400 KB
	// feature block is not window-bound on a LAN.
	MaxStreamReceiveWindow     = 16 << 20
	MaxConnectionReceiveWindow = 64 << 20
	// MaxLoaderStreams is the most sub-rings a loader streamed over the
	// mesh may have (the node's largest workers setting is at most this):
	// a loader's connection gets this many streams' windows (see
	// loaderQuicConfig).
	MaxLoaderStreams = 64
	// RecordPiece is the most of a loader record (LoaderRecord) either
	// end holds outside its ring at once: the sampling node copies a
	// record out of its ring, and the client node into its own, this
	// much at a time through a buffer of the stream's, so that a record
	// of hundreds of MB costs no such copy on the heap of either.
	RecordPiece = 1 << 20
	// ConnectionIDLength is the length of the connection ids a node
	// issues, the most QUIC allows. A packet for a connection the
	// receiver no longer has draws a stateless reset only when it is
	// longer than 42 bytes (quic-go's MinStatelessResetSize: a reset must
	// be smaller than what provoked it), and the id is in every packet
	// sent to the node. With quic-go's default of 4 bytes, the packets of
	// a small request (stats, split, a short kv request: 33 to 40 bytes)
	// and their retransmissions drew none, and a call to a restarted peer
	// waited on the connection to its previous process until the idle
	// timeout (15 s). With 20, a packet that carries any stream data
	// (the smallest request: 50 bytes) or an ACK is over the limit; a
	// lone keep-alive PING (41 bytes) is not.
	ConnectionIDLength = 20
	// refuseLinger is how long a server keeps a refused connection open
	// after its HelloAck, so the client reads the server's values and
	// names the mismatch itself, before the server closes it.
	refuseLinger = time.Second
	// refuseLogEvery is how often a peer refused again and again for
	// one reason is logged (the lines between are counted, not written).
	refuseLogEvery = time.Minute
)
