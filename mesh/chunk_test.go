package mesh

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestPullIDsPerMessage: the most ids of a pull whose answer fits the
// limit, at the limit exactly and one byte short of it; a row that does
// not fit is an error naming its size and the limit. Each count is held
// to the encodings: n ids' request and answer fit, n+1's do not.
func TestPullIDsPerMessage(t *testing.T) {
	for _, tc := range []struct {
		limit, row, want int
		err              string
	}{
		{limit: 12 + 3*16, row: 16, want: 3}, // the answer is the limit exactly
		{limit: 12 + 3*16 - 1, row: 16, want: 2},
		{limit: 12 + 16, row: 16, want: 1},
		{limit: 12 + 16 - 1, row: 16, err: "mesh: pull: a row of 16 bytes does not fit the message limit of 27 bytes (28 with the answer's head)"},
		{limit: 1 << 20, row: 1 << 20, err: "a row of 1048576 bytes does not fit the message limit of 1048576 bytes"},
		{limit: DefaultMaxMessage, row: 1 << 20, want: 255}, // 256 rows of 1 MiB pass 256 MiB by their head
		{limit: 4 + 8*10, row: 2, want: 10}, // the request, 8 bytes an id, is the larger
		{limit: 4 + 8*10 + 7, row: 2, want: 10},
	} {
		n, err := PullIDsPerMessage(tc.limit, tc.row)
		if tc.err != "" {
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("limit %d, rows of %d: %d, %v; want ErrTooLarge %q", tc.limit, tc.row, n, err, tc.err)
			}
			continue
		}
		if err != nil || n != tc.want {
			t.Errorf("limit %d, rows of %d: %d, %v; want %d", tc.limit, tc.row, n, err, tc.want)
			continue
		}
		if tc.limit > 1<<16 {
			continue // too large to encode here
		}
		fits := func(n int) bool {
			req := &PullRequest{IDs: make([]uint64, n)}
			return len(AppendPullRequest(nil, req)) <= tc.limit && len(AppendPullResponse(nil, expectPull(req, tc.row))) <= tc.limit
		}
		if !fits(n) || fits(n+1) {
			t.Errorf("limit %d, rows of %d: %d ids fit: %v, %d: %v", tc.limit, tc.row, n, fits(n), n+1, fits(n+1))
		}
	}
	if _, err := PullIDsPerMessage(100, 0); !errors.Is(err, ErrMalformed) {
		t.Errorf("rows of 0 bytes: %v, want ErrMalformed", err)
	}
}

// TestLabelIDsPerMessage: as TestPullIDsPerMessage, for labels.
func TestLabelIDsPerMessage(t *testing.T) {
	for _, tc := range []struct {
		limit, dim, want int
		err              string
	}{
		{limit: 8 + 12*5, dim: 3, want: 5}, // the answer is the limit exactly
		{limit: 8 + 12*5 - 1, dim: 3, want: 4},
		{limit: 100, dim: 1, want: 12}, // the request, 8 bytes an id, is the larger
		{limit: 8 + 4*4 - 1, dim: 4, err: "mesh: labels: 4 labels of one node (24 bytes) do not fit the message limit of 23 bytes"},
	} {
		n, err := LabelIDsPerMessage(tc.limit, tc.dim)
		if tc.err != "" {
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("limit %d, dim %d: %d, %v; want ErrTooLarge %q", tc.limit, tc.dim, n, err, tc.err)
			}
			continue
		}
		fits := func(n int) bool {
			resp := &LabelResponse{Dim: uint32(tc.dim), Labels: make([]int32, n*tc.dim)}
			return len(AppendLabelRequest(nil, &LabelRequest{IDs: make([]uint64, n)})) <= tc.limit && len(AppendLabelResponse(nil, resp)) <= tc.limit
		}
		if err != nil || n != tc.want || !fits(n) || fits(n+1) {
			t.Errorf("limit %d, dim %d: %d, %v; want %d (fits: %v, %d: %v)", tc.limit, tc.dim, n, err, tc.want, fits(n), n+1, fits(n+1))
		}
	}
}

// TestPullAtTheLimit: a server and a client of a small MaxMessage answer
// the pull of PullIDsPerMessage ids, whose answer is the limit exactly,
// and refuse one more id.
func TestPullAtTheLimit(t *testing.T) {
	const row = 1024
	const limit = 12 + 3*row
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) {
		c.MaxMessage = limit
		c.Handler = &testHandler{rowSize: row}
	})
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, func(c *ClientConfig) { c.MaxMessage = limit })
	n, err := PullIDsPerMessage(c.MaxMessage(), row)
	if err != nil || n != 3 {
		t.Fatalf("%d ids, %v; want 3", n, err)
	}
	ids := []uint64{7, 8, 9, 10}
	var resp PullResponse
	if err := c.Pull(context.Background(), 1, &PullRequest{IDs: ids[:n]}, &resp); err != nil || !slices.Equal(resp.Rows, expectPull(&PullRequest{IDs: ids[:n]}, row).Rows) {
		t.Errorf("pull of %d ids at the limit: %d bytes, %v", n, len(resp.Rows), err)
	}
	if err := c.Pull(context.Background(), 1, &PullRequest{IDs: ids}, &resp); !errors.Is(err, ErrTooLarge) {
		t.Errorf("pull of %d ids, one over: %v, want ErrTooLarge", len(ids), err)
	}
}

