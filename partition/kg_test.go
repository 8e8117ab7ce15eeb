package partition

import (
	"context"
	"testing"
)

func TestReadKG(t *testing.T) {
	for _, gz := range []bool{false, true} {
		dir := t.TempDir()
		rdWrite(t, dir, "entities.dict", "0\tparis\r\n2\tberlin\r\n1\tfrance\r\n", gz)
		rdWrite(t, dir, "relations.dict", "0\tcapital_of\n1\tnear\n", gz)
		rdWrite(t, dir, "train.txt", "paris\tcapital_of\tfrance\r\nberlin\tnear\tparis\r\nparis\tnear\tparis\r\n", gz)
		rdWrite(t, dir, "valid.txt", "berlin\tnear\tfrance\n", gz)
		// no test.txt: optional
		g, err := Read(context.Background(), dir, ReadOptions{Format: FormatKG})
		if err != nil {
			t.Fatal(err)
		}
		rdEq(t, "NumNodes", g.NumNodes, 3)
		rdEq(t, "Names", g.IDs.Names, []string{"paris", "france", "berlin"})
		rdEq(t, "Src", g.Src, []uint32{0, 2, 0})
		rdEq(t, "Dst", g.Dst, []uint32{1, 0, 0})
		rdEq(t, "Etypes", g.Etypes, []uint32{0, 1, 1})
		rdEq(t, "Relations", g.KG.RelationNames, []string{"capital_of", "near"})
		rdEq(t, "Valid", g.KG.Valid, Triples{Head: []uint32{2}, Rel: []uint32{1}, Tail: []uint32{1}})
		rdEq(t, "Test", g.KG.Test.Len(), 0)
		rdEq(t, "Stats", g.Stats, Stats{Lines: 3, EdgesRead: 3, SelfLoops: 1})
	}
}

// TestReadKGEvalRepeats: a valid or test triple listed again in its file
// is dropped by default, kept or refused as asked, and counted; one in
// both files, or in train, is no repeat. A repeat counted twice in MRR
// and Hits@k, and --duplicates error let it pass.
func TestReadKGEvalRepeats(t *testing.T) {
	dir := t.TempDir()
	rdWrite(t, dir, "entities.dict", "0\ta\n1\tb\n2\tc\n", false)
	rdWrite(t, dir, "relations.dict", "0\tr\n1\tq\n", false)
	rdWrite(t, dir, "train.txt", "a\tr\tb\n", false)
	rdWrite(t, dir, "valid.txt", "a\tr\tb\nb\tq\tc\n", false)
	rdWrite(t, dir, "test.txt", "b\tq\tc\nc\tr\ta\n\nb\tq\tc\nc\tr\ta\nc\tq\ta\n", false)
	for _, c := range []struct {
		policy  Policy
		test    []uint32 // heads of the test triples read
		repeats int64
	}{
		{"", []uint32{1, 2, 2}, 2},
		{Drop, []uint32{1, 2, 2}, 2},
		{Keep, []uint32{1, 2, 1, 2, 2}, 2},
	} {
		g, err := Read(context.Background(), dir, ReadOptions{Format: FormatKG, EvalRepeats: c.policy})
		if err != nil {
			t.Fatalf("%q: %v", c.policy, err)
		}
		rdEq(t, string(c.policy)+": valid", g.KG.Valid.Len(), 2)
		rdEq(t, string(c.policy)+": test heads", g.KG.Test.Head, c.test)
		rdEq(t, string(c.policy)+": repeats", g.Stats.EvalRepeats, c.repeats)
	}
	_, err := Read(context.Background(), dir, ReadOptions{Format: FormatKG, EvalRepeats: Error})
	rdWantLineError(t, err, rdDir("partition: DIR/test.txt:4: triple (b, q, c) repeats line 1: it would count twice in MRR and Hits@k (--duplicates drop drops it)", dir))
	if _, err := Read(context.Background(), dir, ReadOptions{Format: FormatKG, EvalRepeats: Add}); err == nil {
		t.Error("EvalRepeats add: no error")
	}
}

