package partition

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadEdgeList(t *testing.T) {
	for _, c := range []struct {
		name     string
		input    string
		opts     ReadOptions
		src, dst []uint32
		n        int
		ints     []uint64
		names    []string
		weights  []float32
		stats    Stats
	}{
		{name: "dense ints", input: "0 1\n1 2\n2 0\n",
			src: []uint32{0, 1, 2}, dst: []uint32{1, 2, 0}, n: 3, stats: Stats{Lines: 3, EdgesRead: 3}},
		{name: "sparse ints ascending", input: "10 20\n20 5\n",
			src: []uint32{1, 2}, dst: []uint32{2, 0}, n: 3, ints: []uint64{5, 10, 20}, stats: Stats{Lines: 2, EdgesRead: 2}},
		{name: "comments crlf blanks", input: "# c\r\n% konect\r\n\r\n0\t1 # trailing\r\n  1 ,  1 % self\r\n",
			src: []uint32{0, 1}, dst: []uint32{1, 1}, n: 2, stats: Stats{Lines: 2, EdgesRead: 2, SelfLoops: 1}},
		{name: "csv header auto", input: "src,dst\n3,4\n4,3\n",
			src: []uint32{0, 1}, dst: []uint32{1, 0}, n: 2, ints: []uint64{3, 4}, stats: Stats{Lines: 2, EdgesRead: 2}},
		{name: "header yes", input: "from to\n0 1\n", opts: ReadOptions{Header: HeaderYes},
			src: []uint32{0}, dst: []uint32{1}, n: 2, stats: Stats{Lines: 1, EdgesRead: 1}},
		{name: "header yes strings", input: "from to\nb a\n", opts: ReadOptions{Header: HeaderYes},
			src: []uint32{0}, dst: []uint32{1}, n: 2, names: []string{"b", "a"}, stats: Stats{Lines: 1, EdgesRead: 1}},
		{name: "header no", input: "0 1\n", opts: ReadOptions{Header: HeaderNo},
			src: []uint32{0}, dst: []uint32{1}, n: 2, stats: Stats{Lines: 1, EdgesRead: 1}},
		{name: "string ids", input: "a b\nb c#x\n",
			src: []uint32{0, 1}, dst: []uint32{1, 2}, n: 3, names: []string{"a", "b", "c#x"}, stats: Stats{Lines: 2, EdgesRead: 2}},
		{name: "single string line", input: "a b\n",
			src: []uint32{0}, dst: []uint32{1}, n: 2, names: []string{"a", "b"}, stats: Stats{Lines: 1, EdgesRead: 1}},
		{name: "ints then strings", input: "1 2\n2 x\n",
			src: []uint32{0, 1}, dst: []uint32{1, 2}, n: 3, names: []string{"1", "2", "x"}, stats: Stats{Lines: 2, EdgesRead: 2}},
		{name: "strings, ints, strings", input: "a b\n1 2\nc d\n", // the first line was an edge, not a header
			src: []uint32{2, 0, 4}, dst: []uint32{3, 1, 5}, n: 6, names: []string{"1", "2", "a", "b", "c", "d"}, stats: Stats{Lines: 3, EdgesRead: 3}},
		{name: "header of 3 fields, ints, strings", input: "from to w\n1 2\nc d\n",
			src: []uint32{0, 2}, dst: []uint32{1, 3}, n: 4, names: []string{"1", "2", "c", "d"}, stats: Stats{Lines: 2, EdgesRead: 2}},
		// A leading zero makes the ids strings as spelt (it made them
		// integers: "00260882" read before a string id and after it
		// became two nodes, "260882" and "00260882").
		{name: "leading zeros are names", input: "00260881 00260882\n00260882 n01\n",
			src: []uint32{0, 1}, dst: []uint32{1, 2}, n: 3, names: []string{"00260881", "00260882", "n01"}, stats: Stats{Lines: 2, EdgesRead: 2}},
		{name: "ints then a leading zero", input: "1 2\n02 2\n",
			src: []uint32{0, 2}, dst: []uint32{1, 1}, n: 3, names: []string{"1", "2", "02"}, stats: Stats{Lines: 2, EdgesRead: 2}},
		{name: "forced ints read zeros", input: "007 7\n", opts: ReadOptions{IDs: IDsInt},
			src: []uint32{0}, dst: []uint32{0}, n: 1, ints: []uint64{7}, stats: Stats{Lines: 1, EdgesRead: 1, SelfLoops: 1}},
		{name: "forced strings keep zeros", input: "007 7\n", opts: ReadOptions{IDs: IDsString},
			src: []uint32{0}, dst: []uint32{1}, n: 2, names: []string{"007", "7"}, stats: Stats{Lines: 1, EdgesRead: 1}},
		{name: "weighted", input: "0 1 0.5\n1 0 2e1\n", opts: ReadOptions{Weighted: true},
			src: []uint32{0, 1}, dst: []uint32{1, 0}, n: 2, weights: []float32{0.5, 20}, stats: Stats{Lines: 2, EdgesRead: 2}},
		{name: "wide ids", input: "5000000000 1\n1 2\n",
			src: []uint32{2, 0}, dst: []uint32{0, 1}, n: 3, ints: []uint64{1, 2, 5000000000}, stats: Stats{Lines: 2, EdgesRead: 2}},
		{name: "very sparse ids", input: "4000000000 0\n",
			src: []uint32{1}, dst: []uint32{0}, n: 2, ints: []uint64{0, 4000000000}, stats: Stats{Lines: 1, EdgesRead: 1}},
		{name: "empty", input: "# nothing\n", n: 0},
	} {
		for _, gz := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/gz=%v", c.name, gz), func(t *testing.T) {
				path := rdWrite(t, t.TempDir(), "edges.txt", c.input, gz)
				g, err := Read(context.Background(), path, c.opts)
				if err != nil {
					t.Fatal(err)
				}
				if len(g.Src) == 0 && c.src == nil {
					g.Src, g.Dst = nil, nil
				}
				rdEq(t, "Src", g.Src, c.src)
				rdEq(t, "Dst", g.Dst, c.dst)
				rdEq(t, "NumNodes", g.NumNodes, c.n)
				rdEq(t, "Ints", g.IDs.Ints, c.ints)
				rdEq(t, "Names", g.IDs.Names, c.names)
				if len(g.Weights) == 0 && c.weights == nil {
					g.Weights = nil
				}
				rdEq(t, "Weights", g.Weights, c.weights)
				rdEq(t, "Stats", g.Stats, c.stats)
				rdEq(t, "Name", g.Name, "edges")
			})
		}
	}
}

