package partition

import (
	"context"
	"slices"
)

// Graph is an input graph held in memory between a reader (or generator)
// and the partitioner. Nodes are dense indices 0..NumNodes-1 in input
// order; IDs maps them back to the input's ids. Edges are directed
// src -> dst as the input states them; policies (self loops, duplicates,
// --undirected) are applied by Clean, not by readers.
//
// Large graphs keep everything in flat slices of fixed-width numbers so
// that memory is a small multiple of the edge count and the GC never walks
// pointers.
type Graph struct {
	Name     string
	NumNodes int

	// Src and Dst are parallel: edge e goes Src[e] -> Dst[e].
	Src, Dst []uint32
	// Weights, when non-nil, has one value per edge.
	Weights []float32
	// Etypes, when non-nil, has one relation id per edge (knowledge graphs).
	Etypes []uint32

	IDs IDMap

	// Feat holds NumNodes rows of FeatDim float32, or is nil.
	FeatDim int
	Feat    []float32

	// Labels holds NumNodes rows of LabelDim int32 (-1 = missing), or is
	// nil. LabelDim is 1 for a class index, C for multi-hot labels.
	LabelDim   int
	Labels     []int32
	NumClasses int
	ClassNames []string // optional: ClassNames[c] is the input's name of class c

	// Train, Val and Test are node indices of the splits (nil = none given).
	Train, Val, Test []uint32

	// KG holds what only knowledge graphs have; nil otherwise.
	KG *KG

	// Stats records what the reader saw and which policies dropped what,
	// so that nothing is dropped silently.
	Stats Stats
}

// IDMap maps dense node indices back to the input's ids. Exactly one of
// Ints and Names is set, or neither when the input ids are 0..N-1 already.
type IDMap struct {
	Ints  []uint64 // Ints[i] is the integer id of node i
	Names []string // Names[i] is the string id of node i
}

// Orig is the original id of node i as uint64. For string ids it is i
// itself (the names are written beside it).
func (m IDMap) Orig(i uint32) uint64 {
	if m.Ints != nil {
		return m.Ints[i]
	}
	return uint64(i)
}

// KG is the knowledge-graph side of a Graph: the triples of Src/Dst/Etypes
// are the training triples; validation and test triples are kept apart.
type KG struct {
	RelationNames []string // RelationNames[r] is relation r's name
	Valid, Test   Triples
}

// MemoryFloor is a floor of the bytes that partitioning g allocates
// beyond g itself: per node 8 bytes of adjacency row offsets (BuildAdj),
// 4 of assignment and 4 of new ids (Write); per edge 4 bytes of stored
// neighbour. A machine with less memory and swap in all cannot partition
// g, however the stages are ordered.
func (g *Graph) MemoryFloor() uint64 {
	return 16*uint64(g.NumNodes) + 4*uint64(len(g.Src))
}

// DistinctSelfLoops counts g's self loops as distinct ones, as the
// duplicates policy tells edges apart: a loop at one node (and, in a
// knowledge graph, of one relation) listed again counts once.
// Stats.SelfLoops, which BuildAdj sets, counts every one listed: the
// Planetoid CiteSeer graph lists each of its 124 self loops twice, 248.
// Call it before BuildAdj, which consumes the edges.
func (g *Graph) DistinctSelfLoops(ctx context.Context) (int64, error) {
	var keys []uint64
	for e := range g.Src {
		if e%cancelEvery == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		if g.Src[e] != g.Dst[e] {
			continue
		}
		k := uint64(g.Src[e]) << 32
		if g.Etypes != nil {
			k |= uint64(g.Etypes[e])
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return int64(len(slices.Compact(keys))), nil
}

// Triples are parallel arrays of (head, relation, tail) in node indices.
type Triples struct {
	Head, Rel, Tail []uint32
}

// Len is the number of triples.
func (t Triples) Len() int { return len(t.Head) }

// Stats counts what ingestion saw and dropped.
type Stats struct {
	Lines         int64 // data lines read (comments and headers excluded)
	EdgesRead     int64 // edges as read, before any policy
	SelfLoops     int64 // self loops seen, each time one is listed (Graph.DistinctSelfLoops counts them once)
	SelfLoopsDrop int64 // self loops dropped by policy
	Duplicates    int64 // duplicate edges dropped by policy
	Dangling      int64 // edges whose endpoint is not a known node
	DanglingDrop  int64 // ... of which dropped by policy
	MissingLabels int64 // nodes without a label
	ReverseAdded  int64 // reverse edges added by --undirected
	// EvalRepeats: knowledge-graph valid and test triples that repeat
	// one before them in their file, kept or dropped by
	// ReadOptions.EvalRepeats (a repeat counted twice in MRR and Hits@k).
	EvalRepeats int64
}
