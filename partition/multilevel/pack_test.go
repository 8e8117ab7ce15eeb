package multilevel

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMultilevelPackRoundTrip(t *testing.T) {
	// mlPackGraph is one row per vertex of deg entries drawn below maxID,
	// with weights below maxW.
	mlPackGraph := func(n, deg int, maxID uint32, maxW int32, weighted bool) *Graph {
		rng := rand.New(rand.NewPCG(uint64(n), uint64(deg)))
		g := &Graph{Xadj: make([]int64, n+1)}
		for v := 0; v < n; v++ {
			for j := 0; j < deg; j++ {
				g.Adjncy = append(g.Adjncy, rng.Uint32N(maxID))
				if weighted {
					g.Adjwgt = append(g.Adjwgt, 1+rng.Int32N(maxW))
				}
			}
			g.Xadj[v+1] = int64(len(g.Adjncy))
		}
		return g
	}
	cases := []struct {
		name    string
		g       *Graph
		packed  bool
		perEdge float64 // packed bytes per entry, adjacency and weight (exactly)
	}{
		{"16-bit ids and weights", mlPackGraph(1<<10, 64, 1<<16, 1<<16-1, true), true, 4},
		{"20-bit ids, small weights", mlPackGraph(1<<10, 64, 1<<20, 3, true), true, 4},
		{"24-bit ids, 9-bit weights", mlPackGraph(1<<10, 64, 1<<24, 300, true), true, 5},
		{"8-bit ids and weights", mlPackGraph(1<<10, 64, 200, 255, true), true, 2},
		{"full-range ids and weights", mlPackGraph(1<<10, 64, math.MaxUint32, math.MaxInt32, true), true, 8},
		{"below the threshold", mlPackGraph(10, 10, 10, 3, true), false, 0},
		{"unit weights (the caller's input)", mlPackGraph(1<<10, 64, 1<<14, 1, false), false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			adj, wgt := slices.Clone(tc.g.Adjncy), slices.Clone(tc.g.Adjwgt)
			l := mlLevel{g: tc.g}
			l.pack(1)
			if got := l.packed != nil; got != tc.packed {
				t.Fatalf("packed = %v, want %v", got, tc.packed)
			}
			if tc.packed {
				if l.g.Adjncy != nil || l.g.Adjwgt != nil || len(l.g.Xadj) != len(tc.g.Xadj) {
					t.Fatalf("packed level keeps adjacency %d / weights %d / Xadj %d", len(l.g.Adjncy), len(l.g.Adjwgt), len(l.g.Xadj))
				}
				size := len(l.packed.adj) + len(l.packed.wgt)
				if per := float64(size) / float64(len(adj)); per != tc.perEdge {
					t.Errorf("%.2f packed bytes per entry, want %g", per, tc.perEdge)
				}
			}
			l.unpack(&mlPool{})
			if l.packed != nil || !slices.Equal(l.g.Adjncy, adj) || !slices.Equal(l.g.Adjwgt, wgt) {
				t.Fatal("unpack does not restore the adjacency and weights")
			}
		})
	}
}

// TestMLPackBytesHint: whatever width mlPackBytes tries first, it packs
// in the fewest bytes that hold the largest value, the same bytes.
func TestMLPackBytesHint(t *testing.T) {
	for _, tc := range []struct {
		xs []uint32
		w  int
	}{
		{[]uint32{0, 0, 0}, 1},
		{[]uint32{7, 255, 1}, 1},
		{[]uint32{7, 256, 1}, 2},
		{[]uint32{1 << 16, 3}, 3},
		{[]uint32{math.MaxUint32, 0}, 4},
		{nil, 1},
	} {
		want, _ := mlPackWidth(tc.xs, tc.w)
		for hint := 1; hint <= 4; hint++ {
			got, w := mlPackBytes(tc.xs, hint)
			if w != tc.w || !slices.Equal(got, want) {
				t.Errorf("%v, hint %d: width %d, bytes %v; want %d, %v", tc.xs, hint, w, got, tc.w, want)
			}
			back := make([]uint32, len(tc.xs))
			mlUnpackBytes(back, got, w)
			if !slices.Equal(back, tc.xs) {
				t.Errorf("%v, hint %d: unpacked %v", tc.xs, hint, back)
			}
		}
	}
}
