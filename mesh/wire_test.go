package mesh

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// encode builds a whole message: header and payload.
func encode(t Type, payload []byte) []byte {
	b, start := beginMessage(nil, t)
	b = append(b, payload...)
	b, _ = endMessage(b, start, 0)
	return b
}

func TestCodecsRoundTrip(t *testing.T) {
	sreq := &SampleRequest{Hop: 3, Weighted: true, Fanout: -1, IDs: []uint64{1, 1 << 40, 7}}
	sreq.Key[31] = 0xee
	nreq := &SampleRequest{Hop: 1, Fanout: 5, IDs: []uint64{1, 1<<32 - 1, 7}, Narrow: true}
	xreq := &SampleRequest{Fanout: 15, IDs: []uint64{1, 1 << 40, 7, 9},
		ExcludeAt: []uint32{1, 3}, ExcludeCounts: []uint32{2, 1}, ExcludeIDs: []uint64{5, 1 << 41, 8}}
	xnreq := &SampleRequest{Fanout: -1, IDs: []uint64{1, 7}, Narrow: true,
		ExcludeAt: []uint32{0}, ExcludeCounts: []uint32{3}, ExcludeIDs: []uint64{0, 7, 1<<32 - 1}}
	sameExclusion := func(r, x *SampleRequest) bool {
		return slices.Equal(r.ExcludeAt, x.ExcludeAt) && slices.Equal(r.ExcludeCounts, x.ExcludeCounts) && slices.Equal(r.ExcludeIDs, x.ExcludeIDs)
	}
	tests := []struct {
		name    string
		payload []byte
		size    int // expected payload size
		check   func(p []byte) error
	}{
		{"Hello", AppendHello(nil, &Hello{Version: 1, Part: 3, Cluster: "c", Node: "host3", Checksum: "abc"}), 8 + 3 + 7 + 5,
			func(p []byte) error {
				var h Hello
				if err := DecodeHello(p, &h); err != nil {
					return err
				}
				return want(h == Hello{Version: 1, Part: 3, Cluster: "c", Node: "host3", Checksum: "abc"}, "hello %+v", h)
			}},
		{"Error", AppendError(nil, &ErrorMessage{Code: CodeRefused, Message: "no"}), 8 + 2,
			func(p []byte) error {
				var e ErrorMessage
				if err := DecodeError(p, &e); err != nil {
					return err
				}
				return want(e == ErrorMessage{Code: CodeRefused, Message: "no"}, "error %+v", e)
			}},
		{"SampleRequest", AppendSampleRequest(nil, sreq), 32 + 8 + 4 + 24,
			func(p []byte) error {
				var r SampleRequest
				if err := DecodeSampleRequest(p, &r); err != nil {
					return err
				}
				return want(r.Key == sreq.Key && r.Hop == 3 && r.Weighted && r.Fanout == -1 && slices.Equal(r.IDs, sreq.IDs) &&
					r.ExcludeAt == nil && r.ExcludeCounts == nil && r.ExcludeIDs == nil, "sample request %+v", r)
			}},
		// Exclusions follow the ids: at []u32, counts []u32, ids []u64.
		{"SampleRequest excluding", AppendSampleRequest(nil, xreq), 32 + 8 + (4 + 32) + (4 + 8) + (4 + 8) + (4 + 24),
			func(p []byte) error {
				var r SampleRequest
				if err := DecodeSampleRequest(p, &r); err != nil {
					return err
				}
				return want(r.Fanout == 15 && !r.Narrow && slices.Equal(r.IDs, xreq.IDs) && sameExclusion(&r, xreq), "excluding sample request %+v", r)
			}},
		{"SampleRequest narrow excluding", AppendSampleRequest(nil, xnreq), 32 + 8 + (4 + 8) + (4 + 4) + (4 + 4) + (4 + 12),
			func(p []byte) error {
				var r SampleRequest
				if err := DecodeSampleRequest(p, &r); err != nil {
					return err
				}
				return want(r.Fanout == -1 && r.Narrow && slices.Equal(r.IDs, xnreq.IDs) && sameExclusion(&r, xnreq), "narrow excluding sample request %+v", r)
			}},
		{"SampleResponse", AppendSampleResponse(nil, &SampleResponse{Counts: []uint32{2, 0, 1}, Neighbors: []uint64{9, 8, 7}}), 4 + 12 + 4 + 24,
			func(p []byte) error {
				var r SampleResponse
				if err := DecodeSampleResponse(p, &r); err != nil {
					return err
				}
				return want(slices.Equal(r.Counts, []uint32{2, 0, 1}) && slices.Equal(r.Neighbors, []uint64{9, 8, 7}), "sample response %+v", r)
			}},
		{"SampleRequest narrow", AppendSampleRequest(nil, nreq), 32 + 8 + 4 + 12,
			func(p []byte) error {
				var r SampleRequest
				if err := DecodeSampleRequest(p, &r); err != nil {
					return err
				}
				return want(r.Narrow && !r.Weighted && r.Hop == 1 && r.Fanout == 5 && slices.Equal(r.IDs, nreq.IDs), "narrow sample request %+v", r)
			}},
		{"SampleResponseNarrow", AppendSampleResponseNarrow(nil, &SampleResponse{Counts: []uint32{2, 0, 1}, Neighbors: []uint64{9, 1<<32 - 1, 7}}), 4 + 12 + 4 + 12,
			func(p []byte) error {
				var r SampleResponse
				if err := DecodeSampleResponseNarrow(p, &r); err != nil {
					return err
				}
				return want(slices.Equal(r.Counts, []uint32{2, 0, 1}) && slices.Equal(r.Neighbors, []uint64{9, 1<<32 - 1, 7}), "narrow sample response %+v", r)
			}},
		{"PullRequest", AppendPullRequest(nil, &PullRequest{IDs: []uint64{5, 6}}), 4 + 16,
			func(p []byte) error {
				var r PullRequest
				if err := DecodePullRequest(p, &r); err != nil {
					return err
				}
				return want(slices.Equal(r.IDs, []uint64{5, 6}), "pull request %+v", r)
			}},
		{"PullResponse", AppendPullResponse(nil, &PullResponse{DType: DTypeFloat16, RowSize: 4, Rows: []byte("abcdefgh")}), 12 + 8,
			func(p []byte) error {
				var r PullResponse
				if err := DecodePullResponse(p, &r); err != nil {
					return err
				}
				return want(r.DType == DTypeFloat16 && r.RowSize == 4 && r.Count() == 2 && string(r.Rows) == "abcdefgh", "pull response %+v", r)
			}},
		{"StatsResponse", AppendStatsResponse(nil, &StatsResponse{Node: "n", Part: 2, Peers: []PeerStats{
			{Peer: "p", Dir: Outbound, Requests: 1, Errors: 2, BytesSent: 3, BytesReceived: 4, P50: time.Millisecond, P99: time.Second}}}),
			3 + 4 + 4 + 3 + 2 + 48,
			func(p []byte) error {
				var r StatsResponse
				if err := DecodeStatsResponse(p, &r); err != nil {
					return err
				}
				return want(r.Node == "n" && r.Part == 2 && len(r.Peers) == 1 && r.Peers[0] == PeerStats{Peer: "p", Dir: Outbound,
					Requests: 1, Errors: 2, BytesSent: 3, BytesReceived: 4, P50: time.Millisecond, P99: time.Second}, "stats %+v", r)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.payload) != tt.size {
				t.Fatalf("payload of %d bytes, want %d", len(tt.payload), tt.size)
			}
			if err := tt.check(tt.payload); err != nil {
				t.Fatal(err)
			}
			// Every strict prefix is an error, never a panic.
			for n := range len(tt.payload) {
				if tt.check(tt.payload[:n]) == nil {
					t.Fatalf("prefix of %d bytes decoded", n)
				}
			}
			// So are trailing bytes.
			if err := tt.check(append(tt.payload[:len(tt.payload):len(tt.payload)], 0)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("trailing byte: %v", err)
			}
		})
	}
}