func TestReadKGErrors(t *testing.T) {
	for _, c := range []struct {
		name, ents, rels, train, want string
	}{
		{"unknown entity", "0\ta\n1\tb\n", "0\tr\n", "a\tr\tb\nb\tr\tc\n", "partition: DIR/train.txt:2: unknown entity \"c\""},
		{"unknown relation", "0\ta\n", "0\tr\n", "a\tq\ta\n", "partition: DIR/train.txt:1: unknown relation \"q\""},
		{"fields", "0\ta\n", "0\tr\n", "a r a\n", "partition: DIR/train.txt:1: want 3 fields (head, relation, tail), got 1"},
		{"dup id", "0\ta\n0\tb\n", "0\tr\n", "", "partition: DIR/entities.dict:2: id 0 listed twice"},
		{"dup name", "0\ta\n1\ta\n", "0\tr\n", "", "partition: DIR/entities.dict:2: name \"a\" listed twice"},
		{"bad id", "0\ta\nx\tb\n", "0\tr\n", "", "partition: DIR/entities.dict:2: id \"x\" is not a node index"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			rdWrite(t, dir, "entities.dict", c.ents, false)
			rdWrite(t, dir, "relations.dict", c.rels, false)
			rdWrite(t, dir, "train.txt", c.train, false)
			_, err := Read(context.Background(), dir, ReadOptions{Format: FormatKG})
			rdWantLineError(t, err, rdDir(c.want, dir))
		})
	}
	dir := t.TempDir()
	rdWrite(t, dir, "entities.dict", "0\ta\n2\tb\n", false)
	rdWrite(t, dir, "relations.dict", "0\tr\n", false)
	rdWrite(t, dir, "train.txt", "", false)
	_, err := Read(context.Background(), dir, ReadOptions{Format: FormatKG})
	if err == nil || err.Error() != "partition: "+dir+"/entities.dict: ids are not contiguous: 1 is missing (line 2 has id 2; 2 entries hold ids 0..1): bad input" {
		t.Errorf("gap: %v", err)
	}
	// No training triples: the parts had no edge type section, and node
	// kge said they were not partitioned with --format kg.
	dir = t.TempDir()
	rdWrite(t, dir, "entities.dict", "0\ta\n1\tb\n", false)
	rdWrite(t, dir, "relations.dict", "0\tr\n", false)
	rdWrite(t, dir, "train.txt", "", false)
	_, err = Read(context.Background(), dir, ReadOptions{Format: FormatKG})
	if err == nil || err.Error() != "partition: "+dir+"/train.txt: no training triples: bad input" {
		t.Errorf("empty train.txt: %v", err)
	}
}

// TestReadKGDictHugeID: a dictionary id far beyond its entry count is an
// error naming its line, found without room for every id up to it (four
// billion names: 64 GB).
func TestReadKGDictHugeID(t *testing.T) {
	dir := t.TempDir()
	rdWrite(t, dir, "entities.dict", "0\ta\n3000000000\tb\n1\tc\n", false)
	rdWrite(t, dir, "relations.dict", "0\tr\n", false)
	rdWrite(t, dir, "train.txt", "a\tr\tc\n", false)
	_, err := Read(context.Background(), dir, ReadOptions{Format: FormatKG})
	want := "partition: " + dir + "/entities.dict: ids are not contiguous: 2 is missing (line 2 has id 3000000000; 3 entries hold ids 0..2): bad input"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

func TestReadKGReal(t *testing.T) {
	for _, c := range []struct {
		name               string
		ents, rels         int
		train, valid, test int
	}{
		{"fb15k-237", 14541, 237, 272115, 17535, 20466},
		{"wn18", 40943, 18, 141442, 5000, 5000},
		{"wn18rr", 40943, 11, 86835, 3034, 3134},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := rdDataDir(t, c.name)
			g, err := Read(context.Background(), dir, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rdEq(t, "NumNodes", g.NumNodes, c.ents)
			rdEq(t, "relations", len(g.KG.RelationNames), c.rels)
			rdEq(t, "train", len(g.Src), c.train)
			rdEq(t, "Etypes", len(g.Etypes), c.train)
			rdEq(t, "valid", g.KG.Valid.Len(), c.valid)
			rdEq(t, "test", g.KG.Test.Len(), c.test)
			rdEq(t, "Lines", g.Stats.Lines, int64(c.train))
			if c.name == "wn18" && g.IDs.Names[0] != "01728840" {
				t.Errorf("entity 0 = %q, want 01728840 (leading zero kept)", g.IDs.Names[0])
			}
		})
	}
}

