package mesh

import (
	"encoding/binary"
	"time"
)

// Direction says which side of a peer's traffic a PeerStats counts.
type Direction uint8

const (
	// Inbound: requests this node served for the peer.
	Inbound Direction = 1
	// Outbound: calls this node made to the peer.
	Outbound Direction = 2
)

func (d Direction) String() string {
	switch d {
	case Inbound:
		return "in"
	case Outbound:
		return "out"
	}
	return "?"
}

// PeerStats is one peer's counters in one direction, since the Client or
// Server began. P50 and P99 are the upper bounds of the Latency buckets
// holding the quantile. Latency counts every request but loader streams,
// whose durations are no request latency; a
// StatsResponse does not carry it (it decodes as zero). Errors are the
// failed requests; a sample request of several nodes refused as too
// large (CodeTooLarge, which its caller asks again in halves) is not one.
// A loader stream is one request at both ends, counted when it ends.
type PeerStats struct {
	Peer          string
	Dir           Direction
	Requests      uint64
	Errors        uint64
	BytesSent     uint64
	BytesReceived uint64
	P50           time.Duration
	P99           time.Duration
	Latency       Latency
}

// peerStatsSize is the encoded size of a PeerStats with an empty name.
const peerStatsSize = 2 + 2 + 6*8

// StatsResponse answers a StatsRequest (whose payload is empty).
//
//	node str | part u32 | peers []{peer str | dir u8 | reserved u8 |
//	    requests u64 | errors u64 | bytes sent u64 | bytes received u64 |
//	    p50 ns u64 | p99 ns u64}
type StatsResponse struct {
	Node  string
	Part  uint32
	Peers []PeerStats
}

// AppendStatsResponse appends r's payload to b.
func AppendStatsResponse(b []byte, r *StatsResponse) []byte {
	b = appendStr(b, r.Node)
	b = binary.LittleEndian.AppendUint32(b, r.Part)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Peers)))
	for i := range r.Peers {
		s := &r.Peers[i]
		b = appendStr(b, s.Peer)
		b = append(b, byte(s.Dir), 0)
		for _, v := range [...]uint64{s.Requests, s.Errors, s.BytesSent, s.BytesReceived,
			uint64(s.P50), uint64(s.P99)} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	return b
}

// DecodeStatsResponse decodes a StatsResponse payload into r.
func DecodeStatsResponse(p []byte, r *StatsResponse) error {
	d := decoder{msg: "StatsResponse", b: p}
	r.Node = d.str("node")
	r.Part = d.u32("part")
	n := d.count("peers", peerStatsSize)
	r.Peers = make([]PeerStats, 0, n)
	for range n {
		var s PeerStats
		s.Peer = d.str("peer")
		s.Dir = Direction(d.u8("dir"))
		if d.err == nil && s.Dir != Inbound && s.Dir != Outbound {
			d.fail("dir", "unknown direction %d", s.Dir)
		}
		d.zero("reserved", 1)
		s.Requests = d.u64("requests")
		s.Errors = d.u64("errors")
		s.BytesSent = d.u64("bytes sent")
		s.BytesReceived = d.u64("bytes received")
		s.P50 = time.Duration(d.u64("p50"))
		s.P99 = time.Duration(d.u64("p99"))
		if d.err != nil {
			break
		}
		r.Peers = append(r.Peers, s)
	}
	return d.end()
}

// DecodeStatsRequest checks a StatsRequest payload, which is empty.
func DecodeStatsRequest(p []byte) error {
	d := decoder{msg: "StatsRequest", b: p}
	return d.end()
}
