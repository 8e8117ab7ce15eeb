package node

import (
	"strconv"

	"graphnode/mesh"
	"graphnode/node/control"
)

// meshMetrics is what /metrics shows of the mesh beyond the stats
// snapshot (control.Stats): each peer's latency histograms, which the
// control socket leaves out (its p50/p99 are their summary).
type meshMetrics struct {
	in, out map[string]*mesh.Latency // by peer name
}

// meshMetrics collects the mesh's histograms; nil without a mesh. Out
// sums the node's own client and every sampler it ran (traffic), as
// meshStats sums their counters.
func (n *Node) meshMetrics() *meshMetrics {
	c := &n.mesh
	if c.cli == nil {
		return nil
	}
	m := &meshMetrics{in: map[string]*mesh.Latency{}, out: map[string]*mesh.Latency{}}
	if c.srv != nil {
		addLatency(m.in, c.srv.Metrics())
	}
	addLatency(m.out, c.cli.Metrics())
	addLatency(m.out, c.traffic.snapshot())
	return m
}

func addLatency(to map[string]*mesh.Latency, stats []mesh.PeerStats) {
	for i := range stats {
		l := to[stats[i].Peer]
		if l == nil {
			l = new(mesh.Latency)
			to[stats[i].Peer] = l
		}
		l.Add(&stats[i].Latency)
	}
}

const requestDurationHelp = "Mesh request latency: dir=out a call this node or one of its samplers made, retries and their backoff included; " +
	"dir=in a request this node served (read, handler, write). Buckets of 1-2-5 steps from 10 µs to 50 s, since the node started; " +
	"_count is graphnode_mesh_requests_total less loader streams and their records, whose durations are no request latency. " +
	"histogram_quantile(0.99, rate(graphnode_mesh_request_duration_seconds_bucket[5m])) is the recent p99."

// writeLatency writes the request duration histogram of every peer in
// both directions (zero for a direction without requests, as the
// counters are), or nothing when mm is nil.
func writeLatency(m metricWriter, peers []control.PeerStats, mm *meshMetrics) {
	if mm == nil {
		return
	}
	const name = "graphnode_mesh_request_duration_seconds"
	m.family(name, "histogram", requestDurationHelp)
	var zero mesh.Latency
	for _, p := range peers {
		for _, d := range []struct {
			dir string
			by  map[string]*mesh.Latency
		}{{"in", mm.in}, {"out", mm.out}} {
			l := d.by[p.Name]
			if l == nil {
				l = &zero
			}
			m.histogram(name, peerLabels(p, d.dir), l)
		}
	}
}

// le is the le label of bucket i of a mesh.Latency, formatted as
// Prometheus's own client formats it (strconv 'g', shortest: "1e-05",
// "0.0001", "50"); the bucket past the last bound is "+Inf".
func le(i int) string {
	if i >= mesh.NumLatencyBounds {
		return "+Inf"
	}
	return strconv.FormatFloat(mesh.LatencyBound(i).Seconds(), 'g', -1, 64)
}
