package mesh

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

func TestRoundTrip(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", nil)
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, nil)
	ctx := context.Background()

	req := &SampleRequest{Hop: 2, Fanout: 3, IDs: ids(100, 1000)}
	req.Key[0] = 7
	var sr SampleResponse
	if err := c.Sample(ctx, 1, req, &sr); err != nil {
		t.Fatal(err)
	}
	want := expectSample(req)
	if !slices.Equal(sr.Counts, want.Counts) || !slices.Equal(sr.Neighbors, want.Neighbors) {
		t.Fatalf("sample: got %v / %v, want %v / %v", sr.Counts[:5], sr.Neighbors[:5], want.Counts[:5], want.Neighbors[:5])
	}

	preq := &PullRequest{IDs: ids(64, 5)}
	var pr PullResponse
	if err := c.Pull(ctx, 1, preq, &pr); err != nil {
		t.Fatal(err)
	}
	if wp := expectPull(preq, 16); pr.DType != DTypeFloat32 || pr.RowSize != 16 || !bytes.Equal(pr.Rows, wp.Rows) {
		t.Fatalf("pull: dtype %d row size %d, rows equal %v", pr.DType, pr.RowSize, bytes.Equal(pr.Rows, wp.Rows))
	}

	if m := waitRequests(srv.srv, 2); len(m) != 1 || m[0].Requests != 2 {
		t.Fatalf("server metrics after the sample and the pull: %+v", m)
	}
	st, err := c.Stats(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Node != "host1" || st.Part != 1 || len(st.Peers) != 1 {
		t.Fatalf("stats: %+v", st)
	}
	in := st.Peers[0]
	// The stats request itself is counted once it is answered, so the
	// server has seen the sample and the pull, and no more.
	if in.Peer != "host0" || in.Dir != Inbound || in.Requests != 2 || in.Errors != 0 || in.BytesSent == 0 || in.BytesReceived == 0 || in.P99 == 0 {
		t.Fatalf("stats: inbound %+v", in)
	}
	out := c.Metrics()
	if len(out) != 1 || out[0].Peer != "host1" || out[0].Dir != Outbound || out[0].Requests != 3 || out[0].Errors != 0 {
		t.Fatalf("client metrics: %+v", out)
	}
	if out[0].BytesReceived < uint64(len(pr.Rows)) || out[0].P50 == 0 || out[0].P50 > out[0].P99 {
		t.Fatalf("client metrics: %+v", out[0])
	}
	// Every request is in the histogram, which the wire does not carry.
	if l := out[0].Latency; l.Count() != 3 || l.Sum <= 0 || l.Sum > 3*time.Duration(out[0].P99) {
		t.Fatalf("client latency %+v: want 3 requests, 0 < sum <= 3 x p99", l)
	}
	if in := waitRequests(srv.srv, 3); len(in) != 1 || in[0].Latency.Count() != 3 || in[0].Latency.Sum <= 0 || st.Peers[0].Latency != (Latency{}) {
		t.Fatalf("server latency %+v (stats response: %+v)", in, st.Peers[0].Latency)
	}
	if got := srv.handler.calls.Load(); got != 2 {
		t.Fatalf("handler calls %d, want 2", got)
	}
}

