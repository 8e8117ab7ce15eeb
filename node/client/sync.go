package client

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"

	"graphnode/node/control"
)

// SyncDim is the row width of an all-reduce table: a vector of n values
// is ceil(n/SyncDim) rows, so a pull names few ids.
const SyncDim = 256

// Sync averages a vector across the trainers of a job through a
// synchronous kv table with the "average" optimiser: each step every
// trainer pushes its vector, the shards average them once all have
// pushed, and every trainer pulls the mean. It has the method set of
// train.Sync (AllReduce). Not safe for concurrent use.
type Sync struct {
	kv          *KV
	table       string
	rank, world int
	n           int
	base        uint64 // the table's version before the job's step 0
	next        uint64 // the table's version after this trainer's last round
	ids         []uint64
	buf, out    []float32
}

// NewSync declares the all-reduce table (the same name and length on
// every trainer of the job) and reads its version, so that steps count
// from wherever an earlier job on the same cluster left it.
func NewSync(ctx context.Context, k *KV, table string, n, rank, world int) (*Sync, error) {
	if n < 1 || world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("client: sync table %q: length %d, rank %d of world %d: invalid", table, n, rank, world)
	}
	if _, err := k.Create(ctx, SyncSpec(table, n)); err != nil {
		return nil, err
	}
	rows := (n + SyncDim - 1) / SyncDim
	s := &Sync{kv: k, table: table, rank: rank, world: world, n: n,
		ids: make([]uint64, rows), buf: make([]float32, rows*SyncDim)}
	for i := range s.ids {
		s.ids[i] = uint64(i)
	}
	var err error
	if s.out, s.base, err = k.PullVersion(ctx, table, 0, s.ids, s.out[:0]); err != nil {
		return nil, err
	}
	s.next = s.base
	return s, nil
}

// SyncSpec is the spec of the all-reduce table of a vector of n values
// that NewSync declares.
func SyncSpec(table string, n int) control.TableSpec {
	rows := (n + SyncDim - 1) / SyncDim
	return control.TableSpec{Name: table, Rows: control.Rows{N: uint64(rows)}, Dim: SyncDim, Optimizer: "average", Mode: "sync"}
}

// AllReduce replaces v with the mean of every trainer's v at step.
func (s *Sync) AllReduce(ctx context.Context, step int, v []float32) error {
	if len(v) != s.n {
		return fmt.Errorf("client: sync table %q step %d: vector of %d values, table holds %d", s.table, step, len(v), s.n)
	}
	copy(s.buf, v) // the padding stays zero
	st := s.base + uint64(step)
	if err := s.kv.PushSync(ctx, s.table, st, s.rank, s.world, s.buf); err != nil {
		return err
	}
	var err error
	if s.out, _, err = s.kv.PullVersion(ctx, s.table, st+1, s.ids, s.out[:0]); err != nil {
		return err
	}
	s.next = st + 1
	copy(v, s.out[:s.n])
	return nil
}

// MaxShare bounds the sum Share returns: the shard's float32 mean of
// whole numbers whose sum stays below 2^24 times back to the sum
// exactly (see Agree).
const MaxShare = 1 << 20

// Share has every trainer of the job offer a whole number x (0 to
// MaxShare/world) in a round of its own and returns their sum, the same
// on every trainer: how the trainers take alike a decision that only
// some of them can see (rank 0's outcome of a --save, whether a table
// holds trained rows). It comes before the first AllReduce, whose steps
// then count from after it as from after Agree, or after the last.
// Its round waits for every trainer, as a step does: one that left
// fails it at once, one that does not come fails it at the node's
// [kv] sync_timeout.
func (s *Sync) Share(ctx context.Context, x int) (int, error) {
	if x < 0 || x > MaxShare/s.world {
		return 0, fmt.Errorf("client: sync table %q: share %d: want 0 to %d", s.table, x, MaxShare/s.world)
	}
	clear(s.buf)
	s.buf[0] = float32(x)
	st := s.next
	if err := s.kv.PushSync(ctx, s.table, st, s.rank, s.world, s.buf); err != nil {
		return 0, err
	}
	var err error
	if s.out, _, err = s.kv.PullVersion(ctx, s.table, st+1, s.ids, s.out[:0]); err != nil {
		return 0, err
	}
	s.buf[0] = 0 // AllReduce copies only its n values: the padding stays zero
	s.next = st + 1
	s.base = s.next
	return int(agreeSum(s.out[0], s.world)), nil
}

