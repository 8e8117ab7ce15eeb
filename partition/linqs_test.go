package partition

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadLINQS(t *testing.T) {
	const content = "p1\t1\t0\t1\tAI\np-2\t0\t0\t0\tDB\r\n9\t0\t1\t0\tAI\n"
	const cites = "p1\tp-2\np-2\t9\nx\tp1\n9\t9\n"
	for _, c := range []struct {
		name     string
		dangling Policy
		path     string // relative: "" = the directory
		gz       bool
		n        int
		src, dst []uint32
		labels   []int32
		stats    Stats
		err      string
	}{
		{name: "drop", dangling: Drop, n: 3, src: []uint32{1, 2, 2}, dst: []uint32{0, 1, 2}, labels: []int32{0, 1, 0},
			stats: Stats{Lines: 4, EdgesRead: 4, SelfLoops: 1, Dangling: 1, DanglingDrop: 1}},
		{name: "add gzip by cites path", dangling: Add, path: "g.cites", gz: true, n: 4, src: []uint32{1, 2, 0, 2}, dst: []uint32{0, 1, 3, 2},
			labels: []int32{0, 1, 0, -1}, stats: Stats{Lines: 4, EdgesRead: 4, SelfLoops: 1, Dangling: 1, MissingLabels: 1}},
		{name: "error", dangling: Error, path: "g.content", err: "partition: D/g.cites:3: paper \"x\" is not in D/g.content"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			rdWrite(t, dir, "g.content", content, c.gz)
			rdWrite(t, dir, "g.cites", cites, c.gz)
			g, err := Read(context.Background(), filepath.Join(dir, c.path), ReadOptions{Format: FormatLINQS, Dangling: c.dangling})
			if c.err != "" {
				rdWantLineError(t, err, strings.ReplaceAll(c.err, "D/", dir+"/"))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rdEq(t, "NumNodes", g.NumNodes, c.n)
			rdEq(t, "Names[:3]", g.IDs.Names[:3], []string{"p1", "p-2", "9"})
			rdEq(t, "Src", g.Src, c.src)
			rdEq(t, "Dst", g.Dst, c.dst)
			rdEq(t, "FeatDim", g.FeatDim, 3)
			rdEq(t, "Feat[:9]", g.Feat[:9], []float32{1, 0, 1, 0, 0, 0, 0, 1, 0})
			rdEq(t, "len(Feat)", len(g.Feat), 3*c.n)
			rdEq(t, "Labels", g.Labels, c.labels)
			rdEq(t, "ClassNames", g.ClassNames, []string{"AI", "DB"})
			rdEq(t, "Stats", g.Stats, c.stats)
		})
	}
}

func TestReadLINQSErrors(t *testing.T) {
	for _, c := range []struct{ content, cites, want string }{
		{"a\t1\t0\tX\nb\t1\tX\n", "", "D/g.content:2: got 3 fields, line 1 has 4 (id, 2 features, label)"},
		// A short first row sets the width: the error names it, not only
		// the correct row that disagrees with it.
		{"\na\t1\tX\nb\t1\t0\tX\n", "", "D/g.content:3: got 4 fields, line 2 has 3 (id, 1 features, label)"},
		{"a\t1\t0\tX\nb\t1\t0.5e\tX\n", "", "D/g.content:2: feature 2: \"0.5e\" is not a number"},
		{"a\t1\t0\tX\nb\tnan\t0\tX\n", "", "D/g.content:2: feature 1: \"nan\" is not a finite number"},
		{"a\t1\t0\tX\na\t1\t0\tX\n", "", "D/g.content:2: paper \"a\" listed twice"},
		// They became a class named "" and a paper named "".
		{"a\t1\t0\tX\nb\t1\t0\t\n", "", "D/g.content:2: paper \"b\": empty label (the last field)"},
		{"a\t1\t0\tX\n\t1\t0\tX\n", "", "D/g.content:2: empty paper id (the first field)"},
		{"a\t1\t0\tX\n", "a\ta\na a\n", "D/g.cites:2: want 2 fields (cited, citing), got 1"},
	} {
		dir := t.TempDir()
		rdWrite(t, dir, "g.content", c.content, false)
		rdWrite(t, dir, "g.cites", c.cites, false)
		_, err := Read(context.Background(), dir, ReadOptions{})
		rdWantLineError(t, err, "partition: "+strings.ReplaceAll(c.want, "D/", dir+"/"))
	}
	dir := t.TempDir()
	rdWrite(t, dir, "g.content", "a\t1\tX\n", false)
	rdWrite(t, dir, "g.cites", "a\tb\n", false)
	_, err := Read(context.Background(), dir, ReadOptions{Format: FormatLINQS, Dangling: Add, MissingLabel: Error})
	if want := "partition: " + dir + "/g.cites: node \"b\" has no label: bad input"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

func TestReadLINQSReal(t *testing.T) {
	for _, c := range []struct {
		name                            string
		nodes, feats, classes           int
		lines, edges, dangling, selfLps int64
		first                           string
	}{
		{"cora", 2708, 1433, 7, 5429, 5429, 0, 0, "31336"},
		{"citeseer", 3312, 3703, 6, 4732, 4732 - 17, 17, 124, "100157"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := rdDataDir(t, c.name)
			g, err := Read(context.Background(), dir, ReadOptions{Format: FormatLINQS})
			if err != nil {
				t.Fatal(err)
			}
			rdEq(t, "NumNodes", g.NumNodes, c.nodes)
			rdEq(t, "FeatDim", g.FeatDim, c.feats)
			rdEq(t, "NumClasses", g.NumClasses, c.classes)
			rdEq(t, "Lines", g.Stats.Lines, c.lines)
			rdEq(t, "edges", int64(len(g.Src)), c.edges)
			rdEq(t, "Dangling", g.Stats.Dangling, c.dangling)
			rdEq(t, "DanglingDrop", g.Stats.DanglingDrop, c.dangling)
			rdEq(t, "SelfLoops", g.Stats.SelfLoops, c.selfLps)
			rdEq(t, "Name", g.Name, c.name)
			rdEq(t, "len(Feat)", len(g.Feat), c.nodes*c.feats)
			rdEq(t, "MissingLabels", g.Stats.MissingLabels, int64(0))
			rdEq(t, "Names[0]", g.IDs.Names[0], c.first)
			if c.name == "cora" {
				// cora.cites line 1 is "35\t1033": paper 1033 cites 35.
				rdEq(t, "edge 0", [2]string{g.IDs.Names[g.Src[0]], g.IDs.Names[g.Dst[0]]}, [2]string{"1033", "35"})
				rdEq(t, "ClassNames[0]", g.ClassNames[0], "Case_Based")
			}
		})
	}
}