// TestSampleNarrow: a narrow request gets the same answer as a wide one
// in fewer bytes; an id that does not fit 32 bits is refused by the
// client before anything is sent, and a neighbour that does not fit
// fails the call with the server's error naming it.
func TestSampleNarrow(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", nil)
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, nil)
	ctx := context.Background()
	received := func() uint64 { return c.Metrics()[0].BytesReceived }

	req := &SampleRequest{Hop: 1, Fanout: 4, IDs: ids(1000, 2000)}
	var wide, narrow SampleResponse
	if err := c.Sample(ctx, 1, req, &wide); err != nil {
		t.Fatal(err)
	}
	wideBytes := received()
	req.Narrow = true
	if err := c.Sample(ctx, 1, req, &narrow); err != nil {
		t.Fatal(err)
	}
	narrowBytes := received() - wideBytes
	want := expectSample(req)
	if !slices.Equal(narrow.Counts, want.Counts) || !slices.Equal(narrow.Neighbors, want.Neighbors) || !slices.Equal(wide.Neighbors, want.Neighbors) {
		t.Fatalf("narrow answer differs from the expected one")
	}
	if saved := wideBytes - narrowBytes; saved != 4*uint64(len(want.Neighbors)) {
		t.Fatalf("narrow answer %d bytes, wide %d: want %d bytes less (4 per neighbour)", narrowBytes, wideBytes, 4*len(want.Neighbors))
	}

	calls := srv.handler.calls.Load()
	err := c.Sample(ctx, 1, &SampleRequest{Fanout: 4, IDs: []uint64{3, 1 << 32}, Narrow: true}, &narrow)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "id 4294967296 in a narrow request") {
		t.Fatalf("narrow request with a wide id: %v", err)
	}
	if got := srv.handler.calls.Load(); got != calls {
		t.Fatalf("a refused narrow request reached the handler")
	}

	// expectSample answers id with id%5 neighbours id*10+k: 429496731*10 >= 2^32.
	err = c.Sample(ctx, 1, &SampleRequest{Fanout: 4, IDs: []uint64{429496731}, Narrow: true}, &narrow)
	if !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "neighbour 4294967310 does not fit the narrow answer") {
		t.Fatalf("narrow answer with a wide neighbour: %v", err)
	}
}

// TestSampleExclusion: a request's exclusions reach the handler as sent,
// wide and narrow (the test handler leaves the excluded neighbours out);
// the client refuses, before anything is sent, exclusions that do not fit
// the request and an excluded id that does not fit a narrow one.
func TestSampleExclusion(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", nil)
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, nil)
	ctx := context.Background()
	// ids 4 and 9 have 4 neighbours each: 40…43 and 90…93.
	for _, narrow := range []bool{false, true} {
		req := &SampleRequest{Fanout: -1, IDs: []uint64{4, 9, 3}, Narrow: narrow,
			ExcludeAt: []uint32{0, 1}, ExcludeCounts: []uint32{2, 1}, ExcludeIDs: []uint64{41, 43, 90}}
		var resp SampleResponse
		if err := c.Sample(ctx, 1, req, &resp); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(resp.Counts, []uint32{2, 3, 3}) || !slices.Equal(resp.Neighbors, []uint64{40, 42, 91, 92, 93, 30, 31, 32}) {
			t.Fatalf("narrow %v: counts %v, neighbours %v; want 4's and 9's less the excluded", narrow, resp.Counts, resp.Neighbors)
		}
	}
	calls := srv.handler.calls.Load()
	for _, tc := range []struct {
		req  SampleRequest
		text string
	}{
		{SampleRequest{IDs: []uint64{4}, ExcludeAt: []uint32{1}, ExcludeCounts: []uint32{1}, ExcludeIDs: []uint64{40}}, "node index 1, request of 1 nodes"},
		{SampleRequest{IDs: []uint64{4}, ExcludeAt: []uint32{0}, ExcludeCounts: []uint32{2}, ExcludeIDs: []uint64{41, 40}}, "id 40 after 41"},
		{SampleRequest{IDs: []uint64{4}, ExcludeCounts: []uint32{1}, ExcludeIDs: []uint64{40}}, "1 counts, 1 ids for no node"},
		{SampleRequest{IDs: []uint64{4}, Narrow: true, ExcludeAt: []uint32{0}, ExcludeCounts: []uint32{1}, ExcludeIDs: []uint64{1 << 32}}, "excluded id 4294967296 in a narrow request"},
	} {
		var resp SampleResponse
		if err := c.Sample(ctx, 1, &tc.req, &resp); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%+v: %v, want ErrMalformed saying %q", tc.req, err, tc.text)
		}
	}
	if got := srv.handler.calls.Load(); got != calls {
		t.Fatalf("%d refused requests reached the handler", got-calls)
	}
}

