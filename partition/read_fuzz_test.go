package partition

import (
	"context"
	"errors"
	"os"
	"testing"
)

// The directory readers turn text a user downloaded into the arrays every
// later stage indexes without checking again. These fuzz tests feed them
// arbitrary file contents: a reader must either refuse the input with an
// error that says it is bad input (a *LineError or ErrFormat, never a
// panic), or return a graph whose arrays agree with each other
// (checkGraph).

// checkGraph fails t when g's arrays disagree: lengths against NumNodes,
// FeatDim and LabelDim, node indices, class and relation ids in range.
func checkGraph(t *testing.T, g *Graph) {
	t.Helper()
	n := g.NumNodes
	if n < 0 || n > maxNarrowID+1 {
		t.Fatalf("NumNodes %d", n)
	}
	e := len(g.Src)
	if len(g.Dst) != e {
		t.Fatalf("%d sources, %d destinations", e, len(g.Dst))
	}
	inRange := func(what string, ids []uint32) {
		t.Helper()
		for i, v := range ids {
			if int(v) >= n {
				t.Fatalf("%s[%d] = %d of %d nodes", what, i, v, n)
			}
		}
	}
	inRange("Src", g.Src)
	inRange("Dst", g.Dst)
	inRange("Train", g.Train)
	inRange("Val", g.Val)
	inRange("Test", g.Test)
	if g.Weights != nil && len(g.Weights) != e {
		t.Fatalf("%d weights for %d edges", len(g.Weights), e)
	}
	if g.Etypes != nil && len(g.Etypes) != e {
		t.Fatalf("%d edge types for %d edges", len(g.Etypes), e)
	}
	if g.IDs.Ints != nil && g.IDs.Names != nil {
		t.Fatal("both integer and string ids")
	}
	if g.IDs.Ints != nil && len(g.IDs.Ints) != n || g.IDs.Names != nil && len(g.IDs.Names) != n {
		t.Fatalf("%d / %d ids for %d nodes", len(g.IDs.Ints), len(g.IDs.Names), n)
	}
	if g.FeatDim < 0 || len(g.Feat) != n*g.FeatDim {
		t.Fatalf("%d features for %d nodes of dimension %d", len(g.Feat), n, g.FeatDim)
	}
	if g.Labels != nil {
		if g.LabelDim < 1 || len(g.Labels) != n*g.LabelDim {
			t.Fatalf("%d labels for %d nodes of dimension %d", len(g.Labels), n, g.LabelDim)
		}
		for i, c := range g.Labels {
			if c < -1 || g.LabelDim == 1 && int(c) >= g.NumClasses {
				t.Fatalf("label %d = %d of %d classes", i, c, g.NumClasses)
			}
		}
	}
	if g.ClassNames != nil && len(g.ClassNames) != g.NumClasses {
		t.Fatalf("%d class names for %d classes", len(g.ClassNames), g.NumClasses)
	}
	if kg := g.KG; kg != nil {
		rels := len(kg.RelationNames)
		for _, tr := range []Triples{{Head: g.Src, Rel: g.Etypes, Tail: g.Dst}, kg.Valid, kg.Test} {
			if len(tr.Rel) != len(tr.Head) || len(tr.Tail) != len(tr.Head) {
				t.Fatalf("triples of %d / %d / %d", len(tr.Head), len(tr.Rel), len(tr.Tail))
			}
			inRange("head", tr.Head)
			inRange("tail", tr.Tail)
			for i, r := range tr.Rel {
				if int(r) >= rels {
					t.Fatalf("relation %d of triple %d: %d relations", r, i, rels)
				}
			}
		}
	}
}

// fuzzRead reads path and checks the outcome (see the top of this file).
func fuzzRead(t *testing.T, path string, opts ReadOptions) {
	g, err := Read(context.Background(), path, opts)
	if err != nil {
		var le *LineError
		if !errors.As(err, &le) && !errors.Is(err, ErrFormat) && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("refused with %v (%T), not a line error or bad input", err, err)
		}
		return
	}
	checkGraph(t, g)
}

