package mesh

import (
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
	m.count(0, 1<<20, false) // a loader record
	l := m.latency.snapshot()
	want := Latency{Sum: 10*time.Microsecond + 15*time.Microsecond + 300*time.Microsecond + time.Second + time.Minute}
	want.Counts[0], want.Counts[1], want.Counts[4], want.Counts[15], want.Counts[NumLatencyBounds] = 1, 1, 2, 1, 1
	if l != want {
		t.Fatalf("snapshot\n%+v, want\n%+v", l, want)
	}
	if l.Count() != 6 || m.requests.Load() != 7 || m.received.Load() != 6*20+1<<20 {
		t.Errorf("count %d, requests %d, received %d: want 6, 7, %d", l.Count(), m.requests.Load(), m.received.Load(), 6*20+1<<20)
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
