package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"graphnode/csr"
	"graphnode/partition"
)

// TestKGEPartTriplesChanged: a part file truncated or rewritten in place
// while node kge reads its triples (another copy of the parts arriving)
// is an error naming the file. The read was outside csr.Graph.Read, and
// the page past the file's new end ended the trainer with SIGBUS
// ("fatal error: fault" and every goroutine's stack, exit 2).
func TestKGEPartTriplesChanged(t *testing.T) {
	parts := syntheticKG(t, 300, 2000, 10)
	m, err := partition.OpenDir(parts)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(parts, filepath.FromSlash(partition.PartFile(1)))
	g, err := csr.Open(path, csr.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ts, err := partTriples(g, path, m, 1)
	if err != nil || uint64(len(ts)) != m.Part[1].Edges {
		t.Fatalf("before the change: %d triples, %v; want %d", len(ts), err, m.Part[1].Edges)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	ts, err = partTriples(g, path, m, 1)
	if !errors.Is(err, csr.ErrChanged) || !strings.Contains(err.Error(), path) || ts != nil {
		t.Fatalf("part file truncated: %d triples, %v; want csr.ErrChanged naming %s", len(ts), err, path)
	}
}