// TestSampleRequestSlice: the slices of a request, exclusions included,
// are valid requests whose answers, concatenated in order, are the
// whole request's answer.
func TestSampleRequestSlice(t *testing.T) {
	req := &SampleRequest{Key: [KeySize]byte{3}, Hop: 1, Fanout: -1, Narrow: true,
		IDs:       []uint64{14, 9, 4, 19, 24, 3, 8},
		ExcludeAt: []uint32{0, 3, 4, 6}, ExcludeCounts: []uint32{2, 1, 3, 1},
		ExcludeIDs: []uint64{140 + 3, 140 + 4, 190 + 3, 240 + 3, 240 + 4, 240 + 5, 80 + 3}}
	if err := CheckExclusion(req); err != nil {
		t.Fatal(err)
	}
	whole := expectSample(req)
	for _, cuts := range [][]int{{0, 7}, {0, 1, 7}, {0, 3, 4, 7}, {0, 1, 2, 3, 4, 5, 6, 7}, {0, 5, 7}, {0, 2, 3, 6, 7}} {
		var got SampleResponse
		for k := range len(cuts) - 1 {
			s := req.Slice(cuts[k], cuts[k+1])
			if !slices.Equal(s.IDs, req.IDs[cuts[k]:cuts[k+1]]) || s.Key != req.Key || s.Hop != req.Hop || s.Fanout != req.Fanout || !s.Narrow {
				t.Fatalf("cuts %v: slice %d is %+v", cuts, k, s)
			}
			if len(s.ExcludeAt) > 0 {
				if err := CheckExclusion(&s); err != nil {
					t.Fatalf("cuts %v: slice %d: %v", cuts, k, err)
				}
			} else if s.ExcludeCounts != nil || s.ExcludeIDs != nil {
				t.Fatalf("cuts %v: slice %d: counts %v, ids %v without a node", cuts, k, s.ExcludeCounts, s.ExcludeIDs)
			}
			a := expectSample(&s)
			got.Counts = append(got.Counts, a.Counts...)
			got.Neighbors = append(got.Neighbors, a.Neighbors...)
		}
		if !slices.Equal(got.Counts, whole.Counts) || !slices.Equal(got.Neighbors, whole.Neighbors) {
			t.Errorf("cuts %v: %v %v, want %v %v", cuts, got.Counts, got.Neighbors, whole.Counts, whole.Neighbors)
		}
	}
	plain := &SampleRequest{Fanout: 2, IDs: []uint64{1, 2, 3}}
	if s := plain.Slice(1, 3); !slices.Equal(s.IDs, []uint64{2, 3}) || s.ExcludeAt != nil {
		t.Errorf("slice of a request without exclusions: %+v", s)
	}
}

