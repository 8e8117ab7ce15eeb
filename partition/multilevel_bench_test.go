package partition

import (
	"context"
	"testing"
)

// BenchmarkMultilevel partitions an R-MAT graph of 2^17 vertices and 2^21
// generated edges into 4 parts and reports the share of edges cut.
func BenchmarkMultilevel(b *testing.B) {
	g := mlTestRMAT(b, 17, 1<<21, 1)
	b.SetBytes(int64(len(g.Adjncy)) * 4)
	b.ReportAllocs()
	var cut int64
	for b.Loop() {
		parts, err := Multilevel(context.Background(), g, MultilevelOptions{Parts: 4, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		cut = mlCut(g, parts)
	}
	b.ReportMetric(100*float64(cut)/float64(g.NumEdges()), "cut%")
	b.ReportMetric(float64(g.NumEdges()), "edges")
}
