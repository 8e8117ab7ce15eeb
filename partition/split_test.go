package partition

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseSplit(t *testing.T) {
	tests := []struct {
		in      string
		want    SplitOptions
		wantErr string
	}{
		{"", SplitOptions{Mode: SplitKeep}, ""},
		{"keep", SplitOptions{Mode: SplitKeep}, ""},
		{"random:0.8,0.1,0.1", SplitOptions{Mode: SplitRandom, Fractions: [3]float64{0.8, 0.1, 0.1}}, ""},
		{"random: 0.5, 0.25 ,0", SplitOptions{Mode: SplitRandom, Fractions: [3]float64{0.5, 0.25, 0}}, ""},
		{"per-class:20,500,1000", SplitOptions{Mode: SplitPerClass, PerClass: 20, Val: 500, Test: 1000}, ""},
		{"keep:1", SplitOptions{}, "keep takes no arguments"},
		{"planetoid", SplitOptions{}, "want keep, random:TRAIN,VAL,TEST or per-class:TRAIN,VAL,TEST"},
		{"random", SplitOptions{}, "random wants three comma-separated values"},
		{"random:0.8,0.2", SplitOptions{}, "random wants three comma-separated values"},
		{"random:0.8,0.2,x", SplitOptions{}, `value 3 ("x") is not a fraction`},
		{"random:1.5,0,0", SplitOptions{}, `value 1 ("1.5") is not a fraction`},
		{"random:0.8,0.2,0.1", SplitOptions{}, "fractions add up to 1.1, more than 1"},
		{"random:0.8,0.3,0.1", SplitOptions{}, "fractions add up to 1.2, more than 1"},
		{"random:0.3333334,0.3333333,0.3333334", SplitOptions{}, "fractions add up to 1.0000001, more than 1"},
		{"per-class:20,-1,5", SplitOptions{}, `value 2 ("-1") is not a count`},
	}
	for _, tt := range tests {
		got, err := ParseSplit(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "partition: split ") {
				t.Errorf("ParseSplit(%q) err = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSplit(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if back, err := ParseSplit(got.String()); err != nil || back != got {
			t.Errorf("ParseSplit(%q.String() = %q) = %+v, %v", tt.in, got.String(), back, err)
		}
	}
}

// labelledGraph has n nodes of 3 classes (v % 3); every 10th node has no label.
func labelledGraph(n int) *Graph {
	g := &Graph{Name: "l", NumNodes: n, LabelDim: 1, NumClasses: 3, Labels: make([]int32, n)}
	for v := range n {
		g.Labels[v] = int32(v % 3)
		if v%10 == 9 {
			g.Labels[v] = -1
		}
	}
	return g
}

func checkSplits(t *testing.T, g *Graph) {
	t.Helper()
	seen := make(map[uint32]bool)
	for _, s := range [][]uint32{g.Train, g.Val, g.Test} {
		if !slices.IsSorted(s) {
			t.Errorf("split not sorted: %v", s)
		}
		for _, v := range s {
			if seen[v] {
				t.Errorf("node %d in two splits", v)
			}
			seen[v] = true
			if g.Labels[v] < 0 {
				t.Errorf("unlabelled node %d in a split", v)
			}
		}
	}
}

func TestSplitRandom(t *testing.T) {
	g := labelledGraph(1000) // 900 labelled
	opts := SplitOptions{Mode: SplitRandom, Fractions: [3]float64{0.5, 0.2, 0.1}, Seed: 7}
	if _, err := Split(g, opts); err != nil {
		t.Fatal(err)
	}
	if len(g.Train) != 450 || len(g.Val) != 180 || len(g.Test) != 90 {
		t.Errorf("sizes %d/%d/%d, want 450/180/90", len(g.Train), len(g.Val), len(g.Test))
	}
	checkSplits(t, g)
	h := labelledGraph(1000)
	Split(h, opts)
	if !slices.Equal(g.Train, h.Train) || !slices.Equal(g.Test, h.Test) {
		t.Error("same seed, different split")
	}
	opts.Seed = 8
	Split(h, opts)
	if slices.Equal(g.Train, h.Train) {
		t.Error("different seeds, same split")
	}
}

func TestSplitPerClass(t *testing.T) {
	g := labelledGraph(1000)
	if _, err := Split(g, SplitOptions{Mode: SplitPerClass, PerClass: 20, Val: 500, Test: 300, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	per := map[int32]int{}
	for _, v := range g.Train {
		per[g.Labels[v]]++
	}
	if len(g.Train) != 60 || per[0] != 20 || per[1] != 20 || per[2] != 20 || len(g.Val) != 500 || len(g.Test) != 300 {
		t.Errorf("train %d %v, val %d, test %d; want 60 (20 each), 500, 300", len(g.Train), per, len(g.Val), len(g.Test))
	}
	checkSplits(t, g)

	_, err := Split(labelledGraph(1000), SplitOptions{Mode: SplitPerClass, PerClass: 20, Val: 800, Test: 100})
	if err == nil || !strings.Contains(err.Error(), "wants 800 val + 100 test nodes, but only 840 labelled nodes remain after 60 training nodes") {
		t.Errorf("err = %v", err)
	}
	multi := &Graph{NumNodes: 2, LabelDim: 2, Labels: []int32{0, 1, 1, 0}}
	if _, err := Split(multi, SplitOptions{Mode: SplitPerClass}); err == nil || !strings.Contains(err.Error(), "one class label per node (label dim 2)") {
		t.Errorf("multi-hot: err = %v", err)
	}
}

func TestSplitKeep(t *testing.T) {
	g := labelledGraph(20)
	g.Train = []uint32{5, 1, 9, 1} // 9 is unlabelled; 1 repeated
	g.Test = []uint32{19, 3}       // 19 is unlabelled
	removed, err := Split(g, SplitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if removed != 2 || !slices.Equal(g.Train, []uint32{1, 5}) || !slices.Equal(g.Test, []uint32{3}) || g.Val != nil {
		t.Errorf("removed %d, train %v, val %v, test %v", removed, g.Train, g.Val, g.Test)
	}
	g.Val = []uint32{20}
	if _, err := Split(g, SplitOptions{}); err == nil || !strings.Contains(err.Error(), "node index 20 beyond 20 nodes") {
		t.Errorf("err = %v", err)
	}
}

// TestSplitKeepOverlap: input splits that share a node (an OGB split/
// folder whose train.csv and test.csv both list it) are refused, naming
// the node by its input id and both splits; they were kept as they were,
// the node trained on and tested.
func TestSplitKeepOverlap(t *testing.T) {
	g := labelledGraph(20)
	g.IDs.Ints = make([]uint64, 20)
	for i := range g.IDs.Ints {
		g.IDs.Ints[i] = 100 + uint64(i)
	}
	g.Train, g.Val, g.Test = []uint32{1, 5, 7}, []uint32{2}, []uint32{6, 7}
	_, err := Split(g, SplitOptions{})
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "node 107 is in both the train and the test split of the input") {
		t.Fatalf("overlapping train and test: %v", err)
	}
	g.Train, g.Val, g.Test = []uint32{1}, []uint32{2, 3}, []uint32{3}
	if _, err := Split(g, SplitOptions{}); err == nil || !strings.Contains(err.Error(), "node 103 is in both the val and the test split") {
		t.Fatalf("overlapping val and test: %v", err)
	}

	d := t.TempDir()
	rdWrite(t, d, "raw/edge.csv", "0,1\n1,2\n2,3\n3,0\n", false)
	rdWrite(t, d, "raw/node-label.csv", "0\n1\n0\n1\n", false)
	rdWrite(t, d, "split/s/train.csv", "0\n1\n", false)
	rdWrite(t, d, "split/s/test.csv", "1\n", false)
	og, err := Read(context.Background(), d, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Split(og, SplitOptions{}); err == nil || !strings.Contains(err.Error(), "node 1 is in both the train and the test split") {
		t.Fatalf("OGB split files that overlap: %v", err)
	}
}

func FuzzParseSplit(f *testing.F) {
	for _, o := range []SplitOptions{
		{Mode: SplitKeep},
		{Mode: SplitRandom, Fractions: [3]float64{0.8, 0.1, 0.1}},
		{Mode: SplitPerClass, PerClass: 20, Val: 500, Test: 1000},
	} {
		f.Add(o.String())
	}
	f.Add("random:1,0,0")
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseSplit(s)
		if err != nil {
			return
		}
		back, err := ParseSplit(o.String())
		if err != nil || back != o {
			t.Fatalf("ParseSplit(%q) = %+v; its String %q parses to %+v, %v", s, o, o.String(), back, err)
		}
	})
}
