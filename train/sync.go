package train

import (
	"context"
	"fmt"
	"sync"
)

// Sync averages a vector across the trainers of a job (data-parallel
// training: every trainer applies the same averaged gradient and keeps
// the same parameters).
//
// Every trainer calls AllReduce with the same sequence of steps 0, 1, 2,
// … and vectors of the same length (Trainer.SyncLen). On a nil return v
// holds the element-wise mean over all trainers, bit-identical on every
// trainer. An error is final: the job cannot go on. Implementations: NoSync
// for one trainer, NewLocalSync for trainers in one process, and the
// synchronous dense kv table (push v as step's contribution, pull the
// mean) for trainers on several hosts.
type Sync interface {
	AllReduce(ctx context.Context, step int, v []float32) error
}

// NoSync is the Sync of a lone trainer: the mean of one vector is itself.
type NoSync struct{}

// AllReduce leaves v as it is.
func (NoSync) AllReduce(context.Context, int, []float32) error { return nil }

// NewLocalSync returns the Syncs of n trainers running in one process,
// one per rank, to be used from n goroutines. A round completes when all
// n have called AllReduce; the mean is summed in rank order, so it is
// the same whatever the arrival order. A trainer whose context ends
// while it waits leaves the group, and every other trainer's AllReduce
// then fails too (instead of waiting forever).
func NewLocalSync(n int) []Sync {
	g := &localGroup{n: n}
	g.mu.vecs = make([][]float32, n)
	out := make([]Sync, n)
	for r := range out {
		out[r] = &localSync{g: g, rank: r}
	}
	return out
}

type localGroup struct {
	n  int
	mu struct {
		sync.Mutex
		round *round      // the round being gathered, nil between rounds
		err   error       // sticky: the group is broken
		vecs  [][]float32 // each rank's vector in the current round
		sum   []float64
	}
}

// round is one AllReduce across the group.
type round struct {
	step, length, arrived int
	done                  chan struct{} // closed when the round ends
	err                   error         // set before done is closed
}

type localSync struct {
	g    *localGroup
	rank int
}

// AllReduce waits for every rank of the group and replaces v with the
// mean of their vectors.
func (s *localSync) AllReduce(ctx context.Context, step int, v []float32) error {
	g := &s.g.mu
	g.Lock()
	if g.err != nil {
		g.Unlock()
		return g.err
	}
	r := g.round
	if r == nil {
		r = &round{step: step, length: len(v), done: make(chan struct{})}
		g.round = r
		clear(g.vecs)
	}
	switch {
	case step != r.step || len(v) != r.length:
		s.g.failLocked(r, fmt.Errorf("train: sync: rank %d at step %d with %d values, others at step %d with %d: %w",
			s.rank, step, len(v), r.step, r.length, ErrSync))
	case g.vecs[s.rank] != nil:
		s.g.failLocked(r, fmt.Errorf("train: sync: rank %d called twice in step %d: %w", s.rank, step, ErrSync))
	default:
		g.vecs[s.rank] = v
		r.arrived++
		if r.arrived == s.g.n {
			s.g.reduceLocked()
			g.round = nil
			close(r.done)
		}
	}
	g.Unlock()

	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
	}
	g.Lock()
	defer g.Unlock()
	select {
	case <-r.done: // finished while we looked at ctx
		return r.err
	default:
	}
	s.g.failLocked(r, fmt.Errorf("train: sync: rank %d left step %d: %w: %w", s.rank, step, ctx.Err(), ErrSync))
	return r.err
}

// failLocked ends round r and breaks the group with err. g.mu must be held.
func (g *localGroup) failLocked(r *round, err error) {
	g.mu.err = err
	g.mu.round = nil
	r.err = err
	select {
	case <-r.done:
	default:
		close(r.done)
	}
}

// reduceLocked writes the mean of every rank's vector into each of them,
// summed in rank order in float64. g.mu must be held.
func (g *localGroup) reduceLocked() {
	m := &g.mu
	m.sum = grow(m.sum, len(m.vecs[0]))
	sum := m.sum
	for i, x := range m.vecs[0] {
		sum[i] = float64(x)
	}
	for _, v := range m.vecs[1:] {
		for i, x := range v {
			sum[i] += float64(x)
		}
	}
	inv := 1 / float64(g.n)
	for _, v := range m.vecs {
		for i := range v {
			v[i] = float32(sum[i] * inv)
		}
	}
}