func want(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return errors.New("mismatch: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func TestDecodeRejects(t *testing.T) {
	var sr SampleRequest
	var sresp SampleResponse
	var pr PullResponse
	var h Hello
	key := make([]byte, 32)
	tests := []struct {
		name string
		err  error
		text string
	}{
		{"count beyond buffer", DecodePullRequest([]byte{0xff, 0xff, 0xff, 0x7f, 1, 2}, &PullRequest{}),
			"count 2147483647 of 8-byte elements exceeds the 2 bytes left"},
		{"unknown sample flag", DecodeSampleRequest(append(key, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0), &sr), "flags: unknown bits 0x8"},
		{"narrow ids cut short", DecodeSampleRequest(append(key, 0, 0, 2, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0), &sr),
			"ids: count 2 of 4-byte elements exceeds the 7 bytes left"},
		{"narrow counts do not sum", DecodeSampleResponseNarrow([]byte{1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0}, &sresp),
			"SampleResponseNarrow: counts: sum to 2, but 1 neighbours follow"},
		{"fanout below -1", DecodeSampleRequest(append(key, 0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0, 0, 0, 0), &sr), "fanout: -2"},
		{"counts do not sum", DecodeSampleResponse([]byte{1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, &sresp),
			"counts: sum to 2, but 1 neighbours follow"},
		{"unknown dtype", DecodePullResponse([]byte{9, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0}, &pr), "dtype: unknown tag 9"},
		{"row size not a multiple", DecodePullResponse([]byte{1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0}, &pr), "row size: 6 is not"},
		{"rows beyond buffer", DecodePullResponse([]byte{1, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 1}, &pr), "rows: need 67108864 bytes"},
		{"reserved not zero", DecodeHello([]byte{1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, &h), "reserved: reserved bytes not zero"},
		{"stats request with payload", DecodeStatsRequest([]byte{1}), "1 trailing bytes"},
		{"bad stats direction", DecodeStatsResponse(append([]byte{0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 3, 0}, make([]byte, 48)...), &StatsResponse{}),
			"dir: unknown direction 3"},
	}
	// A request for ids 1, 2, 3 (fanout 0) with the exclude flag, then
	// the exclusion's arrays.
	excluding := func(at, counts []uint32, ids []uint64) error {
		p := append(key, 0, 0, 4, 0, 0, 0, 0, 0)
		p = appendU64s(p, []uint64{1, 2, 3})
		p = appendU32s(p, at)
		p = appendU32s(p, counts)
		return DecodeSampleRequest(appendU64s(p, ids), &sr)
	}
	tests = append(tests, []struct {
		name string
		err  error
		text string
	}{
		{"exclude flag without exclusions", excluding(nil, nil, nil), "exclude: flag set without exclusions"},
		{"exclusion counts fewer than nodes", excluding([]uint32{0, 1}, []uint32{1}, []uint64{5}), "exclude: 1 counts for 2 nodes"},
		{"exclusion past the ids", excluding([]uint32{3}, []uint32{1}, []uint64{5}), "exclude: exclusion 0: node index 3, request of 3 nodes"},
		{"exclusions out of order", excluding([]uint32{2, 1}, []uint32{1, 1}, []uint64{5, 6}), "node index 1 after 2, want ascending"},
		{"exclusion listed twice", excluding([]uint32{1, 1}, []uint32{1, 1}, []uint64{5, 6}), "node index 1 after 1, want ascending"},
		{"empty exclusion", excluding([]uint32{1}, []uint32{0}, nil), "exclusion 0: no ids"},
		{"exclusion counts beyond ids", excluding([]uint32{0, 1}, []uint32{1, 2}, []uint64{5, 6}), "exclusion 1: 2 ids, 1 left"},
		{"exclusion ids left over", excluding([]uint32{1}, []uint32{1}, []uint64{5, 6}), "counts add up to 1, 2 ids given"},
		{"exclusion run not ascending", excluding([]uint32{1}, []uint32{2}, []uint64{6, 5}), "id 5 after 6, want strictly ascending"},
		{"exclusion run repeats", excluding([]uint32{1}, []uint32{2}, []uint64{6, 6}), "id 6 after 6, want strictly ascending"},
		{"exclusion counts beyond buffer", DecodeSampleRequest(append(appendU64s(append(key, 0, 0, 4, 0, 0, 0, 0, 0), []uint64{1}), 1, 0, 0, 0), &sr),
			"exclude at: count 1 of 4-byte elements exceeds the 0 bytes left"},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, ErrMalformed) || !strings.Contains(tt.err.Error(), tt.text) {
				t.Fatalf("err = %v, want ErrMalformed containing %q", tt.err, tt.text)
			}
		})
	}
}

func TestHeader(t *testing.T) {
	b := AppendHeader(nil, Header{Type: TypePullResponse, Len: 0x01020304})
	if !bytes.Equal(b, []byte{7, 0, 0, 0, 4, 3, 2, 1}) {
		t.Fatalf("header bytes % x", b)
	}
	h, err := DecodeHeader(b)
	if err != nil || h != (Header{Type: TypePullResponse, Len: 0x01020304}) {
		t.Fatalf("DecodeHeader = %+v, %v", h, err)
	}
	for _, bad := range [][]byte{{7, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}, {7, 0, 1, 0, 0, 0, 0, 0}} {
		if _, err := DecodeHeader(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeHeader(% x) = %v, want ErrMalformed", bad, err)
		}
	}
	if s := Type(99).String(); s != "Type(99)" {
		t.Errorf("Type(99) = %q", s)
	}
	if s := TypeKVPushResponse.String(); s != "KVPushResponse" {
		t.Errorf("TypeKVPushResponse = %q", s)
	}
}

func TestReadMessage(t *testing.T) {
	big := bytes.Repeat([]byte{1}, 3*readChunk+5)
	msg := encode(TypePullResponse, big)
	h, p, err := readMessage(bytes.NewReader(msg), 4*readChunk)
	if err != nil || h.Type != TypePullResponse || !bytes.Equal(p, big) {
		t.Fatalf("readMessage: %v %v, %d bytes", h, err, len(p))
	}
	if _, _, err := readMessage(bytes.NewReader(msg), readChunk); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over limit: %v", err)
	}
	if _, _, err := readMessage(bytes.NewReader(msg[:len(msg)-1]), 4*readChunk); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short payload: %v", err)
	}
	// A header that promises 1 GiB but sends 10 bytes allocates no more
	// than one chunk before failing.
	lying := append(AppendHeader(nil, Header{Type: TypePullRequest, Len: 1 << 30}), make([]byte, 10)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	readMessage(bytes.NewReader(lying), 1<<31)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 2*readChunk {
		t.Fatalf("allocated %d bytes for a 10-byte payload", n)
	}

	// Into a buffer large enough: the payload is read into its memory,
	// with no allocation; a smaller one is outgrown, the bytes the same.
	buf := make([]byte, 4*readChunk)
	rd := bytes.NewReader(msg)
	// AllocsPerRun counts the whole process's allocations: goroutines
	// that earlier tests of the package left winding down (QUIC
	// connections closing) made one measurement in CI read 2. The least
	// of a few measurements is this path's own count.
	allocs := math.Inf(1)
	for range 5 {
		allocs = min(allocs, testing.AllocsPerRun(5, func() {
			rd.Reset(msg)
			_, p, err = readMessageInto(rd, 4*readChunk, buf)
		}))
	}
	if allocs > 1 || err != nil || &p[0] != &buf[0] || !bytes.Equal(p, big) { // 1: the header, read through an interface
		t.Fatalf("readMessageInto a large buffer: %v allocations, err %v, aliases buf %v", allocs, err, &p[0] == &buf[0])
	}
	if _, p, err = readMessageInto(bytes.NewReader(msg), 4*readChunk, buf[:0:10]); err != nil || !bytes.Equal(p, big) {
		t.Fatalf("readMessageInto a small buffer: %v, %d bytes", err, len(p))
	}
}
