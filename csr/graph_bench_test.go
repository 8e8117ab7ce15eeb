package csr

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// benchFile writes a partition of nodes × degree edges with weights and
// f32 features of dim columns, and returns its path and size.
func benchFile(b *testing.B, nodes, degree, dim int) (string, int64) {
	r := rand.New(rand.NewPCG(1, 2))
	total := uint64(nodes * 4)
	m := Meta{Part: 0, NumParts: 4, Start: 0, End: uint64(nodes), TotalNodes: total,
		NumEdges: uint64(nodes * degree), FeatDim: uint32(dim), FeatType: TypeF32}
	indptr := make([]uint64, nodes+1)
	indices := make([]uint64, 0, nodes*degree)
	for v := range nodes {
		start := len(indices)
		for range degree {
			indices = append(indices, r.Uint64N(total))
		}
		slices.Sort(indices[start:])
		indptr[v+1] = uint64(len(indices))
	}
	weights := make([]float32, len(indices))
	feat := make([]float32, nodes*dim)
	for i := range feat {
		feat[i] = float32(i)
	}
	path := filepath.Join(b.TempDir(), "part.csr")
	w, err := Create(path, m)
	if err != nil {
		b.Fatal(err)
	}
	for _, err := range []error{
		w.Uint64s(SecIndptr, indptr), w.Uint64s(SecIndices, indices),
		w.Float32s(SecWeights, weights), w.Float32s(SecFeat, feat), w.Close(),
	} {
		if err != nil {
			b.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return path, fi.Size()
}

// BenchmarkOpen opens a file of 1M edges (40 000 nodes of degree 25, 16
// f32 features each): without Verify the cost is the O(E) structural
// checks; with it, the CRC of every byte as well. SetBytes is the file
// size, so MB/s is the file read rate.
func BenchmarkOpen(b *testing.B) {
	const nodes, degree, dim = 40_000, 25, 16
	path, size := benchFile(b, nodes, degree, dim)
	for _, verify := range []bool{false, true} {
		b.Run(fmt.Sprintf("verify=%v", verify), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(size)
			for b.Loop() {
				g, err := Open(path, OpenOptions{Verify: verify})
				if err != nil {
					b.Fatal(err)
				}
				g.Close()
			}
			b.ReportMetric(float64(nodes*degree)*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
		})
	}
}
