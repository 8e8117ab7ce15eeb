package mesh

import (
	"bytes"
	"testing"
	"time"
)

// Each decoder has a fuzz target: decode arbitrary bytes and, when they
// decode, re-encode and require the same bytes (encodings are canonical).
// Seeds come from the encoders. Run one with, for example:
//
//	go test -run '^$' -fuzz '^FuzzDecodePullResponse$' -fuzztime 20s ./mesh/

func roundTrip(t *testing.T, in []byte, decode func([]byte) ([]byte, error)) {
	out, err := decode(in)
	if err != nil {
		return
	}
	if !bytes.Equal(in, out) {
		t.Fatalf("re-encoding differs:\n in % x\nout % x", in, out)
	}
}

func FuzzDecodeHeader(f *testing.F) {
	f.Add(AppendHeader(nil, Header{Type: TypeSampleRequest, Len: 44}))
	f.Add(AppendHeader(nil, Header{Type: 999, Len: 1 << 31}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			h, err := DecodeHeader(b)
			if err != nil {
				return nil, err
			}
			return append(AppendHeader(nil, h), b[HeaderSize:]...), nil
		})
	})
}

func FuzzDecodeHello(f *testing.F) {
	f.Add(AppendHello(nil, &Hello{Version: ProtocolVersion, Part: 1, Cluster: "products", Node: "host1", Checksum: "9f86d081884c7d65"}))
	f.Add(AppendHello(nil, &Hello{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var h Hello
			err := DecodeHello(b, &h)
			return AppendHello(nil, &h), err
		})
	})
}

func FuzzDecodeError(f *testing.F) {
	f.Add(AppendError(nil, &ErrorMessage{Code: CodeHandler, Message: "pull handler: id 7 not owned"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var e ErrorMessage
			err := DecodeError(b, &e)
			return AppendError(nil, &e), err
		})
	})
}

func FuzzDecodeSampleRequest(f *testing.F) {
	r := &SampleRequest{Hop: 1, Weighted: true, Fanout: 10, IDs: []uint64{1, 2, 1 << 63}}
	r.Key[0], r.Key[31] = 1, 2
	f.Add(AppendSampleRequest(nil, r))
	f.Add(AppendSampleRequest(nil, &SampleRequest{Fanout: -1}))
	f.Add(AppendSampleRequest(nil, &SampleRequest{Fanout: 3, IDs: []uint64{1, 1<<32 - 1}, Narrow: true}))
	f.Add(AppendSampleRequest(nil, &SampleRequest{Fanout: 15, IDs: []uint64{1, 2, 1 << 40},
		ExcludeAt: []uint32{0, 2}, ExcludeCounts: []uint32{1, 2}, ExcludeIDs: []uint64{2, 1, 1 << 40}}))
	f.Add(AppendSampleRequest(nil, &SampleRequest{Fanout: -1, IDs: []uint64{7}, Narrow: true,
		ExcludeAt: []uint32{0}, ExcludeCounts: []uint32{2}, ExcludeIDs: []uint64{3, 1<<32 - 1}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var r SampleRequest
			err := DecodeSampleRequest(b, &r)
			if err == nil {
				checkExclusion(t, &r)
			}
			return AppendSampleRequest(nil, &r), err
		})
	})
}

func FuzzDecodeSampleResponse(f *testing.F) {
	f.Add(AppendSampleResponse(nil, &SampleResponse{Counts: []uint32{2, 0, 1}, Neighbors: []uint64{4, 5, 6}}))
	f.Add(AppendSampleResponse(nil, &SampleResponse{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var r SampleResponse
			err := DecodeSampleResponse(b, &r)
			return AppendSampleResponse(nil, &r), err
		})
	})
}

func FuzzDecodeSampleResponseNarrow(f *testing.F) {
	f.Add(AppendSampleResponseNarrow(nil, &SampleResponse{Counts: []uint32{2, 0, 1}, Neighbors: []uint64{4, 1<<32 - 1, 6}}))
	f.Add(AppendSampleResponseNarrow(nil, &SampleResponse{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var r SampleResponse
			err := DecodeSampleResponseNarrow(b, &r)
			return AppendSampleResponseNarrow(nil, &r), err
		})
	})
}

