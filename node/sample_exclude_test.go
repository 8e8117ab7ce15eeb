package node

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"graphnode/csr"
	"graphnode/sample"
)

// TestLinkExcludeRemoteSeeds: a link batch whose seeds part 1 owns,
// sampled by part 0 over the mesh (meshRemote to the daemon's handler,
// narrow requests), leaves the seed edges out before the peer draws: each
// such seed of in-degree above the fanout gets exactly min(fanout, its
// neighbours less the other ends of its seed edges) neighbours, none of
// them excluded, for every batch key, and every eligible one at fanout
// -1. The batches equal those of one process sampling the union.
func TestLinkExcludeRemoteSeeds(t *testing.T) {
	c := startMeshCluster(t, 2, 0, csr.TypeF32, 0)
	ctx := context.Background()
	lo, hi := c.book.Range(1)
	part1 := c.parts_[1]
	nbrs := func(v uint64) []uint64 { return part1.Neighbors(uint32(v - lo)) }
	// Seed edges (u, w): u on part 1 with in-degree ≥ 7, w its
	// neighbour (u's edge from w is the one to leave out), and a second
	// pair per u to a node that is no neighbour.
	const fanout = 5
	var src, dst []uint64
	for v := lo; v < hi && len(src) < 24; v++ {
		nb := nbrs(v)
		if len(nb) < fanout+2 {
			continue
		}
		src, dst = append(src, v), append(dst, nb[len(nb)/2])
		if w := (v + 1) % c.book.NumNodes(); !slices.Contains(nb, w) {
			src, dst = append(src, w), append(dst, v)
		}
	}
	if len(src) < 12 {
		t.Fatalf("only %d seed edges of part 1 nodes with at least %d neighbours", len(src), fanout+2)
	}
	excluded := map[uint64][]uint64{}
	for i, u := range src {
		excluded[u] = append(excluded[u], dst[i])
		excluded[dst[i]] = append(excluded[dst[i]], u)
	}
	u, err := sample.NewUnion(c.book, []sample.Partition{c.parts_[0], c.parts_[1]})
	if err != nil {
		t.Fatal(err)
	}
	cli := c.client(t, 0)
	for _, fo := range []int{fanout, -1} {
		t.Run(fmt.Sprintf("fanout=%d", fo), func(t *testing.T) {
			fanouts := []int{fo, 2}
			s, err := sample.New(sample.Config{Fanouts: fanouts, Local: c.parts_[0], Remote: newMeshRemote(cli, c.book), Book: c.book})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := sample.New(sample.Config{Fanouts: fanouts, Local: u})
			if err != nil {
				t.Fatal(err)
			}
			o := sample.LinkOptions{NegRatio: 1, NumNodes: c.book.NumNodes(), Exclude: true}
			for k := range 60 {
				key := sample.BatchKey{Seed: 21, Epoch: 3, Batch: uint64(k)}
				b, err := s.SampleLink(ctx, key, src, dst, o)
				if err != nil {
					t.Fatal(err)
				}
				got := map[uint64][]uint64{}
				for e := range int(b.NumSampledEdges[0]) {
					v := b.NID[b.Col[e]]
					got[v] = append(got[v], b.NID[b.Row[e]])
				}
				checked := 0
				for _, v := range src {
					if v < lo || v >= hi {
						continue
					}
					var eligible []uint64
					for _, w := range nbrs(v) {
						if !slices.Contains(excluded[v], w) {
							eligible = append(eligible, w)
						}
					}
					want := len(eligible)
					if fo >= 0 {
						want = min(fo, want)
					}
					if len(got[v]) != want {
						t.Fatalf("batch %d: remote seed %d (%d neighbours, %d eligible) got %d: %v; want %d",
							k, v, len(nbrs(v)), len(eligible), len(got[v]), got[v], want)
					}
					for _, w := range got[v] {
						if !slices.Contains(eligible, w) {
							t.Fatalf("batch %d: remote seed %d got %d, the other end of one of its seed edges", k, v, w)
						}
					}
					if fo < 0 && !slices.Equal(got[v], eligible) {
						t.Fatalf("batch %d: remote seed %d got %v at fanout -1, want %v", k, v, got[v], eligible)
					}
					checked++
				}
				if checked < 12 {
					t.Fatalf("batch %d: %d remote seeds checked", k, checked)
				}
				want, err := ref.SampleLink(ctx, key, src, dst, o)
				if err != nil {
					t.Fatal(err)
				}
				if g, w := batchText(b), batchText(want); !bytes.Equal(g, w) {
					t.Fatalf("batch %d differs from the union's:\n got  %s\n want %s", k, g, w)
				}
			}
		})
	}
}

// batchText is a batch's structure as bytes, for comparisons.
func batchText(b *sample.Batch) []byte {
	return fmt.Appendf(nil, "%v|%v|%v|%v|%v|%v", b.NID, b.Row, b.Col, b.NumSampledEdges, b.EdgeLabelIndex, b.EdgeLabel)
}
