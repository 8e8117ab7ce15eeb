package sample

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// excludeGraph is a graph of 40 nodes whose seeds under test have more
// neighbours than the fanout of 15, one or more of them the other end of
// a seed edge:
//
//	0: 1 … 20                  (20; seed edge 0–1, given as 0→1, 1→0 and 0→1 again)
//	1: 0, 21 … 35              (16: 15 eligible, the fanout)
//	2: 2 (a self loop), 3 … 22 (21; seed edge 2→2)
//	5: 6, 6 (two edges), 7 … 25 (21; seed edge 5→6)
//	6: 5, 26 … 39              (15: 14 eligible)
//
// and every other node v has the one neighbour (v+1) mod 40. With
// weights, every edge weighs 1 but 0's edge from 20, which weighs 0.
func excludeGraph(weighted bool) *testGraph {
	lists := make([][]uint64, 40)
	span := func(lo, hi uint64) (l []uint64) {
		for u := lo; u <= hi; u++ {
			l = append(l, u)
		}
		return l
	}
	lists[0] = span(1, 20)
	lists[1] = append([]uint64{0}, span(21, 35)...)
	lists[2] = append([]uint64{2}, span(3, 22)...)
	lists[5] = append([]uint64{6, 6}, span(7, 25)...)
	lists[6] = append([]uint64{5}, span(26, 39)...)
	g := &testGraph{n: 40}
	for v, l := range lists {
		if l == nil {
			l = []uint64{uint64(v+1) % 40}
		}
		for _, u := range l {
			g.src, g.dst = append(g.src, u), append(g.dst, uint64(v))
			if weighted {
				w := float32(1)
				if v == 0 && u == 20 {
					w = 0
				}
				g.w = append(g.w, w)
			}
		}
	}
	return g
}

// excludeEdges are the seed edges of excludeGraph's batches: a pair
// twice, once reversed, a self pair, and a pair whose edge is doubled.
var excludeSrc, excludeDst = []uint64{0, 1, 0, 2, 5}, []uint64{1, 0, 1, 2, 6}

// TestSampleLinkExcludesBeforeDrawing: with Exclude, the edges between
// the two ends of a seed edge are left out of the graph before the draw
// (as DGL's as_edge_prediction_sampler(exclude=...) does), so a seed
// gets exactly min(fanout, eligible) neighbours, none of them excluded,
// for every batch key; fanout -1 takes every eligible neighbour; pairs
// given twice or reversed exclude as once, a self pair drops the self
// loop, a doubled edge drops both copies; weighted sampling takes
// min(fanout, eligible of positive weight). The whole graph, a Union of
// two parts and a part asking the other through a Remote give the same
// batches.
func TestSampleLinkExcludesBeforeDrawing(t *testing.T) {
	ctx := context.Background()
	excluded := map[uint64][]uint64{0: {1}, 1: {0}, 2: {2}, 5: {6}, 6: {5}}
	for _, weighted := range []bool{false, true} {
		g := excludeGraph(weighted)
		whole := g.whole(t)
		u, parts := g.split(t, []uint64{0, 3, 40})
		for _, fanout := range []int{15, -1} {
			t.Run(fmt.Sprintf("weighted=%v/fanout=%d", weighted, fanout), func(t *testing.T) {
				fanouts := []int{fanout, 2}
				samplers := map[string]*Sampler{
					"whole": newSampler(t, whole, whole, fanouts, weighted),
					"union": newSampler(t, u, u, fanouts, weighted),
				}
				for p := range parts {
					s, err := New(Config{Fanouts: fanouts, Weighted: weighted, Local: parts[p], Remote: &fakeRemote{parts: parts}, Book: u.Book()})
					if err != nil {
						t.Fatal(err)
					}
					samplers[fmt.Sprintf("part %d with a remote", p)] = s
				}
				o := LinkOptions{NegRatio: 1, NumNodes: 40, Exclude: true}
				for k := range 300 {
					key := BatchKey{Seed: 3, Epoch: 1, Batch: uint64(k)}
					b, err := samplers["whole"].SampleLink(ctx, key, excludeSrc, excludeDst, o)
					if err != nil {
						t.Fatal(err)
					}
					got := map[uint64][]uint64{}
					e1 := int(b.NumSampledEdges[0])
					for e := range e1 {
						c := b.NID[b.Col[e]]
						got[c] = append(got[c], b.NID[b.Row[e]])
					}
					for _, v := range []uint64{0, 1, 2, 5, 6} {
						var eligible []uint64
						for i, w := range whole.Neighbors(uint32(v)) {
							if slices.Contains(excluded[v], w) {
								continue
							}
							if ws := whole.Weights(uint32(v)); ws != nil && ws[i] <= 0 {
								continue
							}
							eligible = append(eligible, w)
						}
						want := len(eligible)
						if fanout >= 0 {
							want = min(fanout, want)
						}
						if len(got[v]) != want {
							t.Fatalf("batch %d: seed %d got %d neighbours %v, want min(fanout %d, %d eligible) = %d",
								k, v, len(got[v]), got[v], fanout, len(eligible), want)
						}
						for _, w := range got[v] {
							if !slices.Contains(eligible, w) {
								t.Fatalf("batch %d: seed %d got neighbour %d, which is excluded or weighs 0", k, v, w)
							}
						}
						if fanout < 0 && !slices.Equal(got[v], eligible) {
							t.Fatalf("batch %d: seed %d got %v at fanout -1, want every eligible neighbour %v", k, v, got[v], eligible)
						}
					}
					want := snapshot(b)
					for name, s := range samplers {
						if name == "whole" {
							continue
						}
						b2, err := s.SampleLink(ctx, key, excludeSrc, excludeDst, o)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if got := snapshot(b2); !bytes.Equal(got, want) {
							t.Fatalf("batch %d: %s differs from the whole graph's", k, name)
						}
					}
				}
			})
		}
	}
}

