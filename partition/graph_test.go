package partition

import (
	"context"
	"testing"

	"graphnode/csr"
)

func TestDistinctSelfLoops(t *testing.T) {
	for _, tt := range []struct {
		name     string
		g        *Graph
		want     int64
		wantRead int64 // BuildAdj's Stats.SelfLoops: every one listed
	}{
		{"none", &Graph{NumNodes: 2, Src: []uint32{0}, Dst: []uint32{1}}, 0, 0},
		// Planetoid's CiteSeer lists each of its self loops twice.
		{"listed twice", &Graph{NumNodes: 3, Src: []uint32{1, 0, 1, 2, 0}, Dst: []uint32{1, 1, 1, 2, 1}}, 2, 3},
		// In a knowledge graph a loop of another relation is another loop.
		{"relations", &Graph{NumNodes: 2, Src: []uint32{0, 0, 0, 1}, Dst: []uint32{0, 0, 0, 1}, Etypes: []uint32{0, 1, 0, 0}}, 3, 4},
	} {
		got, err := tt.g.DistinctSelfLoops(context.Background())
		if err != nil || got != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.name, got, err, tt.want)
		}
		if _, err := BuildAdj(context.Background(), tt.g, csr.In, CleanOptions{}, nil); err != nil || tt.g.Stats.SelfLoops != tt.wantRead {
			t.Errorf("%s: BuildAdj counted %d self loops (%v), want %d", tt.name, tt.g.Stats.SelfLoops, err, tt.wantRead)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (&Graph{Src: []uint32{0}, Dst: []uint32{0}}).DistinctSelfLoops(ctx); err == nil {
		t.Error("cancelled: no error")
	}
}
