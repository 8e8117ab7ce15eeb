package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"graphnode/csr"
	"graphnode/partition"
	"graphnode/shm"
)

// runNode runs the CLI in-process.
func runNode(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// writeEdgeList writes a ring of n nodes (ids 100, 101, ...) with a self
// loop at 100 and a duplicate of the first edge.
func writeEdgeList(t *testing.T, n int) string {
	var b strings.Builder
	b.WriteString("100 100\n")
	for i := range n {
		fmt.Fprintf(&b, "%d %d\n", 100+i, 100+(i+1)%n)
	}
	b.WriteString("100 101\n")
	path := filepath.Join(t.TempDir(), "ring.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPartitionInspectCLI(t *testing.T) {
	in := writeEdgeList(t, 12)
	out := filepath.Join(t.TempDir(), "parts")
	code, stdout, stderr := runNode(t, "partition", "--input", in, "--format", "edgelist", "--parts", "3",
		"--method", "random", "--self-loops", "drop", "--undirected", "--seed", "4", "-o", out)
	if code != 0 {
		t.Fatalf("partition: code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// 12 ring edges + reverses = 24; the duplicate 100->101 and its reverse are dropped.
	for _, want := range []string{
		"read " + in + ": 12 nodes, 14 edges",
		"cleaned: 24 edges stored (direction in); self loops 1 (dropped 1), duplicates dropped 2, reverse edges added 13",
		"partitioned into 3 parts (random, seed 4)",
		// No training nodes: no train balance to speak of.
		"balance max/mean (asked: nodes; random is exact): nodes 1.000, edges 1.000, train -\n",
		"wrote " + out,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("partition output lacks %q:\n%s", want, stdout)
		}
	}
	m, err := partition.OpenDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Nodes != 12 || m.Edges != 24 || m.Parts != 3 || !m.Undirected || m.SelfLoops != "drop" || m.Stats["self_loops_drop"] != 1 {
		t.Errorf("manifest: %+v", m)
	}

	code, stdout, stderr = runNode(t, "inspect", out, "--verify")
	if code != 0 {
		t.Fatalf("inspect --verify: code %d\n%s\n%s", code, stdout, stderr)
	}
	// No training nodes: "train -", as partition says it, not 0.000.
	for _, want := range []string{"12 nodes, 24 edges, 3 parts", "balance max/mean: nodes 1.000, edges 1.000, train -\n", "part-2/part.csr  OK", "all 5 files OK"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, stderr = runNode(t, "inspect", out, "--verify", "--part", "2")
	if code != 0 || !strings.Contains(stdout, "part 2 alone") || !strings.Contains(stdout, "all 2 files OK") || strings.Contains(stdout, "part-1") {
		t.Errorf("inspect --verify --part 2: code %d\n%s\n%s", code, stdout, stderr)
	}

	// A refused second run, then a forced one.
	code, _, stderr = runNode(t, "partition", "--input", in, "--parts", "2", "-o", out)
	if code != 1 || !strings.Contains(stderr, "exists and is not empty (--force replaces it)") {
		t.Errorf("second run: code %d, stderr %s", code, stderr)
	}
	if code, _, stderr = runNode(t, "partition", "--input", in, "--parts", "2", "--force", "-o", out); code != 0 {
		t.Errorf("--force: code %d, stderr %s", code, stderr)
	}
}

// TestPartitionSelfLoopsListedTwice: a graph that lists a self loop
// twice (Planetoid's CiteSeer lists each of its 124 so: 248) says how
// many loops there are besides how many were listed, which graph.toml's
// stats.self_loops records; the printout said 248 and README 124.
func TestPartitionSelfLoopsListedTwice(t *testing.T) {
	in := filepath.Join(t.TempDir(), "loops.txt")
	if err := os.WriteFile(in, []byte("1 1\n1 1\n2 2\n1 2\n2 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		policy string
		want   string
		drop   int64
	}{
		{"keep", "cleaned: 4 edges stored (direction in); self loops 3 (2 distinct; dropped 0), duplicates dropped 1,", 0},
		{"drop", "cleaned: 2 edges stored (direction in); self loops 3 (2 distinct; dropped 3), duplicates dropped 0,", 3},
	} {
		out := filepath.Join(t.TempDir(), "parts")
		code, stdout, stderr := runNode(t, "partition", "--input", in, "--self-loops", tt.policy, "-o", out)
		if code != 0 || !strings.Contains(stdout, tt.want) {
			t.Errorf("--self-loops %s: code %d, stdout %q, stderr %q; want %q", tt.policy, code, stdout, stderr, tt.want)
			continue
		}
		m, err := partition.OpenDir(out)
		if err != nil {
			t.Fatal(err)
		}
		if m.Stats["self_loops"] != 3 || m.Stats["self_loops_drop"] != tt.drop {
			t.Errorf("--self-loops %s: graph.toml stats %v, want self_loops 3 (every one listed), self_loops_drop %d", tt.policy, m.Stats, tt.drop)
		}
	}
	// Each loop listed once: the count alone, as before.
	code, stdout, _ := runNode(t, "partition", "--input", writeEdgeList(t, 4), "-o", filepath.Join(t.TempDir(), "parts"))
	if code != 0 || !strings.Contains(stdout, "self loops 1 (dropped 0)") {
		t.Errorf("one self loop: code %d, stdout %q", code, stdout)
	}
}

func TestInspectVerifyNamesCorruptSection(t *testing.T) {
	in := writeEdgeList(t, 20)
	out := filepath.Join(t.TempDir(), "parts")
	if code, _, stderr := runNode(t, "partition", "--input", in, "--parts", "2", "-o", out); code != 0 {
		t.Fatalf("partition: %s", stderr)
	}
	path := filepath.Join(out, "part-1", "part.csr")
	g, err := csr.Open(path, csr.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var off uint64
	for _, s := range g.Sections() {
		if s.Name == csr.SecIndices {
			off = s.Offset + 8*s.Length/16 // the low byte of a middle id: still in range, sorted order aside
		}
	}
	g.Close()
	b, _ := os.ReadFile(path)
	b[off] ^= 1
	os.WriteFile(path, b, 0o644)

	code, stdout, stderr := runNode(t, "inspect", "--verify", out)
	if code != 1 {
		t.Fatalf("inspect --verify of a corrupt file: code %d\n%s", code, stdout)
	}
	if !strings.Contains(stdout, "part-1/part.csr  FAILED") || !strings.Contains(stdout, `section "indices"`) || !strings.Contains(stdout, "part-0/part.csr  OK") {
		t.Errorf("report does not name the file and section:\n%s", stdout)
	}
	if !strings.Contains(stderr, "node inspect: "+out+": 1 file FAILED") {
		t.Errorf("stderr: %s", stderr)
	}

	// A truncated file is one failure among the files, each reported:
	// the check of every file's size stopped --verify before any.
	if err := os.Truncate(path, int64(len(b))-100); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runNode(t, "inspect", "--verify", out)
	if code != 1 || !strings.Contains(stdout, "part-1/part.csr  FAILED") || !strings.Contains(stdout, "part-0/part.csr  OK") ||
		!strings.Contains(stderr, "node inspect: "+out+": 1 file FAILED") {
		t.Errorf("inspect --verify of a truncated file: code %d\n%s\nstderr: %s", code, stdout, stderr)
	}
}

func TestPartitionUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"partition", "--help"}, 0, "-undirected"},
		{[]string{"partition", "-o", "x"}, 2, "--input and -o are required"},
		{[]string{"partition", "--input", "x", "-o", "y", "--seed", "18446744073709551615"}, 2, "want below 2^63"},
		{[]string{"inspect"}, 2, "want one directory"},
		{[]string{"inspect", "/nonexistent/parts"}, 1, "graph.toml: no such file"},
		{[]string{"inspect", "--part", "-2", "x"}, 2, "node inspect: --part -2: want a part index, 0 or more (leave --part out for every part)"},
		// -1, the flag's default once, showed every part.
		{[]string{"inspect", "--part", "-1", "x"}, 2, "node inspect: --part -1: want a part index, 0 or more (leave --part out for every part)"},
		{[]string{"inspect", "--part", "two", "x"}, 2, `invalid value "two" for flag -part: not an integer`},
		// Was taken as "not given": graph.toml's batch size, without a word.
		{[]string{"inspect", "--batch-size", "-5", "x"}, 2, "--batch-size -5: want 0 or more"},
	} {
		code, _, stderr := runNode(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
}

// TestPartitionMethodsCLI partitions one generated graph with every
// method, with and without a cache, and checks each directory with
// inspect --verify.
func TestPartitionMethodsCLI(t *testing.T) {
	in := filepath.Join(t.TempDir(), "sbm")
	if code, _, stderr := runNode(t, "gen", "sbm", "--nodes", "3000", "--feat-dim", "8", "--train-frac", "0.2", "-o", in); code != 0 {
		t.Fatalf("gen sbm: %s", stderr)
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--method", "random"}, []string{"partitioned into 4 parts (random, seed 1): edge cut", "balance max/mean (asked: nodes; random is exact): nodes 1.000", "cached 0.00%"}},
		{[]string{"--method", "metis", "--balance", "nodes,edges,train"}, []string{"(metis, seed 1)", "asked: nodes,edges,train within 1.030"}},
		{[]string{"--method", "freq", "--imbalance", "1.0", "--fanouts", "10,5", "--batch-size", "64"}, []string{"(freq, seed 1)", "nodes 1.000", "(fanouts 10,5, batch 64)"}},
		{[]string{"--method", "random", "--cache-ratio", "0.2"}, []string{"; 600 nodes cached"}},
		{[]string{"--method", "metis", "--cache-bytes", "4KB"}, []string{"; 400 nodes cached"}}, // 100 rows of 8 × f32 and their 8-byte ids per part
		{[]string{"--method", "freq", "--imbalance", "1", "--cache-ratio", "0.2", "--feat-dtype", "f16"}, []string{"; 600 nodes cached"}},
	} {
		out := filepath.Join(t.TempDir(), "parts")
		args := append([]string{"partition", "--input", in, "--parts", "4", "-o", out}, tt.args...)
		code, stdout, stderr := runNode(t, args...)
		if code != 0 {
			t.Fatalf("%v: code %d\n%s\n%s", tt.args, code, stdout, stderr)
		}
		for _, w := range append(tt.want, "expected feature reads per epoch") {
			if !strings.Contains(stdout, w) {
				t.Errorf("%v: output lacks %q:\n%s", tt.args, w, stdout)
			}
		}
		code, stdout, stderr = runNode(t, "inspect", "--verify", out)
		if code != 0 || !strings.Contains(stdout, "reads local %") || !strings.Contains(stdout, "all 6 files OK") {
			t.Errorf("%v: inspect --verify: code %d\n%s\n%s", tt.args, code, stdout, stderr)
		}
		m, err := partition.OpenDir(out)
		if err != nil {
			t.Fatal(err)
		}
		if m.Achieved.Nodes < 1 || m.Achieved.Nodes > 1.03 || len(m.Fanouts) == 0 {
			t.Errorf("%v: manifest balance %+v fanouts %v", tt.args, m.Achieved, m.Fanouts)
		}
	}
	// inspect --fanouts recomputes the shares for other fanouts.
	out := filepath.Join(t.TempDir(), "parts")
	if code, _, stderr := runNode(t, "partition", "--input", in, "--parts", "2", "--cache-ratio", "0.1", "-o", out); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, _ := runNode(t, "inspect", out, "--fanouts", "5", "--batch-size", "0")
	if code != 0 || !strings.Contains(stdout, "(fanouts 5, batch 0, trainer p reading share p of split train)") {
		t.Errorf("inspect --fanouts 5: code %d\n%s", code, stdout)
	}
	// Either flag alone takes the other from graph.toml (batch 64 here):
	// graph.toml's own fanouts given again are graph.toml's estimate, which
	// --verify then checks.
	out = filepath.Join(t.TempDir(), "parts")
	if code, _, stderr := runNode(t, "partition", "--input", in, "--parts", "2", "--cache-ratio", "0.1", "--fanouts", "10,5", "--batch-size", "64", "-o", out); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, _ = runNode(t, "inspect", "--verify", out, "--fanouts", "10,5")
	if code != 0 || !strings.Contains(stdout, "(fanouts 10,5, batch 64, trainer p reading share p of split train)") {
		t.Errorf("inspect --fanouts 10,5 of a partitioning for batch 64: code %d\n%s", code, stdout)
	}
	code, stdout, _ = runNode(t, "inspect", out, "--batch-size", "32")
	if code != 0 || !strings.Contains(stdout, "(fanouts 10,5, batch 32, trainer p reading share p of split train)") {
		t.Errorf("inspect --batch-size 32: code %d\n%s", code, stdout)
	}
	// A bad --fanouts is a usage error, before graph.toml is read (it was
	// exit 1, after reading it).
	code, _, stderr := runNode(t, "inspect", filepath.Join(t.TempDir(), "missing"), "--fanouts", "abc")
	if code != 2 || !strings.Contains(stderr, `node inspect: --fanouts "abc": "abc" is not an integer`) {
		t.Errorf("inspect --fanouts abc: code %d, stderr %q; want 2", code, stderr)
	}
}

func TestPartitionFlagErrors(t *testing.T) {
	in := writeEdgeList(t, 12)
	for _, tt := range []struct {
		args []string
		code int // 2: a bad flag; 1: what the input lacks
		want string
	}{
		{[]string{"--balance", "nodes,vertices"}, 2, `--balance: partition: balance "vertices"`},
		// An empty entry was dropped without a word.
		{[]string{"--balance", "nodes,,edges", "--method", "metis"}, 2, `--balance: partition: balance "nodes,,edges": entry 2 is empty: want a list of nodes, edges and train`},
		{[]string{"--balance", ""}, 2, `--balance: partition: balance "": entry 1 is empty: want a list of nodes, edges and train`},
		{[]string{"--fanouts", "10,x"}, 2, `--fanouts "10,x": "x" is not an integer`},
		{[]string{"--fanouts", "10,-3"}, 2, "hop 2 is -3"},
		{[]string{"--cache-bytes", "64M"}, 2, `--cache-bytes: shm: size "64M": unit "M" is ambiguous`},
		{[]string{"--cache-ratio", "0.2", "--fanouts", "none"}, 2, "need --fanouts"},
		// freq took 15,10,5 without a word.
		{[]string{"--method", "freq", "--fanouts", "none"}, 2, "--method freq places nodes by the heat of sampling with --fanouts"},
		{[]string{"--method", "freq"}, 1, "has no training split"},
		{[]string{"--method", "random", "--balance", "edges"}, 2, `method random cannot balance "edges"`},
		{[]string{"--imbalance", "0.5", "--method", "metis"}, 2, "imbalance 0.5: want a number ≥ 1"},
		// Taken, ignored, and printed as "asked: nodes within 5.000".
		{[]string{"--imbalance", "5", "--method", "random"}, 2, "--imbalance 5: method random balances nodes exactly and takes no imbalance: leave --imbalance out, or use --method metis or freq"},
		{[]string{"--imbalance", "1.03"}, 2, "--imbalance 1.03: method random balances nodes exactly and takes no imbalance"},
	} {
		args := append([]string{"partition", "--input", in, "--format", "edgelist", "--parts", "2", "-o", filepath.Join(t.TempDir(), "p")}, tt.args...)
		code, _, stderr := runNode(t, args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
}

// TestPartitionChecksBeforeReading: options that are wrong whatever the
// graph are refused before the input is read (which can take minutes),
// all of them at once. The input does not exist, so an error about it
// would mean it was opened first.
func TestPartitionChecksBeforeReading(t *testing.T) {
	in := filepath.Join(t.TempDir(), "missing.txt")
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "graph.toml"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		code int // 2: a bad flag among the problems; 1: the output's alone
		want []string
	}{
		{[]string{"--method", "metsi"}, 2, []string{`method "metsi": want random, metis or freq`}},
		{[]string{"--method", "random", "--balance", "edges"}, 2, []string{`method random cannot balance "edges"`}},
		{[]string{"--parts", "0"}, 2, []string{"0 parts: want at least 1"}},
		{[]string{"--method", "metis", "--imbalance", "0.9"}, 2, []string{"imbalance 0.9: want a number ≥ 1"}},
		{[]string{"--method", "random", "--imbalance", "5"}, 2, []string{"--imbalance 5: method random balances nodes exactly and takes no imbalance"}},
		{[]string{"--self-loops", "maybe"}, 2, []string{"self loops"}},
		{[]string{"--dangling", "never"}, 2, []string{"(dangling)"}},
		{[]string{"--cache-ratio", "-0.5"}, 2, []string{"cache ratio -0.5"}},
		{[]string{"-o", full}, 1, []string{"output " + full + " exists and is not empty (--force replaces it)"}},
		// Found by the write's mkdir once the input was read and partitioned.
		{[]string{"-o", "/proc/graphnode-test/parts"}, 1, []string{"output /proc/graphnode-test/parts: cannot write in /proc"}},
		{[]string{"--method", "metsi", "--duplicates", "twice", "-o", full}, 2, []string{`method "metsi"`, "duplicates", "exists and is not empty"}},
		// Every problem, not the first of each check: the method went
		// unsaid beside a bad part count, and the flags parsed here stopped
		// at the first.
		{[]string{"--method", "bogus", "--parts", "0"}, 2, []string{`method "bogus"`, "0 parts: want at least 1"}},
		{[]string{"--self-loops", "x", "--parts", "0", "--balance", "edges", "--method", "bogus", "-o", "/proc/graphnode-test/parts"}, 2,
			[]string{`policy "x"`, "(self loops)", "0 parts", `method "bogus"`, "cannot write in /proc"}},
		{[]string{"--direction", "up", "--feat-dtype", "f64", "--balance", "vertices", "--fanouts", "10,x", "--method", "freq", "--cache-bytes", "64M",
			"--batch-size", "-1", "--seed", "18446744073709551615", "--split", "half", "--self-loops", "x", "--duplicates", "y", "--imbalance", "0.5"}, 2,
			[]string{`--direction "up"`, `--feat-dtype "f64"`, `--balance: partition: balance "vertices"`, `--fanouts "10,x"`, `--cache-bytes: shm: size "64M"`,
				"--batch-size -1", "--seed 18446744073709551615: want below 2^63", `split "half"`, "(self loops)", "(duplicates)", "imbalance 0.5"}},
	} {
		args := append([]string{"partition", "--input", in, "--format", "edgelist", "--parts", "2", "-o", filepath.Join(t.TempDir(), "p")}, tt.args...)
		code, stdout, stderr := runNode(t, args...)
		if code != tt.code || strings.Contains(stderr, "missing.txt") || stdout != "" {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want %d and no word of the input", tt.args, code, stdout, stderr, tt.code)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", tt.args, stderr, w)
			}
		}
		// A --fanouts that does not parse is said once, not again as none.
		if strings.Contains(stderr, "need --fanouts") || strings.Contains(stderr, "not none") {
			t.Errorf("%v: stderr %q takes a bad --fanouts for none", tt.args, stderr)
		}
	}
}

// TestPartitionGuessedFormatOptions: an option of another format is a
// usage error (exit 2) whether the format was given or guessed from the
// input's path, refused with the other bad options before the input is
// read. Guessed, it was found by the read and exited 1.
func TestPartitionGuessedFormatOptions(t *testing.T) {
	ogb := filepath.Join(t.TempDir(), "ogb")
	linqs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ogb, "raw"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Neither is read: a read would fail on the missing files.
	if err := os.WriteFile(filepath.Join(linqs, "cora.content"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "graph.toml"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--input", ogb, "--node-file", "x"}, []string{"node file applies to edge lists only, not ogb (guessed from " + ogb}},
		{[]string{"--input", ogb, "--format", "ogb", "--node-file", "x"}, []string{"node file applies to edge lists only, not ogb\n"}},
		{[]string{"--input", linqs, "--split-scheme", "a"}, []string{"split scheme applies to ogb only, not linqs (guessed from " + linqs}},
		{[]string{"--input", linqs, "--weighted", "--header", "yes"}, []string{"weighted applies to edge lists only, not linqs (guessed", "header applies to edge lists only, not linqs (guessed"}},
		// With the other problems, all at once.
		{[]string{"--input", linqs, "--split-scheme", "a", "--method", "metsi", "-o", full}, []string{"split scheme applies to ogb only", `method "metsi"`, "exists and is not empty"}},
	} {
		args := append([]string{"partition", "-o", filepath.Join(t.TempDir(), "p")}, tt.args...)
		code, stdout, stderr := runNode(t, args...)
		if code != 2 || stdout != "" || strings.Contains(stderr, "read ") {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want 2 before reading", tt.args, code, stdout, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", tt.args, stderr, w)
			}
		}
	}
}

// TestPartitionRefusesBeforeAssign: what the files cannot take of the
// graph read (a cache of a graph without features, or without training
// nodes to rank it) is refused before the assignment, which takes hours
// on the largest graphs; it was refused by Write, after it.
func TestPartitionRefusesBeforeAssign(t *testing.T) {
	in := writeEdgeList(t, 12)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--split", "random:0.5,0.2,0.3", "--cache-ratio", "0.2"}, "partition: cache: the graph has no features to cache (a cache holds feature rows: leave out --cache-ratio and --cache-bytes)"},
		// Not freq's "no training split": its Assign refused first.
		{[]string{"--method", "freq", "--cache-bytes", "1MB"}, "partition: cache: the graph has no features to cache"},
	} {
		args := append([]string{"partition", "--input", in, "--parts", "2", "-o", filepath.Join(t.TempDir(), "p")}, tt.args...)
		code, _, stderr := runNode(t, args...)
		if code != 1 || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "sort rows: done") || strings.Contains(stderr, "assign") {
			t.Errorf("%v: code %d, stderr %q; want 1, %q after reading and before assign", tt.args, code, stderr, tt.want)
		}
	}
}

// TestPartitionForceKeepsInput: --force replaces the output directory
// whole, so one that holds an input file (-o . beside the edge list) is
// refused before anything is read or removed; an output inside the
// input's directory is replaced as usual.
func TestPartitionForceKeepsInput(t *testing.T) {
	for _, tt := range []struct {
		name string
		args func(in, dir string) []string // dir holds in and a file of its own
		want string                        // "" = partitioned
	}{
		{"input in the output", func(in, dir string) []string { return []string{"--input", in, "-o", dir} },
			"holds the input IN"},
		{"output is the input directory", func(in, dir string) []string {
			return []string{"--input", dir, "--format", "ogb", "-o", dir + string(filepath.Separator) + "."}
		}, "holds the input DIR"},
		{"label file in the output", func(in, dir string) []string {
			other := writeEdgeList(t, 12)
			return []string{"--input", other, "--label-file", in, "-o", dir}
		}, "holds the input IN"},
		{"output inside the input's directory", func(in, dir string) []string {
			parts := filepath.Join(dir, "parts")
			if err := os.MkdirAll(filepath.Join(parts, "old"), 0o755); err != nil {
				t.Fatal(err)
			}
			return []string{"--input", in, "-o", parts}
		}, ""},
	} {
		in := writeEdgeList(t, 12)
		dir := filepath.Dir(in)
		keep := filepath.Join(dir, "notes.txt")
		if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"partition", "--parts", "2", "--force"}, tt.args(in, dir)...)
		code, _, stderr := runNode(t, args...)
		for _, f := range []string{in, keep} {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
		}
		if tt.want == "" {
			if code != 0 {
				t.Errorf("%s: code %d, stderr %s", tt.name, code, stderr)
			}
			continue
		}
		want := strings.NewReplacer("IN", in, "DIR", dir).Replace(tt.want)
		if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "done in") {
			t.Errorf("%s: code %d, stderr %q; want 1, %q and nothing read", tt.name, code, stderr, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"512", 512, false}, {"64MB", 64_000_000, false}, {"1.5GiB", 3 << 29, false}, {"2 kib", 2048, false},
		{"64M", 0, true}, {"MB", 0, true}, {"1.5B", 0, true}, {"-1", 0, true},
	} {
		got, err := shm.ParseSize(tt.in) // what --cache-bytes takes
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("%q: %d, %v; want %d (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// A node count the machine cannot hold is refused after the read with an
// error that says so, not by the runtime's out-of-memory crash (an OGB
// num-node-list.csv of 4000000000 once took node partition down with a
// 32 GB allocation). The test poses as a machine of 16 GiB.
func TestPartitionMemoryFloor(t *testing.T) {
	small := func(args ...string) (code int, stdout, stderr string) {
		var out, errb bytes.Buffer
		a := newApp(&out, &errb)
		a.memory = func() uint64 { return 16 << 30 }
		code = a.run(context.Background(), args)
		return code, out.String(), errb.String()
	}

	raw := filepath.Join(t.TempDir(), "ogb", "raw")
	if err := os.MkdirAll(raw, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"num-node-list.csv": "4000000000\n", "edge.csv": "0,1\n1,2\n"} {
		if err := os.WriteFile(filepath.Join(raw, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "parts")
	code, stdout, stderr := small("partition", "--input", filepath.Dir(raw), "--format", "ogb", "--parts", "2", "-o", out)
	want := "4000000000 nodes and 2 edges need at least 59.60 GiB beyond the graph read (16 bytes a node, 4 an edge), " +
		"more than the 16.00 GiB of memory and swap of this machine; is the node count right?"
	if code == 0 || !strings.Contains(stderr, want) {
		t.Fatalf("code %d, stderr:\n%s\nwant it to contain %q\nstdout:\n%s", code, stderr, want, stdout)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("output directory %s exists after the refusal (stat: %v)", out, err)
	}

	// The same machine partitions a graph that fits.
	in := writeEdgeList(t, 12)
	if code, stdout, stderr := small("partition", "--input", in, "--format", "edgelist", "--parts", "2", "-o", out); code != 0 {
		t.Fatalf("a 12-node graph on a 16 GiB machine: code %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestMissNotes: an asked quantity whose heaviest part passes the bound
// the partitioners keep (max(⌈mean⌉, ⌊imbalance · mean⌋)) is pointed out
// with its part; the freq partitioner left Cora's part 2 with 1.085 ×
// the mean edges under --balance nodes,edges,train and only the balance
// line's number showed it. A part at the bound, and quantities not asked
// for, get no such note.
func TestMissNotes(t *testing.T) {
	m := &partition.Manifest{
		Nodes: 2708, Edges: 10556, Train: 140,
		Achieved: partition.BalanceAchieved{Nodes: 1.01034, Edges: 1.084502, Train: 1},
		Part: []partition.PartEntry{
			{Index: 0, Start: 0, End: 684, Edges: 2675, Train: 35}, {Index: 1, Start: 684, End: 1367, Edges: 2440, Train: 35},
			{Index: 2, Start: 1367, End: 2025, Edges: 2862, Train: 35}, {Index: 3, Start: 2025, End: 2708, Edges: 2579, Train: 35},
		},
	}
	want := []string{"note: part 2 stores 1.085 × the mean edges, more than --imbalance 1.030 allows (2862, at most 2718): the freq partitioner could not keep --balance edges"}
	if got := missNotes(m, partition.MethodFreq, []string{"nodes", "edges", "train"}, 1.03); !slices.Equal(got, want) {
		t.Errorf("edges missed:\n got %q\nwant %q", got, want)
	}
	if got := missNotes(m, partition.MethodFreq, []string{"nodes", "train"}, 1.03); got != nil {
		t.Errorf("edges not asked: %q, want no note (skewNotes speaks of those)", got)
	}
	if got := missNotes(m, partition.MethodFreq, []string{"nodes", "edges", "train"}, 1.1); got != nil {
		t.Errorf("within --imbalance 1.1: %q, want no note", got)
	}
	// ⌈mean⌉ is the bound where ⌊imbalance · mean⌋ is below it: 10
	// nodes into 3 parts owe a part 4 nodes (1.2 × the mean).
	small := &partition.Manifest{Nodes: 10, Achieved: partition.BalanceAchieved{Nodes: 1.2},
		Part: []partition.PartEntry{{Index: 0, Start: 0, End: 4}, {Index: 1, Start: 4, End: 7}, {Index: 2, Start: 7, End: 10}}}
	if got := missNotes(small, partition.MethodMetis, []string{"nodes"}, 1.03); got != nil {
		t.Errorf("4 of 10 nodes in 3 parts: %q, want no note", got)
	}
	small.Part[0].End, small.Part[1].Start = 5, 5
	small.Achieved.Nodes = 1.5
	want = []string{"note: part 0 owns 1.500 × the mean nodes, more than --imbalance 1.030 allows (5, at most 4): the metis partitioner could not keep --balance nodes"}
	if got := missNotes(small, partition.MethodMetis, []string{"nodes"}, 1.03); !slices.Equal(got, want) {
		t.Errorf("5 of 10 nodes in 3 parts:\n got %q\nwant %q", got, want)
	}
	m.Part[0].Edges, m.Part[1].Edges = 2800, 2315
	want = []string{"note: part 2 stores 1.085 × the mean edges, more than --imbalance 1.030 allows (2862, at most 2718): the freq partitioner could not keep --balance edges (2 parts over it)"}
	if got := missNotes(m, partition.MethodFreq, []string{"nodes", "edges", "train"}, 1.03); !slices.Equal(got, want) {
		t.Errorf("two parts over:\n got %q\nwant %q", got, want)
	}
}

// TestSkewNotes: a quantity not asked for whose heaviest part passes
// 1.5 × the mean is pointed out with its part and the flags that balance
// it; asked-for quantities and mild skew are not.
func TestSkewNotes(t *testing.T) {
	m := &partition.Manifest{
		Edges: 80, Train: 20,
		Achieved: partition.BalanceAchieved{Nodes: 1.01, Edges: 2.5, Train: 1.6},
		Part: []partition.PartEntry{
			{Index: 0, Edges: 10, Train: 5}, {Index: 1, Edges: 50, Train: 3}, {Index: 2, Edges: 20, Train: 8}, {Index: 3, Edges: 0, Train: 4},
		},
	}
	for _, tt := range []struct {
		method string
		asked  []string
		want   []string
	}{
		{partition.MethodMetis, []string{"nodes"}, []string{
			"note: part 1 stores 2.50 × the mean edges (not balanced): its host holds and samples that much more of the graph; --balance nodes,edges evens them",
			"note: part 2 owns 1.60 × the mean training nodes (not balanced): its trainer has that many more seeds per epoch; --balance nodes,train evens them",
		}},
		{partition.MethodMetis, []string{"nodes", "train"}, []string{
			"note: part 1 stores 2.50 × the mean edges (not balanced): its host holds and samples that much more of the graph; --balance nodes,train,edges evens them",
		}},
		{partition.MethodRandom, []string{"nodes"}, []string{
			"note: part 1 stores 2.50 × the mean edges (not balanced): its host holds and samples that much more of the graph; --method metis --balance nodes,edges evens them",
			"note: part 2 owns 1.60 × the mean training nodes (not balanced): its trainer has that many more seeds per epoch; --method metis --balance nodes,train evens them",
		}},
		{partition.MethodFreq, []string{"nodes", "train"}, []string{
			"note: part 1 stores 2.50 × the mean edges (not balanced): its host holds and samples that much more of the graph; --balance nodes,train,edges evens them",
		}},
		{partition.MethodMetis, []string{"nodes", "edges", "train"}, nil},
	} {
		got := skewNotes(m, tt.method, tt.asked)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s %v:\n got %q\nwant %q", tt.method, tt.asked, got, tt.want)
		}
	}
	m.Achieved = partition.BalanceAchieved{Nodes: 1, Edges: 1.5, Train: 1.2}
	if got := skewNotes(m, partition.MethodRandom, []string{"nodes"}); got != nil {
		t.Errorf("skew at 1.5 and below: %q, want no note", got)
	}
}

// TestSkewNotesFloor: a heaviest part that holds no more than any
// partitioning leaves some part gets no flags that cannot even it, but
// why: 5 training nodes in 4 parts leave one 2 (1.6 × the mean), and a
// node storing 40 of 80 edges keeps them together. With more parts than
// training nodes (Cora's 140 into 139 parts, freq) the note offered
// --balance nodes,train, which left train at 1.986.
func TestSkewNotesFloor(t *testing.T) {
	part := func(i int, edges, maxDeg, train uint64) partition.PartEntry {
		return partition.PartEntry{Index: i, Edges: edges, MaxDegree: maxDeg, Train: train}
	}
	m := &partition.Manifest{
		Edges: 80, Train: 5,
		Achieved: partition.BalanceAchieved{Nodes: 1, Edges: 2, Train: 1.6},
		Part:     []partition.PartEntry{part(0, 10, 1, 1), part(1, 40, 40, 1), part(2, 10, 1, 2), part(3, 20, 2, 1)},
	}
	want := []string{
		"note: part 1 stores 2.00 × the mean edges (not balanced): its host holds and samples that much more of the graph; no partitioning evens them: a node stores 40 edges, which stay with it",
		"note: part 2 owns 1.60 × the mean training nodes (not balanced): its trainer has that many more seeds per epoch; no partitioning evens them: 5 training nodes in 4 parts leave some part 2, as a node is not split",
	}
	for _, method := range []string{partition.MethodFreq, partition.MethodMetis, partition.MethodRandom} {
		if got := skewNotes(m, method, []string{"nodes"}); !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", method, got, want)
		}
	}
	// The hub's part stores more than the hub: balancing can move the rest.
	m.Part[1].Edges, m.Part[0].Edges, m.Achieved.Edges = 45, 5, 2.25
	want[0] = "note: part 1 stores 2.25 × the mean edges (not balanced): its host holds and samples that much more of the graph; --balance nodes,edges evens them"
	if got := skewNotes(m, partition.MethodFreq, []string{"nodes"}); !slices.Equal(got, want) {
		t.Errorf("hub and more:\n got %q\nwant %q", got, want)
	}
	// 6 edges in 4 parts: some part stores 2 (1.33 × the mean, posed as
	// over skewNoteAt), whatever the degrees.
	m = &partition.Manifest{
		Edges: 6, Achieved: partition.BalanceAchieved{Nodes: 1, Edges: 1.6},
		Part: []partition.PartEntry{part(0, 2, 1, 0), part(1, 2, 1, 0), part(2, 1, 1, 0), part(3, 1, 1, 0)},
	}
	want = []string{"note: part 0 stores 1.60 × the mean edges (not balanced): its host holds and samples that much more of the graph; no partitioning evens them: 6 edges in 4 parts leave some part 2, as an edge is not split"}
	if got := skewNotes(m, partition.MethodMetis, []string{"nodes"}); !slices.Equal(got, want) {
		t.Errorf("few edges:\n got %q\nwant %q", got, want)
	}
}

// TestPartitionSkewNoteSeeds: freq into more parts than a part's share
// of 5 training nodes can even (4 parts: one holds 2) says that no
// partitioning evens them, and offers no --balance.
func TestPartitionSkewNoteSeeds(t *testing.T) {
	in := filepath.Join(t.TempDir(), "sbm")
	if code, _, stderr := runNode(t, "gen", "sbm", "--nodes", "200", "--feat-dim", "4", "--train-frac", "0.025", "-o", in); code != 0 {
		t.Fatalf("gen sbm: %s", stderr)
	}
	code, stdout, stderr := runNode(t, "partition", "--input", in, "--format", "ogb", "--parts", "4", "--method", "freq", "-o", filepath.Join(t.TempDir(), "parts"))
	if code != 0 {
		t.Fatalf("partition: code %d\n%s\n%s", code, stdout, stderr)
	}
	want := "owns 1.60 × the mean training nodes (not balanced): its trainer has that many more seeds per epoch; no partitioning evens them: 5 training nodes in 4 parts leave some part 2, as a node is not split\n"
	if !strings.Contains(stdout, "split keep: 5/") || !strings.Contains(stdout, want) || strings.Contains(stdout, "nodes,train evens them") {
		t.Errorf("stdout:\n%s\nwant %q and no --balance nodes,train", stdout, want)
	}
}

// TestPartitionSkewNoteCLI: a star of 40 leaves split at random into 4
// parts leaves the hub's part with its 40 in-edges besides its share of
// the leaves' (at least 2 × the mean of 20); partition says so and how to
// balance edges.
func TestPartitionSkewNoteCLI(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "0 %d\n", i)
	}
	in := filepath.Join(t.TempDir(), "star.txt")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "parts")
	code, stdout, stderr := runNode(t, "partition", "--input", in, "--format", "edgelist", "--parts", "4",
		"--undirected", "--fanouts", "none", "-o", out)
	if code != 0 {
		t.Fatalf("partition: code %d\n%s\n%s", code, stdout, stderr)
	}
	m, err := partition.OpenDir(out)
	if err != nil {
		t.Fatal(err)
	}
	hub := m.Part[0]
	for _, p := range m.Part {
		if p.Edges > hub.Edges {
			hub = p
		}
	}
	want := fmt.Sprintf("note: part %d stores %.2f × the mean edges (not balanced)", hub.Index, m.Achieved.Edges)
	if m.Achieved.Edges < 2 || !strings.Contains(stdout, want) || !strings.Contains(stdout, "--method metis --balance nodes,edges evens them") {
		t.Errorf("edges balance %.3f; output lacks %q:\n%s", m.Achieved.Edges, want, stdout)
	}
}

// TestPartitionOneWayNote: OGB ships ogbn-products and ogbn-proteins
// with each pair once in raw/edge.csv, and its loader adds the reverses;
// read so, without --undirected, the graph kept half its edges, said
// "reverse edges added 0" and nothing else.
func TestPartitionOneWayNote(t *testing.T) {
	dir := t.TempDir()
	oneWay := filepath.Join(dir, "products")
	twoWay := filepath.Join(dir, "twoway")
	for path, edges := range map[string]string{
		oneWay: "0,1\n1,2\n2,3\n0,3\n",
		twoWay: "0,1\n1,0\n1,2\n2,3\n", // one pair listed both ways is enough
	} {
		if err := os.MkdirAll(filepath.Join(path, "raw"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, "raw", "edge.csv"), []byte(edges), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const note = "note: none of the 4 edges stored has its reverse stored: an undirected graph listed once per pair reads as directed with half its edges. " +
		"OGB ships ogbn-products and ogbn-proteins so (its loader adds the reverse edges): --undirected adds them. A directed graph needs nothing.\n"
	for _, tt := range []struct {
		name    string
		args    []string
		cleaned string
		note    bool
	}{
		{"one way", []string{"--input", oneWay}, "cleaned: 4 edges stored (direction in); self loops 0 (dropped 0), duplicates dropped 0, reverse edges added 0,", true},
		{"one way, --undirected", []string{"--input", oneWay, "--undirected"}, "cleaned: 8 edges stored (direction in); self loops 0 (dropped 0), duplicates dropped 0, reverse edges added 4,", false},
		{"one pair both ways", []string{"--input", twoWay}, "cleaned: 4 edges stored (direction in);", false},
		{"one way, direction out", []string{"--input", oneWay, "--direction", "out"}, "cleaned: 4 edges stored (direction out);", true},
	} {
		args := append([]string{"partition", "--format", "ogb", "-o", filepath.Join(t.TempDir(), "parts")}, tt.args...)
		code, stdout, stderr := runNode(t, args...)
		if code != 0 {
			t.Errorf("%s: code %d\n%s\n%s", tt.name, code, stdout, stderr)
			continue
		}
		if !strings.Contains(stdout, tt.cleaned) {
			t.Errorf("%s: stdout lacks %q:\n%s", tt.name, tt.cleaned, stdout)
		}
		if got := strings.Contains(stdout, note); got != tt.note {
			t.Errorf("%s: note printed %v, want %v:\n%s", tt.name, got, tt.note, stdout)
		}
		if strings.Count(stdout, "note: none of") > 1 {
			t.Errorf("%s: the note printed twice:\n%s", tt.name, stdout)
		}
	}
}

// TestOneWayText: past partition.OneWay's sample the note says how many
// edges it rests on.
func TestOneWayText(t *testing.T) {
	for _, tt := range []struct {
		checked, stored uint64
		want            string
	}{
		{4, 4, "note: none of the 4 edges stored has its reverse stored: "},
		{1 << 16, 61859140, "note: none of 65536 edges checked, spread over the 61859140 stored, has its reverse stored: "},
	} {
		got := oneWayText(tt.checked, tt.stored)
		if !strings.HasPrefix(got, tt.want) || !strings.Contains(got, "--undirected adds them") {
			t.Errorf("oneWayText(%d, %d) = %q, want it to begin %q and name --undirected", tt.checked, tt.stored, got, tt.want)
		}
	}
}

// TestPartitionNoSplitNote: a LINQS graph (no split of its own)
// partitioned with the default --split keep has no training nodes, and
// node partition says so and how to draw a split: a trainer then failed
// with "partition 0 has no train nodes". With a split, no note. Read
// without --undirected (the format guessed from the files), it says that
// DGL and PyG read LINQS graphs both ways: a few citations go both ways,
// so the note of a graph with no reverse edge at all kept quiet.
func TestPartitionNoSplitNote(t *testing.T) {
	in := t.TempDir()
	var content strings.Builder
	for i := range 12 {
		fmt.Fprintf(&content, "p%d\t1\t0\t%d\tclass%d\n", i, i%2, i%3)
	}
	var cites strings.Builder
	for i := range 12 {
		fmt.Fprintf(&cites, "p%d\tp%d\n", i, (i+1)%12)
	}
	cites.WriteString("p1\tp0\n") // one citation both ways, as a few of Cora's
	for name, body := range map[string]string{"cora.content": content.String(), "cora.cites": cites.String()} {
		if err := os.WriteFile(filepath.Join(in, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const note = "note: no training nodes: the input carries no split of its own"
	const linqsNote = "note: LINQS lists each citation once, citing to cited: DGL and PyG train on Cora and CiteSeer undirected"
	for _, tc := range []struct {
		split      string
		undirected bool
		note       bool
	}{{"keep", true, true}, {"random:0.5,0.25,0.25", true, false}, {"random:0.5,0.25,0.25", false, false}} {
		args := []string{"partition", "--input", in, "--parts", "1", "--split", tc.split, "-o", filepath.Join(t.TempDir(), "parts")}
		if tc.undirected {
			args = append(args, "--undirected")
		}
		code, stdout, stderr := runNode(t, args...)
		// Read one way, a LINQS graph says how DGL and PyG read it.
		if code != 0 || strings.Contains(stdout, note) != tc.note || strings.Contains(stdout, linqsNote) == tc.undirected {
			t.Errorf("--split %s, undirected %v: exit %d, stdout:\n%s\nstderr: %s\nwant the split note: %v, the LINQS note: %v",
				tc.split, tc.undirected, code, stdout, stderr, tc.note, !tc.undirected)
		}
	}
}

// TestPartitionStoppedBySignal: node partition and node gen stopped by a
// signal say which, not "context canceled" alone, and leave no output.
func TestPartitionStoppedBySignal(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received")) // as signal.NotifyContext says it
	in := writeEdgeList(t, 12)
	for _, args := range [][]string{
		{"partition", "--input", in, "--parts", "2"},
		{"gen", "sbm", "--nodes", "1000"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		var stdout, stderr strings.Builder
		code := run(ctx, append(args, "-o", out), &stdout, &stderr)
		if want := "node " + args[0] + ": stopped by SIGINT (Ctrl-C): "; code != 1 || !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "node "+args[0]+": context canceled") {
			t.Errorf("%v stopped: exit %d, stderr %q; want 1 and %q", args, code, stderr.String(), want)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v stopped: %s left (%v)", args, out, err)
		}
	}
}
