// Package mesh connects graphnode nodes: QUIC (quic-go) with TLS 1.3 and
// mutual authentication against the cluster's CA, one request per
// stream, length-prefixed binary messages. It knows bytes and ids, not
// sampling: requests carry arrays of uint64 ids, rows of bytes and
// opaque RNG keys; the daemon (package node) wires a Handler to the
// sampler and the partition. It imports no other package of the project.
//
// # Contract
//
//  1. Once per cluster, WriteCluster (node cert init) writes the CA and a
//     certificate per node into a directory; each host gets ca.crt,
//     HOST.crt and HOST.key (ca.key stays with the operator).
//  2. Each node calls LoadIdentity(dir, node), then Listen(ctx, addr,
//     ServerConfig{...}) to serve its part, and NewClient(ClientConfig{...})
//     with the address and node name of every other part. Every node dials
//     every peer it needs; connections are not shared between directions.
//     A child process that dials as the same node (a sampler) gets the
//     node's Identity.PEM over a pipe and calls NewIdentity: it goes by
//     the identity its node loaded, not by what the files hold later.
//  3. The daemon calls Client.WaitReady(ctx) before it reports ready: it
//     retries until every peer answered the hello, whatever the start
//     order, and fails at once on a refusal (which waiting cannot heal).
//  4. Samplers call Sample, Pull, Labels, Split and Stats from any number
//     of goroutines; a node fetching its files calls ReadFile.
//  5. Server.Close and Client.Close on exit (also done when Listen's ctx
//     ends); the UDP socket is released before Close returns.
//
// # Authentication and the hello
//
// TLS 1.3 only. The server requires a client certificate that verifies
// against the cluster CA, and the client verifies the server's
// certificate against the CA and the configured node name (its DNS SAN,
// and its CommonName, which must equal the name: the 127.0.0.1 and ::1
// SANs of every node certificate name no node in particular); both check
// that the certificate's Organization names the cluster. A
// peer without such a certificate fails the handshake, so no request of
// it is ever read. ALPN is "graphnode/1": a node of another protocol
// version fails the handshake with an error saying "protocol version".
//
// The first stream of a connection carries the hello: the client sends
// Hello {version, part, cluster, node, checksum}, the server answers
// HelloAck with its own values. The client compares them with its
// configuration (version, cluster, partition-set checksum, and that the
// peer serves the part it was configured for) and returns, without
// retrying, an ErrRefused error naming the peer and what differs:
//
//	mesh: peer host1 (10.0.0.2:7100, part 1): sample: hello: partition-set checksum 9f..: want 3a..: refused
//
// The server runs the same check (and that the hello's node is the
// certificate's); on a mismatch it closes the connection with the reason
// and serves no request on it.
//
// # Messages
//
// A message is an 8-byte header then the payload (wire.go, wire_msg.go,
// wire_stats.go hold every layout; all integers little-endian):
//
//	offset size
//	0      2    type
//	2      2    flags (none defined; must be zero)
//	4      4    payload length (at most MaxMessage, default 256 MiB; a
//	            LoaderRecord at most its loader's largest record)
//
// The type enum is append-only; numbers are never reused:
//
//	type  name            direction  payload
//	1     Hello           c → s      version u16, 0 u16, part u32, cluster, node, checksum (u16-length strings)
//	2     HelloAck        s → c      as Hello, the server's values
//	3     Error           s → c      code u16, 0 u16, message (u32 length, ≤ 64 KiB)
//	4     SampleRequest   c → s      key [32]byte, hop u16, flags u16 (1 = weighted, 2 = narrow, 4 = exclude), fanout i32 (-1 = all), ids []u64 ([]u32 when narrow); with flag 4: exclude at []u32, exclude counts []u32, exclude ids []u64 ([]u32 when narrow)
//	5     SampleResponse  s → c      counts []u32 (one per id), neighbours []u64 (sum(counts) long)
//	6     PullRequest     c → s      ids []u64
//	7     PullResponse    s → c      dtype u8, 0 [3]u8, row size u32, count u32, rows (count × row size bytes)
//	8     StatsRequest    c → s      empty
//	9     StatsResponse   s → c      node, part u32, per-peer counters (see PeerStats)
//	10    KVPullRequest   c → s      one kv message (package kv's bytes, opaque here; at least 2 bytes)
//	11    KVPullResponse  s → c      the kv answer
//	12    KVPushRequest   c → s      one kv push, synchronous push or leave (opaque)
//	13    KVPushResponse  s → c      the kv answer
//	14    SplitRequest    c → s      split (u16-length string, ≤ 64 bytes)
//	15    SplitResponse   s → c      ids []u64 (the peer's nodes in the split, strictly ascending)
//	16    LabelRequest    c → s      ids []u64
//	17    LabelResponse   s → c      dim u32, labels []i32 (count(ids) × dim, request order, -1 = missing)
//	18    SampleResponseNarrow s → c counts []u32, neighbours []u32: the answer to a narrow SampleRequest
//	19    LoaderOpenRequest   c → s  the daemon's loader options (opaque here; at least 1 byte)
//	20    LoaderOpenResponse  s → c  id u64, the daemon's loader description (opaque)
//	21    LoaderStreamRequest c → s  id u64, sub u32
//	22    LoaderRecord        s → c  one ring record (opaque; at least 1 byte)
//	23    FileRequest     c → s      path (u16-length string, 1 to 4096 bytes), offset u64, length u32 (> 0)
//	24    FileResponse    s → c      size u64 (the whole file's), offset u64, data []u8 (offset + len ≤ size)
//
// A narrow SampleRequest (flag 2) carries its ids as u32 and is answered
// with a SampleResponseNarrow: half the bytes of sampling, for partition
// sets of up to 2^32 nodes (the node sets the flag when its book has no
// more). The client refuses to send an id that does not fit; a server
// whose answer holds a neighbour that does not fit answers CodeHandler.
//
// A SampleRequest with flag 4 carries exclusions: edges the peer leaves
// out of the graph before it draws (a link batch's seed edges, at hop
// 0). Node ids[at[j]] is sampled as if its edges from the counts[j] ids
// of run j did not exist; at is strictly ascending and within ids, each
// run is non-empty and strictly ascending, and the counts add up to the
// excluded ids (the decoder checks all of it). A request without
// exclusions has neither the flag nor the arrays, so it is byte for byte
// what it was before they existed. A node built before them answers a
// request with flag 4 CodeMalformed ("flags: unknown bits 0x4"), so a
// link batch that excludes its seed edges fails, naming that peer,
// rather than being drawn without leaving them out.
//
// Types 14–17 are served when the Handler also implements SplitHandler
// and LabelHandler (split.go); otherwise they are answered CodeUnsupported.
// Types 10–13 likewise need KVHandler (kv.go). Client.KVPull retries like
// Pull (a pull is idempotent); Client.KVPush is never retried, since a
// gradient applied twice is not applied once. Both are bounded by
// ClientConfig.KVTimeout and, on the server, ServerConfig.KVTimeout
// (DefaultKVTimeout, 90 s) instead of the usual call and request timeouts:
// a synchronous push waits for every trainer of its step, so both must
// exceed the kv sync timeout. A kv handler's context also ends when the
// caller cancels its stream (the waiting trainer gave up).
//
// Arrays ([]T) are a u32 count then the elements. Decoders check every
// count against the bytes left before they allocate, reject non-zero
// reserved fields and trailing bytes (so each value has one encoding),
// and never panic; each has a fuzz target that re-encodes what it
// decodes. Decoded PullResponse rows alias the received buffer, which the
// client allocates per call and hands to the caller.
//
// Types 19–22 are server-client mode (loader.go), served when the Handler
// implements LoaderHandler. Client.OpenLoader dials a QUIC connection of
// the loader's own (so that a trainer that stops reading fills only its
// own flow-control windows, never those of other loaders or calls) and
// opens a loader on the peer (bounded by LoaderOpenTimeout, never
// retried); the loader belongs to that connection (RemoteLoader.Close
// closes both), and RemoteLoader.Stream asks for one of its sub-rings on
// a new stream of it: the answer is one
// LoaderRecord per record, in order, then the end of the stream, or an
// Error after the records sent so far. A loader stream has no deadline:
// QUIC flow control holds the server while the trainer does not read, and
// a peer that dies is noticed by the connection's idle timeout. A record
// is bounded by the loader's ring, which both ends know, not by
// MaxMessage (a batch of wide features passes 256 MiB): the server sends
// records up to MaxRecordMessage (4 GiB − 1, the length's limit) and the
// client reads each with the largest record of its sub-ring as the
// limit (Stream's maxRecord), refusing a larger one (ErrTooLarge) before
// its bytes are read. A client older than this reads with MaxMessage: a
// larger record fails its stream with ErrTooLarge, and the server's send
// with it; an older server refuses to send it (an Error naming
// MaxMessage). Either way an error, never a hang.
//
// Requests whose ids make an answer larger than MaxMessage (a batch's
// rows of wide features from one peer) are split by the caller into
// several (chunk.go): PullIDsPerMessage and LabelIDsPerMessage ids each,
// SampleCuts for neighbours, halves of a sample request that the peer
// refuses as too large.
//
// Types 23–24 let a node that starts without its partition's files
// (node.fetch) read them from a peer (file.go), served when the Handler
// implements FileHandler: Client.ReadFile asks for up to length bytes at
// an offset (the server answers at most MaxFileChunk), and retries like
// Pull, so a caller goes on from the offset it has reached, from the same
// peer or another. A file the peer does not hold is answered CodeNotFound
// (ErrNotFound), which is not retried. A node that has no graph.toml yet
// connects with an empty checksum in its hello: servers accept it
// whatever their partitioning, and answer anything but a FileRequest on
// that connection CodeRefused.
//
// A stream carries one request and its answer: the client writes the
// request and closes its side; the server writes one message (the
// answer, or Error) and closes (a loader stream: many messages). Error codes are append-only too:
// internal (1, a handler panic), malformed (2), too large (3),
// unsupported (4), refused (5), handler (6), timeout (7), closing (8),
// not found (9).
//
// # Deadlines, retries, failure
//
// Every call is bounded by its context and by ClientConfig.Timeout
// (DefaultCallTimeout, 10 s) without progress: the clock starts with the
// call and restarts when the request is written and whenever bytes of
// the answer arrive, so a 30 MB answer from a busy peer is not failed
// while it streams in, and a silent peer fails the call within the
// timeout of its last byte. A transient failure (connection closed or reset by a peer
// restarting, idle timeout, no answer to a dial within DialTimeout) drops
// the connection and retries on a new one after a backoff that starts at
// ClientConfig.Backoff and doubles up to MaxBackoff, at most Retries
// times and never past the deadline. A peer that stays down fails the
// call with ErrUnavailable, naming the peer and the attempts, when the
// timeout ends without progress: never a hang. Refusals, Error answers
// (ErrRemote; too large also matches ErrTooLarge, also when the server
// refuses a request before the client has written all of it), malformed
// answers and cancellation are not retried. Sample and Pull are
// idempotent, so a retry after a lost answer is safe; kv pushes are not,
// and are never retried.
//
// Servers send stateless resets keyed by a secret derived from the node's
// private key, so after a crash and restart the peers' old connections
// end at their next request instead of at the idle timeout. quic-go
// resets only packets over 42 bytes, so connection ids are 20 bytes
// (ConnectionIDLength): the smallest request's packet is longer, a lone
// keep-alive PING's is not. Keep-alives
// (KeepAlivePeriod) keep quiet connections open; MaxIdleTimeout ends
// connections to a peer that vanished. Client.Probe reports which peers
// have a live connection now, redialling those that have none (the
// daemon's graphnode_mesh_peer_up).
//
// # Server
//
// Each stream is served on its own goroutine with a deadline
// (ServerConfig.RequestTimeout, or KVTimeout, LoaderOpenTimeout); the
// stream stays open AnswerGrace longer, so that a handler stopped by the
// deadline gets its CodeTimeout answer to the caller, which does not
// retry it. The handler's context ends at the deadline, when
// the peer's connection closes, or at Close. The server never waits on
// anything but its handler and the stream. Handler panics become
// CodeInternal answers; responses that do not match their request (a
// count per id, a row per id) become CodeInternal rather than bad bytes.
// Garbage datagrams on the port are dropped by QUIC.
//
// # Concurrency
//
// Client and Server methods are safe for concurrent use. A Client keeps
// one QUIC connection per peer (dialled once even under concurrent
// callers, within DialTimeout, whichever of them give up meanwhile) and
// opens one stream per call; up to MaxIncomingStreams calls per peer are
// in flight at once. Handler methods are called concurrently.
//
// # Metrics
//
// Per peer and direction: requests, errors, bytes sent and received, and
// a fixed-bucket latency histogram (1-2-5 steps from 10 µs to 50 s; its
// counts and the sum of the durations, PeerStats.Latency) with p50/p99
// read from it. A client call is timed from its start to its answer,
// retries included; a served request from its stream's acceptance to the
// answer written. A loader stream is one request at both ends, counted
// when it ends (failed when it broke, not when its reader closed it), and
// not timed: it lasts as long as its loader; its records' bytes are
// counted as they go. Client.Metrics is the
// outbound view, Server.Metrics the inbound; a StatsRequest returns the
// server's inbound stats plus, when ServerConfig.Outbound is set, the
// node's outbound ones, without the histograms.
//
// Tunables are named constants in tunables.go.
package mesh
