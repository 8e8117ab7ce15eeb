package node

import (
	"strings"
	"testing"

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
	writeMetrics(&b, st)
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
	writeMetrics(&b, st)
	if strings.Contains(b.String(), `graphnode_mesh_peer_ready{peer="trainer0"`) || !strings.Contains(b.String(), `graphnode_mesh_requests_total{peer="trainer0",part="-1",dir="in"} 0`) {
		t.Errorf("metrics of a caller without a part:\n%s", b.String())
	}
	b.Reset()
	st.Mesh = nil
	writeMetrics(&b, st)
	if strings.Contains(b.String(), "graphnode_mesh") {
		t.Errorf("mesh metrics without a mesh:\n%s", b.String())
	}
}
