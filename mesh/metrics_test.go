package mesh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestHistogram(t *testing.T) {
	var h histogram
	if l := h.snapshot(); l.quantile(0.5) != 0 {
		t.Fatal("empty histogram has a median")
	}
	for range 98 {
		h.observe(150 * time.Microsecond) // bucket (100µs, 200µs]
	}
	h.observe(3 * time.Millisecond) // (2ms, 5ms]
	h.observe(100 * time.Second)    // overflow
	l := h.snapshot()
	if got := l.quantile(0.5); got != 200*time.Microsecond {
		t.Errorf("p50 = %v, want 200µs", got)
	}
	if got := l.quantile(0.99); got != 5*time.Millisecond {
		t.Errorf("p99 = %v, want 5ms", got)
	}
	if got := l.quantile(1); got != 100*time.Second {
		t.Errorf("p100 = %v, want 100s (overflow)", got)
	}
	for i, want := range map[int]time.Duration{0: 10 * time.Microsecond, 1: 20 * time.Microsecond, 5: 500 * time.Microsecond, 20: 50 * time.Second} {
		if got := LatencyBound(i); got != want {
			t.Errorf("LatencyBound(%d) = %v, want %v", i, got, want)
		}
	}
	if bucketOf(10*time.Microsecond) != 0 || bucketOf(11*time.Microsecond) != 1 || bucketOf(time.Hour) != NumLatencyBounds {
		t.Error("bucketOf boundaries")
	}
}

// A snapshot holds each bucket's own count (not the running total), the
// sum of the durations observed, and the quantiles computed from it;
// requests counted without a latency (loader streams) stay out of it.
func TestLatencySnapshot(t *testing.T) {
	var m peerMetrics
	for _, d := range []time.Duration{
		10 * time.Microsecond,  // bucket 0: at the bound, not above it
		15 * time.Microsecond,  // 1: (10µs, 20µs]
		150 * time.Microsecond, // 4: (100µs, 200µs]
		150 * time.Microsecond, // 4
		time.Second,            // 15: (500ms, 1s]
		time.Minute,            // 21: above 50s
	} {
		m.record(10, 20, d, false)
	}
	m.transfer(0, 1<<20)  // a loader stream's record: bytes, no request
	m.count(16, 0, false) // the stream, once it ended
	l := m.latency.snapshot()
	want := Latency{Sum: 10*time.Microsecond + 15*time.Microsecond + 300*time.Microsecond + time.Second + time.Minute}
	want.Counts[0], want.Counts[1], want.Counts[4], want.Counts[15], want.Counts[NumLatencyBounds] = 1, 1, 2, 1, 1
	if l != want {
		t.Fatalf("snapshot\n%+v, want\n%+v", l, want)
	}
	if l.Count() != 6 || m.requests.Load() != 7 || m.received.Load() != 6*20+1<<20 || m.sent.Load() != 6*10+16 {
		t.Errorf("count %d, requests %d, received %d, sent %d: want 6, 7, %d, %d", l.Count(), m.requests.Load(), m.received.Load(), m.sent.Load(), 6*20+1<<20, 6*10+16)
	}
	if p50, p99 := l.quantile(0.5), l.quantile(0.99); p50 != 200*time.Microsecond || p99 != 100*time.Second {
		t.Errorf("p50 %v, p99 %v: want 200µs, 100s (overflow)", p50, p99)
	}
	sum := l
	sum.Add(&l)
	if sum.Count() != 12 || sum.Sum != 2*l.Sum || sum.Counts[4] != 4 {
		t.Errorf("l + l = %+v", sum)
	}
}

