package sample

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestPlanShares(t *testing.T) {
	for _, tc := range []struct {
		n, world, batch int
		dropLast        bool
		wantLens        []int
		wantBatches     []int
	}{
		{10, 3, 3, false, []int{4, 3, 3}, []int{2, 1, 1}},
		{10, 3, 3, true, []int{3, 3, 3}, []int{1, 1, 1}},
		{10, 4, 2, false, []int{3, 3, 2, 2}, []int{2, 2, 1, 1}},
		{10, 4, 2, true, []int{2, 2, 2, 2}, []int{1, 1, 1, 1}},
		{12, 1, 5, false, []int{12}, []int{3}},
		{12, 1, 5, true, []int{12}, []int{2}},
		{2, 3, 1, false, []int{1, 1, 0}, []int{1, 1, 0}},
	} {
		t.Run(fmt.Sprintf("n=%d/world=%d/batch=%d/drop_last=%v", tc.n, tc.world, tc.batch, tc.dropLast), func(t *testing.T) {
			ids := make([]uint64, tc.n)
			for i := range ids {
				ids[i] = uint64(3*i + 1)
			}
			var all []uint64
			for r := range tc.world {
				p, err := NewPlan(ids, PlanOptions{BatchSize: tc.batch, DropLast: tc.dropLast, Rank: r, WorldSize: tc.world})
				if err != nil {
					t.Fatal(err)
				}
				if p.Len() != tc.wantLens[r] || p.NumBatches() != tc.wantBatches[r] {
					t.Fatalf("rank %d: %d seeds in %d batches, want %d in %d", r, p.Len(), p.NumBatches(), tc.wantLens[r], tc.wantBatches[r])
				}
				ep := p.Epoch(0, nil)
				var got []uint64
				for b := range ep.NumBatches() {
					got = append(got, ep.Batch(b)...)
				}
				if !tc.dropLast && !slices.Equal(got, ep.Order()) {
					t.Fatalf("rank %d: batches %v do not cover the share %v", r, got, ep.Order())
				}
				all = append(all, ep.Order()...)
			}
			// Shares are contiguous, disjoint and in order; without
			// drop_last they cover the split.
			want := ids
			if tc.dropLast {
				want = ids[:tc.n/tc.world*tc.world]
			}
			if !slices.Equal(all, want) {
				t.Fatalf("shares %v, want %v", all, want)
			}
		})
	}
}

func TestPlanShuffle(t *testing.T) {
	ids := make([]uint64, 1000)
	for i := range ids {
		ids[i] = uint64(i * 2)
	}
	opt := PlanOptions{BatchSize: 64, Shuffle: true, Seed: 7, Rank: 0, WorldSize: 1}
	p, err := NewPlan(ids, opt)
	if err != nil {
		t.Fatal(err)
	}
	e1 := slices.Clone(p.Epoch(1, nil).Order())
	e2 := slices.Clone(p.Epoch(2, nil).Order())
	if again := p.Epoch(1, make([]uint64, 5, 2000)).Order(); !slices.Equal(again, e1) {
		t.Fatal("epoch 1 shuffled twice gives two orders")
	}
	if slices.Equal(e1, e2) || slices.Equal(e1, ids) {
		t.Fatal("shuffle does not change with the epoch, or is the identity")
	}
	for _, order := range [][]uint64{e1, e2} {
		if !slices.Equal(slices.Sorted(slices.Values(order)), ids) {
			t.Fatal("shuffled order is not a permutation of the share")
		}
	}
	// Rank and seed key the shuffle too.
	for _, o := range []PlanOptions{{BatchSize: 64, Shuffle: true, Seed: 8}, {BatchSize: 64, Shuffle: true, Seed: 7, Rank: 1, WorldSize: 2}} {
		q, _ := NewPlan(ids, o)
		if slices.Equal(q.Epoch(1, nil).Order()[:100], e1[:100]) {
			t.Errorf("options %+v give the same shuffle", o)
		}
	}
	// Every position sees many values: the permutation is not near-identity.
	moved := 0
	for i, v := range e1 {
		if v != ids[i] {
			moved++
		}
	}
	if moved < 950 {
		t.Errorf("only %d of 1000 seeds moved", moved)
	}
	// Without shuffle the given order stays.
	q, _ := NewPlan([]uint64{5, 3, 9}, PlanOptions{BatchSize: 2})
	if got := q.Epoch(3, nil).Batch(0); !slices.Equal(got, []uint64{5, 3}) {
		t.Errorf("unshuffled batch 0 = %v, want [5 3]", got)
	}
	if k := q.Epoch(3, nil).Key(1); k != (BatchKey{Epoch: 3, Batch: 1}) {
		t.Errorf("key = %+v", k)
	}
}

func TestPlanErrors(t *testing.T) {
	if _, err := NewPlan([]uint64{1, 2, 1}, PlanOptions{BatchSize: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("duplicate ids: err = %v", err)
	}
	err := PlanOptions{BatchSize: 0, Rank: 3, WorldSize: 2}.Validate()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "batch_size") || !strings.Contains(err.Error(), "rank 3") {
		t.Errorf("Validate = %v, want batch_size and rank named", err)
	}
}
