package multilevel

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkMultilevel partitions an R-MAT graph of 2^17 vertices and 2^21
// generated edges into 4 parts and reports the share of edges cut.
func BenchmarkMultilevel(b *testing.B) {
	g := mlTestRMAT(b, 17, 1<<21, 1)
	b.SetBytes(int64(len(g.Adjncy)) * 4)
	b.ReportAllocs()
	cut := mlBenchCut(b, g, 4)
	b.ReportMetric(100*float64(cut)/float64(g.NumEdges()), "cut%")
	b.ReportMetric(float64(g.NumEdges()), "edges")
}

// BenchmarkMultilevelCora partitions Cora (2708 vertices, 5278 edges)
// into 2 and 8 parts: the small-graph path, where the tries of rbScheme
// run and allocation, not the edges, is much of the cost. It reports the
// cut; -benchmem the bytes allocated per partitioning.
func BenchmarkMultilevelCora(b *testing.B) {
	wg := mlCora(b)
	for _, k := range []int{2, 8} {
		b.Run(fmt.Sprintf("parts=%d", k), func(b *testing.B) {
			b.ReportAllocs()
			b.ReportMetric(float64(mlBenchCut(b, wg, k)), "cut")
		})
	}
}

// BenchmarkMultilevelBlogCatalog partitions BlogCatalog (10312 vertices,
// 333983 edges, power-law) into 4 parts: one try, dense coarse levels
// that are packed while they wait, FM on every level, on both cores. It
// reports the cut.
func BenchmarkMultilevelBlogCatalog(b *testing.B) {
	g := mlBlogCatalog(b)
	b.ReportAllocs()
	b.ReportMetric(float64(mlBenchCut(b, g, 4)), "cut")
}

// mlBenchCut partitions g into k parts (seed 1) in b's loop and returns
// the cut of the last partition.
func mlBenchCut(b *testing.B, g *Graph, k int) int64 {
	var cut int64
	for b.Loop() {
		parts, err := Partition(context.Background(), g, Options{Parts: k, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		cut = mlCut(g, parts)
	}
	return cut
}
