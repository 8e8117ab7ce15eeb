package partition

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"graphnode/csr"
)

// ringDirs partitions a directed ring of n nodes (every part file of a
// given part has the same size whatever the seed: same ranges, same
// edge count, no features) into 2 parts with seeds 1 and 2.
func ringDirs(t *testing.T, n int) (a, b string) {
	t.Helper()
	ring := func() *Graph { // BuildAdj takes the edges: one graph a partitioning
		g := &Graph{Name: "ring", NumNodes: n, Src: make([]uint32, n), Dst: make([]uint32, n)}
		for v := range n {
			g.Src[v], g.Dst[v] = uint32(v), uint32((v+1)%n)
		}
		return g
	}
	a, b = filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	partitionTo(t, ring(), a, csr.In, 2, WriteOptions{Seed: 1})
	partitionTo(t, ring(), b, csr.In, 2, WriteOptions{Seed: 2})
	return a, b
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOpenPartOtherPartitioning: a part file of another partitioning of
// the same graph, of the very size graph.toml records, put in place of
// the right one (two runs' outputs mixed in one directory, or a host
// given the wrong run's part) is refused by OpenPart, which node run
// calls, and OpenDir, naming the file; it was taken, and node run served
// another partitioning's ids under this one's book.
func TestOpenPartOtherPartitioning(t *testing.T) {
	a, b := ringDirs(t, 64)
	for _, f := range []string{PartFile(0), PartFile(1)} {
		sa, errA := os.Stat(filepath.Join(a, f))
		sb, errB := os.Stat(filepath.Join(b, f))
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if sa.Size() != sb.Size() {
			t.Fatalf("%s: sizes %d and %d: the test needs equal sizes", f, sa.Size(), sb.Size())
		}
	}
	if _, err := OpenPart(a, 1); err != nil {
		t.Fatalf("OpenPart of a whole directory: %v", err)
	}
	copyFile(t, filepath.Join(b, PartFile(1)), filepath.Join(a, PartFile(1)))
	if _, err := OpenPart(a, 0); err != nil {
		t.Errorf("OpenPart(0) with part 1 swapped: %v, want part 0 taken", err)
	}
	for name, open := range map[string]func() (*Manifest, error){
		"OpenPart(1)": func() (*Manifest, error) { return OpenPart(a, 1) },
		"OpenDir":     func() (*Manifest, error) { return OpenDir(a) },
	} {
		_, err := open()
		if err == nil {
			t.Errorf("%s with part 1 of another partitioning: no error", name)
			continue
		}
		msg := err.Error()
		for _, want := range []string{filepath.Join(a, PartFile(1)), `part[1].header_crc32c`, "another partitioning"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q lacks %q", name, msg, want)
			}
		}
		if !errors.Is(err, csr.ErrCorrupt) {
			t.Errorf("%s: %v does not wrap csr.ErrCorrupt", name, err)
		}
		if len(problemsOf(err)) != 1 {
			t.Errorf("%s: %d problems, want 1: %v", name, len(problemsOf(err)), err)
		}
	}
}
