package partition

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestAssignRandomBalance(t *testing.T) {
	for _, tt := range []struct{ n, parts int }{{10, 3}, {1000, 7}, {5, 5}, {1, 1}, {64, 4}} {
		g := &Graph{NumNodes: tt.n}
		got, err := Assign(context.Background(), g, nil, AssignOptions{Method: MethodRandom, Parts: tt.parts, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		sizes := make([]int, tt.parts)
		for _, p := range got {
			sizes[p]++
		}
		lo, hi := tt.n/tt.parts, (tt.n+tt.parts-1)/tt.parts
		for p, s := range sizes {
			if s < lo || s > hi {
				t.Errorf("n=%d parts=%d: part %d has %d nodes, want %d..%d (%v)", tt.n, tt.parts, p, s, lo, hi, sizes)
			}
		}
	}
}

func TestAssignRandomSeed(t *testing.T) {
	g := &Graph{NumNodes: 500}
	a1, _ := Assign(context.Background(), g, nil, AssignOptions{Method: MethodRandom, Parts: 4, Seed: 1})
	a2, _ := Assign(context.Background(), g, nil, AssignOptions{Method: MethodRandom, Parts: 4, Seed: 1})
	a3, _ := Assign(context.Background(), g, nil, AssignOptions{Method: MethodRandom, Parts: 4, Seed: 2})
	if !slices.Equal(a1, a2) {
		t.Error("same seed, different assignment")
	}
	if slices.Equal(a1, a3) {
		t.Error("different seeds, same assignment")
	}
}

func TestAssignErrors(t *testing.T) {
	g := &Graph{NumNodes: 3}
	for _, tt := range []struct {
		opts AssignOptions
		want string
	}{
		{AssignOptions{Method: MethodMetis, Parts: 2}, `partition: method "metis": not available in this build yet`},
		{AssignOptions{Method: MethodFreq, Parts: 2}, `partition: method "freq": not available in this build yet`},
		{AssignOptions{Method: "hash", Parts: 2}, `partition: method "hash": want random, metis or freq`},
		{AssignOptions{Method: MethodRandom, Parts: 0}, "partition: 0 parts: want at least 1"},
		{AssignOptions{Method: MethodRandom, Parts: 4}, "partition: 4 parts for 3 nodes"},
	} {
		_, err := Assign(context.Background(), g, nil, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want %q", tt.opts, err, tt.want)
		}
		if tt.opts.Method == MethodMetis && !errors.Is(err, ErrUnavailable) {
			t.Errorf("metis: %v does not wrap ErrUnavailable", err)
		}
	}
}