func TestReadEdgeListErrors(t *testing.T) {
	for _, c := range []struct {
		name, input string
		opts        ReadOptions
		want        string
	}{
		{"third column", "0 1\n0 1 2\n", ReadOptions{}, "F:2: want 2 fields, got 3 (a third column needs the weighted option)"},
		{"one field", "# c\n0 1\n0\n", ReadOptions{}, "F:3: want 2 fields, got 1"},
		{"empty field", "0,,1\n", ReadOptions{}, "F:1: empty field before ','"},
		{"trailing comma", "0,1,\n", ReadOptions{}, "F:1: empty field after ','"},
		{"bad weight", "0 1 1\n1 2 x\n", ReadOptions{Weighted: true}, "F:2: weight \"x\" is not a number"},
		{"infinite weight", "0 1 1\n1 2 -inf\n", ReadOptions{Weighted: true}, "F:2: weight \"-inf\" is not a finite number"},
		{"int ids", "0 1\n1 b\n", ReadOptions{IDs: IDsInt}, "F:2: node id \"b\" is not an integer"},
		{"held line bad", "a b c\nd e\n", ReadOptions{}, "F:1: want 2 fields, got 3 (a third column needs the weighted option)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := rdWrite(t, t.TempDir(), "e.csv", c.input, true)
			_, err := Read(context.Background(), path, c.opts)
			rdWantLineError(t, err, "partition: "+path+strings.TrimPrefix(c.want, "F"))
		})
	}
}

