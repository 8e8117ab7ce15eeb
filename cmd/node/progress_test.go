package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProgressStop: off a terminal a stage prints one line when done,
// none when stopped (it failed).
func TestProgressStop(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b)
	p.report("read", 1, 10)
	p.report("build", 1, 10) // read is done
	p.stop()
	p.stop()
	p.done()
	if got := b.String(); !strings.HasPrefix(got, "read: done in ") || strings.Count(got, "\n") != 1 || strings.Contains(got, "build") {
		t.Errorf("output %q: want read's done line alone", got)
	}
}

// TestPartitionFailedReadNotDone: a read that fails on a bad line after
// reporting progress (every 65536 lines) does not print "FILE: done in",
// as it did before the error.
func TestPartitionFailedReadNotDone(t *testing.T) {
	var b strings.Builder
	for i := range 70000 {
		fmt.Fprintf(&b, "%d %d\n", i, i+1)
	}
	b.WriteString("5 x y z\n")
	in := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runNode(t, "partition", "--input", in, "--format", "edgelist", "-o", filepath.Join(t.TempDir(), "p"))
	if code != 1 || !strings.Contains(stderr, "bad.txt:70001: want 2 fields, got 4") || strings.Contains(stderr, "done in") {
		t.Errorf("exit %d, want 1, the bad line and no stage done; stderr:\n%s", code, stderr)
	}
}