func TestStatsIncludeOutbound(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) {
		c.Outbound = func() []PeerStats { return []PeerStats{{Peer: "host9", Dir: Outbound, Requests: 5}} }
	})
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, nil)
	st, err := c.Stats(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	// host0's inbound entry (this very request, not yet counted), then
	// the outbound stats the daemon supplied.
	if len(st.Peers) != 2 || st.Peers[0].Peer != "host0" || st.Peers[0].Dir != Inbound ||
		st.Peers[1].Peer != "host9" || st.Peers[1].Dir != Outbound || st.Peers[1].Requests != 5 {
		t.Fatalf("stats peers %+v", st.Peers)
	}
}

func TestHandlerFailures(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", nil)
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, nil)
	tests := []struct {
		name string
		hook func(context.Context) error
		code ErrorCode
		text string
	}{
		{"error", func(context.Context) error { return errors.New("disk on fire") }, CodeHandler, "disk on fire"},
		{"panic", func(context.Context) error { panic("boom") }, CodeInternal, "panicked: boom"},
		{"deadline", func(context.Context) error { return context.DeadlineExceeded }, CodeTimeout, "deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv.handler.setHook(tt.hook)
			defer srv.handler.setHook(nil)
			before := srv.handler.calls.Load()
			var resp PullResponse
			err := c.Pull(context.Background(), 1, &PullRequest{IDs: ids(3, 0)}, &resp)
			var re *RemoteError
			if !errors.As(err, &re) || re.Code != tt.code || !strings.Contains(err.Error(), tt.text) || !errors.Is(err, ErrRemote) {
				t.Fatalf("err = %v, want remote %s containing %q", err, tt.code, tt.text)
			}
			if !strings.Contains(err.Error(), "peer host1 (") {
				t.Fatalf("err %q does not name the peer", err)
			}
			if n := srv.handler.calls.Load() - before; n != 1 {
				t.Fatalf("handler called %d times: remote errors must not be retried", n)
			}
		})
	}
	// The server still serves after a panic.
	if err := checkSample(c, 1, &SampleRequest{Fanout: -1, IDs: ids(10, 0)}); err != nil {
		t.Fatal(err)
	}
}

// A handler that runs out of its request's time answers CodeTimeout, and
// that answer reaches the caller, which does not retry a request the
// server spent its whole budget on. The stream used to end at the same
// deadline: the answer was cut off, the caller retried the reset as a
// lost connection and reported the peer unavailable.
func TestHandlerDeadline(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	h := &kvHandler{testHandler: testHandler{rowSize: 16}, ended: make(chan error, 8)}
	h.setHook(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) {
		c.Handler = h
		c.RequestTimeout, c.KVTimeout = 300*time.Millisecond, 300*time.Millisecond
	})
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, nil)
	ctx := context.Background()
	tests := []struct {
		name  string
		call  func() error
		calls func() int64
	}{
		{"pull", func() error { return c.Pull(ctx, 1, &PullRequest{IDs: ids(3, 0)}, &PullResponse{}) }, h.calls.Load},
		{"kv pull", func() error { _, err := c.KVPull(ctx, 1, []byte{'B', 1}); return err }, func() int64 { return int64(len(h.ended)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var re *RemoteError
			if !errors.As(err, &re) || re.Code != CodeTimeout || !strings.Contains(err.Error(), "deadline exceeded") {
				t.Fatalf("err = %v, want a remote timeout", err)
			}
			if n := tt.calls(); n != 1 {
				t.Fatalf("handler called %d times, want 1: a timeout answer is not retried", n)
			}
		})
	}
}

// A handler returning a response that does not match the request is a
// server bug, reported as CodeInternal rather than sent.
type badHandler struct{ testHandler }

