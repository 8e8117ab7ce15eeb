package main

import (
	"strings"
	"testing"

	"graphnode/partition"
)

func TestMedianRun(t *testing.T) {
	run := func(cut int64, wall, rss float64) measured {
		return measured{q: partition.PartitionQuality{EdgeCut: cut}, wall: wall, part: wall / 2, cpu: 2 * wall, rssMiB: rss}
	}
	got, err := medianRun([]measured{run(7, 0.30, 10), run(7, 0.10, 30), run(7, 0.20, 20)})
	if err != nil {
		t.Fatal(err)
	}
	if got.q.EdgeCut != 7 || got.wall != 0.20 || got.part != 0.10 || got.cpu != 0.40 || got.rssMiB != 20 {
		t.Errorf("odd runs: %+v, want the middle of each", got)
	}
	got, err = medianRun([]measured{run(7, 0.40, 10), run(7, 0.10, 40)})
	if err != nil {
		t.Fatal(err)
	}
	if got.wall != 0.25 || got.rssMiB != 25 {
		t.Errorf("even runs: wall %g, RSS %g; want 0.25, 25", got.wall, got.rssMiB)
	}
	if _, err := medianRun([]measured{run(7, 0.1, 1), run(8, 0.1, 1)}); err == nil || !strings.Contains(err.Error(), "not deterministic") {
		t.Errorf("runs with different cuts: err %v, want 'not deterministic'", err)
	}
}
