package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"graphnode/mesh"
	"graphnode/node/control"
)

// The Prometheus endpoint ([metrics] listen) renders the same snapshot as
// the control socket's stats request, and the mesh's latency histograms
// (metrics_mesh.go), in the text exposition format
// (version 0.0.4). The format is a few lines per metric, so it is written
// here rather than through a client library and its dependencies.

// serveMetrics starts http://listen/metrics, or does nothing when listen
// is empty. The returned stop closes the listener and waits for the
// server: the port is free again when stop returns.
func (n *Node) serveMetrics(listen string) (stop func(), err error) {
	if listen == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("node: metrics.listen %q: %w", listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		mm := n.meshMetrics(r.Context())
		bw := bufio.NewWriter(w)
		writeMetrics(bw, n.stats(), mm)
		bw.Flush()
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("metrics server failed", "listen", listen, "err", err)
		}
	}()
	n.log.Info("metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
	}, nil
}

// writeMetrics writes st and mm in the Prometheus text format.
func writeMetrics(w io.Writer, st *control.Stats, mm *meshMetrics) {
	m := metricWriter{w: w}
	m.one("graphnode_up", "gauge", "1 while node run serves.", nil, 1)
	m.one("graphnode_uptime_seconds", "gauge", "Seconds since node run started.", nil, st.Uptime)
	m.one("graphnode_ready", "gauge", "1 once every configured peer has answered the mesh handshake (always 1 without a mesh).", nil, boolValue(st.Ready))
	m.one("graphnode_partition_nodes", "gauge", "Nodes owned by the partition served here.", []string{"part", strconv.Itoa(st.Part)}, float64(st.Nodes))
	m.one("graphnode_partition_edges", "gauge", "Edges stored in the partition served here.", []string{"part", strconv.Itoa(st.Part)}, float64(st.Edges))
	m.one("graphnode_loaders_open", "gauge", "Loaders open now.", nil, float64(len(st.Loaders)))
	m.one("graphnode_loaders_opened_total", "counter", "Loaders opened since start.", nil, float64(st.Opened))
	m.one("graphnode_batches_total", "counter", "Batch records written by samplers, all loaders, since start.", nil, float64(st.Batches))
	m.one("graphnode_sampled_edges_total", "counter", "Edges of the batches this node's samplers wrote, all loaders, since start.", nil, float64(st.SampledEdges))
	m.one("graphnode_sampler_failures_total", "counter", "Sampler processes that failed, since start. On a client node: relayed sub-rings that failed, their sampler failed on the sampling node or their stream from it broke (that node stopped, died or went silent).", nil, float64(st.Failures))
	m.family("graphnode_loader_batches_total", "counter", "Batch records written into an open loader's ring.")
	for _, l := range st.Loaders {
		m.sample("graphnode_loader_batches_total", []string{"loader", strconv.FormatUint(l.LoaderID, 10)}, float64(l.Batches))
	}
	m.family("graphnode_ring_sub_ring_bytes", "gauge", "Capacity of each sub-ring of an open loader's ring.")
	for _, l := range st.Loaders {
		m.sample("graphnode_ring_sub_ring_bytes", []string{"loader", strconv.FormatUint(l.LoaderID, 10)}, float64(l.SubRingSize))
	}
	m.family("graphnode_ring_used_bytes", "gauge", "Bytes of a sub-ring written and not yet released by the trainer: full, the samplers wait on the trainer; empty, the trainer waits on them.")
	for _, l := range st.Loaders {
		for w, u := range l.RingUsed {
			m.sample("graphnode_ring_used_bytes", []string{"loader", strconv.FormatUint(l.LoaderID, 10), "worker", strconv.Itoa(w)}, float64(u))
		}
	}
	m.one("graphnode_cache_rows", "gauge", "Feature rows in the partition's cache section.", nil, float64(st.CacheRows))
	m.one("graphnode_cache_hits_total", "counter", "Rows of nodes owned elsewhere served from the cache section.", nil, float64(st.CacheHits))
	m.one("graphnode_cache_misses_total", "counter", "Rows of nodes owned elsewhere pulled from a peer.", nil, float64(st.CacheMisses))
	if st.Mesh == nil {
		return
	}
	peers := st.Mesh.Peers
	m.family("graphnode_mesh_peer_ready", "gauge", "1 once every configured peer has answered the handshake at start-up (graphnode_ready's latch, per configured peer); it does not drop when a peer goes away later: graphnode_mesh_peer_up does.")
	for _, p := range peers {
		if p.Part >= 0 { // a caller that serves no part has no handshake to wait for
			m.sample("graphnode_mesh_peer_ready", peerLabels(p, ""), boolValue(p.Ready))
		}
	}
	writePeerUp(m, peers, mm)
	writeCertExpiry(m, mm)
	traffic := []struct {
		name, kind, help string
		value            func(control.TrafficStats) float64
	}{
		{"graphnode_mesh_requests_total", "counter", "Mesh requests answered (dir=in) or made (dir=out). A loader stream (server-client mode, one per sub-ring of a relayed loader) is one request at both ends, counted when it ends.", func(t control.TrafficStats) float64 { return float64(t.Requests) }},
		{"graphnode_mesh_errors_total", "counter", "Mesh requests that failed. A sample request of several nodes refused for its answer's size is not one: the sampler asks again in halves (fanout -1); a single node's refusal is. A loader stream that breaks before its end (the sampling node stopped, died or failed it) is one; one its reader closed is not.", func(t control.TrafficStats) float64 { return float64(t.Errors) }},
		{"graphnode_mesh_sent_bytes_total", "counter", "Mesh bytes sent.", func(t control.TrafficStats) float64 { return float64(t.BytesSent) }},
		{"graphnode_mesh_received_bytes_total", "counter", "Mesh bytes received.", func(t control.TrafficStats) float64 { return float64(t.BytesReceived) }},
		{"graphnode_mesh_latency_p50_seconds", "gauge", "Median request latency over the whole run of the process that measured it (upper bound of its 1-2-5 histogram bucket; dir=out: the largest of the node's and its live samplers'), never a recent window: graphnode_mesh_request_duration_seconds gives that.", func(t control.TrafficStats) float64 { return t.P50Ms / 1e3 }},
		{"graphnode_mesh_latency_p99_seconds", "gauge", "99th percentile request latency over the whole run of the process that measured it (upper bound of its 1-2-5 histogram bucket; dir=out: the largest of the node's and its live samplers'), never a recent window: graphnode_mesh_request_duration_seconds gives that.", func(t control.TrafficStats) float64 { return t.P99Ms / 1e3 }},
	}
	for _, f := range traffic {
		m.family(f.name, f.kind, f.help)
		for _, p := range peers {
			m.sample(f.name, peerLabels(p, "in"), f.value(p.In))
			m.sample(f.name, peerLabels(p, "out"), f.value(p.Out))
		}
	}
	writeLatency(m, peers, mm)
}

