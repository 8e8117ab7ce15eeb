// Command floor is the least a Go program does in perf/metis's child
// without partitioning: it reads a METIS graph file with the standard
// library only (os and strconv: no graphnode package, no fmt), keeps its
// adjacency as int32 arrays and writes a partition file (vertex i in part
// i mod k). Its peak RSS and wall time are the floor under a Go
// partitioner on small graphs, to set against gpmetis's whole run
// (perf/metis/README.md, "Cora"):
//
//	go build -trimpath -ldflags=-s -o /tmp/floor ./perf/metis/floor
//	/usr/bin/time -f '%M KiB %e s' /tmp/floor /tmp/metis-compare/cora.metis 2 /tmp/floor.part
package main

import (
	"errors"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) != 4 {
		os.Stderr.WriteString("usage: floor GRAPH.metis K OUT\n")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		os.Stderr.WriteString("floor: " + err.Error() + "\n")
		os.Exit(1)
	}
}

func run(path, kArg, out string) error {
	k, err := strconv.Atoi(kArg)
	if err != nil || k < 1 {
		return errors.New("k " + strconv.Quote(kArg) + ": want a positive integer")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	xadj, adj, err := parse(b)
	if err != nil {
		return errors.New(path + ": " + err.Error())
	}
	n := len(xadj) - 1
	parts := make([]byte, 0, 3*n)
	for v := range n {
		parts = strconv.AppendInt(parts, int64(v%k), 10)
		parts = append(parts, '\n')
	}
	os.Stdout.WriteString(strconv.Itoa(n) + " vertices, " + strconv.Itoa(len(adj)) + " adjacency entries\n")
	return os.WriteFile(out, parts, 0o644)
}

// parse reads every number of every vertex line (weights included, as a
// reader must) after the header and comment lines, into arrays sized by
// the file (every number takes at least two bytes).
func parse(b []byte) (xadj, adj []int32, err error) {
	header := true
	xadj = append(make([]int32, 0, 1+len(b)/2), 0)
	adj = make([]int32, 0, len(b)/2)
	for len(b) > 0 {
		end := 0
		for end < len(b) && b[end] != '\n' {
			end++
		}
		line := b[:end]
		b = b[min(end+1, len(b)):]
		if len(line) > 0 && line[0] == '%' {
			continue
		}
		if header {
			header = false
			continue
		}
		for i := 0; i < len(line); {
			for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
				i++
			}
			j := i
			for j < len(line) && line[j] != ' ' && line[j] != '\t' {
				j++
			}
			if j == i {
				break
			}
			x, err := strconv.ParseInt(string(line[i:j]), 10, 32)
			if err != nil {
				return nil, nil, errors.New("vertex " + strconv.Itoa(len(xadj)) + ": " + err.Error())
			}
			adj = append(adj, int32(x))
			i = j
		}
		xadj = append(xadj, int32(len(adj)))
	}
	if header {
		return nil, nil, errors.New("no header line")
	}
	return xadj, adj, nil
}
