package node

import (
	"testing"

	"graphnode/csr"
	"graphnode/node/control"
)

// TestMaxRecordOfTheSet: with fanout -1 the worst-case record is bounded
// by a degree, and a node's samplers expand nodes of every part: the
// bound must be the set's largest degree (graph.toml's max_degree), not
// the node's own part's, which a batch seeded on the other part's
// largest-degree nodes outgrew (1600 bytes against the 1536 announced).
func TestMaxRecordOfTheSet(t *testing.T) {
	c := startMeshCluster(t, 2, 0, csr.TypeF32, 0)
	deg := make([]int, 2)
	for p, part := range c.parts_ {
		deg[p] = maxDegree(part.Graph().Indptr())
	}
	lowP, highP := 0, 1
	if deg[0] > deg[1] {
		lowP, highP = 1, 0
	}
	t.Logf("max degree: part 0 %d, part 1 %d", deg[0], deg[1])
	if deg[lowP] == deg[highP] {
		t.Skip("parts have equal max degree")
	}
	lo, hi := c.book.Range(highP)
	var seeds []uint64
	for v := lo; v < hi && len(seeds) < 4; v++ {
		if len(c.parts_[highP].Neighbors(uint32(v-lo))) > deg[lowP] {
			seeds = append(seeds, v)
		}
	}
	o := control.LoaderOptions{SeedIDs: seeds, Fanouts: []int{-1}, BatchSize: len(seeds), Epochs: 1, WorldSize: 1, Features: true, Labels: true}
	schema, err := loaderSchema(c.parts_[lowP].Graph(), o)
	if err != nil {
		t.Fatal(err)
	}
	setMax, ok := c.m.MaxDegree()
	if !ok || int(setMax) != deg[highP] {
		t.Fatalf("graph.toml's largest degree %d (%v), the files' %d", setMax, ok, deg[highP])
	}
	announced, err := maxRecord(o, len(seeds), c.book.NumNodes(), int(setMax), true, schema)
	if err != nil {
		t.Fatal(err)
	}
	rec := c.union(t, o, seeds)[0][0]
	t.Logf("node of part %d announces max_record %d; batch of %d seeds of part %d: record of %d bytes", lowP, announced, len(seeds), highP, len(rec))
	if int64(len(rec)) > announced {
		t.Errorf("a record of %d bytes exceeds the worst case %d of the set's largest degree %d", len(rec), announced, setMax)
	}
}