func TestReadEdgeListNodeFile(t *testing.T) {
	for _, c := range []struct {
		name     string
		nodes    string
		dangling Policy
		src, dst []uint32
		ints     []uint64
		names    []string
		n        int
		stats    Stats
		err      string
	}{
		{name: "drop", nodes: "0\n1\n2\n5\n", dangling: Drop, src: []uint32{0, 2}, dst: []uint32{1, 0},
			ints: []uint64{0, 1, 2, 5}, n: 4, stats: Stats{Lines: 3, EdgesRead: 3, Dangling: 1, DanglingDrop: 1}},
		{name: "default is drop", nodes: "0\n1\n2\n5\n", src: []uint32{0, 2}, dst: []uint32{1, 0},
			ints: []uint64{0, 1, 2, 5}, n: 4, stats: Stats{Lines: 3, EdgesRead: 3, Dangling: 1, DanglingDrop: 1}},
		{name: "add", nodes: "# ids\n5\n0\n1\n2\n", dangling: Add, src: []uint32{0, 1, 2}, dst: []uint32{1, 4, 0},
			ints: []uint64{0, 1, 2, 5, 7}, n: 5, stats: Stats{Lines: 3, EdgesRead: 3, Dangling: 1}},
		{name: "error", nodes: "0\n1\n2\n", dangling: Error, err: "E:2: node 7 is not in the node file N"},
		{name: "dense node file", nodes: "0\n1\n2\n3\n4\n5\n6\n7\n", dangling: Error, src: []uint32{0, 1, 2}, dst: []uint32{1, 7, 0}, n: 8,
			stats: Stats{Lines: 3, EdgesRead: 3}},
		{name: "string node file", nodes: "2\n1\nzero\n0\n", dangling: Drop, src: []uint32{3, 0}, dst: []uint32{1, 3},
			names: []string{"2", "1", "zero", "0"}, n: 4, stats: Stats{Lines: 3, EdgesRead: 3, Dangling: 1, DanglingDrop: 1}},
		{name: "string node file add", nodes: "2\n1\nzero\n0\n", dangling: Add, src: []uint32{3, 1, 0}, dst: []uint32{1, 4, 3},
			names: []string{"2", "1", "zero", "0", "7"}, n: 5, stats: Stats{Lines: 3, EdgesRead: 3, Dangling: 1}},
		{name: "twice", nodes: "0\n1\n0\n", err: "partition: N: node 0 listed twice (second time as id number 3): bad input"},
		// "07" is a name, not 7: the edge 1 7 is dangling (it was the
		// node file's "07" read as 7, then named "7" by the edges' ids).
		{name: "leading zero", nodes: "0\n1\n2\n07\n", dangling: Drop, src: []uint32{0, 2}, dst: []uint32{1, 0},
			names: []string{"0", "1", "2", "07"}, n: 4, stats: Stats{Lines: 3, EdgesRead: 3, Dangling: 1, DanglingDrop: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			edges := rdWrite(t, dir, "e.txt", "0 1\n1 7\n2 0\n", false)
			nodes := rdWrite(t, dir, "n.txt", c.nodes, true)
			g, err := Read(context.Background(), edges, ReadOptions{NodeFile: nodes, Dangling: c.dangling})
			if c.err != "" {
				want := strings.ReplaceAll(strings.ReplaceAll(c.err, "N", nodes), "E:", "partition: "+edges+":")
				if err == nil || err.Error() != want {
					t.Fatalf("err = %v, want %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rdEq(t, "Src", g.Src, c.src)
			rdEq(t, "Dst", g.Dst, c.dst)
			rdEq(t, "Ints", g.IDs.Ints, c.ints)
			rdEq(t, "Names", g.IDs.Names, c.names)
			rdEq(t, "NumNodes", g.NumNodes, c.n)
			rdEq(t, "Stats", g.Stats, c.stats)
		})
	}
}

func TestReadEdgeListLabels(t *testing.T) {
	for _, c := range []struct {
		name, edges, labels string
		opts                ReadOptions
		n, dim, classes     int
		lab                 []int32
		classNames          []string
		ints                []uint64
		names               []string
		stats               Stats
		err                 string
	}{
		{name: "single", edges: "0 1\n1 2\n2 3\n", labels: "0 A\n1 B\n3 A\n", n: 4, dim: 1, classes: 2,
			lab: []int32{0, 1, -1, 0}, classNames: []string{"A", "B"}, stats: Stats{Lines: 3, EdgesRead: 3, MissingLabels: 1}},
		{name: "missing error", edges: "0 1\n1 2\n2 3\n", labels: "0 A\n1 B\n3 A\n", opts: ReadOptions{MissingLabel: Error},
			err: "partition: L: node 2 has no label: bad input"},
		{name: "multi", edges: "0 1\n1 2\n2 3\n", labels: "0,A\n0,B\n1,B\n1,B\n", n: 4, dim: 2, classes: 2,
			lab: []int32{1, 1, 0, 1, -1, -1, -1, -1}, classNames: []string{"A", "B"}, stats: Stats{Lines: 3, EdgesRead: 3, MissingLabels: 2}},
		{name: "int labels", edges: "0 1\n1 2\n2 3\n", labels: "0 10\n1 9\n2 10\n3 9\n", n: 4, dim: 1, classes: 2,
			lab: []int32{1, 0, 1, 0}, classNames: []string{"9", "10"}, stats: Stats{Lines: 3, EdgesRead: 3}},
		{name: "dangling drop", edges: "0 1\n", labels: "0 A\n9 B\n", n: 2, dim: 1, classes: 2,
			lab: []int32{0, -1}, classNames: []string{"A", "B"}, stats: Stats{Lines: 1, EdgesRead: 1, Dangling: 1, DanglingDrop: 1, MissingLabels: 1}},
		{name: "dangling add", edges: "0 1\n", labels: "0 A\n9 B\n", opts: ReadOptions{Dangling: Add}, n: 3, dim: 1, classes: 2,
			lab: []int32{0, -1, 1}, classNames: []string{"A", "B"}, ints: []uint64{0, 1, 9},
			stats: Stats{Lines: 1, EdgesRead: 1, Dangling: 1, MissingLabels: 1}},
		{name: "dangling error", edges: "0 1\n", labels: "0 A\n9 B\n", opts: ReadOptions{Dangling: Error},
			err: "partition: L:2: node \"9\" is not a node of the graph"},
		{name: "string add", edges: "a b\n", labels: "b x\nc y\n", opts: ReadOptions{Dangling: Add}, n: 3, dim: 1, classes: 2,
			lab: []int32{-1, 0, 1}, classNames: []string{"x", "y"}, names: []string{"a", "b", "c"},
			stats: Stats{Lines: 1, EdgesRead: 1, Dangling: 1, MissingLabels: 1}},
		// -1 and nan mark a node without a label, as in OGB's
		// node-label.csv: not a class "-1" that shifts every other.
		{name: "missing marks", edges: "0 1\n1 2\n2 3\n", labels: "0 0\n1 -1\n2 1\n3 NaN\n", n: 4, dim: 1, classes: 2,
			lab: []int32{0, -1, 1, -1}, classNames: []string{"0", "1"}, stats: Stats{Lines: 3, EdgesRead: 3, MissingLabels: 2}},
		{name: "missing mark beside a label", edges: "0 1\n1 2\n2 3\n", labels: "0 A\n0 -1\n1 B\n2 A\n3 nan\n", n: 4, dim: 1, classes: 2,
			lab: []int32{0, 1, 0, -1}, classNames: []string{"A", "B"}, stats: Stats{Lines: 3, EdgesRead: 3, MissingLabels: 1}},
		{name: "missing mark adds a dangling node", edges: "0 1\n", labels: "0 A\n9 -1\n", opts: ReadOptions{Dangling: Add}, n: 3, dim: 1, classes: 1,
			lab: []int32{0, -1, -1}, classNames: []string{"A"}, ints: []uint64{0, 1, 9},
			stats: Stats{Lines: 1, EdgesRead: 1, Dangling: 1, MissingLabels: 2}},
		{name: "bad line", edges: "0 1\n", labels: "0 A\n1\n", err: "partition: L:2: want 2 fields (id label), got 1"},
		{name: "not int", edges: "0 1\n", labels: "x A\n", err: "partition: L:1: node id \"x\" is not an integer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			edges := rdWrite(t, dir, "e.txt", c.edges, false)
			c.opts.LabelFile = rdWrite(t, dir, "l.txt", c.labels, false)
			g, err := Read(context.Background(), edges, c.opts)
			if c.err != "" {
				want := strings.ReplaceAll(c.err, "L", c.opts.LabelFile)
				if err == nil || err.Error() != want {
					t.Fatalf("err = %v, want %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rdEq(t, "NumNodes", g.NumNodes, c.n)
			rdEq(t, "LabelDim", g.LabelDim, c.dim)
			rdEq(t, "NumClasses", g.NumClasses, c.classes)
			rdEq(t, "Labels", g.Labels, c.lab)
			rdEq(t, "ClassNames", g.ClassNames, c.classNames)
			rdEq(t, "Ints", g.IDs.Ints, c.ints)
			rdEq(t, "Names", g.IDs.Names, c.names)
			rdEq(t, "Stats", g.Stats, c.stats)
		})
	}
}

func TestReadEdgeListBlogCatalog(t *testing.T) {
	dir := rdDataDir(t, "blogcatalog")
	g, err := Read(context.Background(), filepath.Join(dir, "edges.csv"), ReadOptions{
		NodeFile: filepath.Join(dir, "nodes.csv"), LabelFile: filepath.Join(dir, "group-edges.csv"), Dangling: Error})
	if err != nil {
		t.Fatal(err)
	}
	rdEq(t, "NumNodes", g.NumNodes, 10312)
	rdEq(t, "edges", len(g.Src), 333983)
	rdEq(t, "LabelDim", g.LabelDim, 39)
	rdEq(t, "NumClasses", g.NumClasses, 39)
	rdEq(t, "ClassNames[38]", g.ClassNames[38], "39")
	rdEq(t, "Ints[0], Ints[last]", [2]uint64{g.IDs.Ints[0], g.IDs.Ints[10311]}, [2]uint64{1, 10312})
	ones, missing := 0, 0
	for i := range g.NumNodes {
		row := g.Labels[i*39 : (i+1)*39]
		if row[0] == -1 {
			missing++
		}
		for _, v := range row {
			if v == 1 {
				ones++
			}
		}
	}
	rdEq(t, "memberships", ones, 14476)
	rdEq(t, "MissingLabels", g.Stats.MissingLabels, int64(missing))
	rdEq(t, "Dangling", g.Stats.Dangling, int64(0))
	rdEq(t, "Lines", g.Stats.Lines, int64(333983))
}

func TestSplitFields(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
		msg  string
	}{
		{"a b", []string{"a", "b"}, ""},
		{" a\t\tb  ", []string{"a", "b"}, ""},
		{"a,b,c", []string{"a", "b", "c"}, ""},
		{"a , b ,c", []string{"a", "b", "c"}, ""},
		{"a b # c d", []string{"a", "b"}, ""},
		{"a%b c%", []string{"a%b", "c%"}, ""},
		{"% all", nil, ""},
		{"a b c d e", []string{"a", "b", "c", "d"}, ""},
		{",a", nil, "empty field before ','"},
		{"a,,b", []string{"a"}, "empty field before ','"},
		{"a, # x", []string{"a"}, "empty field after ','"},
	} {
		var f [edgeSplit][]byte
		n, msg := splitFields([]byte(c.line), &f)
		var got []string
		for _, b := range f[:min(n, edgeSplit)] {
			got = append(got, string(b))
		}
		if msg != c.msg || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("splitFields(%q) = %q, %q; want %q, %q", c.line, got, msg, c.want, c.msg)
		}
		if c.line == "a b c d e" && n != 5 {
			t.Errorf("n = %d, want 5", n)
		}
	}
}

// formatEdgeLine is the encoder of the edge-list line format: sep 0 is a
// space, 1 a tab, 2 a comma, 3 a comma with blanks; a comment is
// appended when given.
func formatEdgeLine(a, b string, sep uint8, weight *float32, comment string) string {
	s := []string{" ", "\t", ",", " ,\t"}[sep%4]
	line := a + s + b
	if weight != nil {
		line += s + fmt.Sprint(*weight)
	}
	if comment != "" {
		line += " #" + comment
	}
	return line
}

// validField: what formatEdgeLine can carry in a field.
func validField(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t,\n\r") && s[0] != '#' && s[0] != '%'
}

func FuzzEdgeLine(f *testing.F) {
	f.Add("0", "1", uint8(0), float32(0.5), true, "x")
	f.Add("paper:17", "C#", uint8(2), float32(-3e-7), false, "")
	f.Add("00260881", "a%b", uint8(3), float32(1e30), true, "# , %")
	f.Add("12", "0034", uint8(3), float32(0), false, "")
	f.Fuzz(func(t *testing.T, a, b string, sep uint8, w float32, weighted bool, comment string) {
		if !validField(a) || !validField(b) || strings.ContainsAny(comment, "\n\r") || w != w {
			t.Skip()
		}
		var wp *float32
		if weighted {
			wp = &w
		}
		line := formatEdgeLine(a, b, sep, wp, comment)
		var fs [edgeSplit][]byte
		n, msg := splitFields([]byte(line), &fs)
		want := 2
		if weighted {
			want = 3
		}
		if msg != "" || n != want || string(fs[0]) != a || string(fs[1]) != b {
			t.Fatalf("splitFields(%q) = %d %q %q; want %q %q", line, n, fs[:min(n, edgeSplit)], msg, a, b)
		}
		if x, y, ok := fastPair([]byte(line)); ok { // the fast path agrees with the general one
			if weighted || comment != "" || x != mustUint(t, a) || y != mustUint(t, b) {
				t.Fatalf("fastPair(%q) = %d, %d", line, x, y)
			}
		}
		if weighted {
			got, ok := parseFloat32(fs[2])
			if !ok || got != w {
				t.Fatalf("weight %q parsed as %v %v, want %v", fs[2], got, ok, w)
			}
		}
	})
}

// FuzzReadEdgeList feeds arbitrary bytes to the edge-list reader: it must
// not panic, and what it accepts must be a consistent graph.
func FuzzReadEdgeList(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for i := range 20 {
		w := float32(rng.NormFloat64())
		b.WriteString(formatEdgeLine(fmt.Sprint(rng.IntN(10)), fmt.Sprint(rng.IntN(1<<uint(i+1))), uint8(i), &w, "c") + "\n")
	}
	f.Add(b.Bytes(), uint8(1))
	f.Add([]byte("src,dst\n1,2\n2,x\n"), uint8(0))
	f.Add([]byte("a b\r\nb c\n5000000000 1"), uint8(2))
	f.Add([]byte("a\rb c\r\n"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		in, err := wrapInput(bytes.NewReader(data), "fuzz", int64(len(data)))
		if err != nil {
			return
		}
		opts := ReadOptions{Weighted: mode&1 != 0, IDs: []string{IDsAuto, IDsInt, IDsString}[int(mode>>1)%3],
			Dangling: Drop, MissingLabel: Keep}
		g, err := readEdgeListFrom(context.Background(), in, opts)
		if err != nil {
			return
		}
		if len(g.Src) != len(g.Dst) || (opts.Weighted && len(g.Weights) != len(g.Src)) {
			t.Fatalf("%d src, %d dst, %d weights", len(g.Src), len(g.Dst), len(g.Weights))
		}
		for i := range g.Src {
			if int(g.Src[i]) >= g.NumNodes || int(g.Dst[i]) >= g.NumNodes {
				t.Fatalf("edge %d: %d -> %d with %d nodes", i, g.Src[i], g.Dst[i], g.NumNodes)
			}
		}
		if (g.IDs.Ints != nil && len(g.IDs.Ints) != g.NumNodes) || (g.IDs.Names != nil && len(g.IDs.Names) != g.NumNodes) {
			t.Fatalf("ids: %d ints, %d names, %d nodes", len(g.IDs.Ints), len(g.IDs.Names), g.NumNodes)
		}
		for i, name := range g.IDs.Names { // names.txt can hold them all
			if nameBreak(name) >= 0 {
				t.Fatalf("name %d (%q) holds a line break", i, name)
			}
		}
	})
}

// BenchmarkReadEdgeList reads a generated edge list of 2M edges (an
// R-MAT-like skew is irrelevant to parsing; ids are uniform) in several
// spellings. MB/s is of the file as stored (compressed for gzip).
func BenchmarkReadEdgeList(b *testing.B) {
	const n, m = 1 << 20, 2 << 20
	rng := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct {
		name string
		line func(u, v int) string
		gz   bool
		opts ReadOptions
	}{
		{"ints-tab", func(u, v int) string { return fmt.Sprintf("%d\t%d\n", u, v) }, false, ReadOptions{}},
		{"ints-csv-gzip", func(u, v int) string { return fmt.Sprintf("%d,%d\n", u, v) }, true, ReadOptions{}},
		{"gappy-ints", func(u, v int) string { return fmt.Sprintf("%d %d\n", u*3+7, v*3+7) }, false, ReadOptions{}},
		{"sparse-ints", func(u, v int) string { return fmt.Sprintf("%d %d\n", u<<12, v<<12) }, false, ReadOptions{}},
		{"weighted", func(u, v int) string { return fmt.Sprintf("%d %d %.4f\n", u, v, float64(u%97)/97) }, false, ReadOptions{Weighted: true}},
		{"strings", func(u, v int) string { return fmt.Sprintf("n%d n%d\n", u, v) }, false, ReadOptions{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var sb strings.Builder
			for range m {
				sb.WriteString(c.line(rng.IntN(n), rng.IntN(n)))
			}
			path := rdWrite(b, b.TempDir(), "e.txt", sb.String(), c.gz)
			b.ReportAllocs()
			b.SetBytes(int64(len(mustRead(b, path))))
			for b.Loop() {
				g, err := Read(context.Background(), path, c.opts)
				if err != nil || len(g.Src) != m {
					b.Fatal(err, len(g.Src))
				}
			}
			b.ReportMetric(float64(m)*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
		})
	}
}

func mustUint(t *testing.T, s string) uint64 {
	v, ok := parseUint([]byte(s))
	if !ok {
		t.Fatalf("fastPair accepted %q", s)
	}
	return v
}
