package sample

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"graphnode/csr"
	"graphnode/partition"
)

// writeCSR writes partition [start, end) of g as a real part.csr file and
// opens it.
func writeCSR(t *testing.T, g *testGraph, part, parts int, start, end uint64) *CSR {
	t.Helper()
	m := g.part(t, start, end)
	path := filepath.Join(t.TempDir(), fmt.Sprintf("part-%d.csr", part))
	meta := csr.Meta{
		Part: uint32(part), NumParts: uint32(parts), Start: start, End: end, TotalNodes: uint64(g.n),
		NumEdges: uint64(len(m.d.Indices)), FeatDim: uint32(g.schema.FeatDim), FeatType: csr.TypeF32,
		LabelDim: uint32(g.schema.LabelDim), NumClasses: 10,
	}
	w, err := csr.Create(path, meta)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, err := range []error{
		w.Uint64s(csr.SecIndptr, m.d.Indptr),
		w.Uint64s(csr.SecIndices, m.d.Indices),
		w.Float32s(csr.SecWeights, m.d.Weights),
		w.Bytes(csr.SecFeat, csr.TypeF32, m.d.Feat),
		w.Int32s(csr.SecLabel, m.d.Labels),
		w.Close(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cg, err := csr.Open(path, csr.OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.Close() })
	c, err := FromCSR(cg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Batches sampled from real partition files, as a union and as one file
// asking the other through a Remote, are byte-identical to those of the
// in-memory whole graph.
func TestCSRFilesMatchWhole(t *testing.T) {
	g := randGraph(31, 300, 4000, true, Schema{FeatDim: 4, XType: F32, LabelDim: 1})
	bounds := []uint64{0, 120, 300}
	book, err := partition.NewBook(bounds)
	if err != nil {
		t.Fatal(err)
	}
	parts := []Partition{writeCSR(t, g, 0, 2, 0, 120), writeCSR(t, g, 1, 2, 120, 300)}
	u, err := NewUnion(book, parts)
	if err != nil {
		t.Fatal(err)
	}
	whole := g.whole(t)
	for _, weighted := range []bool{false, true} {
		fanouts := []int{5, 3}
		ref := newSampler(t, whole, whole, fanouts, weighted)
		un := newSampler(t, u, u, fanouts, weighted)
		ls := NewLocalSource(u)
		dist, err := New(Config{
			Fanouts: fanouts, Weighted: weighted, Local: parts[1], Remote: &fakeRemote{parts: parts}, Book: book,
			Schema: g.schema, Features: ls, Labels: ls,
		})
		if err != nil {
			t.Fatal(err)
		}
		for bi := range 6 {
			key := BatchKey{Seed: 8, Batch: uint64(bi)}
			seeds := []uint64{uint64(bi), uint64(299 - bi*3), 150}
			want := record(t, ref, key, seeds)
			if got := record(t, un, key, seeds); !bytes.Equal(got, want) {
				t.Fatalf("weighted=%v batch %d: union of csr files differs from the in-memory graph", weighted, bi)
			}
			if got := record(t, dist, key, seeds); !bytes.Equal(got, want) {
				t.Fatalf("weighted=%v batch %d: csr file with a remote peer differs from the in-memory graph", weighted, bi)
			}
		}
	}
}