// TestSampleCuts: a request that fits whole is not cut; otherwise each
// slice's request fits the limit, and its answer does at the fanout's
// bound, and each slice is as long as that allows.
func TestSampleCuts(t *testing.T) {
	ids := make([]uint64, 100)
	for i := range ids {
		ids[i] = uint64(i)
	}
	excl := &SampleRequest{IDs: ids, Narrow: true,
		ExcludeAt: []uint32{3, 4, 50, 99}, ExcludeCounts: []uint32{1, 20, 2, 3}}
	for i, c := range excl.ExcludeCounts {
		for k := range c {
			excl.ExcludeIDs = append(excl.ExcludeIDs, 1000*uint64(i)+uint64(k))
		}
	}
	// answer is the largest answer to s that its fanout allows; nil when
	// the fanout is -1.
	answer := func(s *SampleRequest) []byte {
		if s.Fanout < 0 {
			return nil
		}
		r := &SampleResponse{Counts: make([]uint32, len(s.IDs)), Neighbors: make([]uint64, len(s.IDs)*int(s.Fanout))}
		for i := range r.Counts {
			r.Counts[i] = uint32(s.Fanout)
		}
		if s.Narrow {
			return AppendSampleResponseNarrow(nil, r)
		}
		return AppendSampleResponse(nil, r)
	}
	fits := func(s *SampleRequest, limit int) bool {
		return len(AppendSampleRequest(nil, s)) <= limit && len(answer(s)) <= limit
	}
	for _, tc := range []struct {
		name   string
		fanout int32
		narrow bool
		limit  int
		whole  bool
	}{
		{"fits", 5, true, sampleHead + 4*100 + answerHead + 4*100 + 4*5*100, true},
		{"answer", 5, true, 1024, false},
		{"answer wide", 5, false, 1024, false},
		{"request", -1, true, 200, false},
		{"all", -1, true, 1 << 20, true},
		{"one node alone", 300, true, 1024, false}, // each node's bound passes the limit: one a request
		{"exclusions", 2, true, 150, false},
		{"exclusions request", -1, true, 150, false},
		{"exclusions wide", -1, false, 300, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &SampleRequest{Fanout: tc.fanout, Narrow: tc.narrow, IDs: ids}
			if strings.HasPrefix(tc.name, "exclusions") {
				c := *excl
				c.Fanout, c.Narrow = tc.fanout, tc.narrow
				r = &c
			}
			cuts := SampleCuts(r, tc.limit)
			if tc.whole {
				if cuts != nil || !fits(r, tc.limit) {
					t.Fatalf("cuts %v of a request that fits", cuts)
				}
				return
			}
			if len(cuts) < 3 || cuts[0] != 0 || cuts[len(cuts)-1] != len(ids) {
				t.Fatalf("cuts %v", cuts)
			}
			for k := range len(cuts) - 1 {
				lo, hi := cuts[k], cuts[k+1]
				s := r.Slice(lo, hi)
				if hi <= lo {
					t.Fatalf("cuts %v not ascending", cuts)
				}
				if hi-lo > 1 && !fits(&s, tc.limit) {
					t.Errorf("cuts %v: slice [%d, %d) does not fit %d bytes", cuts, lo, hi, tc.limit)
				}
				if hi == len(ids) {
					continue
				}
				if longer := r.Slice(lo, hi+1); fits(&longer, tc.limit) {
					t.Errorf("cuts %v: slice [%d, %d) could hold one more id", cuts, lo, hi)
				}
			}
		})
	}
}

// TestSampleCutsRandom checks SampleCuts' contract on random requests
// (fanouts -1 to 6, narrow or wide, with and without exclusions, limits
// of 40 to 840 bytes) against the encoder itself: nil exactly when the
// request and its answer by the fanout's bound fit (answers at fanout -1
// are the peer's to refuse: only their counts are bounded here); else
// every slice's request and bounded answer fit (a slice of one id may
// not: it cannot be cut), each slice is as long as fits (one more id
// would not), and each slice's exclusions are valid on their own.
func TestSampleCutsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		n := 1 + rng.IntN(60)
		r := &SampleRequest{Fanout: int32(rng.IntN(8) - 1), Narrow: rng.IntN(2) == 0, IDs: ids(n, 0)}
		if rng.IntN(2) == 0 {
			for i := range n {
				if rng.IntN(3) == 0 {
					c := 1 + rng.IntN(5)
					r.ExcludeAt = append(r.ExcludeAt, uint32(i))
					r.ExcludeCounts = append(r.ExcludeCounts, uint32(c))
					for k := range c {
						r.ExcludeIDs = append(r.ExcludeIDs, uint64(100*i+k))
					}
				}
			}
		}
		limit := 40 + rng.IntN(800)
		// answer is the most bytes s's answer can take by its fanout:
		// the counts, and as many neighbours of each id as the fanout.
		answer := func(s *SampleRequest) int {
			w := 8
			if s.Narrow {
				w = 4
			}
			return answerHead + 4*len(s.IDs) + w*max(int(s.Fanout), 0)*len(s.IDs)
		}
		fits := func(s *SampleRequest) bool {
			return len(AppendSampleRequest(nil, s)) <= limit && answer(s) <= limit
		}
		cuts := SampleCuts(r, limit)
		if cuts == nil {
			if !fits(r) {
				t.Fatalf("%+v at %d bytes: no cuts, but it does not fit", r, limit)
			}
			continue
		}
		if fits(r) {
			t.Fatalf("%+v at %d bytes: cuts %v, but it fits whole", r, limit, cuts)
		}
		if cuts[0] != 0 || cuts[len(cuts)-1] != n {
			t.Fatalf("cuts %v of %d ids: want 0 … %d", cuts, n, n)
		}
		for k := range len(cuts) - 1 {
			lo, hi := cuts[k], cuts[k+1]
			if lo >= hi {
				t.Fatalf("cuts %v: not increasing", cuts)
			}
			s := r.Slice(lo, hi)
			if len(s.ExcludeAt) > 0 {
				if err := CheckExclusion(&s); err != nil {
					t.Fatalf("slice [%d,%d): %v", lo, hi, err)
				}
			}
			if hi-lo > 1 && !fits(&s) {
				t.Fatalf("slice [%d,%d) of %d bytes does not fit %d", lo, hi, len(AppendSampleRequest(nil, &s)), limit)
			}
			if hi < n {
				if l := r.Slice(lo, hi+1); fits(&l) {
					t.Fatalf("slice [%d,%d) could take one more id", lo, hi)
				}
			}
		}
	}
}
