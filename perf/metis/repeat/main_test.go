package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRun partitions two triangles joined by one edge twice: a header
// line, then a line per call with the cut of 1, and errors that name a
// bad argument or the missing file.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "g.metis")
	// Vertices 1-3 and 4-6 are triangles; edge 3-4 joins them.
	if err := os.WriteFile(in, []byte("6 7\n2 3\n1 3\n1 2 4\n3 5 6\n4 6\n4 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run(&out, in, "2", "2", []string{"3"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "6 vertices, 7 edges, 2 parts, seed 3") {
		t.Fatalf("output:\n%s\nwant a header and 2 calls", out.String())
	}
	call := regexp.MustCompile(`^call +[12]: +[0-9.]+ ms +[0-9]+ page faults +[0-9]+ KB allocated +[0-9]+ collections +cut 1$`)
	for _, l := range lines[1:] {
		if !call.MatchString(l) {
			t.Errorf("call line %q, want time, faults, bytes, collections and cut 1", l)
		}
	}
	for _, bad := range []struct{ k, calls, want string }{{"0", "1", `parts (K) "0"`}, {"2", "x", `calls "x"`}} {
		if err := run(&out, in, bad.k, bad.calls, nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("K %s CALLS %s: err %v, want one naming %s", bad.k, bad.calls, err, bad.want)
		}
	}
	if err := run(&out, in, "2", "1", []string{"-1"}); err == nil || !strings.Contains(err.Error(), `seed "-1"`) {
		t.Errorf("seed -1: err %v", err)
	}
	if err := run(&out, filepath.Join(dir, "none.metis"), "2", "1", nil); err == nil || !strings.Contains(err.Error(), "none.metis") {
		t.Errorf("missing file: err %v, want it named", err)
	}
}
