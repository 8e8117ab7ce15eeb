// Command floor is the least a Go program does in perf/metis's child
// without partitioning: it reads a METIS graph file with the standard
// library only (no graphnode package linked), keeps its adjacency as
// int32 arrays and writes a partition file (vertex i in part i mod k).
// Its peak RSS and wall time are the floor under a Go partitioner on
// small graphs, to set against gpmetis's whole run (perf/metis/README.md,
// "Cora"):
//
//	go build -o /tmp/floor ./perf/metis/floor
//	/usr/bin/time -f '%M KiB %e s' /tmp/floor /tmp/metis-compare/cora.metis 2 /tmp/floor.part
package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: floor GRAPH.metis K OUT")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(path, kArg, out string) error {
	k, err := strconv.Atoi(kArg)
	if err != nil || k < 1 {
		return fmt.Errorf("k %q: want a positive integer", kArg)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	xadj, adj, err := parse(b)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	n := len(xadj) - 1
	parts := make([]byte, 0, 3*n)
	for v := range n {
		parts = strconv.AppendInt(parts, int64(v%k), 10)
		parts = append(parts, '\n')
	}
	fmt.Printf("%d vertices, %d adjacency entries\n", n, len(adj))
	return os.WriteFile(out, parts, 0o644)
}

// parse reads every number of every vertex line (weights included, as a
// reader must) after the header and comment lines.
func parse(b []byte) (xadj, adj []int32, err error) {
	header := true
	xadj = []int32{0}
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) > 0 && line[0] == '%' {
			continue
		}
		if header {
			header = false
			continue
		}
		for _, f := range bytes.Fields(line) {
			x, err := strconv.ParseInt(string(f), 10, 32)
			if err != nil {
				return nil, nil, fmt.Errorf("vertex %d: %w", len(xadj), err)
			}
			adj = append(adj, int32(x))
		}
		xadj = append(xadj, int32(len(adj)))
	}
	if header {
		return nil, nil, fmt.Errorf("no header line")
	}
	return xadj, adj, nil
}
