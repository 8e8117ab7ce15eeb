package main

// The notes node partition prints after a run: edges stored one way, and
// balance constraints missed or skewed by what the graph allows.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"graphnode/partition"
)

// oneWayNote is the line that points out a graph read without
// --undirected of which no edge is stored with its reverse, or "". OGB
// ships its undirected datasets so, each pair once in raw/edge.csv, and
// its loader adds the reverses (add_inverse_edge in its master.csv, which
// the download lacks): read as they are, ogbn-products kept 61,859,140
// of the 123,718,280 edges DGL and PyG load, and said "reverse edges
// added 0". A knowledge graph is left out: a reverse keeps its relation
// and is a triple the graph lacks (node kge refuses --undirected).
func oneWayNote(ctx context.Context, g *partition.Graph, adj *partition.Adj, undirected bool) (string, error) {
	if undirected || g.KG != nil {
		return "", nil
	}
	oneWay, checked, err := adj.OneWay(ctx)
	if err != nil || !oneWay {
		return "", err
	}
	return oneWayText(checked, adj.NumEdges()), nil
}

// oneWayText is oneWayNote's line when checked of the stored edges were.
func oneWayText(checked, stored uint64) string {
	which := fmt.Sprintf("none of the %d edges stored has its reverse stored", stored)
	if checked < stored {
		which = fmt.Sprintf("none of %d edges checked, spread over the %d stored, has its reverse stored", checked, stored)
	}
	return "note: " + which + ": an undirected graph listed once per pair reads as directed with half its edges. " +
		"OGB ships ogbn-products and ogbn-proteins so (its loader adds the reverse edges): --undirected adds them. " +
		"A directed graph needs nothing."
}

// balanceQuantity is a quantity --balance names, as the parts of a
// partitioning hold it.
type balanceQuantity struct {
	name, verb, noun string
	total            uint64
	achieved         float64 // graph.toml's heaviest part over the mean
	of               func(p partition.PartEntry) uint64
}

// balanceQuantities are nodes, edges and training nodes in m.
func balanceQuantities(m *partition.Manifest) []balanceQuantity {
	return []balanceQuantity{
		{partition.BalanceNodes, "owns", "nodes", m.Nodes, m.Achieved.Nodes, func(p partition.PartEntry) uint64 { return p.End - p.Start }},
		{partition.BalanceEdges, "stores", "edges", m.Edges, m.Achieved.Edges, func(p partition.PartEntry) uint64 { return p.Edges }},
		{partition.BalanceTrain, "owns", "training nodes", m.Train, m.Achieved.Train, func(p partition.PartEntry) uint64 { return p.Train }},
	}
}

// heaviest is the part of m (which has one at least) holding the most
// of q, the first of those.
func (q balanceQuantity) heaviest(m *partition.Manifest) partition.PartEntry {
	heavy := m.Part[0]
	for _, p := range m.Part[1:] {
		if q.of(p) > q.of(heavy) {
			heavy = p
		}
	}
	return heavy
}

// missNotes are the lines that point out, for each quantity in asked, a
// heaviest part above the bound the partitioners keep, max(⌈mean⌉,
// ⌊imbalance · mean⌋) (a part cannot hold a fraction of a node): the
// balance line shows the number, but not that the bound asked for was
// not kept. The freq partitioner places every trainer's seeds and fills
// the parts hottest node first, and can leave a part over its edge bound
// (Cora into 16 parts: 1.041 × the mean under 1.03).
func missNotes(m *partition.Manifest, method string, asked []string, imbalance float64) []string {
	var notes []string
	for _, q := range balanceQuantities(m) {
		if !slices.Contains(asked, q.name) || len(m.Part) == 0 || q.total == 0 {
			continue
		}
		mean := float64(q.total) / float64(len(m.Part))
		bound := max(uint64(math.Ceil(mean)), uint64(imbalance*mean))
		over := 0
		for _, p := range m.Part {
			if q.of(p) > bound {
				over++
			}
		}
		if over == 0 {
			continue
		}
		heavy := q.heaviest(m)
		line := fmt.Sprintf("note: part %d %s %.3f × the mean %s, more than --imbalance %.3f allows (%d, at most %d): the %s partitioner could not keep --balance %s",
			heavy.Index, q.verb, float64(q.of(heavy))/mean, q.noun, imbalance, q.of(heavy), bound, method, q.name)
		if over > 1 {
			line += fmt.Sprintf(" (%d parts over it)", over)
		}
		notes = append(notes, line)
	}
	return notes
}

// skewNoteAt is the max/mean of a quantity partition was not asked to
// balance above which it says which part is heavy and how to even it.
// Lowest-cut partitions of power-law graphs under --balance nodes put
// the hubs together: the 50 k node R-MAT graph of the README into 16
// parts leaves one part with 10.6 × the mean edges.
const skewNoteAt = 1.5

// skewCost is what a heavy part of each quantity costs (nodes are
// always balanced: none).
var skewCost = map[string]string{
	partition.BalanceEdges: "its host holds and samples that much more of the graph",
	partition.BalanceTrain: "its trainer has that many more seeds per epoch",
}

// skewNotes are the lines that point out, for edges and training nodes
// when not in asked, a heaviest part above skewNoteAt × the mean: which
// part, how far over, what it costs its host, and the flags that balance
// it (adding --method metis where method cannot), or, where the part
// holds no more than any partitioning leaves some part (see skewFloor),
// why none evens them: with more parts than training nodes (Cora's 140
// into 139 parts) the note offered --balance nodes,train, which leaves
// the train balance where it was.
func skewNotes(m *partition.Manifest, method string, asked []string) []string {
	var notes []string
	for _, q := range balanceQuantities(m) {
		cost := skewCost[q.name]
		if cost == "" || slices.Contains(asked, q.name) || q.achieved <= skewNoteAt || len(m.Part) == 0 {
			continue
		}
		heavy := q.heaviest(m)
		line := fmt.Sprintf("note: part %d %s %.2f × the mean %s (not balanced): %s; ", heavy.Index, q.verb, q.achieved, q.noun, cost)
		if least, why := skewFloor(m, q); q.of(heavy) <= least {
			notes = append(notes, line+"no partitioning evens them: "+why)
			continue
		}
		fix := "--balance " + strings.Join(append(slices.Clone(asked), q.name), ",")
		if !slices.Contains(partition.Balances(method), q.name) {
			fix = "--method " + partition.MethodMetis + " " + fix
		}
		notes = append(notes, line+fix+" evens them")
	}
	return notes
}

// skewFloor is the least of q that any partitioning of m into its parts
// leaves its heaviest part, and why. Nodes and edges are not split: some
// part holds ⌈total / parts⌉ (two of 140 training nodes in 139 parts),
// and the part that owns the node storing the most edges stores them all.
func skewFloor(m *partition.Manifest, q balanceQuantity) (least uint64, why string) {
	parts := uint64(len(m.Part))
	least = (q.total + parts - 1) / parts
	why = fmt.Sprintf("%d %s in %d parts leave some part %d, as a node is not split", q.total, q.noun, parts, least)
	if q.name == partition.BalanceEdges {
		why = fmt.Sprintf("%d edges in %d parts leave some part %d, as an edge is not split", q.total, parts, least)
		if d, ok := m.MaxDegree(); ok && d > least {
			least = d
			why = fmt.Sprintf("a node stores %d edges, which stay with it", d)
		}
	}
	return least, why
}
