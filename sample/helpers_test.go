package sample

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"graphnode/partition"
)

// partition.Book is the Book of a cluster.
var _ Book = partition.Book{}

// testGraph is a directed graph as edge lists plus node data, from which
// every test builds the whole-graph partition, split partitions and a
// map-based reference.
type testGraph struct {
	n      int
	src    []uint64
	dst    []uint64
	w      []float32 // nil when unweighted
	schema Schema
	feat   []byte
	labels []int32
}

// randGraph is a seeded random graph with skewed degrees (some hubs), a
// few self loops and multi-edges, optional weights (some zero), f32 or f16
// features whose bytes encode the node id, and labels (some missing).
func randGraph(seed uint64, n, m int, weighted bool, schema Schema) *testGraph {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	g := &testGraph{n: n, schema: schema}
	for range m {
		d := uint64(r.IntN(n))
		if r.IntN(4) == 0 {
			d = uint64(r.IntN(max(n/20, 1))) // hubs
		}
		s := uint64(r.IntN(n))
		g.src = append(g.src, s)
		g.dst = append(g.dst, d)
		if weighted {
			g.w = append(g.w, float32(r.IntN(4))) // 0 … 3, a quarter zero
		}
	}
	rb := schema.RowBytes()
	g.feat = make([]byte, n*rb)
	for v := range n {
		row := g.feat[v*rb : (v+1)*rb]
		for j := 0; j < schema.FeatDim; j++ {
			x := float32(v) + float32(j)/64
			if schema.XType == F32 {
				binary.LittleEndian.PutUint32(row[4*j:], math.Float32bits(x))
			} else {
				binary.LittleEndian.PutUint16(row[2*j:], uint16(v*7+j))
			}
		}
	}
	g.labels = make([]int32, n*schema.LabelDim)
	for i := range g.labels {
		g.labels[i] = int32(r.IntN(11)) - 1
	}
	return g
}

// part builds the in-memory partition owning [start, end).
func (g *testGraph) part(t testing.TB, start, end uint64) *Mem {
	t.Helper()
	indptr, indices, weights := BuildCSR(start, end, g.src, g.dst, g.w)
	rb, k := g.schema.RowBytes(), g.schema.LabelDim
	m, err := NewMem(MemData{
		Start: start, Indptr: indptr, Indices: indices, Weights: weights, Schema: g.schema,
		Feat:   g.feat[int(start)*rb : int(end)*rb],
		Labels: g.labels[int(start)*k : int(end)*k],
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// whole is the graph as one partition.
func (g *testGraph) whole(t testing.TB) *Mem { return g.part(t, 0, uint64(g.n)) }

// split cuts the graph at bounds into partitions and their union.
func (g *testGraph) split(t testing.TB, bounds []uint64) (*Union, []Partition) {
	t.Helper()
	book, err := partition.NewBook(bounds)
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]Partition, book.Parts())
	for p := range parts {
		s, e := book.Range(p)
		parts[p] = g.part(t, s, e)
	}
	u, err := NewUnion(book, parts)
	if err != nil {
		t.Fatal(err)
	}
	return u, parts
}

// adjacency is the map-based view of the graph: sorted in-neighbours (and
// their weights) per node.
func (g *testGraph) adjacency(t testing.TB) (map[uint64][]uint64, map[uint64][]float32) {
	m := g.whole(t)
	nb := map[uint64][]uint64{}
	ws := map[uint64][]float32{}
	for v := range uint32(g.n) {
		nb[uint64(v)] = m.Neighbors(v)
		ws[uint64(v)] = m.Weights(v)
	}
	return nb, ws
}

// newSampler is a Sampler over p with a LocalSource of src for x and y.
func newSampler(t testing.TB, p Local, src Partition, fanouts []int, weighted bool) *Sampler {
	t.Helper()
	ls := NewLocalSource(src)
	s, err := New(Config{
		Fanouts: fanouts, Weighted: weighted, Local: p, Schema: src.Schema(),
		Features: ls, Labels: ls,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// record samples, gathers and encodes one batch into a fresh buffer.
func record(t testing.TB, s *Sampler, key BatchKey, seeds []uint64) []byte {
	t.Helper()
	rec, err := encodeBatch(s, key, seeds)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// encodeBatch is record for goroutines other than the test's.
func encodeBatch(s *Sampler, key BatchKey, seeds []uint64) ([]byte, error) {
	ctx := context.Background()
	b, err := s.Sample(ctx, key, seeds)
	if err != nil {
		return nil, err
	}
	if err := s.Gather(ctx, b); err != nil {
		return nil, err
	}
	size, err := EncodedSize(b)
	if err != nil {
		return nil, err
	}
	buf := aligned(size)
	n, err := Encode(buf, b)
	if err != nil {
		return nil, err
	}
	if n != size {
		return nil, fmt.Errorf("Encode wrote %d bytes, EncodedSize said %d", n, size)
	}
	return buf, nil
}

// aligned is a zeroed byte slice at a 64-byte aligned address, as the ring
// provides.
func aligned(n int) []byte {
	buf := make([]byte, n+Align)
	off := 0
	for uintptrOf(buf[off:])%Align != 0 {
		off++
	}
	return buf[off : off+n : off+n]
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