func peerLabels(p control.PeerStats, dir string) []string {
	l := []string{"peer", p.Name, "part", strconv.Itoa(p.Part)}
	if dir != "" {
		l = append(l, "dir", dir)
	}
	return l
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricWriter writes families and samples of the text format.
type metricWriter struct{ w io.Writer }

// one writes a family of a single sample.
func (m metricWriter) one(name, kind, help string, labels []string, v float64) {
	m.family(name, kind, help)
	m.sample(name, labels, v)
}

func (m metricWriter) family(name, kind, help string) {
	fmt.Fprintf(m.w, "# HELP %s %s\n# TYPE %s %s\n", name, strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(help), name, kind)
}

// histogram writes one series of a histogram family: a bucket per bound
// of l counting every request up to it (le), +Inf counting all, then
// _sum in seconds and _count.
func (m metricWriter) histogram(name string, labels []string, l *mesh.Latency) {
	var total uint64
	for i, c := range l.Counts {
		total += c
		m.sample(name+"_bucket", append(labels[:len(labels):len(labels)], "le", le(i)), float64(total))
	}
	m.sample(name+"_sum", labels, l.Sum.Seconds())
	m.sample(name+"_count", labels, float64(total))
}

// sample writes one line; labels are name, value pairs.
func (m metricWriter) sample(name string, labels []string, v float64) {
	var b strings.Builder
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(labels[i])
			b.WriteString(`="`)
			b.WriteString(labelEscaper.Replace(labels[i+1]))
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		// Counters of bytes and edges pass 10^6 quickly, where 'g'
		// turns to exponents: whole numbers are written whole.
		b.WriteString(strconv.FormatInt(int64(v), 10))
	} else {
		b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	}
	b.WriteByte('\n')
	io.WriteString(m.w, b.String())
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