// snapshot is the structure of a batch as bytes, for comparisons.
func snapshot(b *Batch) []byte {
	return fmt.Appendf(nil, "%v|%v|%v|%v|%v|%v|%v", b.NID, b.Row, b.Col, b.NumSampledNodes, b.NumSampledEdges, b.EdgeLabelIndex, b.EdgeLabel)
}

// TestSampleNeighborsExclusion: SampleNeighbors with an Exclusion draws
// node 0's 15 of its 18 remaining neighbours (fanout 15) and takes every
// other node's list whole, a request's exclusions that do not fit it are
// refused, and a response holding a neighbour the request left out is a
// bad response.
func TestSampleNeighborsExclusion(t *testing.T) {
	m := excludeGraph(false).whole(t)
	req := NeighborRequest{Key: 7, Fanout: 15, Nodes: []uint64{3, 0, 6},
		Exclude: Exclusion{At: []uint32{1, 2}, Counts: []uint32{2, 1}, IDs: []uint64{4, 11, 5}}}
	var resp NeighborResponse
	if err := SampleNeighbors(m, &req, &resp); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.Counts, []uint32{1, 15, 14}) {
		t.Fatalf("counts %v, want [1 15 14]", resp.Counts)
	}
	for _, u := range resp.Neighbors[1:16] {
		if u == 4 || u == 11 {
			t.Fatalf("node 0 got excluded neighbour %d: %v", u, resp.Neighbors[1:16])
		}
	}
	if !slices.Equal(resp.Neighbors[16:], m.Neighbors(6)[1:]) || resp.Neighbors[0] != 4 {
		t.Fatalf("neighbours %v: want node 3's 4 and node 6's list less 5", resp.Neighbors)
	}
	if err := resp.check(&req, 40); err != nil {
		t.Fatal(err)
	}
	// The draw is a pure function of the request.
	var again NeighborResponse
	if err := SampleNeighbors(m, &req, &again); err != nil || !slices.Equal(again.Neighbors, resp.Neighbors) {
		t.Fatalf("the same request drew %v, then %v (%v)", resp.Neighbors, again.Neighbors, err)
	}
	bad := resp
	bad.Neighbors = slices.Clone(resp.Neighbors)
	bad.Neighbors[1] = 4
	if err := bad.check(&req, 40); !errors.Is(err, ErrBadResponse) || !strings.Contains(err.Error(), "left out") {
		t.Fatalf("a left-out neighbour in the answer: %v, want ErrBadResponse", err)
	}
	for _, tc := range []struct {
		x    Exclusion
		text string
	}{
		{Exclusion{At: []uint32{0}, IDs: []uint64{1}}, "0 counts for 1 nodes"},
		{Exclusion{At: []uint32{3}, Counts: []uint32{1}, IDs: []uint64{1}}, "node index 3, request of 3 nodes"},
		{Exclusion{At: []uint32{1, 1}, Counts: []uint32{1, 1}, IDs: []uint64{1, 2}}, "after 1, want ascending"},
		{Exclusion{At: []uint32{1}, Counts: []uint32{0}}, "no ids"},
		{Exclusion{At: []uint32{1}, Counts: []uint32{3}, IDs: []uint64{1, 2}}, "3 ids, 2 left"},
		{Exclusion{At: []uint32{1}, Counts: []uint32{2}, IDs: []uint64{2, 2}}, "id 2 after 2"},
		{Exclusion{At: []uint32{1}, Counts: []uint32{1}, IDs: []uint64{1, 2}}, "add up to 1, 2 ids given"},
	} {
		r := req
		r.Exclude = tc.x
		resp.Reset()
		if err := SampleNeighbors(m, &r, &resp); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%+v: %v, want ErrInvalid saying %q", tc.x, err, tc.text)
		}
	}
}
