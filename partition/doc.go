// Package partition turns an input graph into a parts/ directory: one
// partition file per host (package csr), the relabelled-id map and a
// graph.toml manifest (DESIGN.md §4).
//
// The pipeline, in the order a caller (cmd/node's partition command) runs
// it:
//
//  1. Read (or a generator) builds a Graph: dense node indices, the edges
//     as parallel Src/Dst arrays, features, labels, splits, ids. Readers
//     apply the dangling-edge and missing-label policies and count what
//     they saw in Graph.Stats.
//  2. BuildAdj applies the cleaning policies (self loops, duplicates,
//     --undirected) while it builds the adjacency in CSR form, keyed by the
//     node that is expanded when sampling (the destination for direction
//     In). It consumes Graph.Src/Dst/Weights/Etypes: they are nil after it.
//     Adj.OneWay then tells a graph no edge of which is stored with its
//     reverse (an undirected one listed once per pair, read without
//     --undirected), for the caller to say so.
//  3. Split keeps the input's train/val/test splits or draws new ones
//     (random fractions, Planetoid-style per class) from a seed.
//  4. CheckWrite refuses what Write would refuse of the graph and the
//     write options alone (a cache without features, features float16
//     cannot hold, names graph.toml cannot hold), before the assignment.
//  5. Assign gives every node a partition (random balanced, multilevel,
//     frequency); methods plug in at one switch in Assign. The multilevel
//     partitioner itself, and the METIS graph format it shares with
//     gpmetis, are package partition/multilevel, which depends on the
//     standard library alone.
//  6. Write relabels nodes so that partition p owns the contiguous range
//     [start_p, end_p) (partition by partition, old index order within),
//     writes part-K/part.csr, orig_ids.bin (new id -> original id, u64
//     LE), names.txt for string ids, the triple files of a knowledge
//     graph, and graph.toml last, into a temporary directory renamed into
//     place (or, for an empty existing output, made in it and moved up).
//
// Readers of a parts/ directory call OpenDir, which validates graph.toml
// against the files, and Manifest.Book for the owner of a global id;
// Inspect computes the per-partition report of `node inspect`.
//
// Layout of a parts/ directory:
//
//	parts/
//	  graph.toml            Manifest: counts, ranges, method, file CRCs
//	  orig_ids.bin          u64 LE [nodes]: new id -> original id
//	  names.txt             string ids: line i = name of original index i
//	  relations.txt         knowledge graphs: line r = relation r
//	  triples-valid.bin     knowledge graphs: u64 LE (head, rel, tail) in new ids
//	  triples-test.bin
//	  part-0/part.csr       indptr, indices (new global ids, rows sorted),
//	  part-1/part.csr       weights, etype, feat, label, train/val/test
//
// Functions of this package are safe for concurrent use on distinct
// Graphs; a Graph and an Adj are not safe for concurrent mutation. Long
// steps take a context and check it once per batch of rows or edges, and
// report how far they are through a Progress.
package partition
