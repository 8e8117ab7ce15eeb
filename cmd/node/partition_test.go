package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"graphnode/csr"
	"graphnode/partition"
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
		"balance max/mean nodes 1.000",
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
	for _, want := range []string{"12 nodes, 24 edges, 3 parts", "part-2/part.csr  OK", "all 5 files OK"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, stdout)
		}
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
	if !strings.Contains(stderr, "node inspect: "+out+": 1 files FAILED") {
		t.Errorf("stderr: %s", stderr)
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
	} {
		code, _, stderr := runNode(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
}
