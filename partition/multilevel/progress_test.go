package multilevel

import (
	"context"
	"math"
	"testing"
)

func TestBisectWork(t *testing.T) {
	for _, c := range []struct {
		k    int
		want float64
	}{{1, 0}, {2, 1}, {3, 5.0 / 3}, {4, 2}, {8, 3}, {5, 1 + 0.4*1 + 0.6*(5.0/3)}} {
		if got := mlBisectWork(c.k); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("mlBisectWork(%d) = %g, want %g", c.k, got, c.want)
		}
	}
}

// TestPartitionProgress: the bisections report units that only grow, to
// a total fixed by n and k, credited by every goroutine as it goes (two
// cliques, whose bisections get 8 tries on two workers; an R-MAT graph
// with one try); what they credit is the total within a tenth, and the
// k-way refinement reports last.
func TestPartitionProgress(t *testing.T) {
	graphs := map[string]*Graph{"rmat": mlTestRMAT(t, 12, 1<<15, 3), "cliques": mlCliques(t, 2, 40)}
	for name, g := range graphs {
		for _, k := range []int{2, 3, 8} {
			type call struct {
				stage       string
				done, total int64
			}
			var calls []call
			opts := Options{Parts: k, Seed: 1, Workers: 2, Progress: func(stage string, done, total int64) {
				calls = append(calls, call{stage, done, total})
			}}
			total := int64(float64(g.NumVertices()) * mlBisectWork(k))
			r := newPartitionRun(context.Background(), g, opts)
			if _, err := r.rbScheme(g, k, 1.03); err != nil {
				t.Fatal(err)
			}
			// What the bisections credited, their tries each a share.
			if c := r.progress.done; c < 0.9*float64(total) || c > 1.1*float64(total) {
				t.Errorf("%s k=%d: bisections credited %.1f units, want about %d", name, k, c, total)
			}
			if len(calls) < 3 {
				t.Fatalf("%s k=%d: %d reports: %v", name, k, len(calls), calls)
			}
			last := calls[len(calls)-1]
			if last != (call{StageRefine, 1, 1}) {
				t.Errorf("%s k=%d: last report %+v, want the refinement's", name, k, last)
			}
			bis := calls[:len(calls)-1]
			var prev int64
			for i, c := range bis {
				if c.stage != StageBisect || c.total != total || c.done < prev || c.done > total {
					t.Fatalf("%s k=%d: report %d = %+v after done %d, want %s up to %d", name, k, i, c, prev, StageBisect, total)
				}
				prev = c.done
			}
			if end := bis[len(bis)-1]; end.done != total {
				t.Errorf("%s k=%d: bisections end at %d of %d", name, k, end.done, total)
			}
			if before := bis[len(bis)-2].done; float64(before) < 0.9*float64(total) {
				t.Errorf("%s k=%d: credited %d of %d before the end", name, k, before, total)
			}
		}
	}
}
