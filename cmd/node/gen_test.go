package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGenWritesOGB(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		files []string
		lines map[string]int // file -> line count
	}{
		{
			args:  []string{"rmat", "--nodes", "1000", "--edges", "5000", "--feat-dim", "4", "--classes", "3", "--seed", "9"},
			files: []string{"raw/edge.csv", "raw/num-node-list.csv", "raw/num-edge-list.csv", "raw/node-feat.csv", "raw/node-label.csv", "split/random/train.csv", "split/random/valid.csv", "split/random/test.csv"},
			lines: map[string]int{"raw/edge.csv": 5000, "raw/node-feat.csv": 1000, "raw/node-label.csv": 1000},
		},
		{
			args:  []string{"rmat", "--nodes", "100", "--edges", "300", "--undirected", "--feat-dim", "0", "--classes", "0", "--gzip", "--split", "s1"},
			files: []string{"raw/edge.csv.gz", "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz", "split/s1/train.csv.gz"},
		},
		{
			args:  []string{"sbm", "--nodes", "2000", "--blocks", "4", "--avg-degree", "6", "--feat-dim", "8", "--train-frac", "0.5"},
			files: []string{"raw/edge.csv", "raw/node-feat.csv", "raw/node-label.csv", "split/random/train.csv"},
			lines: map[string]int{"raw/edge.csv": 12000, "raw/node-label.csv": 2000, "split/random/train.csv": 1000},
		},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			code, stdout, stderr := runNode(t, append(append([]string{"gen"}, tc.args...), "-o", dir)...)
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			if !strings.HasPrefix(stdout, "gen "+tc.args[0]+": ") || !strings.Contains(stdout, " nodes, ") || !strings.Contains(stdout, " files, ") {
				t.Errorf("summary = %q", stdout)
			}
			for _, f := range tc.files {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("missing %s: %v", f, err)
				}
			}
			for f, want := range tc.lines {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if got := bytes.Count(b, []byte("\n")); got != want {
					t.Errorf("%s: %d lines, want %d", f, got, want)
				}
			}
			// A second run into the same directory needs --force.
			if code, _, stderr := runNode(t, append(append([]string{"gen"}, tc.args...), "-o", dir)...); code != 1 || !strings.Contains(stderr, "not empty") {
				t.Errorf("rerun: exit %d, stderr %q; want 1 and 'not empty'", code, stderr)
			}
			if code, _, stderr := runNode(t, append(append([]string{"gen"}, tc.args...), "-o", dir, "--force")...); code != 0 {
				t.Errorf("rerun --force: exit %d, stderr %q", code, stderr)
			}
		})
	}
}

