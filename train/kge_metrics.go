package train

import "context"

// KGEMetrics are link-prediction metrics over every ranked head and tail:
// rank = 1 + the candidates scoring at least the true entity's score
// (ties count against the model, as DGL-KE counts them; a NaN true score
// ranks last).
type KGEMetrics struct {
	Ranks                int // head and tail predictions ranked
	MRR, MR              float64
	Hits1, Hits3, Hits10 float64
}

// kgeMetricsLen is the length of KGEMetrics.vector.
const kgeMetricsLen = 6

// vector writes the sums behind m (count, Σ1/rank, Σrank, hits) into v,
// to be added across trainers.
func (m KGEMetrics) vector(v []float32) {
	n := float64(m.Ranks)
	v[0], v[1], v[2] = float32(n), float32(m.MRR*n), float32(m.MR*n)
	v[3], v[4], v[5] = float32(m.Hits1*n), float32(m.Hits3*n), float32(m.Hits10*n)
}

// kgeMetricsFrom is the inverse of vector on summed vectors.
func kgeMetricsFrom(v []float32) KGEMetrics {
	n := float64(v[0])
	if n == 0 {
		return KGEMetrics{}
	}
	return KGEMetrics{Ranks: int(v[0] + 0.5), MRR: float64(v[1]) / n, MR: float64(v[2]) / n,
		Hits1: float64(v[3]) / n, Hits3: float64(v[4]) / n, Hits10: float64(v[5]) / n}
}

// add accumulates one rank as sums (mean turns them into means).
func (m *KGEMetrics) add(rank int) {
	m.Ranks++
	m.MRR += 1 / float64(rank)
	m.MR += float64(rank)
	for _, h := range []struct {
		at  int
		dst *float64
	}{{1, &m.Hits1}, {3, &m.Hits3}, {10, &m.Hits10}} {
		if rank <= h.at {
			*h.dst++
		}
	}
}

func (m KGEMetrics) mean() KGEMetrics {
	if m.Ranks == 0 {
		return m
	}
	n := float64(m.Ranks)
	return KGEMetrics{Ranks: m.Ranks, MRR: m.MRR / n, MR: m.MR / n, Hits1: m.Hits1 / n, Hits3: m.Hits3 / n, Hits10: m.Hits10 / n}
}

// mergeMetrics is the metrics of every trainer's ranks, m this
// trainer's, merged in the next round of the sync table (vec,
// KGESyncLen long, is its scratch).
func (k *KGE) mergeMetrics(ctx context.Context, m KGEMetrics, vec []float32) (KGEMetrics, error) {
	clear(vec)
	m.vector(vec[3:])
	if err := k.allReduce(ctx, vec); err != nil {
		return KGEMetrics{}, err
	}
	return kgeMetricsFrom(vec[3:]), nil
}
