package train

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkKGEStep runs training steps of every model on a graph of
// FB15k-237's shape (14541 entities, 237 relations, random triples) with
// DGL-KE's default sizes (hidden 400, batches of 1024, chunks of 256
// positives sharing 256 negatives) against an in-process kv store with
// Adagrad: the trainer's compute and the store's pulls and pushes,
// without a socket. It reports positive triples per second.
func BenchmarkKGEStep(b *testing.B) {
	const ents, rels = 14541, 237
	rng := rand.New(rand.NewPCG(1, 1))
	ts := make([]Triple, 1<<16)
	for i := range ts {
		ts[i] = Triple{Head: rng.Uint64N(ents), Rel: uint32(rng.IntN(rels)), Tail: rng.Uint64N(ents)}
	}
	for _, model := range kgeModelNames() {
		b.Run("model="+model+"/hidden=400/batch=1024/neg=256", func(b *testing.B) {
			cfg := DefaultKGEConfig()
			cfg.Model, cfg.Entities, cfg.Relations, cfg.StepsPerEpoch = model, ents, rels, 1
			k, err := NewKGE(cfg, kgeStore(b, cfg, 0.1), NoSync{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			step := 0
			for b.Loop() {
				lo := (step * cfg.BatchSize) % len(ts)
				if _, _, err := k.trainStep(context.Background(), ts[lo:lo+cfg.BatchSize], step%2 == 1); err != nil {
					b.Fatal(fmt.Errorf("step %d: %w", step, err))
				}
				step++
			}
			b.ReportMetric(float64(step*cfg.BatchSize)/b.Elapsed().Seconds(), "triples/s")
		})
	}
}