func FuzzDecodePullRequest(f *testing.F) {
	f.Add(AppendPullRequest(nil, &PullRequest{IDs: []uint64{9, 8, 7}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var r PullRequest
			err := DecodePullRequest(b, &r)
			return AppendPullRequest(nil, &r), err
		})
	})
}

func FuzzDecodePullResponse(f *testing.F) {
	f.Add(AppendPullResponse(nil, &PullResponse{DType: DTypeFloat32, RowSize: 8, Rows: make([]byte, 24)}))
	f.Add(AppendPullResponse(nil, &PullResponse{DType: DTypeFloat16, RowSize: 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var r PullResponse
			err := DecodePullResponse(b, &r)
			return AppendPullResponse(nil, &r), err
		})
	})
}

func FuzzDecodeStatsRequest(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) { return []byte{}, DecodeStatsRequest(b) })
	})
}

func FuzzDecodeStatsResponse(f *testing.F) {
	f.Add(AppendStatsResponse(nil, &StatsResponse{Node: "host0", Part: 3, Peers: []PeerStats{
		{Peer: "host1", Dir: Inbound, Requests: 10, Errors: 1, BytesSent: 1000, BytesReceived: 200, P50: time.Millisecond, P99: 5 * time.Millisecond},
		{Peer: "host2", Dir: Outbound},
	}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var r StatsResponse
			err := DecodeStatsResponse(b, &r)
			return AppendStatsResponse(nil, &r), err
		})
	})
}

func FuzzDecodeSplitRequest(f *testing.F) {
	f.Add(AppendSplitRequest(nil, &SplitRequest{Split: "train"}))
	f.Add(AppendSplitRequest(nil, &SplitRequest{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var r SplitRequest
			err := DecodeSplitRequest(b, &r)
			return AppendSplitRequest(nil, &r), err
		})
	})
}

func FuzzDecodeSplitResponse(f *testing.F) {
	f.Add(AppendSplitResponse(nil, &SplitResponse{IDs: []uint64{3, 9, 1 << 40}}))
	f.Add(AppendSplitResponse(nil, &SplitResponse{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var r SplitResponse
			err := DecodeSplitResponse(b, &r)
			return AppendSplitResponse(nil, &r), err
		})
	})
}

func FuzzDecodeLabelRequest(f *testing.F) {
	f.Add(AppendLabelRequest(nil, &LabelRequest{IDs: []uint64{5, 2, 7}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var r LabelRequest
			err := DecodeLabelRequest(b, &r)
			return AppendLabelRequest(nil, &r), err
		})
	})
}

func FuzzDecodeLabelResponse(f *testing.F) {
	f.Add(AppendLabelResponse(nil, &LabelResponse{Dim: 2, Labels: []int32{1, -1, 46, 0}}))
	f.Add(AppendLabelResponse(nil, &LabelResponse{Dim: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var r LabelResponse
			err := DecodeLabelResponse(b, &r)
			return AppendLabelResponse(nil, &r), err
		})
	})
}

func FuzzDecodeKVMessage(f *testing.F) {
	f.Add(AppendKVMessage(nil, &KVMessage{Data: []byte{1, 1, 0, 3, 'e', 'n', 't'}}))
	f.Add([]byte{4})
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			var m KVMessage
			err := DecodeKVMessage(b, &m)
			return AppendKVMessage(nil, &m), err
		})
	})
}

