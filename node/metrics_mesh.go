package node

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"graphnode/mesh"
	"graphnode/node/control"
)

// peerProbeTimeout bounds how long a scrape waits for the dial of a peer
// that has no live connection (mesh.Client.Probe): a peer on the LAN
// answers in milliseconds, one that is down would hold the scrape for the
// whole mesh.DialTimeout. The dial goes on after it.
const peerProbeTimeout = time.Second

// meshMetrics is what /metrics shows of the mesh beyond the stats
// snapshot (control.Stats): each peer's latency histograms, which the
// control socket leaves out (its p50/p99 are their summary), and whether
// each configured peer is up now.
type meshMetrics struct {
	in, out map[string]*mesh.Latency // by peer name
	up      map[int]bool             // by configured part
	// expires is when this node's certificate ("node") and the cluster
	// CA ("ca") end.
	expires map[string]time.Time
}

// meshMetrics collects the mesh's histograms and probes its peers (at
// most peerProbeTimeout, or until ctx ends); nil without a mesh. Out sums
// the node's own client and every sampler it ran (traffic), as meshStats
// sums their counters. Up is the node's own client's view: samplers
// come and go with loaders, while the node keeps its connections (it
// dialled every peer to become ready) and Probe redials one that ended.
func (n *Node) meshMetrics(ctx context.Context) *meshMetrics {
	c := &n.mesh
	if c.cli == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, peerProbeTimeout)
	defer cancel()
	m := &meshMetrics{in: map[string]*mesh.Latency{}, out: map[string]*mesh.Latency{}, up: c.cli.Probe(ctx), expires: certExpiries(c.id)}
	if c.srv != nil {
		addLatency(m.in, c.srv.Metrics())
	}
	addLatency(m.out, c.cli.Metrics())
	addLatency(m.out, c.traffic.snapshot())
	return m
}

// certExpiries is when id's node certificate and CA end (none of a nil
// id).
func certExpiries(id *mesh.Identity) map[string]time.Time {
	out := map[string]time.Time{}
	if id == nil {
		return out
	}
	if id.Cert.Leaf != nil {
		out["node"] = id.Cert.Leaf.NotAfter
	}
	if id.CA != nil {
		out["ca"] = id.CA.NotAfter
	}
	return out
}

// writeCertExpiry writes mm's certificate ends.
func writeCertExpiry(m metricWriter, mm *meshMetrics) {
	if mm == nil || len(mm.expires) == 0 {
		return
	}
	m.family("graphnode_mesh_cert_expiry_timestamp_seconds", "gauge", "Unix time at which this node's certificate (cert=\"node\") or the cluster CA (cert=\"ca\") ends: "+
		"peers refuse this node after it (renew the node's with node cert add --force and restart it; the CA's end calls for node cert init --force for every node).")
	for _, which := range []string{"node", "ca"} {
		if t, ok := mm.expires[which]; ok {
			m.sample("graphnode_mesh_cert_expiry_timestamp_seconds", []string{"cert", which}, float64(t.Unix()))
		}
	}
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
	"_count is graphnode_mesh_requests_total less loader streams, whose durations are no request latency. " +
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

// writePeerUp writes graphnode_mesh_peer_up for every configured peer,
// or nothing when mm is nil.
func writePeerUp(m metricWriter, peers []control.PeerStats, mm *meshMetrics) {
	if mm == nil {
		return
	}
	m.family("graphnode_mesh_peer_up", "gauge", fmt.Sprintf("1 while this node holds a working mesh connection to the configured peer: "+
		"one that completed the TLS handshake and the hello (same cluster, partition set and part) and has not ended since. "+
		"It ends when the peer closes it (stops), at the next request after the peer restarted (a stateless reset; keep-alives, every %v, are too small to draw one), "+
		"or after %v without a packet (the peer crashed, restarted or is unreachable). A scrape that finds none redials the peer and waits up to %v: "+
		"0 while the peer cannot be reached or refuses the hello; a peer that restarted between two scrapes reads 1 at both.",
		mesh.KeepAlivePeriod, mesh.MaxIdleTimeout, peerProbeTimeout))
	for _, p := range peers {
		if p.Part >= 0 {
			m.sample("graphnode_mesh_peer_up", peerLabels(p, ""), boolValue(mm.up[p.Part]))
		}
	}
}
