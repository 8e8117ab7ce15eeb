package mesh

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// NumLatencyBounds latency buckets have upper bounds in a 1-2-5 series
// from 10 µs to 50 s (LatencyBound); one more bucket holds everything
// above.
const NumLatencyBounds = 21

// LatencyBound is the upper bound of latency bucket i < NumLatencyBounds.
func LatencyBound(i int) time.Duration {
	d := 10 * time.Microsecond
	for range i / 3 {
		d *= 10
	}
	return d * time.Duration([3]int{1, 2, 5}[i%3])
}

// bucketOf is the bucket of latency d.
func bucketOf(d time.Duration) int {
	lo, hi := 0, NumLatencyBounds
	for lo < hi {
		m := (lo + hi) / 2
		if LatencyBound(m) < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Latency is a snapshot of a latency histogram since its counters began:
// Counts[i] requests took more than LatencyBound(i-1) and at most
// LatencyBound(i), Counts[NumLatencyBounds] more than the last bound; Sum
// is their durations together. Each count covers its own bucket only: a
// Prometheus bucket (le) is the running total up to it.
type Latency struct {
	Counts [NumLatencyBounds + 1]uint64
	Sum    time.Duration
}

// Count is the number of requests observed.
func (l *Latency) Count() uint64 {
	var n uint64
	for _, c := range l.Counts {
		n += c
	}
	return n
}

// Add adds o's counts and sum to l.
func (l *Latency) Add(o *Latency) {
	for i, c := range o.Counts {
		l.Counts[i] += c
	}
	l.Sum += o.Sum
}

// quantile is the upper bound of the bucket holding quantile q (0 < q <=
// 1), 0 when empty; the overflow bucket reports twice the last bound.
func (l *Latency) quantile(q float64) time.Duration {
	total := l.Count()
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i, c := range l.Counts {
		seen += c
		if seen >= rank {
			if i < NumLatencyBounds {
				return LatencyBound(i)
			}
			break
		}
	}
	return 2 * LatencyBound(NumLatencyBounds-1)
}

// histogram is a fixed-bucket latency histogram, safe for concurrent use
// without locks.
type histogram struct {
	buckets [NumLatencyBounds + 1]atomic.Uint64
	sum     atomic.Int64 // nanoseconds: 292 years of requests together
}

func (h *histogram) observe(d time.Duration) {
	h.buckets[bucketOf(d)].Add(1)
	h.sum.Add(int64(d))
}

// snapshot reads the counters one by one: while requests finish, Sum may
// hold a duration whose count is not read yet, or the reverse, never by
// more than the requests finishing meanwhile.
func (h *histogram) snapshot() Latency {
	var l Latency
	for i := range h.buckets {
		l.Counts[i] = h.buckets[i].Load()
	}
	l.Sum = time.Duration(h.sum.Load())
	return l
}

// peerMetrics are one peer's counters in one direction.
type peerMetrics struct {
	requests, errors, sent, received atomic.Uint64
	latency                          histogram
}

// record counts one request that took d. The latency goes first: a
// reader that sees the request counted sees its latency too.
func (m *peerMetrics) record(sent, received int, d time.Duration, failed bool) {
	m.latency.observe(d)
	m.count(sent, received, failed)
}

// count counts one request whose duration is no request latency (a
// loader stream, which lasts as long as its loader) and stays out of the
// histogram.
func (m *peerMetrics) count(sent, received int, failed bool) {
	m.requests.Add(1)
	if failed {
		m.errors.Add(1)
	}
	m.transfer(sent, received)
}

// transfer counts bytes of a request that is not over yet (a loader
// stream's records, as they go), so that the byte counters follow a
// stream that lasts as long as its loader; count counts the request
// itself once, when it ends.
func (m *peerMetrics) transfer(sent, received int) {
	m.sent.Add(uint64(sent))
	m.received.Add(uint64(received))
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
		s := PeerStats{
			Peer:          name,
			Dir:           m.dir,
			Requests:      p.requests.Load(),
			Errors:        p.errors.Load(),
			BytesSent:     p.sent.Load(),
			BytesReceived: p.received.Load(),
			Latency:       p.latency.snapshot(),
		}
		s.P50, s.P99 = s.Latency.quantile(0.50), s.Latency.quantile(0.99)
		out = append(out, s)
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
