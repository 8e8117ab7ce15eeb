package mesh

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// numBounds latency buckets have upper bounds in a 1-2-5 series from
// 10 µs to 50 s (bound); one more bucket holds everything above.
const numBounds = 21

// bound is the upper bound of latency bucket i < numBounds.
func bound(i int) time.Duration {
	d := 10 * time.Microsecond
	for range i / 3 {
		d *= 10
	}
	return d * time.Duration([3]int{1, 2, 5}[i%3])
}

// bucketOf is the bucket of latency d.
func bucketOf(d time.Duration) int {
	lo, hi := 0, numBounds
	for lo < hi {
		m := (lo + hi) / 2
		if bound(m) < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// histogram is a fixed-bucket latency histogram, safe for concurrent use
// without locks.
type histogram struct {
	buckets [numBounds + 1]atomic.Uint64
}

func (h *histogram) observe(d time.Duration) {
	h.buckets[bucketOf(d)].Add(1)
}

// quantile is the upper bound of the bucket holding quantile q (0 < q <=
// 1), 0 when empty; the overflow bucket reports twice the last bound.
func (h *histogram) quantile(q float64) time.Duration {
	var counts [numBounds + 1]uint64
	var total uint64
	for i := range h.buckets {
		counts[i] = h.buckets[i].Load()
		total += counts[i]
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			if i < numBounds {
				return bound(i)
			}
			break
		}
	}
	return 2 * bound(numBounds-1)
}

// peerMetrics are one peer's counters in one direction.
type peerMetrics struct {
	requests, errors, sent, received atomic.Uint64
	latency                          histogram
}

func (m *peerMetrics) record(sent, received int, d time.Duration, failed bool) {
	m.requests.Add(1)
	if failed {
		m.errors.Add(1)
	}
	m.sent.Add(uint64(sent))
	m.received.Add(uint64(received))
	m.latency.observe(d)
}

// metrics maps peer names to their counters.
type metrics struct {
	dir   Direction
	mu    sync.Mutex
	peers map[string]*peerMetrics
}

func newMetrics(dir Direction) *metrics {
	return &metrics{dir: dir, peers: make(map[string]*peerMetrics)}
}

func (m *metrics) peer(name string) *peerMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.peers[name]
	if p == nil {
		p = new(peerMetrics)
		m.peers[name] = p
	}
	return p
}

// snapshot returns every peer's stats, sorted by peer name.
func (m *metrics) snapshot() []PeerStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PeerStats, 0, len(m.peers))
	for name, p := range m.peers {
		out = append(out, PeerStats{
			Peer:          name,
			Dir:           m.dir,
			Requests:      p.requests.Load(),
			Errors:        p.errors.Load(),
			BytesSent:     p.sent.Load(),
			BytesReceived: p.received.Load(),
			P50:           p.latency.quantile(0.50),
			P99:           p.latency.quantile(0.99),
		})
	}
	slices.SortFunc(out, func(a, b PeerStats) int {
		if a.Peer < b.Peer {
			return -1
		}
		if a.Peer > b.Peer {
			return 1
		}
		return 0
	})
	return out
}
