package sample

import (
	"hash/crc32"
	"testing"
)

// digestCases pin the bytes of many batches — every sampling path: Floyd
// with a linear set and with a bitset, take-all, weighted, remote peers,
// hubs of thousands of neighbours — to CRC-32C values recorded before
// the sampler's data structures were reworked for speed. A change of any
// output byte fails here; batch_v1.bin alone covers one small batch.
var digestCases = []struct {
	name     string
	graph    func() *testGraph
	bounds   []uint64 // split: sample from part 1 with the others remote
	fanouts  []int
	weighted bool
	batch    int
	want     uint32
}{
	{"rand/15,10,5", func() *testGraph { return randGraph(31, 5000, 100_000, false, Schema{}) }, nil, []int{15, 10, 5}, false, 64, 0x0697fad5},
	{"rand/40,3", func() *testGraph { return randGraph(32, 3000, 90_000, false, Schema{}) }, nil, []int{40, 3}, false, 32, 0x9f3315c4},
	{"rand/-1,2", func() *testGraph { return randGraph(33, 2000, 10_000, false, Schema{}) }, nil, []int{-1, 2}, false, 32, 0x1a249053},
	{"rand/weighted/8,4", func() *testGraph { return randGraph(34, 2000, 40_000, true, Schema{}) }, nil, []int{8, 4}, true, 32, 0xcf1afd41},
	{"rand/remote/15,10", func() *testGraph { return randGraph(35, 3000, 60_000, false, Schema{}) }, []uint64{0, 1000, 1800, 3000}, []int{15, 10}, false, 64, 0x9ded18b3},
	{"rmat/15,10,5", rmatGraph, nil, []int{15, 10, 5}, false, 256, 0xc2a5183c},
	{"rmat/remote/10,10", rmatGraph, []uint64{0, 4096, 9000, 1 << 14}, []int{10, 10}, false, 128, 0xf2abd11d},
}

// rmatGraph is an R-MAT graph of 2^14 nodes and 300 k edges: hubs with
// thousands of in-neighbours, most nodes with a few.
func rmatGraph() *testGraph {
	src, dst := rmatEdges(3, 14, 300_000)
	return &testGraph{n: 1 << 14, src: src, dst: dst}
}

func TestOutputDigest(t *testing.T) {
	for _, tc := range digestCases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.graph()
			var s *Sampler
			if tc.bounds == nil {
				whole := g.whole(t)
				s = newSampler(t, whole, whole, tc.fanouts, tc.weighted)
			} else {
				u, parts := g.split(t, tc.bounds)
				var err error
				s, err = New(Config{Fanouts: tc.fanouts, Weighted: tc.weighted, Local: parts[1],
					Remote: &fakeRemote{parts: parts}, Book: u.Book()})
				if err != nil {
					t.Fatal(err)
				}
			}
			seeds := randomSeeds(uint64(g.n), 12, tc.batch)
			h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
			for i, b := range seeds {
				rec := record(t, s, BatchKey{Seed: 17, Epoch: 3, Batch: uint64(i)}, b)
				h.Write(rec)
			}
			if got := h.Sum32(); got != tc.want {
				t.Errorf("digest of %d batches = %#08x, want %#08x", len(seeds), got, tc.want)
			}
		})
	}
}

// The digest must see real batches: edges at every hop, not empty ones.
func TestOutputDigestCasesSample(t *testing.T) {
	for _, tc := range digestCases[:1] {
		g := tc.graph()
		whole := g.whole(t)
		s := newSampler(t, whole, whole, tc.fanouts, tc.weighted)
		b, err := s.Sample(t.Context(), BatchKey{}, randomSeeds(uint64(g.n), 1, tc.batch)[0])
		if err != nil {
			t.Fatal(err)
		}
		for hop, e := range b.NumSampledEdges {
			if e < int64(tc.batch) {
				t.Errorf("%s: hop %d has %d edges, want ≥ %d", tc.name, hop, e, tc.batch)
			}
		}
	}
}