// TestSizeRefusalOfSampleIsNoFailure: a sample request of several nodes
// that the peer refuses as too large (CodeTooLarge: the handler's
// refusal, or an answer over MaxMessage) is asked again in halves by the
// sampler (fanout -1 over nodes of high degree), so neither end counts it
// as a failed request: graphnode_mesh_errors_total rose in healthy
// sampling (44 of 112 requests of three batches). A single node's
// refusal, a pull over the limit and any other handler error still
// count.
func TestSizeRefusalOfSampleIsNoFailure(t *testing.T) {
	const limit = 256
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	h := &testHandler{rowSize: 64}
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) { c.Handler, c.MaxMessage = h, limit })
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, func(c *ClientConfig) { c.MaxMessage = limit })
	ctx := context.Background()
	refuse := func(context.Context) error { return fmt.Errorf("answer over %d bytes: %w", limit, ErrTooLarge) }
	boom := func(context.Context) error { return errors.New("boom") }
	var resp SampleResponse
	for i, tc := range []struct {
		name   string
		hook   func(context.Context) error
		req    *SampleRequest
		pull   int // rows to pull instead, when not 0
		failed bool
	}{
		{"refused, 2 nodes", refuse, &SampleRequest{Fanout: -1, IDs: ids(2, 0)}, 0, false},
		{"answer over the limit, 30 nodes", nil, &SampleRequest{Fanout: 4, Narrow: true, IDs: ids(30, 1)}, 0, false},
		{"refused, 1 node", refuse, &SampleRequest{Fanout: -1, IDs: ids(1, 0)}, 0, true},
		{"handler error, 2 nodes", boom, &SampleRequest{Fanout: -1, IDs: ids(2, 0)}, 0, true},
		{"pull over the limit", nil, nil, 5, true},
	} {
		h.setHook(tc.hook)
		before, beforeIn := sumStats(c.Metrics()), sumStats(waitRequests(srv.srv, uint64(i)))
		var err error
		if tc.pull > 0 {
			err = c.Pull(ctx, 1, &PullRequest{IDs: ids(tc.pull, 0)}, &PullResponse{})
		} else {
			err = c.Sample(ctx, 1, tc.req, &resp)
		}
		if tc.hook == nil || errors.Is(tc.hook(ctx), ErrTooLarge) {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%s: %v, want ErrTooLarge", tc.name, err)
			}
		} else if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		want := uint64(0)
		if tc.failed {
			want = 1
		}
		out, in := sumStats(c.Metrics()), sumStats(waitRequests(srv.srv, uint64(i+1)))
		if out.Requests-before.Requests != 1 || out.Errors-before.Errors != want {
			t.Errorf("%s: the client counts %d requests, %d failed; want 1, %d", tc.name, out.Requests-before.Requests, out.Errors-before.Errors, want)
		}
		if in.Requests-beforeIn.Requests != 1 || in.Errors-beforeIn.Errors != want {
			t.Errorf("%s: the server counts %d requests, %d failed; want 1, %d", tc.name, in.Requests-beforeIn.Requests, in.Errors-beforeIn.Errors, want)
		}
	}
}

// A request the client refuses to send, over its own MaxMessage, is a
// failed request of its counters: counted as a request as well as an
// error, and, never sent, no latency; a sample of several nodes, which
// its caller asks again in parts, a request and no failure. It counted the error alone, so
// errors outnumbered requests (graphnode_mesh_errors_total over
// graphnode_mesh_requests_total).
func TestRequestOverClientLimitIsCounted(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", nil)
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, func(c *ClientConfig) { c.MaxMessage = 100 })
	err := c.Pull(context.Background(), 1, &PullRequest{IDs: ids(100, 0)}, &PullResponse{})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "peer host1") {
		t.Fatalf("err = %v, want ErrTooLarge naming host1", err)
	}
	m := c.Metrics()
	if len(m) != 1 || m[0].Requests != 1 || m[0].Errors != 1 || m[0].Latency.Count() != 0 {
		t.Fatalf("metrics %+v, want 1 request, 1 error, no latency observation", m)
	}
	if n := srv.handler.calls.Load(); n != 0 {
		t.Fatalf("handler called %d times", n)
	}
	// A sample of several nodes that is too large is asked again in
	// parts (node/remote.go): its refusal is no failure, here as when
	// the peer refuses the answer's size.
	err = c.Sample(context.Background(), 1, &SampleRequest{Fanout: -1, IDs: ids(100, 0)}, &SampleResponse{})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("sample over the limit: %v, want ErrTooLarge", err)
	}
	if m := c.Metrics(); m[0].Requests != 2 || m[0].Errors != 1 {
		t.Fatalf("metrics %+v, want 2 requests, 1 error (the pull's)", m)
	}
}
