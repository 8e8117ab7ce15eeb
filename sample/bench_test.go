package sample

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// rmatEdges generates m directed edges over 2^scale nodes with the R-MAT
// quadrant probabilities of Graph500 (0.57, 0.19, 0.19, 0.05): a seeded
// power-law graph with hubs, the shape DGL's sampler benchmarks use.
func rmatEdges(seed uint64, scale, m int) (src, dst []uint64) {
	r := rand.New(rand.NewPCG(seed, 0x726d6174))
	src, dst = make([]uint64, m), make([]uint64, m)
	const a, b, c = 0.57, 0.19, 0.19
	for e := range m {
		var u, v uint64
		for range scale {
			p := r.Float64()
			u, v = u<<1, v<<1
			switch {
			case p < a:
			case p < a+b:
				v |= 1
			case p < a+b+c:
				u |= 1
			default:
				u, v = u|1, v|1
			}
		}
		src[e], dst[e] = u, v
	}
	return src, dst
}

// rmatMem is the in-neighbour CSR of an R-MAT graph of 2^20 nodes and
// 10 M edges (about 1.2 s to build).
func rmatMem(b *testing.B) *Mem {
	const scale, edges = 20, 10_000_000
	src, dst := rmatEdges(1, scale, edges)
	indptr, indices, _ := BuildCSR(0, 1<<scale, src, dst, nil)
	m, err := NewMem(MemData{Indptr: indptr, Indices: indices})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// randomSeeds are k batches of size distinct random node ids.
func randomSeeds(n uint64, k, size int) [][]uint64 {
	r := rand.New(rand.NewPCG(7, 7))
	out := make([][]uint64, k)
	for i := range out {
		seen := map[uint64]bool{}
		for len(out[i]) < size {
			v := r.Uint64N(n)
			if !seen[v] {
				seen[v] = true
				out[i] = append(out[i], v)
			}
		}
	}
	return out
}

// BenchmarkSample: go test ./sample -run '^$' -bench 'Sample$' -benchtime 200x
// Sampled edges per second on one core; the peer is DGL's C++ sampler at
// 12.1 M edges/s on one thread over an R-MAT of 1 M nodes / 10 M edges.
func BenchmarkSample(b *testing.B) {
	m := rmatMem(b)
	for _, tc := range []struct {
		fanouts []int
		batch   int
	}{{[]int{15, 10, 5}, 1024}, {[]int{10, 10}, 1024}} {
		name := fmt.Sprintf("fanout=%s/batch=%d", joinInts(tc.fanouts), tc.batch)
		b.Run(name, func(b *testing.B) { benchSample(b, m, tc.fanouts, tc.batch) })
	}
}

// BenchmarkSampleLarge is BenchmarkSample on the products-size graph of
// perf/onehost: R-MAT ids folded onto 2.4 M nodes, 62 M edges, duplicates
// dropped (60.3 M stay). Building it takes about 30 s and 1.5 GB, so it
// runs only when asked:
// SAMPLE_BENCH_LARGE=1 go test ./sample -run '^$' -bench SampleLarge -benchtime 200x
func BenchmarkSampleLarge(b *testing.B) {
	if os.Getenv("SAMPLE_BENCH_LARGE") == "" {
		b.Skip("set SAMPLE_BENCH_LARGE=1 to build the 2.4 M-node graph")
	}
	const nodes, edges = 2_400_000, 62_000_000
	src, dst := rmatEdges(5, 22, edges)
	for i := range src {
		src[i] %= nodes
		dst[i] %= nodes
	}
	indptr, indices, _ := BuildCSR(0, nodes, src, dst, nil)
	src, dst = nil, nil
	kept := indices[:0]
	for v := range nodes {
		a, e := indptr[v], indptr[v+1]
		indptr[v] = uint64(len(kept))
		for i := a; i < e; i++ {
			if i == a || indices[i] != indices[i-1] {
				kept = append(kept, indices[i])
			}
		}
	}
	indptr[nodes] = uint64(len(kept))
	m, err := NewMem(MemData{Indptr: indptr, Indices: kept})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fanout=15,10,5/batch=1024", func(b *testing.B) { benchSample(b, m, []int{15, 10, 5}, 1024) })
}

// benchSample samples batches of random seeds from m, reporting edges per
// wall and per CPU second and nodes per batch.
func benchSample(b *testing.B, m *Mem, fanouts []int, batch int) {
	ctx := context.Background()
	s, err := New(Config{Fanouts: fanouts, Local: m})
	if err != nil {
		b.Fatal(err)
	}
	batches := randomSeeds(m.End(), 16, batch)
	for i, seeds := range batches { // grow every buffer to its steady size
		if _, err := s.Sample(ctx, BatchKey{Seed: 1, Batch: uint64(i)}, seeds); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var edges, nodes, i int
	var cpu0 time.Duration
	for b.Loop() {
		if i == 0 {
			cpu0 = cpuTime()
		}
		bt, err := s.Sample(ctx, BatchKey{Seed: 1, Batch: uint64(i)}, batches[i%len(batches)])
		if err != nil {
			b.Fatal(err)
		}
		edges += bt.NumEdges()
		nodes += bt.NumNodes()
		i++
	}
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(edges)/b.Elapsed().Seconds(), "edges/s")
	if cpu > 0 {
		b.ReportMetric(float64(edges)/cpu.Seconds(), "edges/cpu-s")
	}
	b.ReportMetric(float64(nodes)/float64(i), "nodes/batch")
}

// BenchmarkSampleLink: go test ./sample -run '^$' -bench 'SampleLink' -benchtime 200x
// Link batches of 512 edges of the graph itself (so that exclusion has
// edges to drop), 1 negative each (1024 + up to 512 seed nodes), fanouts
// 10,10 on the R-MAT of BenchmarkSample: the cost of the seed bookkeeping,
// the negatives and the exclusion against a node batch of as many seeds.
func BenchmarkSampleLink(b *testing.B) {
	m := rmatMem(b)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 3))
	type edges struct{ src, dst []uint64 }
	var batches []edges
	for range 16 {
		var e edges
		for len(e.src) < 512 {
			v := r.Uint64N(m.End())
			if nb := m.Neighbors(uint32(v)); len(nb) > 0 {
				e.src, e.dst = append(e.src, nb[r.IntN(len(nb))]), append(e.dst, v)
			}
		}
		batches = append(batches, e)
	}
	for _, exclude := range []bool{false, true} {
		b.Run(fmt.Sprintf("exclude=%v", exclude), func(b *testing.B) {
			s, err := New(Config{Fanouts: []int{10, 10}, Local: m})
			if err != nil {
				b.Fatal(err)
			}
			o := LinkOptions{NegRatio: 1, NumNodes: m.End(), Exclude: exclude}
			for i, e := range batches { // grow every buffer to its steady size
				if _, err := s.SampleLink(ctx, BatchKey{Seed: 1, Batch: uint64(i)}, e.src, e.dst, o); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			var sampled, seeds, i int
			for b.Loop() {
				e := batches[i%len(batches)]
				bt, err := s.SampleLink(ctx, BatchKey{Seed: 1, Batch: uint64(i)}, e.src, e.dst, o)
				if err != nil {
					b.Fatal(err)
				}
				sampled += bt.NumEdges()
				seeds += bt.BatchSize
				i++
			}
			b.ReportMetric(float64(sampled)/b.Elapsed().Seconds(), "edges/s")
			b.ReportMetric(float64(seeds)/float64(i), "seeds/batch")
		})
	}
}