// TestReadKGByAppearance: a directory without dictionaries (DGL-KE's
// raw_udd_hrt layout) numbers entities and relations as DGL-KE does, by
// first appearance over train, valid and test, a line's head before its
// tail; it was refused with "entities.dict: no such file".
func TestReadKGByAppearance(t *testing.T) {
	for _, gz := range []bool{false, true} {
		dir := t.TempDir()
		rdWrite(t, dir, "train.txt", "berlin\tnear\tparis\r\nparis\tcapital_of\tfrance\r\nberlin\tnear\tparis\r\n", gz)
		rdWrite(t, dir, "valid.txt", "rome\tnear\tberlin\n", gz)
		rdWrite(t, dir, "test.txt", "italy\tborders\tfrance\n", gz)
		if got, err := DetectFormat(dir); got != FormatKG || err != nil {
			t.Errorf("DetectFormat = %q, %v; want kg", got, err)
		}
		g, err := Read(context.Background(), dir, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rdEq(t, "NumNodes", g.NumNodes, 5)
		rdEq(t, "Names", g.IDs.Names, []string{"berlin", "paris", "france", "rome", "italy"})
		rdEq(t, "Relations", g.KG.RelationNames, []string{"near", "capital_of", "borders"})
		rdEq(t, "Src", g.Src, []uint32{0, 1, 0})
		rdEq(t, "Dst", g.Dst, []uint32{1, 2, 1})
		rdEq(t, "Etypes", g.Etypes, []uint32{0, 1, 0})
		rdEq(t, "Valid", g.KG.Valid, Triples{Head: []uint32{3}, Rel: []uint32{0}, Tail: []uint32{0}})
		rdEq(t, "Test", g.KG.Test, Triples{Head: []uint32{4}, Rel: []uint32{2}, Tail: []uint32{2}})
		rdEq(t, "Stats", g.Stats, Stats{Lines: 3, EdgesRead: 3})
	}
}

// TestReadKGOneDict: one dictionary without the other is refused, naming
// both, not numbered half by the file and half by appearance.
func TestReadKGOneDict(t *testing.T) {
	for _, c := range []struct{ has, lacks string }{{"entities.dict", "relations.dict"}, {"relations.dict", "entities.dict"}} {
		dir := t.TempDir()
		rdWrite(t, dir, c.has, "0\ta\n", false)
		rdWrite(t, dir, "train.txt", "a\ta\ta\n", false)
		_, err := Read(context.Background(), dir, ReadOptions{Format: FormatKG})
		want := "partition: " + dir + ": " + c.has + " without " + c.lacks + ": give both dictionaries (id TAB name a line: the ids of entities and relations) or neither " +
			"(then numbered by first appearance over train, valid and test, as DGL-KE's raw_udd formats): bad input"
		if err == nil || err.Error() != want {
			t.Errorf("%s alone: %v, want %q", c.has, err, want)
		}
	}
	// Without dictionaries a name is checked as a dictionary's is: the
	// name file holds one a line.
	dir := t.TempDir()
	rdWrite(t, dir, "train.txt", "a\tr\tb\rc\n", false)
	_, err := Read(context.Background(), dir, ReadOptions{Format: FormatKG})
	rdWantLineError(t, err, rdDir(`partition: DIR/train.txt:1: entity name "b\rc" holds a line break ("\r"), which names.txt, one name a line, cannot hold`, dir))
}
