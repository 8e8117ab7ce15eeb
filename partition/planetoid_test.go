package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"graphnode/csr"
)

// planetoidFixture is a small Planetoid dataset: 2 training rows, 503
// rows of allx (the 500 validation nodes fit), test nodes 505 and 503
// (tx row 0 is node 505), and node 504 between them, no test node but a
// key of the graph: zero features, no label (CiteSeer's case).
type planetoidFixture struct {
	x, allx, tx    [][]float32
	y, ally, ty    []int
	test           string
	keys           []int
	adj            map[int][]int
	classes, width int
	txWidth        int // 0: width
}

func newPlanetoidFixture() *planetoidFixture {
	f := &planetoidFixture{classes: 3, width: 3, test: "505\n503\n"}
	for i := range 503 {
		row := make([]float32, 3)
		row[i%3] = float32(i + 1)
		f.allx = append(f.allx, row)
		f.ally = append(f.ally, i%3)
	}
	f.x, f.y = f.allx[:2], f.ally[:2]
	f.tx = [][]float32{{0, 0.5, 0}, {7, 0, 0}}
	f.ty = []int{2, 0}
	f.keys = []int{0, 1, 2, 504, 505}
	f.adj = map[int][]int{0: {1, 1}, 1: {0}, 2: {2}, 504: {503}, 505: {0}}
	return f
}

// write writes the files ind.<name>.* into dir, but those in skip.
func (f *planetoidFixture) write(t *testing.T, dir, name string, skip ...string) {
	t.Helper()
	files := map[string][]byte{
		"x": pickleDenseCSR(f.x, f.width), "tx": pickleDenseCSR(f.tx, cmp.Or(f.txWidth, f.width)), "allx": pickleDenseCSR(f.allx, f.width),
		"y": pickleOneHot(f.y, f.classes), "ty": pickleOneHot(f.ty, f.classes), "ally": pickleOneHot(f.ally, f.classes),
		"graph": pickleGraph(f.keys, f.adj), "test.index": []byte(f.test),
	}
	for s, b := range files {
		if slices.Contains(skip, s) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "ind."+name+"."+s), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadPlanetoid(t *testing.T) {
	dir := t.TempDir()
	newPlanetoidFixture().write(t, dir, "toy")
	g, err := Read(context.Background(), dir, ReadOptions{Format: FormatPlanetoid})
	if err != nil {
		t.Fatal(err)
	}
	rdEq(t, "Name", g.Name, filepath.Base(dir))
	rdEq(t, "NumNodes", g.NumNodes, 506)
	rdEq(t, "FeatDim", g.FeatDim, 3)
	rdEq(t, "NumClasses", g.NumClasses, 3)
	rdEq(t, "LabelDim", g.LabelDim, 1)
	rdEq(t, "IDs", g.IDs, IDMap{})
	row := func(v int) []float32 { return g.Feat[v*3 : v*3+3] }
	rdEq(t, "feat 0", row(0), []float32{1, 0, 0})
	rdEq(t, "feat 502", row(502), []float32{0, 503, 0})
	rdEq(t, "feat 503 (tx row 1)", row(503), []float32{7, 0, 0})
	rdEq(t, "feat 504 (no row)", row(504), []float32{0, 0, 0})
	rdEq(t, "feat 505 (tx row 0)", row(505), []float32{0, 0.5, 0})
	rdEq(t, "labels", g.Labels[500:], []int32{500 % 3, 501 % 3, 502 % 3, 0, -1, 2})
	rdEq(t, "Train", g.Train, []uint32{0, 1})
	rdEq(t, "len(Val)", len(g.Val), 500)
	rdEq(t, "Val ends", []uint32{g.Val[0], g.Val[499]}, []uint32{2, 501})
	rdEq(t, "Test", g.Test, []uint32{505, 503})
	// Listed pairs, in the file's order, then the reverses the file
	// lacks: 503 -> 504 and 0 -> 505.
	rdEq(t, "Src", g.Src, []uint32{0, 0, 1, 2, 504, 505, 503, 0})
	rdEq(t, "Dst", g.Dst, []uint32{1, 1, 0, 2, 503, 0, 504, 505})
	rdEq(t, "Stats", g.Stats, Stats{EdgesRead: 6, SelfLoops: 1, ReverseAdded: 2, MissingLabels: 1})

	adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rdEq(t, "edges", adj.NumEdges(), uint64(7))
	rdEq(t, "row 0", adj.Row(0), []uint32{1, 505})
	// The reader's reverses stay counted (they were reported as 0).
	rdEq(t, "Stats.ReverseAdded after BuildAdj", g.Stats.ReverseAdded, int64(2))
	removed, err := Split(g, SplitOptions{Mode: SplitKeep})
	rdEq(t, "split", [4]any{removed, err, len(g.Val), g.Test}, [4]any{0, error(nil), 500, []uint32{503, 505}})

	// The same from one of the files, and by name among several datasets.
	newPlanetoidFixture().write(t, dir, "other")
	for _, c := range []struct {
		path, name string
	}{{filepath.Join(dir, "ind.toy.graph"), ""}, {dir, "toy"}} {
		g, err := Read(context.Background(), c.path, ReadOptions{Format: FormatPlanetoid, Name: c.name})
		if err != nil {
			t.Fatal(err)
		}
		rdEq(t, c.path+" NumNodes", g.NumNodes, 506)
	}
}

// TestReadPlanetoidMissingLabel: a missing label is an error when asked,
// naming the file that lacks it. Node 504, which test.index leaves out
// among the test nodes (CiteSeer's 2407), was said to lack a label in
// ally, which has 503 rows.
func TestReadPlanetoidMissingLabel(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(f *planetoidFixture)
		want   string // after "partition: D/"
	}{
		{"no test row", func(f *planetoidFixture) {},
			"ind.toy.test.index: node 504 has no label: it lies among the test nodes (503..505, after allx's 503 rows) but test.index does not list it, so ty holds no label for it (and tx no features: they are zero)"},
		{"zero row of ally", func(f *planetoidFixture) { f.ally[7], f.keys, f.test = -1, f.keys[:3], "503\n504\n" },
			"ind.toy.ally: node 7 has no label: row 7 is all zeros"},
		{"zero row of ty", func(f *planetoidFixture) {
			f.ty[1], f.test = -1, "505\n503\n504\n"
			f.tx, f.ty = append(f.tx, []float32{0, 0, 1}), append(f.ty, 1)
		},
			"ind.toy.ty: test node 503 has no label: its row, 1, is all zeros"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			f := newPlanetoidFixture()
			c.change(f)
			f.write(t, dir, "toy")
			_, err := Read(context.Background(), dir, ReadOptions{Format: FormatPlanetoid, MissingLabel: Error})
			rdEq(t, "error", fmt.Sprint(err), "partition: "+dir+"/"+c.want+": bad input")
			// Kept, the node is counted, once.
			g, err := Read(context.Background(), dir, ReadOptions{Format: FormatPlanetoid})
			if err != nil {
				t.Fatal(err)
			}
			rdEq(t, "missing labels kept", g.Stats.MissingLabels, int64(1))
		})
	}
}

func TestReadPlanetoidErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(f *planetoidFixture)
		skip   string
		want   string // after "partition: D/"
	}{
		{name: "no allx", skip: "allx", want: ": Planetoid dataset toy lacks ind.toy.allx (allx holds the features of every node but the test nodes: without it they would have none)"},
		{name: "tx width", change: func(f *planetoidFixture) { f.tx[0], f.txWidth = append(f.tx[0], 1), 4 }, want: "ind.toy.tx: 4 feature columns, allx has 3"},
		{name: "not one-hot", change: func(f *planetoidFixture) { f.ty[1] = 5 }, want: "ind.toy.ty: ndarray"},
		{name: "ty rows", change: func(f *planetoidFixture) { f.ty = f.ty[:1] }, want: "ind.toy.ty: 1 rows, tx has 2"},
		{name: "test count", change: func(f *planetoidFixture) { f.test = "505\n" }, want: "ind.toy.test.index: 1 test nodes, tx has 2 rows"},
		{name: "test in allx", change: func(f *planetoidFixture) { f.test = "505\n17\n" }, want: "ind.toy.test.index: test node 17 is a row of allx (503 rows)"},
		{name: "test twice", change: func(f *planetoidFixture) { f.test = "505\n505\n" }, want: "ind.toy.test.index:2: node 505 listed twice (line 1)"},
		{name: "test not a number", change: func(f *planetoidFixture) { f.test = "505\nx\n" }, want: "ind.toy.test.index:2: \"x\" is not a node index"},
		{name: "gap not stated", change: func(f *planetoidFixture) { f.keys = f.keys[:3]; f.adj[0] = []int{1} },
			want: "ind.toy.test.index: node 504, below the largest test node 505, is neither a test node nor in the graph"},
		{name: "far test node", change: func(f *planetoidFixture) { f.test = "4000000000\n503\n" },
			want: "ind.toy.test.index: test node 4000000000: the 3999999498 nodes after allx's 503 rows are more than the 2 test nodes and 5 graph keys can state"},
		{name: "graph beyond", change: func(f *planetoidFixture) { f.adj[1] = []int{600} }, want: "ind.toy.graph: node 600 beyond the 506 nodes of allx and test.index"},
		{name: "x not allx", change: func(f *planetoidFixture) { f.x = [][]float32{{1, 0, 0}, {0, 3, 0}} }, want: "ind.toy.x: row 1 differs from row 1 of allx (x must be the first rows of allx)"},
		{name: "y not ally", change: func(f *planetoidFixture) { f.y = []int{0, 2} }, want: "ind.toy.y: row 1 differs from row 1 of ally (y must be the first rows of ally)"},
		{name: "no room for val", change: func(f *planetoidFixture) { f.x, f.y = f.allx[:4], f.ally[:4] },
			want: "ind.toy.x: 4 training rows and 500 validation nodes after them pass the 503 rows of allx"},
		{name: "wide", change: func(f *planetoidFixture) { f.width = 1 << 20 }, want: "ind.toy.allx: 506 nodes × 1048576 feature columns"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			f := newPlanetoidFixture()
			if c.change != nil {
				c.change(f)
			}
			if c.name == "not one-hot" {
				// A one-hot row with two ones.
				f.ty = []int{2, 0}
				f.write(t, dir, "toy")
				v := make([]int32, 6)
				v[2], v[3], v[4] = 1, 1, 1
				os.WriteFile(filepath.Join(dir, "ind.toy.ty"), newPkw().ndarray([]int{2, 3}, "i4", i32Bytes(v)).op(pkStop).b, 0o644)
				c.want = "ind.toy.ty: row 1 is not one-hot: column 1 is 1"
			} else {
				f.write(t, dir, "toy", c.skip)
			}
			_, err := Read(context.Background(), dir, ReadOptions{Format: FormatPlanetoid})
			want := "partition: " + dir + "/" + c.want
			if c.skip != "" {
				want = "partition: " + dir + c.want
			}
			if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, ErrFormat) {
				t.Errorf("err = %v\nwant %s... (bad input)", err, want)
			}
		})
	}

	// Which dataset: several without a name, a name not there, none.
	dir := t.TempDir()
	newPlanetoidFixture().write(t, dir, "b")
	newPlanetoidFixture().write(t, dir, "a")
	for _, c := range []struct{ name, want string }{
		{"", "partition: D: several Planetoid datasets (ind.a.*, ind.b.*); choose one with the name (--name): bad input"},
		{"c", "partition: D: no Planetoid files ind.c.*; there are ind.a.*, ind.b.*: bad input"},
	} {
		_, err := Read(context.Background(), dir, ReadOptions{Format: FormatPlanetoid, Name: c.name})
		rdEq(t, "err "+c.name, fmt.Sprint(err), strings.ReplaceAll(c.want, "D", dir))
	}
	// A corrupt pickle names the file and the offset.
	os.WriteFile(filepath.Join(dir, "ind.a.graph"), []byte{pkProto, 2, 'I'}, 0o644)
	_, err := Read(context.Background(), dir, ReadOptions{Format: FormatPlanetoid, Name: "a"})
	rdEq(t, "corrupt", fmt.Sprint(err), "partition: "+dir+"/ind.a.graph: pickle offset 2: opcode 0x49: not one a Planetoid file uses: bad input")
}

func TestDetectPlanetoid(t *testing.T) {
	dir := t.TempDir()
	newPlanetoidFixture().write(t, dir, "toy")
	for _, p := range []string{dir, filepath.Join(dir, "ind.toy.graph"), filepath.Join(dir, "ind.toy.test.index")} {
		f, err := DetectFormat(p)
		rdEq(t, "format of "+p, [2]any{f, err}, [2]any{FormatPlanetoid, error(nil)})
	}
	// A directory with the LINQS files too stays linqs, as before.
	rdWrite(t, dir, "toy.content", "a\t1\tX\n", false)
	f, _ := DetectFormat(dir)
	rdEq(t, "with .content", f, FormatLINQS)
}