// FuzzReadMessage reads one framed message from arbitrary bytes, into no
// buffer and into a small one: it never panics, refuses a payload over
// the limit, and what it returns is the header's length of the bytes that
// follow the header, whichever buffer it was read into.
func FuzzReadMessage(f *testing.F) {
	f.Add(encode(TypePullResponse, bytes.Repeat([]byte{3}, 100)), 0)
	f.Add(append(AppendHeader(nil, Header{Type: TypePullRequest, Len: 1 << 30}), 1, 2, 3), 64)
	f.Add([]byte{1, 2}, 8)
	f.Fuzz(func(t *testing.T, in []byte, bufCap int) {
		const limit = 1 << 16
		var buf []byte
		if bufCap > 0 {
			buf = make([]byte, 0, bufCap%(2*limit))
		}
		h, p, err := readMessageInto(bytes.NewReader(in), limit, buf)
		_, p0, err0 := readMessage(bytes.NewReader(in), limit)
		if (err == nil) != (err0 == nil) || !bytes.Equal(p, p0) {
			t.Fatalf("into a buffer: %v, %d bytes; without: %v, %d bytes", err, len(p), err0, len(p0))
		}
		if err != nil {
			return
		}
		if int(h.Len) != len(p) || h.Len > limit || !bytes.Equal(p, in[HeaderSize:HeaderSize+len(p)]) {
			t.Fatalf("header says %d bytes, read %d", h.Len, len(p))
		}
	})
}

func FuzzDecodeLoaderMessages(f *testing.F) {
	f.Add(uint8(0), AppendLoaderOpen(nil, &LoaderOpen{Options: []byte(`{"split":"train"}`)}))
	f.Add(uint8(1), AppendLoaderOpened(nil, &LoaderOpened{ID: 7, Info: []byte(`{"sub_rings":2}`)}))
	f.Add(uint8(2), AppendLoaderStream(nil, &LoaderStream{ID: 1 << 40, Sub: 3}))
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			switch which % 3 {
			case 0:
				var m LoaderOpen
				err := DecodeLoaderOpen(b, &m)
				return AppendLoaderOpen(nil, &m), err
			case 1:
				var m LoaderOpened
				err := DecodeLoaderOpened(b, &m)
				return AppendLoaderOpened(nil, &m), err
			}
			var m LoaderStream
			err := DecodeLoaderStream(b, &m)
			return AppendLoaderStream(nil, &m), err
		})
	})
}

func FuzzDecodeFileMessages(f *testing.F) {
	f.Add(uint8(0), AppendFileRequest(nil, &FileRequest{Path: "part-1/part.csr", Offset: 8 << 20, Length: 8 << 20}))
	f.Add(uint8(1), AppendFileResponse(nil, &FileResponse{Size: 10, Offset: 7, Data: []byte{1, 2, 3}}))
	f.Add(uint8(1), AppendFileResponse(nil, &FileResponse{Size: 10, Offset: 10}))
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		roundTrip(t, b, func(b []byte) ([]byte, error) {
			if which%2 == 0 {
				var m FileRequest
				err := DecodeFileRequest(b, &m)
				return AppendFileRequest(nil, &m), err
			}
			var m FileResponse
			err := DecodeFileResponse(b, &m)
			if err == nil && m.Offset+uint64(len(m.Data)) > m.Size {
				t.Fatalf("decoded %d bytes at %d of a file of %d", len(m.Data), m.Offset, m.Size)
			}
			return AppendFileResponse(nil, &m), err
		})
	})
}

// checkExclusion fails t unless the exclusions of a decoded request are
// what the handler may rely on: one count per listed node, nodes
// ascending and within the ids, each run non-empty and strictly
// ascending, the counts adding up to the ids.
func checkExclusion(t *testing.T, r *SampleRequest) {
	if len(r.ExcludeCounts) != len(r.ExcludeAt) {
		t.Fatalf("%d counts for %d excluding nodes", len(r.ExcludeCounts), len(r.ExcludeAt))
	}
	o := 0
	for j, at := range r.ExcludeAt {
		c := int(r.ExcludeCounts[j])
		if int(at) >= len(r.IDs) || j > 0 && at <= r.ExcludeAt[j-1] || c == 0 || o+c > len(r.ExcludeIDs) {
			t.Fatalf("exclusion %d (node %d, %d ids) accepted: %+v", j, at, c, r)
		}
		for i := o + 1; i < o+c; i++ {
			if r.ExcludeIDs[i] <= r.ExcludeIDs[i-1] {
				t.Fatalf("exclusion %d not ascending accepted: %v", j, r.ExcludeIDs[o:o+c])
			}
		}
		o += c
	}
	if o != len(r.ExcludeIDs) {
		t.Fatalf("counts add up to %d, %d excluded ids accepted", o, len(r.ExcludeIDs))
	}
}
