package main

import (
	"math"
	"strings"
	"testing"

	"graphnode/partition/multilevel"
)

func TestMedianRun(t *testing.T) {
	run := func(cut int64, wall, rss float64) measured {
		return measured{q: multilevel.Quality{EdgeCut: cut}, wall: wall, part: wall / 2, cpu: 2 * wall, rssMiB: rss}
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

func TestSetBalance(t *testing.T) {
	// A star: vertex 0 joined to 1..11.
	n := 12
	g := &multilevel.Graph{Xadj: make([]int64, n+1), Ncon: 1}
	for u := 1; u < n; u++ {
		g.Adjncy = append(g.Adjncy, uint32(u))
	}
	g.Xadj[1] = int64(n - 1)
	for v := 1; v < n; v++ {
		g.Adjncy = append(g.Adjncy, 0)
		g.Xadj[v+1] = g.Xadj[v] + 1
	}
	if err := setBalance(g, []string{"nodes", "edges", "train"}); err != nil {
		t.Fatal(err)
	}
	if g.Ncon != 3 || len(g.Vwgt) != 3*n {
		t.Fatalf("ncon %d, %d weights; want 3, %d", g.Ncon, len(g.Vwgt), 3*n)
	}
	for v := range n {
		deg, train := int64(1), int64(0)
		if v == 0 {
			deg = int64(n - 1)
		}
		if v%10 == 0 {
			train = 1
		}
		if got := g.Vwgt[3*v : 3*v+3]; got[0] != 1 || got[1] != deg || got[2] != train {
			t.Errorf("vertex %d: weights %v, want [1 %d %d]", v, got, deg, train)
		}
	}
	if err := setBalance(g, []string{"nodes", "degree"}); err == nil || !strings.Contains(err.Error(), `"degree"`) {
		t.Errorf("unknown constraint: err %v, want it named", err)
	}
	if got := balanceText([]float64{1.0291, 1.03}); got != "1.029/1.030" {
		t.Errorf("balanceText = %q", got)
	}
}

// A ratio of ours to gpmetis's where gpmetis's is 0 (a disconnected
// graph cut between its components) was 0, which the table reads as
// ours better than anything; it is +Inf when ours is not 0 too.
func TestRatio(t *testing.T) {
	for _, c := range []struct {
		a, b int64
		want float64
	}{{3, 4, 0.75}, {0, 4, 0}, {0, 0, 1}, {5, 0, math.Inf(1)}} {
		if got := ratio(c.a, c.b); got != c.want {
			t.Errorf("ratio(%d, %d) = %g, want %g", c.a, c.b, got, c.want)
		}
	}
}
