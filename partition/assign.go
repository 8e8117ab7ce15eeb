package partition

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
)

// ErrUnavailable: a partitioning method this build does not provide.
var ErrUnavailable = errors.New("not available in this build yet")

// Partitioning methods accepted by Assign.
const (
	MethodRandom = "random" // balanced random: exact node balance ±1
	MethodMetis  = "metis"  // multilevel edge-cut minimisation
	MethodFreq   = "freq"   // access-frequency driven (GLT style)
)

// assignStream is the second PCG word of assignment draws.
const assignStream = 0x6173736967 // "assig"

// AssignOptions choose how nodes are given to partitions.
type AssignOptions struct {
	Method string // MethodRandom, MethodMetis or MethodFreq
	Parts  int    // number of partitions, 1..NumNodes
	Seed   uint64 // makes every method reproducible
	// Balance names the quantities the multilevel method balances
	// besides nodes ("train", "edges"); the random method balances nodes.
	Balance []string
	// Progress, when set, hears how far a long method is.
	Progress Progress
}

// Assign returns, for every node index of g, the partition that owns it.
// adj is g's adjacency from BuildAdj (the edges g held are gone by then).
func Assign(ctx context.Context, g *Graph, adj *Adj, opts AssignOptions) ([]uint32, error) {
	if opts.Parts < 1 {
		return nil, fmt.Errorf("partition: %d parts: want at least 1", opts.Parts)
	}
	if g.NumNodes > 0 && opts.Parts > g.NumNodes {
		return nil, fmt.Errorf("partition: %d parts for %d nodes: a partition would own no node", opts.Parts, g.NumNodes)
	}
	if adj != nil && adj.NumNodes() != g.NumNodes {
		return nil, fmt.Errorf("partition: adjacency has %d rows for %d nodes", adj.NumNodes(), g.NumNodes)
	}
	// Methods plug in here: each takes the same inputs and returns one
	// partition per node index.
	switch opts.Method {
	case MethodRandom:
		return assignRandom(ctx, g.NumNodes, opts)
	case MethodMetis, MethodFreq:
		return nil, fmt.Errorf("partition: method %q: %w", opts.Method, ErrUnavailable)
	}
	return nil, fmt.Errorf("partition: method %q: want %s, %s or %s", opts.Method, MethodRandom, MethodMetis, MethodFreq)
}

// assignRandom shuffles the nodes with the seed and deals them out in
// equal contiguous shares of the shuffled order, so partition sizes
// differ by at most one.
func assignRandom(ctx context.Context, n int, opts AssignOptions) ([]uint32, error) {
	perm := make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, assignStream))
	rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The node at shuffled position i goes to part i*P/n, which gives
	// each part floor or ceil of n/P nodes.
	p := uint64(opts.Parts)
	out := make([]uint32, n)
	for i, v := range perm {
		out[v] = uint32(uint64(i) * p / uint64(n))
	}
	opts.Progress.report("assign", int64(n), int64(n))
	return out, nil
}
