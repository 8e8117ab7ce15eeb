package node

import (
	"encoding/json"
	"sync"

	"graphnode/mesh"
)

// samplerReport is a sampler's "mesh <json>" progress line: its feature
// cache counters and its mesh client's per-peer metrics, all cumulative
// since the sampler started.
type samplerReport struct {
	CacheHits   uint64           `json:"cache_hits"`
	CacheMisses uint64           `json:"cache_misses"`
	Peers       []mesh.PeerStats `json:"peers"`
}

func (r *samplerReport) line() []byte {
	b, _ := json.Marshal(r) // plain counters: cannot fail
	return append(append([]byte("mesh "), b...), '\n')
}

// traffic sums the reports of every sampler the node ran: counters and
// latency histograms are kept across samplers' exits (added as deltas
// between reports), latency quantiles only from samplers still running.
type traffic struct {
	mu     sync.Mutex
	total  map[string]*mesh.PeerStats
	live   map[*proc]*samplerReport
	hits   uint64
	misses uint64
}

// report applies p's latest report.
func (t *traffic) report(p *proc, r *samplerReport) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.total == nil {
		t.total, t.live = map[string]*mesh.PeerStats{}, map[*proc]*samplerReport{}
	}
	prev := t.live[p]
	if prev == nil {
		prev = &samplerReport{}
	}
	t.hits += r.CacheHits - min(r.CacheHits, prev.CacheHits)
	t.misses += r.CacheMisses - min(r.CacheMisses, prev.CacheMisses)
	old := map[string]mesh.PeerStats{}
	for _, s := range prev.Peers {
		old[s.Peer] = s
	}
	for _, s := range r.Peers {
		o := old[s.Peer]
		tot := t.total[s.Peer]
		if tot == nil {
			tot = &mesh.PeerStats{Peer: s.Peer, Dir: mesh.Outbound}
			t.total[s.Peer] = tot
		}
		tot.Requests += s.Requests - min(s.Requests, o.Requests)
		tot.Errors += s.Errors - min(s.Errors, o.Errors)
		tot.BytesSent += s.BytesSent - min(s.BytesSent, o.BytesSent)
		tot.BytesReceived += s.BytesReceived - min(s.BytesReceived, o.BytesReceived)
		for i, c := range s.Latency.Counts {
			tot.Latency.Counts[i] += c - min(c, o.Latency.Counts[i])
		}
		tot.Latency.Sum += s.Latency.Sum - min(s.Latency.Sum, o.Latency.Sum)
	}
	t.live[p] = r
}

// done forgets p's latencies once it has exited; its counters stay.
func (t *traffic) done(p *proc) {
	t.mu.Lock()
	delete(t.live, p)
	t.mu.Unlock()
}

// snapshot is the samplers' outbound stats per peer.
func (t *traffic) snapshot() []mesh.PeerStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]mesh.PeerStats, 0, len(t.total))
	for name, tot := range t.total {
		s := *tot
		for _, r := range t.live {
			for _, l := range r.Peers {
				if l.Peer == name {
					s.P50, s.P99 = max(s.P50, l.P50), max(s.P99, l.P99)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// cache is the samplers' cache hits and misses.
func (t *traffic) cache() (hits, misses uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hits, t.misses
}