// fuzzPolicy picks a dangling-endpoint policy from a fuzzed byte.
func fuzzPolicy(b byte) Policy { return []Policy{Drop, Add, Error}[b%3] }

func FuzzReadLINQS(f *testing.F) {
	f.Add("p1\t1\t0\t1\tAI\np-2\t0\t0\t0\tDB\r\n9\t0\t1\t0\tAI\n", "p1\tp-2\np-2\t9\nx\tp1\n9\t9\n", byte(1))
	f.Add("a\t1\tX\n", "a\tb\n", byte(0))
	f.Add("a\t1\t0\tX\nb\t1\t0.5e\tX\n", "", byte(2))
	f.Fuzz(func(t *testing.T, content, cites string, policy byte) {
		dir := t.TempDir()
		rdWrite(t, dir, "g.content", content, false)
		rdWrite(t, dir, "g.cites", cites, false)
		fuzzRead(t, dir, ReadOptions{Format: FormatLINQS, Dangling: fuzzPolicy(policy)})
	})
}

func FuzzReadKG(f *testing.F) {
	f.Add("0\tparis\r\n2\tberlin\r\n1\tfrance\r\n", "0\tcapital_of\n1\tnear\n", "paris\tcapital_of\tfrance\r\nberlin\tnear\tparis\r\n", "berlin\tnear\tfrance\n")
	f.Add("0\ta\n2\tb\n", "0\tr\n", "", "")
	f.Add("0\ta\n3000000000\tb\n", "0\tr\n", "a\tr\ta\n", "")
	f.Fuzz(func(t *testing.T, ents, rels, train, valid string) {
		dir := t.TempDir()
		rdWrite(t, dir, "entities.dict", ents, false)
		rdWrite(t, dir, "relations.dict", rels, false)
		rdWrite(t, dir, "train.txt", train, false)
		if valid != "" {
			rdWrite(t, dir, "valid.txt", valid, false)
		}
		fuzzRead(t, dir, ReadOptions{Format: FormatKG})
		// The same triples without dictionaries: numbered as they appear.
		raw := t.TempDir()
		rdWrite(t, raw, "train.txt", train, false)
		if valid != "" {
			rdWrite(t, raw, "valid.txt", valid, false)
		}
		fuzzRead(t, raw, ReadOptions{Format: FormatKG})
	})
}

// FuzzReadOGB writes the files of ogbFiles from fuzzed contents; present
// has a bit per optional file (node count, edge count, labels, features,
// the train split), so that the reader also meets every mix of files
// that fix the node count or lack it.
func FuzzReadOGB(f *testing.F) {
	base := ogbFiles()
	f.Add(base["raw/edge.csv"], base["raw/num-node-list.csv"], base["raw/num-edge-list.csv"], base["raw/node-label.csv"],
		base["raw/node-feat.csv"], base["split/time/train.csv"], byte(0xff), byte(0))
	f.Add("0,1\n1,2\n", "", "", "1\n0\n2\n", "1,2\n3,4\n5,6\n", "2\n", byte(0x1c), byte(1))
	// The last byte was a dangling policy, which OGB has no use for (it
	// is refused there); it stays so that the corpus keeps its shape.
	f.Fuzz(func(t *testing.T, edges, nodes, nedges, labels, feat, train string, present, _ byte) {
		dir := t.TempDir()
		rdWrite(t, dir, "raw/edge.csv", edges, false)
		for i, file := range []struct{ name, content string }{
			{"raw/num-node-list.csv", nodes}, {"raw/num-edge-list.csv", nedges}, {"raw/node-label.csv", labels},
			{"raw/node-feat.csv", feat}, {"split/time/train.csv", train},
		} {
			if present&(1<<i) != 0 {
				rdWrite(t, dir, file.name, file.content, false)
			}
		}
		fuzzRead(t, dir, ReadOptions{Format: FormatOGB})
	})
}
