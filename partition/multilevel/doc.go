// Package multilevel partitions a weighted undirected graph into k parts
// with few cut edges and every balance constraint within a bound: METIS's
// multilevel recursive bisection (coarsening by matching, grown initial
// bisections, Fiduccia–Mattheyses refinement on every level, greedy k-way
// refinement at the end), in Go, deterministic for a seed whatever the
// worker count. It also reads and writes the METIS graph file, so that
// its results compare with gpmetis's on the same input (perf/metis).
//
// A caller builds a Graph (Symmetrize turns a directed CSR into one;
// Weights gives it the vertex weights of balance constraints "nodes",
// "edges" and "train"), calls Partition, and may Measure the result (edge
// cut, communication volume, balance). Partition reads its Graph and does
// not change it; it is safe to call concurrently on the same Graph.
// ReadMETIS, WriteMETIS and ReadPartition move graphs and partitions to
// and from METIS's files; package partition reads the format through
// METISParser with its own line scanner (gzip, progress).
//
// The package imports the standard library only, and not fmt: a program
// that reads a METIS file and partitions it (perf/metis/child, measured
// against gpmetis) links the partitioner and nothing more. Its errors
// start with "multilevel: " and wrap ErrBadGraph (a malformed Graph) or
// ErrFormat (a malformed METIS file).
package multilevel
