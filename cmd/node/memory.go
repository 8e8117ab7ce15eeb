package main

import (
	"fmt"

	"graphnode/partition"
)

// checkMemoryFloor refuses to partition a graph that cannot fit in a
// machine of have bytes of memory and swap (0: unknown) however the work
// is ordered (see partition.Graph.MemoryFloor): a node count in a header
// or count file that is off by digits would otherwise end in the
// runtime's "out of memory" crash, or the kernel's OOM killer, after the
// read.
func checkMemoryFloor(input string, g *partition.Graph, have uint64) error {
	need := g.MemoryFloor()
	if have == 0 || need <= have {
		return nil
	}
	return fmt.Errorf("partition: %s: %d nodes and %d edges need at least %s beyond the graph read "+
		"(16 bytes a node, 4 an edge), more than the %s of memory and swap of this machine; "+
		"is the node count right?", input, g.NumNodes, len(g.Src),
		partitionBytes(int64(need)), partitionBytes(int64(have)))
}