func joinInts(v []int) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(x)
	}
	return s
}

// BenchmarkGather: go test ./sample -run XXX -bench Gather
// Rows of 400 bytes (100 float32) copied from a 200 MB table at random ids.
func BenchmarkGather(b *testing.B) {
	const rows, rowBytes, batch = 500_000, 400, 100_000
	schema := Schema{FeatDim: rowBytes / 4, XType: F32}
	indptr := make([]uint64, rows+1)
	feat := make([]byte, rows*rowBytes)
	for i := range feat {
		feat[i] = byte(i * 7)
	}
	m, err := NewMem(MemData{Indptr: indptr, Schema: schema, Feat: feat})
	if err != nil {
		b.Fatal(err)
	}
	src := NewLocalSource(m)
	ids := randomSeeds(rows, 1, batch)[0]
	dst := make([]byte, batch*rowBytes)
	ctx := context.Background()
	if err := src.Gather(ctx, ids, dst); err != nil { // fault in dst
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("row=%dB/batch=%d", rowBytes, batch), func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(batch * rowBytes)
		n := 0
		var cpu0 time.Duration
		for b.Loop() {
			if n == 0 {
				cpu0 = cpuTime()
			}
			if err := src.Gather(ctx, ids, dst); err != nil {
				b.Fatal(err)
			}
			n += batch
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rows/s")
		if cpu := cpuTime() - cpu0; cpu > 0 {
			b.ReportMetric(float64(n)/cpu.Seconds(), "rows/cpu-s")
		}
	})
}

// BenchmarkEncode: go test ./sample -run XXX -bench Encode
// A batch the size a 15,10,5 × 1024 batch has on ogbn-products-like
// data: 150 k nodes of 400-byte rows, 400 k edges.
func BenchmarkEncode(b *testing.B) {
	const nodes, edges, dim = 150_000, 400_000, 100
	bt := &Batch{BatchSize: 1024, Schema: Schema{FeatDim: dim, XType: F32, LabelDim: 1}}
	for i := range nodes {
		bt.NID = append(bt.NID, uint64(i*3))
	}
	for i := range edges {
		bt.Row = append(bt.Row, int64(i%nodes))
		bt.Col = append(bt.Col, int64(i%1024))
	}
	bt.NumSampledNodes = []int64{1024, nodes - 1024}
	bt.NumSampledEdges = []int64{edges}
	bt.X = make([]byte, nodes*dim*4)
	bt.Y = make([]int64, 1024)
	size, err := EncodedSize(bt)
	if err != nil {
		b.Fatal(err)
	}
	dst := aligned(size)
	b.ReportAllocs()
	b.SetBytes(int64(size))
	for b.Loop() {
		if _, err := Encode(dst, bt); err != nil {
			b.Fatal(err)
		}
	}
}
