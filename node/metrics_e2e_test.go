package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"graphnode/mesh"
	"graphnode/node/client"
)

// node run with [metrics] listen serves /metrics while it runs, counts
// the batches a loader writes, and frees the port when it stops.
func TestMetricsEndpoint(t *testing.T) {
	bin, parts := setup(t)
	addr := freeTCP(t)
	cfg, socket, rings := newConfig(t, parts, "[metrics]\nlisten = \""+addr+"\"\n")
	d := startDaemon(t, bin, cfg, socket, rings)
	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
			t.Fatalf("GET /metrics: %v, status %d, type %q", err, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return string(body)
	}
	if m := scrape(); !strings.Contains(m, "graphnode_up 1\n") || !strings.Contains(m, "graphnode_ready 1\n") || !strings.Contains(m, "graphnode_loaders_open 0\n") {
		t.Fatalf("a fresh node's metrics:\n%s", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Every batch of a one-epoch loader read to the end: the edges the
	// samplers count are the edges the trainer got.
	o := baseOptions()
	o.Epochs = 1
	one, err := client.OpenLoader(ctx, socket, o)
	if err != nil {
		t.Fatal(err)
	}
	var edges int
	for {
		b, err := one.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, client.ErrEndOfEpoch) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		edges += len(b.Row())
	}
	want := fmt.Sprintf("graphnode_sampled_edges_total %d\n", edges)
	eventually(t, 5*time.Second, "sampled edges counted: "+want, func() bool { return strings.Contains(scrape(), want) })
	one.Close()
	l, err := client.OpenLoader(ctx, socket, baseOptions())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The node closes the first loader once it sees the connection end:
	// soon, not at once.
	eventually(t, 5*time.Second, "one loader open", func() bool { return strings.Contains(scrape(), "graphnode_loaders_open 1\n") })
	if m := scrape(); !strings.Contains(m, "graphnode_loaders_open 1\n") || !strings.Contains(m, "graphnode_loader_batches_total{loader=") ||
		!strings.Contains(m, `graphnode_ring_used_bytes{loader="2",worker="0"} `) || !strings.Contains(m, `graphnode_ring_sub_ring_bytes{loader="2"} `) {
		t.Fatalf("metrics with a loader open:\n%s", m)
	}
	l.Close()
	d.stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("metrics port still bound after the node stopped: %v", err)
	}
	ln.Close()
}

// In a cluster, graphnode_mesh_peer_up is live: 1 while the peer runs, 0
// once it has stopped, 1 again once it is back, while
// graphnode_mesh_peer_ready stays the start-up latch. The samplers' calls
// reach the latency histogram, whose _count is their request count.
func TestMetricsClusterPeerUp(t *testing.T) {
	parts := clusterParts(t, 2)
	var listen [2]string
	for p := range listen {
		listen[p] = freeTCP(t)
	}
	c := startClusterWith(t, parts, 2, "3s", func(p int) string { return fmt.Sprintf("[metrics]\nlisten = %q\n", listen[p]) })
	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + listen[0] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	const up, down, ready = `graphnode_mesh_peer_up{peer="host1",part="1"} 1` + "\n", `graphnode_mesh_peer_up{peer="host1",part="1"} 0` + "\n",
		`graphnode_mesh_peer_ready{peer="host1",part="1"} 1` + "\n"
	if m := scrape(); !strings.Contains(m, up) || !strings.Contains(m, ready) {
		t.Fatalf("a ready node's metrics:\n%s", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	openReading(t, ctx, c.sockets[0], baseOptions(), 5).Close()
	// The samplers report their calls with their cache misses (rows pulled
	// from host1), every 100 ms; once they have stopped, every call to
	// host1 is in both counts.
	var calls, misses string
	eventually(t, 10*time.Second, "the samplers' calls to host1 in the histogram", func() bool {
		m := scrape()
		calls = sampleValue(m, `graphnode_mesh_requests_total{peer="host1",part="1",dir="out"}`)
		misses = sampleValue(m, "graphnode_cache_misses_total")
		return misses != "" && misses != "0" && calls != "" && sampleValue(m, `graphnode_mesh_request_duration_seconds_count{peer="host1",part="1",dir="out"}`) == calls &&
			sampleValue(m, `graphnode_mesh_request_duration_seconds_bucket{peer="host1",part="1",dir="out",le="+Inf"}`) == calls
	})
	t.Logf("%s calls to host1, %s rows pulled", calls, misses)
	c.nodes[1].stop()
	eventually(t, 5*time.Second, "host1 down once stopped", func() bool { return strings.Contains(scrape(), down) })
	if m := scrape(); !strings.Contains(m, ready) {
		t.Errorf("peer_ready dropped:\n%s", m)
	}
	c.restart(1)
	eventually(t, 5*time.Second, "host1 up once restarted", func() bool { return strings.Contains(scrape(), up) })
}

// sampleValue is the value of the sample series (name and labels) in a
// text exposition, "" when it has none.
func sampleValue(text, series string) string {
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// freeTCP returns a 127.0.0.1 TCP address nobody listens on, whose port
// lies outside the kernel's ephemeral range (mesh.LoopbackAddrs), so that
// no connection of this or another test takes it before the node binds
// it, as a port from binding port 0 could be.
func freeTCP(t *testing.T) string {
	t.Helper()
	for range 20 {
		addrs, err := mesh.LoopbackAddrs(1)
		if err != nil {
			t.Fatal(err)
		}
		if l, err := net.Listen("tcp", addrs[0]); err == nil {
			l.Close()
			return addrs[0]
		}
	}
	t.Fatal("no free TCP port on 127.0.0.1 outside the ephemeral range in 20 tries")
	return ""
}
