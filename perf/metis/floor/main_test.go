package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParse: comment and header lines are skipped, an empty line is a
// vertex without neighbours, every number of a line is kept.
func TestParse(t *testing.T) {
	xadj, adj, err := parse([]byte("% a comment\n3 2\n2 3\n1\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(xadj, []int32{0, 2, 3, 3}) || !slices.Equal(adj, []int32{2, 3, 1}) {
		t.Errorf("xadj %v adj %v", xadj, adj)
	}
	if _, _, err := parse([]byte("2 1\n2\nx\n")); err == nil || !strings.Contains(err.Error(), "vertex 2") {
		t.Errorf("bad number: err %v, want one naming vertex 2", err)
	}
	if _, _, err := parse([]byte("% only a comment\n")); err == nil {
		t.Error("no header: no error")
	}
}

// TestRun writes vertex i into part i mod k.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "g.metis"), filepath.Join(dir, "g.part")
	if err := os.WriteFile(in, []byte("3 2\n2 3\n1\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, "2", out); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "0\n1\n0\n" {
		t.Errorf("partition %q", b)
	}
	if err := run(in, "0", out); err == nil {
		t.Error("k 0: no error")
	}
}
