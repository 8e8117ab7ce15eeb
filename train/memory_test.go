package train

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"graphnode/sample"
)

func TestBlockNodes(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		batch   int
		fanouts []int
		graph   uint64
		want    []float64
	}{
		{4, []int{2, 3}, 0, []float64{4, 12, 36}},
		{4, []int{2, 3}, 1000, []float64{4, 12, 36}},
		{4, []int{2, 3}, 20, []float64{4, 12, 20}},
		{4, []int{-1, 3}, 0, []float64{4, inf, inf}},
		{4, []int{-1, 3}, 100, []float64{4, 100, 100}},
		{50, []int{5}, 10, []float64{10, 10}}, // no more seeds than nodes
		{0, []int{-1}, 0, []float64{0, 0}},
		{1024, []int{15, 10, 5}, 0, []float64{1024, 1024 + 15360, 1024 + 15360 + 153600, 1024 + 15360 + 153600 + 768000}},
	} {
		if got := BlockNodes(tc.batch, tc.fanouts, tc.graph); !slices.Equal(got, tc.want) {
			t.Errorf("BlockNodes(%d, %v, %d) = %v, want %v", tc.batch, tc.fanouts, tc.graph, got, tc.want)
		}
	}
}

// TestBatchBytes: after a training batch and a larger evaluation batch,
// each run with both orders of aggregation, the trainer's batch buffers
// take exactly what BatchBytes says for those batches' node counts, and
// BlockNodes bounds the counts.
func TestBatchBytes(t *testing.T) {
	g := randGraph(3, 400, 2400, 8, 3)
	p := g.mem(t, sample.F32)
	for _, layers := range []int{2, 3} {
		t.Run(fmt.Sprintf("layers=%d", layers), func(t *testing.T) {
			fanouts := []int{4, 3, 2}[:layers]
			cfg := DefaultConfig()
			cfg.FeatDim, cfg.Classes, cfg.Layers, cfg.Hidden, cfg.Threads = g.d, g.classes, layers, 16, 1
			tr, err := New(cfg, NoSync{})
			if err != nil {
				t.Fatal(err)
			}
			n := tr.net
			n.store = storeDense
			tv := oneBatch(t, p, ids(400, 0, 40), fanouts) // 10 seeds
			ev := oneBatch(t, p, ids(400, 1, 8), fanouts)  // 50 seeds
			for _, order := range []int{orderProjectFirst, orderAggregateFirst} {
				n.order = order
				clear(tr.vec)
				if err := tr.batchGrad(0, &tv); err != nil {
					t.Fatal(err)
				}
				if _, _, err := n.evaluate(&ev, false); err != nil {
					t.Fatal(err)
				}
			}
			have := cap(n.x) + cap(n.b.labels) + cap(n.dLogits)
			for _, ly := range n.layers {
				have += cap(ly.inv) + cap(ly.out) + cap(ly.agg) + cap(ly.dAgg) + cap(ly.dIn)
			}
			blocks := func(v *sample.View, batch int) []float64 {
				var cum []float64
				for k, c := range v.NumSampledNodes {
					if k > 0 {
						c += int64(cum[k-1])
					}
					cum = append(cum, float64(c))
				}
				bound := BlockNodes(batch, fanouts, uint64(g.n))
				for k := range cum {
					if cum[k] > bound[k] {
						t.Errorf("a batch of %d seeds reached %v nodes within k hops, BlockNodes says at most %v", batch, cum, bound)
						break
					}
				}
				return cum
			}
			train, eval := blocks(&tv, 10), blocks(&ev, 50)
			if eval[layers] <= train[layers] {
				t.Fatalf("the evaluation batch (%v) is no larger than the training batch (%v)", eval, train)
			}
			model := cfg.BatchBytes(nil, nil)
			if got, want := cfg.BatchBytes(train, eval)-model, 4*float64(have); got != want {
				t.Errorf("BatchBytes for %v and %v: %v beyond the model, the buffers hold %v", train, eval, got, want)
			}
			if least := 4 * float64(len(n.params)+len(tr.vec)+len(tr.opt.m)+len(tr.opt.v)); model < least {
				t.Errorf("BatchBytes without batches %v, the model's vectors take %v", model, least)
			}
		})
	}
}
