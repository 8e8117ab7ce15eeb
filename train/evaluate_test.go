package train

import (
	"testing"
	"time"

	"graphnode/sample"
)

// TestAccuracyRecount: the val and test accuracy Run reports for a job
// of three trainers (unequal shares, seeds without a label among them)
// is the fraction of labelled seeds whose argmax, recomputed seed by seed
// with the reference forward on the trained parameters, is their label.
func TestAccuracyRecount(t *testing.T) {
	g := randGraph(11, 240, 1200, 6, 4)
	p := g.mem(t, sample.F32)
	cfg := DefaultConfig()
	cfg.FeatDim, cfg.Classes = g.d, g.classes
	cfg.Hidden, cfg.Epochs, cfg.Seed, cfg.LR = 8, 3, 2, 0.05
	full := []int{-1, -1}
	split := map[string][]uint64{"val": ids(170, 100, 1), "test": ids(240, 170, 1)}
	const world = 3
	trs, res, errs := runRanks(t, cfg, world, func(r int) Data {
		opt := func(bs int, shuffle bool) sample.PlanOptions {
			return sample.PlanOptions{BatchSize: bs, Shuffle: shuffle, Seed: 4, Rank: r, WorldSize: world}
		}
		return Data{
			Train: newBatches(t, p, ids(100, 0, 1), full, opt(16, true)),
			Val:   newBatches(t, p, split["val"], full, opt(7, false)),
			Test:  newBatches(t, p, split["test"], full, opt(7, false)),
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	ref := newNet[float64](cfg.dims(), cfg.Seed, 1, time.Now)
	for i, x := range trs[0].Params() {
		ref.params[i] = float64(x)
	}
	recount := func(name string) (acc float64, labelled int) {
		right := 0
		for _, id := range split[name] {
			if g.labels[id] < 0 {
				continue
			}
			v := oneBatch(t, p, []uint64{id}, full)
			z := fullForward(ref, &v)[0]
			best := 0
			for j := range z {
				if z[j] > z[best] {
					best = j
				}
			}
			labelled++
			if best == int(g.labels[id]) {
				right++
			}
		}
		return float64(right) / float64(labelled), labelled
	}
	last := res[0].Epochs[len(res[0].Epochs)-1]
	for _, c := range []struct {
		name string
		got  float64
	}{{"val", last.ValAcc}, {"test", last.TestAcc}} {
		want, n := recount(c.name)
		if n == len(split[c.name]) {
			t.Fatalf("%s: every seed is labelled; the test wants some without a label", c.name)
		}
		t.Logf("%s: reported %v, recounted %v over %d labelled of %d seeds", c.name, c.got, want, n, len(split[c.name]))
		if c.got != want {
			t.Errorf("%s accuracy after the last epoch: reported %v, recounted %v over %d labelled seeds", c.name, c.got, want, n)
		}
	}
	for r := 1; r < world; r++ {
		if l := res[r].Epochs[len(res[r].Epochs)-1]; l.ValAcc != last.ValAcc || l.TestAcc != last.TestAcc {
			t.Errorf("rank %d reports val %v test %v, rank 0 val %v test %v", r, l.ValAcc, l.TestAcc, last.ValAcc, last.TestAcc)
		}
	}
}
