package train

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"graphnode/sample"
)

// graph is a directed graph with features and labels, built in a test.
type graph struct {
	n        int
	src, dst []uint64
	d        int
	feat     []float32 // n × d
	labels   []int32   // n, −1 = none
	classes  int
}

// randGraph is a seeded random graph: m directed edges, dense features
// with about a fifth zeros, labels in [−1, classes).
func randGraph(seed uint64, n, m, d, classes int) *graph {
	r := rand.New(rand.NewPCG(seed, 1))
	g := &graph{n: n, d: d, classes: classes}
	for range m {
		g.src = append(g.src, uint64(r.IntN(n)))
		g.dst = append(g.dst, uint64(r.IntN(n)))
	}
	g.feat = make([]float32, n*d)
	for i := range g.feat {
		if r.IntN(5) != 0 {
			g.feat[i] = float32(r.NormFloat64())
		}
	}
	g.labels = make([]int32, n)
	for i := range g.labels {
		g.labels[i] = int32(r.IntN(classes+1)) - 1
	}
	return g
}

// blockGraph is a learnable graph: classes blocks, edges inside a block
// with probability pin, features a noisy one-hot of the class in the
// first classes columns and noise in the rest.
func blockGraph(seed uint64, n, degree, d, classes int, pin, noise float64) *graph {
	r := rand.New(rand.NewPCG(seed, 2))
	g := &graph{n: n, d: d, classes: classes}
	g.labels = make([]int32, n)
	byClass := make([][]uint64, classes)
	for v := range n {
		c := r.IntN(classes)
		g.labels[v] = int32(c)
		byClass[c] = append(byClass[c], uint64(v))
	}
	for v := range n {
		for range degree {
			u := uint64(r.IntN(n))
			if r.Float64() < pin {
				b := byClass[g.labels[v]]
				u = b[r.IntN(len(b))]
			}
			g.src = append(g.src, u)
			g.dst = append(g.dst, uint64(v))
		}
	}
	g.feat = make([]float32, n*d)
	for v := range n {
		row := g.feat[v*d : (v+1)*d]
		for j := range row {
			row[j] = float32(noise * r.NormFloat64())
		}
		row[g.labels[v]] += 1
	}
	return g
}

// mem is g as one in-memory partition, features as xtype.
func (g *graph) mem(t testing.TB, xtype sample.DType) *sample.Mem {
	t.Helper()
	indptr, indices, _ := sample.BuildCSR(0, uint64(g.n), g.src, g.dst, nil)
	schema := sample.Schema{FeatDim: g.d, XType: xtype, LabelDim: 1}
	feat := make([]byte, g.n*schema.RowBytes())
	for i, x := range g.feat {
		if xtype == sample.F32 {
			binary.LittleEndian.PutUint32(feat[4*i:], math.Float32bits(x))
		} else {
			binary.LittleEndian.PutUint16(feat[2*i:], toHalf(x))
		}
	}
	m, err := sample.NewMem(sample.MemData{Indptr: indptr, Indices: indices, Schema: schema, Feat: feat, Labels: g.labels})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// toHalf rounds x to binary16 (normal range, round half up: enough for
// test values that are exactly representable).
func toHalf(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	if x == 0 {
		return sign
	}
	exp := int(b>>23&0xff) - 127 + 15
	man := (b & 0x7fffff) + 1<<12
	return sign | uint16(exp)<<10 | uint16(man>>13)&0x3ff
}

// memBatches is a Batches over an in-memory partition: it samples each
// batch, encodes it into a record and decodes it, as a sampler and the
// ring would. Epoch e of the source is the plan's epoch e; after epochs
// epochs (0 = never) it returns io.EOF.
type memBatches struct {
	s      *sample.Sampler
	src    *sample.LocalSource
	plan   *sample.Plan
	epochs int
	epoch  int
	b      int
	ep     sample.Epoch
	order  []uint64
	rec    []byte
}

func newBatches(t testing.TB, p sample.Partition, ids []uint64, fanouts []int, opt sample.PlanOptions) *memBatches {
	t.Helper()
	src := sample.NewLocalSource(p)
	s, err := sample.New(sample.Config{Fanouts: fanouts, Local: p, Schema: p.Schema(), Features: src, Labels: src})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sample.NewPlan(ids, opt)
	if err != nil {
		t.Fatal(err)
	}
	m := &memBatches{s: s, src: src, plan: plan}
	m.ep = plan.Epoch(0, nil)
	return m
}

func (m *memBatches) Next(ctx context.Context) (sample.View, error) {
	if m.epochs > 0 && m.epoch >= m.epochs {
		return sample.View{}, fmt.Errorf("memBatches: %w", io.EOF)
	}
	if m.b == m.ep.NumBatches() {
		m.epoch, m.b = m.epoch+1, 0
		m.order = m.ep.Order()
		m.ep = m.plan.Epoch(uint64(m.epoch), m.order)
		return sample.View{}, fmt.Errorf("memBatches: %w", ErrEndOfEpoch)
	}
	b := m.b
	m.b++
	batch, err := m.s.Sample(ctx, m.ep.Key(b), m.ep.Batch(b))
	if err != nil {
		return sample.View{}, err
	}
	size, err := sample.EncodedSize(batch)
	if err != nil {
		return sample.View{}, err
	}
	m.rec = grow(m.rec, size)
	if _, err := sample.EncodeGather(ctx, m.rec, batch, m.src); err != nil {
		return sample.View{}, err
	}
	return sample.Decode(m.rec)
}

// oneBatch is the decoded batch of seeds from p; it owns its record.
func oneBatch(t testing.TB, p sample.Partition, seeds []uint64, fanouts []int) sample.View {
	t.Helper()
	m := newBatches(t, p, seeds, fanouts, sample.PlanOptions{BatchSize: len(seeds), Seed: 7})
	v, err := m.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ids are 0 … n−1 as uint64, every step-th from off.
func ids(n, off, step int) []uint64 {
	var out []uint64
	for i := off; i < n; i += step {
		out = append(out, uint64(i))
	}
	return out
}
