package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"graphnode/csr"
	"graphnode/mesh"
	"graphnode/node/control"
)

// writeMetrics renders every counter of a stats snapshot, with peer
// labels escaped as the text format wants.
func TestWriteMetrics(t *testing.T) {
	st := &control.Stats{
		Part: 1, Nodes: 100, Edges: 900, Uptime: 2.5, Ready: true, Opened: 3, Batches: 42, SampledEdges: 777, Failures: 1,
		Loaders:   []control.LoaderStats{{LoaderID: 7, Batches: 40, SubRingSize: 1 << 20, RingUsed: []int64{4096, 0}}},
		CacheRows: 20, CacheHits: 11, CacheMisses: 5,
		Mesh: &control.MeshStats{Peers: []control.PeerStats{{
			Part: 0, Name: `host"0\`, Ready: true,
			In:  control.TrafficStats{Requests: 9, BytesSent: 4096, BytesReceived: 12345678901, P50Ms: 2, P99Ms: 50},
			Out: control.TrafficStats{Requests: 8, Errors: 2, BytesSent: 256, BytesReceived: 8192, P50Ms: 1, P99Ms: 20},
		}}},
	}
	var b strings.Builder
	writeMetrics(&b, st, nil)
	text := b.String()
	for _, want := range []string{
		"# TYPE graphnode_up gauge\ngraphnode_up 1\n",
		"graphnode_uptime_seconds 2.5\n",
		"graphnode_ready 1\n",
		`graphnode_partition_nodes{part="1"} 100` + "\n",
		`graphnode_partition_edges{part="1"} 900` + "\n",
		"graphnode_loaders_open 1\n",
		"# TYPE graphnode_loaders_opened_total counter\ngraphnode_loaders_opened_total 3\n",
		"graphnode_batches_total 42\n",
		"graphnode_sampler_failures_total 1\n",
		`graphnode_loader_batches_total{loader="7"} 40` + "\n",
		"# TYPE graphnode_sampled_edges_total counter\ngraphnode_sampled_edges_total 777\n",
		`graphnode_ring_sub_ring_bytes{loader="7"} 1048576` + "\n",
		`graphnode_ring_used_bytes{loader="7",worker="0"} 4096` + "\n",
		`graphnode_ring_used_bytes{loader="7",worker="1"} 0` + "\n",
		`graphnode_mesh_received_bytes_total{peer="host\"0\\",part="0",dir="in"} 12345678901` + "\n",
		"graphnode_cache_rows 20\n", "graphnode_cache_hits_total 11\n", "graphnode_cache_misses_total 5\n",
		`graphnode_mesh_peer_ready{peer="host\"0\\",part="0"} 1` + "\n",
		`graphnode_mesh_requests_total{peer="host\"0\\",part="0",dir="in"} 9` + "\n",
		`graphnode_mesh_requests_total{peer="host\"0\\",part="0",dir="out"} 8` + "\n",
		`graphnode_mesh_errors_total{peer="host\"0\\",part="0",dir="out"} 2` + "\n",
		`graphnode_mesh_sent_bytes_total{peer="host\"0\\",part="0",dir="in"} 4096` + "\n",
		`graphnode_mesh_received_bytes_total{peer="host\"0\\",part="0",dir="out"} 8192` + "\n",
		`graphnode_mesh_latency_p50_seconds{peer="host\"0\\",part="0",dir="in"} 0.002` + "\n",
		`graphnode_mesh_latency_p99_seconds{peer="host\"0\\",part="0",dir="out"} 0.02` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// Every sample belongs to a family declared just before it.
	family := ""
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			family = strings.Fields(name)[0]
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.HasPrefix(line, family) {
			t.Errorf("sample %q outside its family %s", line, family)
		}
	}
	// A caller that serves no part (a client node, a tool) has traffic
	// but no handshake to wait for: no peer_ready series.
	st.Mesh.Peers = append(st.Mesh.Peers, control.PeerStats{Part: -1, Name: "trainer0"})
	b.Reset()
	writeMetrics(&b, st, nil)
	if strings.Contains(b.String(), `graphnode_mesh_peer_ready{peer="trainer0"`) || !strings.Contains(b.String(), `graphnode_mesh_requests_total{peer="trainer0",part="-1",dir="in"} 0`) {
		t.Errorf("metrics of a caller without a part:\n%s", b.String())
	}
	b.Reset()
	st.Mesh = nil
	writeMetrics(&b, st, nil)
	if strings.Contains(b.String(), "graphnode_mesh") {
		t.Errorf("mesh metrics without a mesh:\n%s", b.String())
	}
}

// The latency histogram is a Prometheus histogram per peer and
// direction: declared once, a cumulative bucket per bound with le written
// as Prometheus writes it, +Inf, _sum in seconds and _count; a direction
// without requests has its series, all zero.
func TestWriteMetricsLatencyHistogram(t *testing.T) {
	var in mesh.Latency
	for _, d := range []time.Duration{10 * time.Microsecond, 150 * time.Microsecond, 150 * time.Microsecond, 3 * time.Millisecond, time.Second, time.Minute} {
		in.Counts[bucketFor(d)]++
		in.Sum += d
	}
	st := &control.Stats{Mesh: &control.MeshStats{Peers: []control.PeerStats{{Part: 1, Name: "host1"}}}}
	var b strings.Builder
	writeMetrics(&b, st, &meshMetrics{in: map[string]*mesh.Latency{"host1": &in}, out: map[string]*mesh.Latency{}})
	text := b.String()
	const name = "graphnode_mesh_request_duration_seconds"
	if n := strings.Count(text, "# TYPE "+name+" histogram\n"); n != 1 || strings.Count(text, "# HELP "+name+" ") != 1 {
		t.Errorf("%d TYPE lines of the histogram, want 1", n)
	}
	series := func(dir string, cum []int, sum string) string {
		var w strings.Builder
		les := []string{"1e-05", "2e-05", "5e-05", "0.0001", "0.0002", "0.0005", "0.001", "0.002", "0.005", "0.01", "0.02", "0.05",
			"0.1", "0.2", "0.5", "1", "2", "5", "10", "20", "50", "+Inf"}
		for i, le := range les {
			fmt.Fprintf(&w, "%s_bucket{peer=\"host1\",part=\"1\",dir=\"%s\",le=\"%s\"} %d\n", name, dir, le, cum[i])
		}
		fmt.Fprintf(&w, "%s_sum{peer=\"host1\",part=\"1\",dir=\"%s\"} %s\n", name, dir, sum)
		fmt.Fprintf(&w, "%s_count{peer=\"host1\",part=\"1\",dir=\"%s\"} %d\n", name, dir, cum[len(cum)-1])
		return w.String()
	}
	want := series("in", []int{1, 1, 1, 1, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 6}, "61.00331") +
		series("out", make([]int, 22), "0")
	if !strings.Contains(text, "histogram\n"+want) {
		t.Errorf("histogram series: want\n%s\nin\n%s", want, text)
	}
	// Without the histograms (a node without a mesh) the family is absent.
	b.Reset()
	writeMetrics(&b, st, nil)
	if strings.Contains(b.String(), "# TYPE "+name) || strings.Contains(b.String(), name+"_") {
		t.Errorf("histogram without mesh metrics:\n%s", b.String())
	}
}

// bucketFor is the bucket of d in a mesh.Latency: the first bound at or
// above it.
func bucketFor(d time.Duration) int {
	i := 0
	for i < mesh.NumLatencyBounds && mesh.LatencyBound(i) < d {
		i++
	}
	return i
}

// The samplers' histograms add up across reports and exits, as their
// counters do: a report adds what grew since the same sampler's last.
func TestTrafficLatency(t *testing.T) {
	report := func(counts map[int]uint64, sum time.Duration) *samplerReport {
		s := mesh.PeerStats{Peer: "host1", Dir: mesh.Outbound, Latency: mesh.Latency{Sum: sum}}
		for i, c := range counts {
			s.Latency.Counts[i] = c
			s.Requests += c
		}
		return &samplerReport{Peers: []mesh.PeerStats{s}}
	}
	var tr traffic
	a, b := new(proc), new(proc)
	tr.report(a, report(map[int]uint64{3: 2}, 2*time.Millisecond))
	tr.report(a, report(map[int]uint64{3: 5, 8: 1}, 9*time.Millisecond))
	tr.report(b, report(map[int]uint64{3: 1}, time.Millisecond))
	tr.done(a)
	tr.report(b, report(map[int]uint64{3: 4, 21: 1}, time.Minute))
	s := tr.snapshot()
	var want mesh.Latency
	want.Counts[3], want.Counts[8], want.Counts[21], want.Sum = 9, 1, 1, 9*time.Millisecond+time.Minute
	if len(s) != 1 || s[0].Latency != want || s[0].Requests != 11 {
		t.Fatalf("traffic %+v, want latency %+v and 11 requests", s, want)
	}
}

// graphnode_mesh_peer_up follows the node's connection to a configured
// peer: 1 once it is connected, 0 once the peer's server has closed,
// while graphnode_mesh_peer_ready stays latched; a caller without a part
// has no series.
func TestMetricsPeerUp(t *testing.T) {
	c := startMeshCluster(t, 2, 0, csr.TypeF32, 0)
	n := &Node{}
	n.mesh.cli = c.client(t, 0)
	st := &control.Stats{Mesh: &control.MeshStats{Peers: []control.PeerStats{
		{Part: 1, Name: "host1", Ready: true}, {Part: -1, Name: "trainer0"},
	}}}
	scrape := func() string {
		var b strings.Builder
		writeMetrics(&b, st, n.meshMetrics(context.Background()))
		return b.String()
	}
	const up, down = `graphnode_mesh_peer_up{peer="host1",part="1"} 1` + "\n", `graphnode_mesh_peer_up{peer="host1",part="1"} 0` + "\n"
	if _, err := n.mesh.cli.Stats(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	m := scrape()
	for _, want := range []string{up, "# TYPE graphnode_mesh_peer_up gauge\n",
		`graphnode_mesh_request_duration_seconds_count{peer="host1",part="1",dir="out"} 1` + "\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(m, `graphnode_mesh_peer_up{peer="trainer0"`) {
		t.Error("a caller without a part has a peer_up series")
	}
	c.srvs[1].Close()
	start := time.Now()
	for m = scrape(); !strings.Contains(m, down); m = scrape() {
		if time.Since(start) > mesh.MaxIdleTimeout/3 {
			t.Fatalf("host1 still up %v after its server closed:\n%s", time.Since(start), m)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(m, `graphnode_mesh_peer_ready{peer="host1",part="1"} 1`+"\n") {
		t.Errorf("peer_ready is the start-up latch, yet dropped:\n%s", m)
	}
	// A scrape waits peerProbeTimeout for the peer's dial, not the whole
	// mesh.DialTimeout.
	start = time.Now()
	if m := scrape(); !strings.Contains(m, down) {
		t.Errorf("host1 up again with its server closed:\n%s", m)
	}
	if d := time.Since(start); d >= mesh.DialTimeout {
		t.Errorf("a scrape with host1 down took %v, want at most about %v", d, peerProbeTimeout)
	}
}

// TestCertExpiry: the metric has when this node's certificate and the CA
// end, and the log says so a week before and once ended: a node whose
// certificate expired said nothing and stayed ready.
func TestCertExpiry(t *testing.T) {
	node, ca := time.Unix(1900000000, 0), time.Unix(2000000000, 0)
	st := &control.Stats{Mesh: &control.MeshStats{Peers: []control.PeerStats{{Part: 1, Name: "host1"}}}}
	var b strings.Builder
	writeMetrics(&b, st, &meshMetrics{in: map[string]*mesh.Latency{}, out: map[string]*mesh.Latency{}, expires: map[string]time.Time{"node": node, "ca": ca}})
	for _, want := range []string{
		"# TYPE graphnode_mesh_cert_expiry_timestamp_seconds gauge\n" +
			"graphnode_mesh_cert_expiry_timestamp_seconds{cert=\"node\"} 1900000000\n" +
			"graphnode_mesh_cert_expiry_timestamp_seconds{cert=\"ca\"} 2000000000\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack\n%s\nin\n%s", want, b.String())
		}
	}
	for _, c := range []struct {
		which string
		left  time.Duration
		want  string
	}{
		{"node", 30 * 24 * time.Hour, ""},
		{"node", 2 * time.Hour, `level=WARN msg="this node's certificate ends soon: renew it with node cert add --force`},
		{"node", -time.Minute, `level=ERROR msg="this node's certificate has ended: peers refuse this node`},
		{"ca", -time.Minute, `level=ERROR msg="the cluster CA has ended`},
	} {
		var l strings.Builder
		now := time.Unix(1800000000, 0)
		logCertEnd(slog.New(slog.NewTextHandler(&l, nil)), c.which, now.Add(c.left), now)
		if c.want == "" && l.Len() > 0 || c.want != "" && !strings.Contains(l.String(), c.want) {
			t.Errorf("%s ending in %v: log %q, want %q", c.which, c.left, l.String(), c.want)
		}
	}
}

// A sampler's mesh report goes out whenever any counter moved: an error
// or bytes counted after their request (an answer that failed to
// decode) went unreported when the check looked at requests and cache
// reads alone, and, the sampler then failing with no request after it,
// the node's errors total never counted it.
func TestSamplerReportsEveryChange(t *testing.T) {
	var c changedLines
	var out strings.Builder
	rep := samplerReport{CacheHits: 3, Peers: []mesh.PeerStats{{Peer: "host1", Dir: mesh.Outbound, Requests: 1}}}
	c.write(&out, rep.line())
	rep.Peers[0].Errors = 1
	c.write(&out, rep.line())
	rep.Peers[0].BytesReceived = 40
	c.write(&out, rep.line())
	c.write(&out, rep.line()) // nothing moved
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out.String())
	}
	var tr traffic
	sampler := &proc{}
	for _, l := range lines {
		var r samplerReport
		if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "mesh ")), &r); err != nil {
			t.Fatal(err)
		}
		tr.report(sampler, &r)
	}
	got := tr.total["host1"]
	if got == nil || got.Errors != 1 || got.BytesReceived != 40 || got.Requests != 1 {
		t.Fatalf("node's totals %+v, want 1 request, 1 error, 40 bytes received", got)
	}
}
