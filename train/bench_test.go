package train

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"graphnode/sample"
)

// records is a Batches that hands out pre-encoded records in turn, one
// per epoch: the trainer's cost without the sampler's.
type records struct {
	recs [][]byte
	i    int
	end  bool
}

func (r *records) Next(context.Context) (sample.View, error) {
	if r.end = !r.end; !r.end {
		return sample.View{}, ErrEndOfEpoch
	}
	rec := r.recs[r.i%len(r.recs)]
	r.i++
	return sample.Decode(rec)
}

// BenchmarkTrainStep is one training step (forward, backward, sync,
// Adam) of a 3-layer GraphSAGE on a batch sampled at fanouts 15,10,5
// from a random graph of 100k nodes with in-degree 20 (the shape of an
// ogbn-products batch: 100 features, 47 classes). Metrics: batches/s,
// sampled edges/s, and the share of the step in dense products (gemm-%)
// and in mean aggregation and its adjoint (agg-%).
//
//	go test -run '^$' -bench TrainStep -benchtime 3x ./train/
func BenchmarkTrainStep(b *testing.B) {
	const nodes, degree, feat, classes = 100_000, 20, 100, 47
	g := blockGraph(3, nodes, degree, feat, classes, 0.5, 1)
	p := g.mem(b, sample.F32)
	for _, c := range []struct {
		fanouts       []int
		batch, hidden int
	}{
		{[]int{15, 10, 5}, 1024, 256},
	} {
		name := fmt.Sprintf("fanout=%s/batch=%d/feat=%d/hidden=%d/classes=%d",
			strings.Trim(strings.Join(strings.Fields(fmt.Sprint(c.fanouts)), ","), "[]"), c.batch, feat, c.hidden, classes)
		b.Run(name, func(b *testing.B) {
			src := &records{}
			var xBytes, edges int64
			m := newBatches(b, p, ids(nodes, 0, 1), c.fanouts, sample.PlanOptions{BatchSize: c.batch, Shuffle: true, Seed: 1})
			for range 2 {
				v, err := m.Next(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				src.recs = append(src.recs, slices.Clone(m.rec))
				xBytes += int64(len(v.X))
				edges += int64(v.Header.NumEdges)
			}
			cfg := DefaultConfig()
			cfg.FeatDim, cfg.Classes, cfg.Layers, cfg.Hidden = feat, classes, len(c.fanouts), c.hidden
			tr, err := New(cfg, NoSync{})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(xBytes / int64(len(src.recs)))
			b.ReportAllocs()
			var st EpochStats
			for b.Loop() {
				s, err := tr.trainEpoch(context.Background(), 0, src)
				if err != nil {
					b.Fatal(err)
				}
				st.Batches += s.Batches
				st.Edges += s.Edges
				st.TrainTime += s.TrainTime
				st.GEMMTime += s.GEMMTime
				st.AggTime += s.AggTime
			}
			b.ReportMetric(st.BatchesPerSec(), "batches/s")
			b.ReportMetric(st.EdgesPerSec(), "edges/s")
			b.ReportMetric(100*st.GEMMTime.Seconds()/st.TrainTime.Seconds(), "gemm-%")
			b.ReportMetric(100*st.AggTime.Seconds()/st.TrainTime.Seconds(), "agg-%")
		})
	}
}