func (*badHandler) SampleNeighbors(context.Context, *SampleRequest) (*SampleResponse, error) {
	return &SampleResponse{Counts: []uint32{3}, Neighbors: []uint64{1}}, nil
}

func TestHandlerBadResponse(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) { c.Handler = &badHandler{} })
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, nil)
	var resp SampleResponse
	err := c.Sample(context.Background(), 1, &SampleRequest{IDs: []uint64{1}}, &resp)
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != CodeInternal {
		t.Fatalf("err = %v, want CodeInternal", err)
	}
}

func TestOversize(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) { c.MaxMessage = 1024 })
	ctx := context.Background()
	tests := []struct {
		name      string
		clientMax int
		ids       int
		remote    bool   // refused by the server rather than the client
		requests  uint64 // seen by the server: 0 or 1, never a retry
	}{
		{"request over server limit", 0, 1000, true, 1},
		// More than the stream's flow-control window: the server answers
		// and stops reading while the client still writes.
		{"request over server limit and window", 0, 256 << 10, true, 1}, // 2 MiB
		{"request over client limit", 100, 1000, false, 0},
		{"response over client limit", 900, 60, false, 1}, // 60 rows × 16 B
		{"response over server limit", 0, 100, true, 1},   // 100 rows × 16 B > 1024
	}
	requests := func() (n uint64) {
		for _, m := range srv.srv.Metrics() {
			n += m.Requests
		}
		return n
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, func(c *ClientConfig) { c.MaxMessage = tt.clientMax })
			if err := c.WaitReady(ctx); err != nil {
				t.Fatal(err)
			}
			before := requests()
			var resp PullResponse
			err := c.Pull(ctx, 1, &PullRequest{IDs: ids(tt.ids, 0)}, &resp)
			var re *RemoteError
			if !errors.Is(err, ErrTooLarge) || errors.As(err, &re) != tt.remote || errors.Is(err, ErrUnavailable) {
				t.Fatalf("err = %v, want ErrTooLarge (remote %v)", err, tt.remote)
			}
			// The server counts a request after writing its answer: wait
			// for the count (retries, if any, were counted earlier).
			n := requests() - before
			for end := time.Now().Add(5 * time.Second); n < tt.requests && time.Now().Before(end); n = requests() - before {
				time.Sleep(10 * time.Millisecond)
			}
			if n != tt.requests {
				t.Fatalf("server saw %d requests, want %d: refusals are not retried", n, tt.requests)
			}
			// Not retried, and the connection survives.
			if err := checkSample(c, 1, &SampleRequest{Fanout: 1, IDs: ids(3, 0)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestGarbageOnPort(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", nil)
	ua := srv.srv.Addr().(*net.UDPAddr)
	junk, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, ua)
	if err != nil {
		t.Fatal(err)
	}
	defer junk.Close()
	buf := make([]byte, 1500)
	for i := range 300 {
		n := 1 + i*5%1400
		rand.Read(buf[:n])
		switch i % 3 {
		case 0: // a QUIC v1 Initial header over random bytes, padded to 1200
			n = max(n, 1200)
			buf[0] = 0xc0 | buf[0]&0x0f
			copy(buf[1:], []byte{0, 0, 0, 1, 8})
		case 1: // a long header with an unknown version: version negotiation
			buf[0] |= 0x80
		}
		if _, err := junk.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, nil)
	if err := checkSample(c, 1, &SampleRequest{Fanout: 2, IDs: ids(50, 0)}); err != nil {
		t.Fatalf("server after garbage: %v", err)
	}
}

func TestClientWithoutCertificate(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", nil)
	id := loadID(t, dir, "host0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tc := &tls.Config{RootCAs: id.Roots, ServerName: "host1", NextProtos: []string{ALPN}, MinVersion: tls.VersionTLS13}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	conn, err := quic.Dial(ctx, udp, srv.srv.Addr(), tc, &quic.Config{})
	if err == nil {
		// TLS 1.3: the client may finish before the server checks its
		// (absent) certificate; the refusal then arrives on first use.
		var st *quic.Stream
		st, err = conn.OpenStreamSync(ctx)
		if err == nil {
			b, start := beginMessage(nil, TypePullRequest)
			b = AppendPullRequest(b, &PullRequest{IDs: []uint64{1}})
			b, _ = endMessage(b, start, 0)
			st.Write(b)
			st.Close()
			_, _, err = readMessage(st, 1<<20)
		}
		conn.CloseWithError(0, "")
	}
	var te *quic.TransportError
	if !errors.As(err, &te) || te.ErrorCode != quic.TransportErrorCode(0x100+alertCertificateRequired) {
		t.Fatalf("err = %v, want TLS alert certificate_required", err)
	}
	if n := srv.handler.calls.Load(); n != 0 {
		t.Fatalf("handler called %d times for an unauthenticated client", n)
	}
}

func TestCloseReleasesPort(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", nil)
	addr := srv.srv.Addr().String()
	if err := srv.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for range 3 { // bind, release, bind again
		s2 := startServer(t, dir, "host1", 1, addr, nil)
		if got := s2.srv.Addr().String(); got != addr {
			t.Fatalf("rebound at %s, want %s", got, addr)
		}
		s2.srv.Close()
	}
}

func TestListenContextCloses(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host1")
	id := loadID(t, dir, "host1")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Listen(ctx, "127.0.0.1:0", ServerConfig{Identity: id, Cluster: testCluster, Handler: &testHandler{}})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		u, err := net.ListenUDP("udp", srv.Addr().(*net.UDPAddr))
		if err == nil {
			u.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("port still bound 5 s after the context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Close()
}

func TestServerConfigValidate(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host1")
	id := loadID(t, dir, "host1")
	cfg := ServerConfig{Identity: id, Cluster: "other", Part: -1, MaxMessage: -1}
	err := cfg.Validate()
	for _, want := range []string{`cluster "other"`, "Handler is nil", "part -1", "MaxMessage -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}

func TestServerConcurrentClients(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1", "host2")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", nil)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for _, name := range []string{"host0", "host2"} {
		c := newTestClient(t, loadID(t, dir, name), map[int]Peer{1: srv.peer()}, nil)
		for g := range 8 {
			wg.Go(func() {
				for i := range 10 {
					if err := checkSample(c, 1, &SampleRequest{Fanout: int32(i % 4), IDs: ids(20+g, uint64(i*100))}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m := waitRequests(srv.srv, 160)
	if len(m) != 2 || m[0].Peer != "host0" || m[1].Peer != "host2" || m[0].Requests != 80 || m[1].Requests != 80 {
		t.Fatalf("server metrics %+v", m)
	}
}

// waitRequests returns s's metrics once they count want requests in all,
// or after 5 s: the server counts a request once its answer is written,
// which can be after the client has read the answer.
func waitRequests(s *Server, want uint64) []PeerStats {
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := s.Metrics()
		var n uint64
		for _, p := range m {
			n += p.Requests
		}
		if n >= want || time.Now().After(deadline) {
			return m
		}
		time.Sleep(time.Millisecond)
	}
}

// releasingHandler hands out rows from a pool of its own and records
// what the server gives back.
type releasingHandler struct {
	testHandler
	mu       sync.Mutex
	returned [][]byte
	samples  []*SampleResponse
}

func (h *releasingHandler) ReleaseSample(r *SampleResponse) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples = append(h.samples, r)
}

func (h *releasingHandler) ReleaseRows(rows []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.returned = append(h.returned, rows)
}

// The server hands a RowsReleaser the rows of every pull it answered,
// once written, and a SampleReleaser every sample answer once encoded; a
// client that keeps its PullResponse reads the next answer into the same
// memory.
func TestPullBuffersReused(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	h := &releasingHandler{testHandler: testHandler{rowSize: 100}}
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) { c.Handler = h })
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, nil)
	ctx := context.Background()
	var resp PullResponse
	var first *byte
	for i, n := range []int{5000, 3000} {
		req := &PullRequest{IDs: ids(n, uint64(i))}
		if err := c.Pull(ctx, 1, req, &resp); err != nil {
			t.Fatal(err)
		}
		if want := expectPull(req, 100); !bytes.Equal(resp.Rows, want.Rows) {
			t.Fatalf("pull %d: rows differ", i)
		}
		if i == 0 {
			first = &resp.Rows[0]
		} else if &resp.Rows[0] != first {
			t.Fatalf("the second pull did not reuse the first one's buffer")
		}
	}
	sreq := &SampleRequest{Hop: 1, Fanout: 3, IDs: ids(50, 7)}
	var sresp SampleResponse
	if err := c.Sample(ctx, 1, sreq, &sresp); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	if len(h.samples) != 1 || len(h.samples[0].Counts) != 50 {
		t.Fatalf("sample answers released: %d, want 1 of 50 counts", len(h.samples))
	}
	h.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		got := len(h.returned)
		var sizes []int
		for _, r := range h.returned {
			sizes = append(sizes, len(r))
		}
		h.mu.Unlock()
		if got == 2 {
			if sizes[0]+sizes[1] != 8000*100 {
				t.Fatalf("released rows of %v bytes, want 500000 and 300000", sizes)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pulls' rows released, want 2", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIdleMessageBuffers: the server keeps the buffers of large answers
// for the next one and drops small ones (errors, stats, the heads of pull
// answers), which would otherwise be handed to the next sample answer.
func TestIdleMessageBuffers(t *testing.T) {
	s := &Server{bufs: make(chan []byte, idleMessages)}
	s.putBuf(make([]byte, 20))
	if b := s.getBuf(); b != nil {
		t.Fatalf("a %d-byte buffer was kept", cap(b))
	}
	big := make([]byte, 10, minIdleMessage)
	s.putBuf(big)
	if b := s.getBuf(); cap(b) != minIdleMessage || len(b) != 0 || &b[:1][0] != &big[0] {
		t.Fatalf("got a buffer of len %d cap %d, want the kept one, emptied", len(b), cap(b))
	}
	for range idleMessages + 1 {
		s.putBuf(make([]byte, minIdleMessage))
	}
	if n := len(s.bufs); n != idleMessages {
		t.Fatalf("%d idle buffers, want at most %d", n, idleMessages)
	}
}

// lockedBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRefusalLoggedOnce: a peer refused again and again for the same
// reason (a node of another partitioning retrying its handshake every
// 2 s) is logged once, and again when the reason changes. Every
// refusal was a WARN line: 1800 an hour per such peer on each node.
func TestRefusalLoggedOnce(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	var logs lockedBuffer
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	id := loadID(t, dir, "host0")
	peers := map[int]Peer{1: srv.peer()}
	wrongSum := newTestClient(t, id, peers, func(c *ClientConfig) { c.Checksum = "sum-2" })
	for range 4 {
		if err := wrongSum.WaitReady(context.Background()); !errors.Is(err, ErrRefused) {
			t.Fatalf("WaitReady = %v, want ErrRefused", err)
		}
	}
	wrongCluster := newTestClient(t, id, peers, nil)
	wrongCluster.cfg.Cluster = "products"
	if err := wrongCluster.WaitReady(context.Background()); !errors.Is(err, ErrRefused) {
		t.Fatalf("WaitReady = %v, want ErrRefused", err)
	}
	srv.srv.Close() // waits for every connection's handling
	var lines []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "refused peer") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "checksum sum-2") || !strings.Contains(lines[1], "products") {
		t.Fatalf("refusal lines:\n%s\nwant one for the checksum, then one for the cluster", strings.Join(lines, ""))
	}
}
