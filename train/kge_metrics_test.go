package train

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"graphnode/kv"
)

// kvSync is a Sync on a synchronous kv table with the "average"
// optimiser, as node/client.Sync is across hosts: the shard sums the
// pushes in float32, in trainer order, and divides by the world.
type kvSync struct {
	s           *kv.Store
	rank, world int
	buf         []float32
}

const kvSyncTable = "test.sync"

// kvSyncs are the Syncs of world trainers on one store's table of one
// row of width, the vectors' length at most.
func kvSyncs(t *testing.T, world, width int) []Sync {
	t.Helper()
	spec := kv.Spec{Name: kvSyncTable, Rows: 1, Dim: width, Init: kv.Init{Kind: kv.InitZeros}, Opt: kv.Average(),
		Mode: kv.Sync, Bounds: []uint64{0, 1}}
	s, err := kv.New(kv.Config{Part: 0, Tables: []kv.Spec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Sync, world)
	for r := range out {
		out[r] = &kvSync{s: s, rank: r, world: world, buf: make([]float32, width)}
	}
	return out
}

func (k *kvSync) AllReduce(ctx context.Context, step int, v []float32) error {
	clear(k.buf)
	copy(k.buf, v)
	if err := k.s.PushSync(ctx, kvSyncTable, uint64(step), k.rank, k.world, k.buf); err != nil {
		return err
	}
	rows, _, err := k.s.PullVersion(ctx, kvSyncTable, uint64(step)+1, []uint64{0}, nil)
	copy(v, rows)
	return err
}

// TestKGEMetricsMergedExactly: the metrics merged across trainers are
// those of a float64 computation over every rank. The sums behind them
// pass 2^24 (FB15k-237's 40932 ranks of a model early in training, at
// 14541 entities: Σrank about 3·10^8; Wikidata5M's about 2.4·10^10),
// where sums carried in float32 slots rounded: MR was off in the fourth
// decimal, MRR in the eighth digit.
func TestKGEMetricsMergedExactly(t *testing.T) {
	const world = 3
	for _, c := range []struct {
		name            string
		ranks, entities int
	}{
		{"fb15k-237", 40932, 14541},
		{"wikidata5m", 10266, 4594485},
	} {
		rng := rand.New(rand.NewPCG(uint64(c.ranks), 1))
		ranks := make([]int, c.ranks)
		for i := range ranks {
			// Half of them near the top, as a model that learnt something ranks.
			if i%2 == 0 {
				ranks[i] = 1 + rng.IntN(20)
			} else {
				ranks[i] = 1 + rng.IntN(c.entities)
			}
		}
		var want KGEMetrics
		for _, r := range ranks {
			want.add(r)
		}
		want = want.mean()
		for _, s := range []struct {
			name  string
			syncs []Sync
		}{
			{"local", NewLocalSync(world)},
			{"kv", kvSyncs(t, world, KGESyncLen)},
		} {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				got := make([]KGEMetrics, world)
				errs := make([]error, world)
				var wg sync.WaitGroup
				for r := range world {
					// Each trainer's share, as evaluate takes it.
					var m KGEMetrics
					for i := r; i < len(ranks); i += world {
						m.add(ranks[i])
					}
					k := &KGE{cfg: KGEConfig{Rank: r, World: world}, sync: s.syncs[r]}
					wg.Go(func() { got[r], errs[r] = k.mergeMetrics(context.Background(), m.mean(), make([]float32, KGESyncLen)) })
				}
				wg.Wait()
				for r := range world {
					if errs[r] != nil {
						t.Fatalf("rank %d: %v", r, errs[r])
					}
					g := got[r]
					if g.Ranks != want.Ranks || g.MR != want.MR || g.Hits1 != want.Hits1 || g.Hits3 != want.Hits3 || g.Hits10 != want.Hits10 ||
						math.Abs(g.MRR-want.MRR) > 1e-12*want.MRR {
						t.Errorf("rank %d: merged %+v,\nwant %+v (float64 over every rank): MR off by %.3g, MRR by %.3g",
							r, g, want, g.MR-want.MR, g.MRR-want.MRR)
					}
				}
			})
		}
	}
}

// TestKGEMetricsDigitsAtMaxWorld: digits of 255, the largest, come
// through both reductions exactly for every world kv allows, up to
// kv.MaxWorld trainers (2^16, whose division is exact, and 2^16-1,
// whose is not).
func TestKGEMetricsDigitsAtMaxWorld(t *testing.T) {
	// Digits 255, 255 of the count and the hits, 255 × 4, 15 of Σrank,
	// 255, 255 above 2^32 of Σ1/rank.
	const n, sumRank = 1<<16 - 1, 1<<36 - 1
	m := KGEMetrics{Ranks: n, MRR: 1, MR: float64(sumRank) / n, Hits1: 1, Hits3: 1, Hits10: 1}
	v := make([]float32, kgeMetricsLen)
	m.vector(v)
	for _, world := range []int{1, 3, 1000, kv.MaxWorld - 1, kv.MaxWorld} {
		want := KGEMetrics{Ranks: world * n, MRR: 1, MR: float64(world*sumRank) / float64(world*n), Hits1: 1, Hits3: 1, Hits10: 1}
		for _, reduce := range []struct {
			name string
			mean func() []float32
		}{
			{"kv", func() []float32 {
				// A kv shard's average (kv/sync.go, applyRoundLocked):
				// summed in float32, trainer by trainer, then divided.
				avg := make([]float32, len(v))
				for range world {
					for i, x := range v {
						avg[i] += x
					}
				}
				for i := range avg {
					avg[i] /= float32(world)
				}
				return avg
			}},
			{"local", func() []float32 {
				g := &localGroup{n: world}
				g.mu.vecs = make([][]float32, world)
				for r := range g.mu.vecs {
					g.mu.vecs[r] = slices.Clone(v)
				}
				g.reduceLocked()
				return g.mu.vecs[0]
			}},
		} {
			if got := kgeMetricsFrom(reduce.mean(), world); got != want {
				t.Errorf("world %d, %s: %+v, want %+v", world, reduce.name, got, want)
			}
		}
	}
}

// TestKGEDigitSumExact: every sum of world digits (at most 255) is
// read back from its mean as a kv shard (float32) and NewLocalSync
// (float64) compute it; the sums are exact in both (below 2^24), so the
// mean is the sum divided once. Rounded to float32, mean·world missed
// by one at world 40000 (sums just below 2^23, where float32's spacing
// is 1/2).
func TestKGEDigitSumExact(t *testing.T) {
	for _, world := range []int{1, 3, 1000, 40000, kv.MaxWorld - 1, kv.MaxWorld} {
		inv := 1 / float64(world)
		bad := 0
		for s := range (1<<kgeDigitBits-1)*world + 1 {
			kvMean := float32(s) / float32(world)
			localMean := float32(float64(s) * inv)
			for _, mean := range []float32{kvMean, localMean} {
				if got := meanSum(mean, world); got != float64(s) && bad < 5 {
					bad++
					t.Errorf("world %d: digits summing to %d averaged to %v, read back as %v", world, s, mean, got)
				}
			}
		}
	}
}