func TestGenUsage(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		contains []string
	}{
		{[]string{"gen", "--help"}, 0, []string{"usage: node gen rmat|sbm", "sbm"}},
		{[]string{"gen"}, 2, []string{"usage: node gen"}},
		{[]string{"gen", "rmat", "--help"}, 0, []string{"-nodes", "-edges", "-feat-dim", "-classes", "-train-frac", "-val-frac", "-test-frac", "-undirected", "-seed", "-a ", "-b ", "-c ", "-noise", "-gzip", "-force", "-o "}},
		{[]string{"gen", "sbm", "-h"}, 0, []string{"-nodes", "-blocks", "-avg-degree", "-homophily", "-feat-dim", "-signal", "-noise", "-train-frac", "-seed", "-gzip"}},
		{[]string{"gen", "rmat"}, 2, []string{"-o DIR is required"}},
		{[]string{"gen", "rmat", "-o", "x", "extra"}, 2, []string{`unexpected argument "extra"`}},
		{[]string{"gen", "rmat", "--bogus"}, 2, []string{"bogus"}},
		{[]string{"gen", "er"}, 2, []string{`unknown generator "er"`}},
		// Bad values are usage errors, as in every command.
		{[]string{"gen", "sbm", "--homophily", "3", "-o", "x"}, 2, []string{"node gen: partition: sbm: homophily = 3"}},
		// More pairs than a simple graph of 100 nodes holds were drawn,
		// and node partition dropped the repeats.
		{[]string{"gen", "sbm", "--nodes", "100", "--avg-degree", "200", "-o", "x"}, 2, []string{"node gen: partition: sbm: avg degree = 200 with 100 nodes: want at most nodes-1 = 99"}},
		{[]string{"gen", "rmat", "--train-frac", "NaN", "-o", "x"}, 2, []string{"node gen: partition: rmat: train, val, test fractions = NaN"}},
		{[]string{"gen", "rmat", "--nodes", "0", "-o", "x"}, 2, []string{"node gen: partition: rmat: nodes = 0"}},
		// Refused before generating: no machine holds 16 PiB.
		{[]string{"gen", "rmat", "--nodes", "4294967295", "--feat-dim", "1048576", "-o", "x"}, 1, []string{"node gen: rmat: 4294967295 nodes, ", "more than the ", "of memory and swap of this machine"}},
		// The class centroids count: 1e8 classes of 1e5 features hold
		// 80 TB (they were left out, and the run ended in the runtime's
		// "out of memory" crash).
		{[]string{"gen", "rmat", "--classes", "100000000", "--feat-dim", "100000", "-o", "x"}, 1, []string{"node gen: rmat: 65536 nodes, 1048576 edges, 100000 features a node and 100000000 classes hold 72.78 TiB, more than the "}},
		// Labels are int32: 5e9 classes wrote 43 of 100 labels as nan,
		// and 9e12 of 2^20 features overflowed the centroids' length
		// (panic: makeslice).
		{[]string{"gen", "rmat", "--nodes", "100", "--edges", "100", "--classes", "5000000000", "-o", "x"}, 2, []string{"node gen: partition: rmat: classes = 5000000000: want 0..2147483647 (labels are int32)"}},
		{[]string{"gen", "rmat", "--nodes", "10", "--edges", "10", "--classes", "9000000000000", "--feat-dim", "1048576", "-o", "x"}, 2, []string{"classes = 9000000000000: want 0..2147483647"}},
		// Given as 0, a, b and c became Graph500's 0.57, 0.19, 0.19
		// without a word; with one block, --homophily was ignored.
		{[]string{"gen", "rmat", "--a", "0", "--b", "0", "--c", "0", "-o", "x"}, 2, []string{"node gen rmat: --a, --b, --c = 0, 0, 0: d = 1 makes every edge the same self loop"}},
		{[]string{"gen", "sbm", "--blocks", "1", "--homophily", "0", "-o", "x"}, 2, []string{"node gen sbm: --homophily 0 with --blocks 1: every edge stays in the one block"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := runNode(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			for _, s := range tc.contains {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}

// TestGenChecksOutputFirst: a non-empty output without --force is
// refused before the graph is generated (minutes at ogbn-products'
// size), so no generation progress is printed.
func TestGenChecksOutputFirst(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runNode(t, "gen", "rmat", "--nodes", "1000", "--edges", "5000", "-o", out)
	if code != 1 || !strings.Contains(stderr, "holds 1 entries (overwrite with force)") || strings.Contains(stderr, "done in") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1, the output refused, and nothing generated", code, stderr)
	}
	// An output that cannot be made failed after generating (13 s for
	// 2M nodes and 20M edges).
	code, _, stderr = runNode(t, "gen", "rmat", "--nodes", "1000", "--edges", "5000", "-o", "/proc/graphnode-test/ogb")
	if code != 1 || !strings.Contains(stderr, "output /proc/graphnode-test/ogb: cannot write in /proc") || strings.Contains(stderr, "done in") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1, the unwritable output refused, and nothing generated", code, stderr)
	}
}

// TestGenRefusesBadWriteFlags: --split names one folder under split/ and
// --workers is not negative (it was taken as 0, all CPUs); both are
// refused before anything is written.
// --split ../x used to write the split files beside the output's
// temporary directory, move raw/ into place and then fail, leaving a
// graph without splits (with --force, over the old graph's raw/); a/b
// nested the split where partition --split-scheme finds no files.
func TestGenRefusesBadWriteFlags(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--split", "../x"}, `--split "../x": want a folder name`},
		{[]string{"--split", "../../../x"}, `--split "../../../x": want a folder name`},
		{[]string{"--split", "a/b"}, `--split "a/b": want a folder name`},
		{[]string{"--split", ".."}, `--split "..": want a folder name`},
		{[]string{"--workers", "-2"}, "--workers -2: want 0 (all CPUs, at most 256) to 256"},
		// The writer keeps 2*workers+2 chunks in flight: 1e8 ended in
		// the OOM killer, leaving the output's temporary directory.
		{[]string{"--workers", "100000000"}, "--workers 100000000: want 0 (all CPUs, at most 256) to 256"},
		// "" wrote split/random/ without a word.
		{[]string{"--split", ""}, `--split "": want a folder name`},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			root := t.TempDir()
			out := filepath.Join(root, "a", "b", "g")
			args := append([]string{"gen", "sbm", "--nodes", "100", "-o", out}, tc.flags...)
			code, _, stderr := runNode(t, args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want 2 and %q; stderr:\n%s", code, tc.want, stderr)
			}
			if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 {
				t.Errorf("written: %v (%v)", entries, err)
			}
		})
	}
}
