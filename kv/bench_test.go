package kv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// KG embedding shape: DGL-KE's default hidden size 400, batches of 1024
// rows, from a table far larger than the caches.
const (
	benchRows  = 1 << 16
	benchDim   = 400
	benchBatch = 1024
)

func benchIDs(n int, rows uint64, seed uint64) []uint64 {
	rng := rand.New(rand.NewPCG(seed, 0))
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = rng.Uint64N(rows)
	}
	return ids
}

func reportRows(b *testing.B, rows int) {
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkPull(b *testing.B) {
	s := newStore(b, 0, spec("e", benchRows, benchDim, SGD(1), Async, 1))
	ids := benchIDs(benchBatch, benchRows, 1)
	dst := make([]float32, 0, benchBatch*benchDim)
	b.Run(fmt.Sprintf("rows=%d/dim=%d", benchBatch, benchDim), func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(benchBatch * benchDim * 4)
		for b.Loop() {
			var err error
			if dst, err = s.Pull("e", ids, dst[:0]); err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b, benchBatch)
	})
}

func BenchmarkPush(b *testing.B) {
	for _, opt := range []Optimizer{SGD(0.1), Adagrad(0.1, 1e-10), Adam(0.01, 0.9, 0.999, 1e-8)} {
		s := newStore(b, 0, spec("e", benchRows, benchDim, opt, Async, 1))
		ids := benchIDs(benchBatch, benchRows, 2)
		grads := make([]float32, benchBatch*benchDim)
		for i := range grads {
			grads[i] = float32(i%7) - 3
		}
		for _, par := range []int{1, runtime.GOMAXPROCS(0)} {
			b.Run(fmt.Sprintf("opt=%s/rows=%d/dim=%d/goroutines=%d", opt.Kind, benchBatch, benchDim, par), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(benchBatch * benchDim * 4)
				if par == 1 {
					for b.Loop() {
						if err := s.Push("e", ids, grads); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					// Concurrent trainers, one per core, on their own batches.
					b.RunParallel(func(pb *testing.PB) {
						own := benchIDs(benchBatch, benchRows, rand.Uint64())
						for pb.Next() {
							if err := s.Push("e", own, grads); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				reportRows(b, benchBatch)
			})
		}
	}
}

// BenchmarkSyncStep is the latency of one synchronous step: 2 trainers
// push a 1 MiB dense gradient, the shard averages and applies Adam.
func BenchmarkSyncStep(b *testing.B) {
	const rows, dim = 1024, 256
	s := newStore(b, 0, spec("w", rows, dim, Adam(0.01, 0.9, 0.999, 1e-8), Sync, 1))
	g := make([]float32, rows*dim)
	b.Run("trainers=2/floats=262144", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(2 * rows * dim * 4)
		step, _ := s.Version("w")
		for b.Loop() {
			var wg sync.WaitGroup
			wg.Go(func() {
				if err := s.PushSync(context.Background(), "w", step, 1, 2, g); err != nil {
					b.Error(err)
				}
			})
			if err := s.PushSync(context.Background(), "w", step, 0, 2, g); err != nil {
				b.Fatal(err)
			}
			wg.Wait()
			step++
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/step")
	})
}

// BenchmarkClientPull pulls 1024 rows spread over 4 shards, through the
// encoded path (encode, Handle, decode) for the 3 remote ones.
func BenchmarkClientPull(b *testing.B) {
	const parts = 4
	sp := spec("e", benchRows, benchDim, SGD(1), Async, parts)
	stores := newCluster(b, parts, sp)
	tr, _ := wireCluster(stores)
	c, err := NewClient([]Spec{sp}, stores[0], tr)
	if err != nil {
		b.Fatal(err)
	}
	ids := benchIDs(benchBatch, benchRows, 3)
	dst := make([]float32, 0, benchBatch*benchDim)
	b.Run(fmt.Sprintf("parts=%d/rows=%d/dim=%d", parts, benchBatch, benchDim), func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(benchBatch * benchDim * 4)
		for b.Loop() {
			if dst, err = c.Pull(context.Background(), "e", ids, dst[:0]); err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b, benchBatch)
	})
}

func BenchmarkWire(b *testing.B) {
	m := PullResponse{Dim: benchDim, Rows: make([]float32, benchBatch*benchDim)}
	buf := AppendPullResponse(nil, &m)
	b.Run("encode/PullResponse", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			buf = AppendPullResponse(buf[:0], &m)
		}
	})
	b.Run("decode/PullResponse", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(buf)))
		var out PullResponse
		for b.Loop() {
			if err := DecodePullResponse(buf, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
