package train

import (
	"context"
	"math"
)

// KGEMetrics are link-prediction metrics over every ranked head and tail:
// rank = 1 + the candidates scoring at least the true entity's score
// (ties count against the model, as DGL-KE counts them; a NaN true score
// ranks last).
type KGEMetrics struct {
	Ranks                int // head and tail predictions ranked
	MRR, MR              float64
	Hits1, Hits3, Hits10 float64
}

// The metric sums cross the all-reduce as whole numbers, each in
// kgeDigits base-256 digits of one float32 slot apiece, lowest first: the
// count of ranks, Σ1/rank in units of kgeInvUnit, Σrank, and the hits at
// 1, 3 and 10. A float32 slot holds a sum exactly only below 2^24, which
// Σrank passes at once (FB15k-237's 40932 test ranks early in training:
// about 3·10^8), and a reduction rounds again wherever a partial sum or
// the mean does: MR and MRR came out about 10^-7 off their float64
// values. Digits come through both of the package's reductions exactly,
// as node/client.Agree's pieces do: the digits of W <= kv.MaxWorld (2^16)
// trainers, at most 255 each, sum to at most 255·2^16 < 2^24, exactly in
// float32 in any order (a kv shard sums in float32, trainer by trainer,
// then divides by W; NewLocalSync in float64); their mean, below 2^8, is
// within half of float32's spacing there, 2^-17, of the true one, so
// mean·W lies within W·2^-17 <= 1/2 of the digits' sum (exactly on it for
// W = 2^16, a power of two) and rounds back to it. kgeMetricsFrom
// reassembles each sum in float64, exact below 2^53.
const (
	kgeDigitBits = 8
	kgeDigits    = 64 / kgeDigitBits // of a uint64
	kgeSums      = 6
	// kgeInvUnit is the unit of Σ1/rank: a trainer's sum is rounded to
	// it, by at most 2^-33, 2^-17 over 2^16 trainers. A trainer's sum
	// fits 64 bits of units while it ranks fewer than 2^32 times.
	kgeInvUnit = 0x1p-32
)

// kgeMetricsLen is the length of KGEMetrics.vector.
const kgeMetricsLen = kgeSums * kgeDigits

// vector writes the sums behind m (see kgeDigits) into v, kgeMetricsLen
// values, to be averaged across trainers.
func (m KGEMetrics) vector(v []float32) {
	n := float64(m.Ranks)
	// m holds means: times n, each is within a rounding or two of its
	// sum, a whole number (of units) that Round gives back.
	sums := [kgeSums]float64{n, m.MRR * n / kgeInvUnit, m.MR * n, m.Hits1 * n, m.Hits3 * n, m.Hits10 * n}
	for i, s := range sums {
		x := uint64(math.Round(s))
		for j := range kgeDigits {
			v[i*kgeDigits+j] = float32(x >> (j * kgeDigitBits) & (1<<kgeDigitBits - 1))
		}
	}
}

// kgeMetricsFrom is the metrics of world trainers whose vectors averaged
// to mean: the inverse of vector on the sum of their sums.
func kgeMetricsFrom(mean []float32, world int) KGEMetrics {
	var sums [kgeSums]float64
	for i := range sums {
		for j := kgeDigits - 1; j >= 0; j-- {
			sums[i] = sums[i]*(1<<kgeDigitBits) + meanSum(mean[i*kgeDigits+j], world)
		}
	}
	n := sums[0]
	if n == 0 {
		return KGEMetrics{}
	}
	return KGEMetrics{Ranks: int(n), MRR: sums[1] * kgeInvUnit / n, MR: sums[2] / n,
		Hits1: sums[3] / n, Hits3: sums[4] / n, Hits10: sums[5] / n}
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
	// The mean, not allReduce's sum in float32 (see meanSum).
	if err := k.allReduceMean(ctx, vec); err != nil {
		return KGEMetrics{}, err
	}
	return kgeMetricsFrom(vec[3:], k.cfg.World), nil
}
