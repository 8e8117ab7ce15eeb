package sample

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestCountsCannotWrap: per-hop counts, each a non-negative int64, whose
// sum wraps around 2^64 to the number of nodes must be refused by both
// Encode and Decode (the Python decoder, summing in Python ints, always
// refused them).
func TestCountsCannotWrap(t *testing.T) {
	b := &Batch{
		BatchSize:       1,
		Schema:          Schema{XType: F32},
		NID:             []uint64{0, 1, 2, 3},
		NumSampledNodes: []int64{1, math.MaxInt64, math.MaxInt64, 5}, // 1 + (2^64-2) + 5 ≡ 4
		NumSampledEdges: []int64{0, 0, 0},
	}
	size, err := EncodedSize(b)
	if err != nil {
		t.Fatal(err)
	}
	rec := aligned(size)
	if _, err := Encode(rec, b); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "node counts up to hop 1 add up to more than the batch's 4 nodes") {
		t.Errorf("Encode of num_sampled_nodes %v for %d nodes: %v", b.NumSampledNodes, len(b.NID), err)
	}
	// The same record, its counts written past Encode's check.
	b.NumSampledNodes = []int64{1, 1, 1, 1}
	if _, err := Encode(rec, b); err != nil {
		t.Fatal(err)
	}
	o := binary.LittleEndian.Uint64(rec[offTable+16*SecNumSampledNodes:])
	for i, c := range []int64{1, math.MaxInt64, math.MaxInt64, 5} {
		binary.LittleEndian.PutUint64(rec[o+8*uint64(i):], uint64(c))
	}
	v, err := Decode(rec)
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("Decode accepted num_sampled_nodes %v for %d nodes (err %v)", v.NumSampledNodes, v.Header.NumNodes, err)
	}
}

// TestEncodeErrorNamesProblem: an unknown x dtype or too many hops make
// the record's sizes absurd; Encode and EncodedSize must name the cause,
// not call the record too large.
func TestEncodeErrorNamesProblem(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    *Batch
		want string
	}{
		{"dtype", &Batch{BatchSize: 1, Schema: Schema{FeatDim: 1, XType: 7}, NID: []uint64{0},
			NumSampledNodes: []int64{1, 0}, NumSampledEdges: []int64{0}}, "dtype"},
		{"hops", &Batch{BatchSize: 1, Schema: Schema{XType: F32}, NID: []uint64{0},
			NumSampledNodes: make([]int64, 35), NumSampledEdges: make([]int64, 34)}, "hops"},
	} {
		tc.b.NumSampledNodes[0] = 1
		_, err := Encode(aligned(1<<16), tc.b)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Encode: %v, want ErrInvalid naming the %s", tc.name, err, tc.want)
		}
		if _, err := EncodedSize(tc.b); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: EncodedSize: %v, want ErrInvalid naming the %s", tc.name, err, tc.want)
		}
	}
}
