package sample

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
)

func TestLocalSource(t *testing.T) {
	ctx := context.Background()
	g := randGraph(4, 60, 200, false, Schema{FeatDim: 3, XType: F16, LabelDim: 2})
	u, _ := g.split(t, []uint64{0, 20, 60})
	part := g.part(t, 20, 60)
	rb := g.schema.RowBytes()
	for name, tc := range map[string]struct {
		p   Partition
		ids []uint64
	}{
		"mem":   {part, []uint64{59, 20, 33, 33}},
		"union": {u, []uint64{0, 59, 19, 20}},
	} {
		src := NewLocalSource(tc.p)
		dst := make([]byte, len(tc.ids)*rb)
		if err := src.Gather(ctx, tc.ids, dst); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, id := range tc.ids {
			if want := g.feat[int(id)*rb : int(id+1)*rb]; !bytes.Equal(dst[i*rb:(i+1)*rb], want) {
				t.Fatalf("%s: row %d (node %d) = %x, want %x", name, i, id, dst[i*rb:(i+1)*rb], want)
			}
		}
		y := make([]int64, 2*len(tc.ids))
		if err := src.GatherLabels(ctx, tc.ids, y); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, id := range tc.ids {
			want := []int64{int64(g.labels[2*id]), int64(g.labels[2*id+1])}
			if !slices.Equal(y[2*i:2*i+2], want) {
				t.Fatalf("%s: labels of node %d = %v, want %v", name, id, y[2*i:2*i+2], want)
			}
		}
	}
	src := NewLocalSource(part)
	if err := src.Gather(ctx, []uint64{19}, make([]byte, rb)); !errors.Is(err, ErrNotOwned) {
		t.Errorf("node outside: err = %v", err)
	}
	if err := src.Gather(ctx, []uint64{25}, make([]byte, rb+1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("wrong dst size: err = %v", err)
	}
	if err := src.GatherLabels(ctx, []uint64{60}, make([]int64, 2)); !errors.Is(err, ErrNotOwned) {
		t.Errorf("label outside: err = %v", err)
	}
}

func TestSampleNeighbors(t *testing.T) {
	g := randGraph(8, 100, 1500, true, Schema{})
	part := g.part(t, 40, 80)
	var resp NeighborResponse
	req := NeighborRequest{Key: 99, Hop: 1, Fanout: 4, Nodes: []uint64{40, 79, 55, 55}}
	for _, weighted := range []bool{false, true} {
		req.Weighted = weighted
		resp.Reset()
		if err := SampleNeighbors(part, &req, &resp); err != nil {
			t.Fatal(err)
		}
		if err := resp.check(&req, 100); err != nil {
			t.Fatal(err)
		}
		off := 0
		for i, v := range req.Nodes {
			got := resp.Neighbors[off : off+int(resp.Counts[i])]
			off += int(resp.Counts[i])
			nb, w := part.Neighbors(uint32(v-40)), part.Weights(uint32(v-40))
			var idx []uint32
			var c Chooser
			if weighted {
				idx = c.Weighted(NodeStream(99, 1, v), w, 4, nil)
			} else {
				idx = c.Uniform(NodeStream(99, 1, v), len(nb), 4, nil)
			}
			if len(got) != len(idx) {
				t.Fatalf("weighted=%v node %d: %d neighbours, chooser says %d", weighted, v, len(got), len(idx))
			}
			for j, k := range idx {
				if got[j] != nb[k] {
					t.Fatalf("weighted=%v node %d: %v, want index %v of %v", weighted, v, got, idx, nb)
				}
			}
		}
		if !slices.Equal(resp.Neighbors[off-int(resp.Counts[3]):], resp.Neighbors[off-2*int(resp.Counts[3]):off-int(resp.Counts[3])]) {
			t.Fatal("the same node twice in a request gave two samples")
		}
	}
	for _, bad := range []NeighborRequest{{Fanout: 2, Nodes: []uint64{39}}, {Fanout: 2, Nodes: []uint64{80}}} {
		if err := SampleNeighbors(part, &bad, &resp); !errors.Is(err, ErrNotOwned) {
			t.Errorf("nodes %v: err = %v", bad.Nodes, err)
		}
	}
	if err := SampleNeighbors(part, &NeighborRequest{Fanout: -2, Nodes: []uint64{40}}, &resp); !errors.Is(err, ErrInvalid) {
		t.Errorf("fanout -2: err = %v", err)
	}
}