// Setting is one value every trainer of a job must share (a flag, or a
// number derived from the input), named as the user knows it.
type Setting struct{ Name, Value string }

// agreeWidth is the values of a round Agree spends on one setting:
// sixteen 4-bit pieces of the setting's 64-bit hash, each with its
// square.
const agreeWidth = 32

// Agree compares, before the job's first step, the settings every
// trainer offers (the same names in the same order on every trainer),
// and returns the names of those whose values differ among the
// trainers, nil when all agree: the same list on every trainer, so that
// all of them stop or none. The steps of AllReduce count from after it.
// A trainer started with another --epochs or --seed than the rest
// trained a model of its own (parameters drawn from another seed stay
// apart under averaged gradients) or left the others waiting for rounds
// it never ran, without a word.
//
// Each setting is the 64-bit FNV-1a hash of its value: a round averages
// its sixteen 4-bit pieces q and their squares, and the trainers agree
// on a piece exactly when world·Σq² = (Σq)². That holds in float32 for
// every world kv allows (kv.MaxWorld, 2^16): the shard sums whole
// numbers of at most 225·2^16 < 2^24, exactly, and divides once; the
// mean, at most 225 < 2^8, is then within half of float32's spacing
// there, 2^-17, of the true one, so mean·world lies within
// world·2^-17 ≤ 1/2 of the sum (exactly on it for world 2^16, a power
// of two) and rounds back to it; the products compared, below 2^40,
// are exact in float64. Two values of a setting are told apart
// unless their 64-bit hashes collide; the 16-bit hashes of before let
// one pair in 65 536 through, seeds 105 and 303 among them.
//
// A round holds len(s.buf)/agreeWidth settings, 8 when the table is one
// row (a KGE job's, or a small model's): Agree takes as many rounds as
// the settings need, the same number on every trainer.
func (s *Sync) Agree(ctx context.Context, settings []Setting) ([]string, error) {
	per := len(s.buf) / agreeWidth
	var differ []string
	for lo := 0; lo == 0 || lo < len(settings); lo += per {
		d, err := s.agreeRound(ctx, settings[lo:min(lo+per, len(settings))])
		if err != nil {
			return nil, err
		}
		differ = append(differ, d...)
	}
	return differ, nil
}

// agreeRound is one round of Agree, of at most len(s.buf)/agreeWidth
// settings.
func (s *Sync) agreeRound(ctx context.Context, settings []Setting) ([]string, error) {
	clear(s.buf)
	for i, st := range settings {
		h := fnv.New64a()
		h.Write([]byte(st.Value))
		x := h.Sum64()
		for j := range agreeWidth / 2 {
			q := float32(x >> (4 * j) & 15)
			s.buf[i*agreeWidth+2*j], s.buf[i*agreeWidth+2*j+1] = q, q*q
		}
	}
	if err := s.kv.PushSync(ctx, s.table, s.base, s.rank, s.world, s.buf); err != nil {
		return nil, err
	}
	var err error
	if s.out, _, err = s.kv.PullVersion(ctx, s.table, s.base+1, s.ids, s.out[:0]); err != nil {
		return nil, err
	}
	s.base++
	s.next = s.base
	clear(s.buf) // AllReduce copies only its n values: the padding stays zero
	var differ []string
	for i, st := range settings {
		for j := range agreeWidth / 2 {
			k := i*agreeWidth + 2*j
			if !agreed(s.out[k], s.out[k+1], s.world) {
				differ = append(differ, st.Name)
				break
			}
		}
	}
	return differ, nil
}

// agreed reports whether the world trainers whose pieces q averaged to
// mean, and whose squares to mean2, offered the same q (see Agree for
// why the sums are exact).
func agreed(mean, mean2 float32, world int) bool {
	q, q2 := agreeSum(mean, world), agreeSum(mean2, world)
	return float64(world)*q2 == q*q
}

// agreeSum is the sum of world whole numbers whose mean a shard
// returned.
func agreeSum(mean float32, world int) float64 {
	return math.Round(float64(mean) * float64(world))
}
