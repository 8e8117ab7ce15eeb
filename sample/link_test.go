package sample

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestSampleLink: the seed nodes are the endpoints and negatives, once
// each, in order of first appearance; edge_label_index points at the
// seed edges, then at each edge's negatives (same source, a node of the
// graph), with labels 1 then 0; the batch is a pure function of its key;
// with Exclude no sampled edge joins the two ends of a seed edge, while
// without it they are sampled (fanout -1 takes every edge); the record
// round-trips.
func TestSampleLink(t *testing.T) {
	m := testRing(t, 50, 4) // every node has neighbours on both sides
	ctx := context.Background()
	src, dst := []uint64{3, 10, 3, 40}, []uint64{4, 9, 2, 41}
	key := BatchKey{Seed: 9, Epoch: 2, Batch: 5}
	for _, exclude := range []bool{false, true} {
		s := newSampler(t, m, m, []int{-1, 3}, false)
		b, err := s.SampleLink(ctx, key, src, dst, LinkOptions{NegRatio: 3, NumNodes: 50, Exclude: exclude})
		if err != nil {
			t.Fatal(err)
		}
		p, n := len(src), len(src)*4
		if b.Pairs() != n || len(b.EdgeLabelIndex) != 2*n {
			t.Fatalf("%d pairs, %d positions; want %d", b.Pairs(), len(b.EdgeLabelIndex), n)
		}
		rows, cols := b.EdgeLabelIndex[:n], b.EdgeLabelIndex[n:]
		seen := map[uint64]bool{}
		for _, v := range b.NID[:b.BatchSize] {
			if seen[v] {
				t.Fatalf("seed node %d twice in %v", v, b.NID[:b.BatchSize])
			}
			seen[v] = true
		}
		if !slices.Equal(b.NID[:4], []uint64{3, 4, 10, 9}) {
			t.Fatalf("seed nodes start %v, want the endpoints in order 3 4 10 9", b.NID[:4])
		}
		for i := range n {
			u, v := b.NID[rows[i]], b.NID[cols[i]]
			if int(rows[i]) >= b.BatchSize || int(cols[i]) >= b.BatchSize {
				t.Fatalf("pair %d points past the seed nodes", i)
			}
			if i < p {
				if u != src[i] || v != dst[i] || b.EdgeLabel[i] != 1 {
					t.Fatalf("pair %d: (%d, %d) label %v, want seed edge (%d, %d) label 1", i, u, v, b.EdgeLabel[i], src[i], dst[i])
				}
			} else if u != src[(i-p)/3] || v >= 50 || b.EdgeLabel[i] != 0 {
				t.Fatalf("negative %d: (%d, %d) label %v, want source %d", i, u, v, b.EdgeLabel[i], src[(i-p)/3])
			}
		}
		joined := 0
		for e := range b.Row {
			u, v := b.NID[b.Col[e]], b.NID[b.Row[e]]
			for i := range p {
				if pairKey(u, v) == pairKey(src[i], dst[i]) {
					joined++
				}
			}
		}
		if exclude && joined != 0 || !exclude && joined == 0 {
			t.Fatalf("exclude %v: %d sampled edges join a seed edge's ends", exclude, joined)
		}
		if err := b.check(); err != nil {
			t.Fatal(err)
		}
		if err := s.Gather(ctx, b); err != nil {
			t.Fatal(err)
		}
		size, _ := EncodedSize(b)
		rec := aligned(size)
		if _, err := Encode(rec, b); err != nil {
			t.Fatal(err)
		}
		v, err := Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.CheckEdges(); err != nil {
			t.Fatal(err)
		}
		if v.Header.Pairs != uint64(n) || !slices.Equal(v.EdgeLabelIndex, b.EdgeLabelIndex) || !slices.Equal(v.EdgeLabel, b.EdgeLabel) {
			t.Fatalf("decoded pairs %d, %v, %v", v.Header.Pairs, v.EdgeLabelIndex, v.EdgeLabel)
		}
		again := newSampler(t, m, m, []int{-1, 3}, false)
		b2, err := again.SampleLink(ctx, key, src, dst, LinkOptions{NegRatio: 3, NumNodes: 50, Exclude: exclude})
		if err != nil || !slices.Equal(b2.NID, b.NID) || !slices.Equal(b2.EdgeLabelIndex, b.EdgeLabelIndex) || !slices.Equal(b2.Row, b.Row) {
			t.Fatalf("the same key gave another batch (%v)", err)
		}
		other, err := again.SampleLink(ctx, BatchKey{Seed: 10, Epoch: 2, Batch: 5}, src, dst, LinkOptions{NegRatio: 3, NumNodes: 50, Exclude: exclude})
		if err != nil || slices.Equal(other.EdgeLabelIndex, b.EdgeLabelIndex) && slices.Equal(other.NID, b.NID) {
			t.Fatalf("another seed drew the same negatives (%v)", err)
		}
	}
	// A node batch after a link batch on the same Sampler has no pairs
	// and excludes nothing.
	s := newSampler(t, m, m, []int{-1}, false)
	if _, err := s.SampleLink(ctx, key, []uint64{3}, []uint64{4}, LinkOptions{Exclude: true}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Sample(ctx, key, []uint64{3})
	if err != nil || b.Pairs() != 0 || !slices.Contains(b.NID, 4) {
		t.Fatalf("node batch after a link batch: %d pairs, n_id %v, %v", b.Pairs(), b.NID, err)
	}
	for _, tc := range []struct {
		src, dst []uint64
		o        LinkOptions
	}{
		{nil, nil, LinkOptions{}},
		{[]uint64{1}, []uint64{1, 2}, LinkOptions{}},
		{[]uint64{1}, []uint64{2}, LinkOptions{NegRatio: MaxNegRatio + 1, NumNodes: 50}},
		{[]uint64{1}, []uint64{2}, LinkOptions{NegRatio: 1}},
	} {
		if _, err := s.SampleLink(ctx, key, tc.src, tc.dst, tc.o); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v %v %+v: %v, want ErrInvalid", tc.src, tc.dst, tc.o, err)
		}
	}
}

// testRing is a graph of n nodes where v's neighbours are v±1 … v±k/2
// (mod n), stored both ways, with 2 float32 features and a label each.
func testRing(t testing.TB, n, k int) *Mem {
	t.Helper()
	indptr := []uint64{0}
	var indices []uint64
	feat := make([]byte, 8*n)
	labels := make([]int32, n)
	for v := range n {
		var l []uint64
		for d := 1; d <= k/2; d++ {
			l = append(l, uint64((v+d)%n), uint64((v-d+n)%n))
		}
		slices.Sort(l)
		indices = append(indices, l...)
		indptr = append(indptr, uint64(len(indices)))
		putF32s(feat[8*v:], []float32{float32(v), 1})
		labels[v] = int32(v % 5)
	}
	m, err := NewMem(MemData{Indptr: indptr, Indices: indices, Schema: Schema{FeatDim: 2, XType: F32, LabelDim: 1}, Feat: feat, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// pairKey is the unordered pair {u, v}.
func pairKey(u, v uint64) [2]uint64 {
	if u > v {
		u, v = v, u
	}
	return [2]uint64{u, v}
}
