package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"graphnode/partition"
	"graphnode/partition/multilevel"
)

// loadGraph builds the named comparison graph as an undirected Graph.
func loadGraph(ctx context.Context, name, data string) (*multilevel.Graph, error) {
	switch name {
	case "cora":
		return loadCora(filepath.Join(data, "cora"))
	case "blogcatalog":
		return loadBlogCatalog(filepath.Join(data, "blogcatalog", "edges.csv"))
	case "rmat1m":
		return rmat(ctx, 1_000_000, 10_000_000)
	case "rmat2m":
		return rmat(ctx, 2_400_000, 62_000_000)
	}
	return nil, fmt.Errorf("metis: unknown graph %q: want cora, blogcatalog, rmat1m or rmat2m", name)
}

// rmat generates an R-MAT graph with the package generator (a, b, c =
// 0.57, 0.19, 0.19, noise 0.1, seed 1) and symmetrizes it.
func rmat(ctx context.Context, nodes int, edges int64) (*multilevel.Graph, error) {
	cfg := partition.RMATConfig{Nodes: nodes, Edges: edges, Noise: 0.1, Seed: 1}
	g, err := partition.RMAT(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	return fromPairs(nodes, g.Src, g.Dst)
}

// fromPairs builds the CSR of directed pairs and symmetrizes it.
func fromPairs(n int, src, dst []uint32) (*multilevel.Graph, error) {
	indptr := make([]uint64, n+1)
	for _, u := range src {
		indptr[u+1]++
	}
	for i := 0; i < n; i++ {
		indptr[i+1] += indptr[i]
	}
	fill := make([]uint64, n)
	copy(fill, indptr)
	indices := make([]uint32, len(src))
	for i, u := range src {
		indices[fill[u]] = dst[i]
		fill[u]++
	}
	return multilevel.Symmetrize(n, indptr, indices)
}

// loadCora reads cora.content (node ids) and cora.cites (cited \t citing).
func loadCora(dir string) (*multilevel.Graph, error) {
	ids := map[string]uint32{}
	if err := eachLine(filepath.Join(dir, "cora.content"), func(f []string) error {
		ids[f[0]] = uint32(len(ids))
		return nil
	}); err != nil {
		return nil, err
	}
	var src, dst []uint32
	err := eachLine(filepath.Join(dir, "cora.cites"), func(f []string) error {
		u, ok1 := ids[f[0]]
		v, ok2 := ids[f[1]]
		if !ok1 || !ok2 {
			return fmt.Errorf("unknown paper in %q", strings.Join(f, " "))
		}
		src, dst = append(src, v), append(dst, u)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fromPairs(len(ids), src, dst)
}

// loadBlogCatalog reads edges.csv: "u,v" with ids 1..n.
func loadBlogCatalog(path string) (*multilevel.Graph, error) {
	var src, dst []uint32
	n := 0
	err := eachLine(path, func(f []string) error {
		if len(f) != 1 {
			return fmt.Errorf("want u,v")
		}
		a, b, ok := strings.Cut(f[0], ",")
		u, err1 := strconv.ParseUint(a, 10, 32)
		v, err2 := strconv.ParseUint(b, 10, 32)
		if !ok || err1 != nil || err2 != nil || u == 0 || v == 0 {
			return fmt.Errorf("bad edge %q", f[0])
		}
		src, dst = append(src, uint32(u-1)), append(dst, uint32(v-1))
		n = max(n, int(u), int(v))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fromPairs(n, src, dst)
}

// eachLine calls fn with the whitespace-separated fields of every
// non-empty line of path.
func eachLine(path string, fn func([]string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("metis: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if err := fn(fields); err != nil {
			return fmt.Errorf("metis: %s:%d: %w", path, line, err)
		}
	}
	return sc.Err()
}

// writeMETIS writes g for gpmetis with multilevel.WriteMETIS.
func writeMETIS(path string, g *multilevel.Graph) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("metis: %w", err)
	}
	if err := multilevel.WriteMETIS(f, g); err != nil {
		f.Close()
		return fmt.Errorf("metis: %s: %w", path, err)
	}
	return f.Close()
}

// readParts reads a partition file (one part per line) with
// multilevel.ReadPartition.
func readParts(path string, n int) ([]uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("metis: %w", err)
	}
	defer f.Close()
	return multilevel.ReadPartition(f, n, path)
}
