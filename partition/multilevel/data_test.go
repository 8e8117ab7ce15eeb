package multilevel

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"graphnode/internal/datasets"
)

// mlCora is Cora (2708 vertices, 5278 undirected edges) as a Graph: the
// papers of cora.content numbered in file order, the citations of
// cora.cites as undirected edges (the 5429 lines hold duplicates).
func mlCora(t testing.TB) *Graph {
	t.Helper()
	dir := datasets.Dir(t, "cora")
	return mlFromIDFiles(t, filepath.Join(dir, "cora.content"), filepath.Join(dir, "cora.cites"), "\t")
}

// mlBlogCatalog is BlogCatalog (10312 vertices, 333983 edges) as a Graph.
func mlBlogCatalog(t testing.TB) *Graph {
	t.Helper()
	dir := datasets.Dir(t, "blogcatalog")
	return mlFromIDFiles(t, filepath.Join(dir, "nodes.csv"), filepath.Join(dir, "edges.csv"), ",")
}

// mlFromIDFiles numbers the ids in the first field of each line of nodes
// in order and reads the id pairs of edges (the first two fields, split
// by sep).
func mlFromIDFiles(t testing.TB, nodes, edges, sep string) *Graph {
	t.Helper()
	ids := map[string]uint32{}
	mlEachLine(t, nodes, func(line []byte) {
		f, _, _ := bytes.Cut(line, []byte(sep))
		ids[string(f)] = uint32(len(ids))
	})
	var src, dst []uint32
	mlEachLine(t, edges, func(line []byte) {
		a, b, ok := bytes.Cut(line, []byte(sep))
		b, _, _ = bytes.Cut(b, []byte(sep))
		u, uok := ids[string(a)]
		v, vok := ids[string(b)]
		if !ok || !uok || !vok {
			t.Fatalf("%s: line %q names an unknown node", edges, line)
		}
		src, dst = append(src, u), append(dst, v)
	})
	return mlFromEdges(t, len(ids), src, dst)
}

func mlEachLine(t testing.TB, path string, fn func(line []byte)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		if line := bytes.TrimRight(s.Bytes(), "\r"); len(line) > 0 {
			fn(line)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}
