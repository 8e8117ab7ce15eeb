package partition

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"graphnode/csr"
)

// TestReadPlanetoidReal reads the Planetoid files of Cora and CiteSeer and
// checks them against DGL's documented counts (CoraGraphDataset: 2708
// nodes, 10556 edges, 1433 features, 7 classes, 140/500/1000; CiteSeer:
// 3327, 9228, 3703, 6, 120/500/1000), PyG's edge count without self
// loops, and rows read independently from the pickles (Python's pickle
// module, no numpy).
func TestReadPlanetoidReal(t *testing.T) {
	type row struct {
		node  int
		cols  []int // nonzero feature columns, all 1.0
		label int32
	}
	for _, c := range []struct {
		name                         string
		nodes, feats, classes        int
		edges, noLoops               uint64
		train, val, test             int
		pairs, selfLoops, missing    int64
		distinctLoops                int64 // README's count: CiteSeer lists each twice
		rows                         []row
		firstTest, lastVal, lastTest uint32
	}{
		{name: "cora", nodes: 2708, feats: 1433, classes: 7, edges: 10556, noLoops: 10556, train: 140, val: 500, test: 1000,
			pairs: 10858, rows: []row{
				{0, []int{19, 81, 146, 315, 774, 877, 1194, 1247, 1274}, 3},
				{1, []int{19, 88, 149, 212, 233, 332, 336, 359, 472, 507, 548, 687, 763, 808, 889, 1058, 1177, 1254, 1257, 1262, 1332, 1339, 1349}, 4},
				// test.index line 1 is 2692: tx row 0.
				{2692, []int{311, 314, 353, 505, 510, 621, 1075, 1132, 1171, 1226, 1230, 1301, 1379, 1389, 1392}, 3},
			}, firstTest: 1708, lastVal: 639, lastTest: 2707},
		{name: "citeseer", nodes: 3327, feats: 3703, classes: 6, edges: 9228, noLoops: 9104, train: 120, val: 500, test: 1000,
			pairs: 9464, selfLoops: 248, distinctLoops: 124, missing: 15, rows: []row{
				// 2407: between allx's 2312 rows and the last test node, in
				// no file but the graph: no features, no label.
				{2407, nil, -1},
				{0, []int{184, 257, 362, 560, 565, 597, 600, 601, 637, 729, 805, 816, 942, 1116, 1435, 1545, 1623, 1635, 1846, 2085,
					2338, 2343, 2565, 2604, 2696, 2741, 2918, 2970, 3502, 3548, 3647}, 3},
				// test.index line 1 is 2488: tx row 0.
				{2488, []int{19, 21, 169, 170, 425, 459, 510, 511, 532, 729, 865, 878, 1093, 1292, 1478, 1480, 1613, 1705, 1733, 1790,
					1831, 1916, 2081, 2204, 2513, 2541, 2604, 2670, 2718, 2735, 2741, 2768, 2883, 2990, 2997, 3126, 3202, 3257, 3579, 3668, 3675}, 2},
			}, firstTest: 2312, lastVal: 619, lastTest: 3326},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := rdDataDir(t, c.name)
			g, err := Read(context.Background(), dir, ReadOptions{Format: FormatPlanetoid})
			if err != nil {
				t.Fatal(err)
			}
			rdEq(t, "Name", g.Name, c.name)
			rdEq(t, "NumNodes", g.NumNodes, c.nodes)
			rdEq(t, "FeatDim", g.FeatDim, c.feats)
			rdEq(t, "NumClasses", g.NumClasses, c.classes)
			rdEq(t, "Stats", g.Stats, Stats{EdgesRead: c.pairs, SelfLoops: c.selfLoops, MissingLabels: c.missing})
			if c.missing > 0 {
				// The first of CiteSeer's 15: ty lacks it, not ally (2312 rows).
				_, err := Read(context.Background(), dir, ReadOptions{Format: FormatPlanetoid, MissingLabel: Error})
				rdEq(t, "missing label error", fmt.Sprint(err), "partition: "+dir+"/ind.citeseer.test.index: node 2407 has no label: it lies among the test nodes "+
					"(2312..3326, after allx's 2312 rows) but test.index does not list it, so ty holds no label for it (and tx no features: they are zero): bad input")
			}
			distinct, err := g.DistinctSelfLoops(context.Background())
			rdEq(t, "distinct self loops", distinct, c.distinctLoops)
			rdEq(t, "distinct self loops error", err, nil)
			for _, r := range c.rows {
				var cols []int // nonzero columns, each 1
				for k, v := range g.Feat[r.node*c.feats : (r.node+1)*c.feats] {
					if v != 0 {
						cols = append(cols, k)
						rdEq(t, fmt.Sprintf("feat %d[%d]", r.node, k), v, float32(1))
					}
				}
				rdEq(t, fmt.Sprintf("feat %d", r.node), cols, r.cols)
				rdEq(t, fmt.Sprintf("label %d", r.node), g.Labels[r.node], r.label)
			}
			removed, err := Split(g, SplitOptions{Mode: SplitKeep})
			if err != nil {
				t.Fatal(err)
			}
			rdEq(t, "removed", removed, 0)
			rdEq(t, "split", [3]int{len(g.Train), len(g.Val), len(g.Test)}, [3]int{c.train, c.val, c.test})
			rdEq(t, "split ends", [4]uint32{g.Train[c.train-1], g.Val[c.val-1], g.Test[0], g.Test[c.test-1]},
				[4]uint32{uint32(c.train - 1), c.lastVal, c.firstTest, c.lastTest})

			lin := linqsByFeatures(t, dir, g)
			for _, loops := range []struct {
				policy Policy
				edges  uint64
			}{{Keep, c.edges}, {Drop, c.noLoops}} {
				h, err := Read(context.Background(), dir, ReadOptions{Format: FormatPlanetoid})
				if err != nil {
					t.Fatal(err)
				}
				adj, err := BuildAdj(context.Background(), h, csr.In, CleanOptions{SelfLoops: loops.policy}, nil)
				if err != nil {
					t.Fatal(err)
				}
				rdEq(t, "edges, self loops "+string(loops.policy), adj.NumEdges(), loops.edges)
				if loops.policy == Keep {
					lin.checkEdges(t, adj)
				}
			}
		})
	}
}

// linqsMatch maps Planetoid nodes to the LINQS papers of the same
// directory by their feature rows (the two share the vocabulary's
// column order), for the nodes whose row is unique on both sides.
type linqsMatch struct {
	lin   *Graph
	paper map[uint32]uint32 // Planetoid node -> LINQS paper
}

// linqsByFeatures reads the LINQS files beside the Planetoid ones and
// checks that every Planetoid node with features has a LINQS paper with
// the same row, and that Planetoid's classes are LINQS's labels renamed:
// one LINQS label for each class over all matched nodes.
func linqsByFeatures(t *testing.T, dir string, g *Graph) *linqsMatch {
	t.Helper()
	lin, err := Read(context.Background(), dir, ReadOptions{Format: FormatLINQS})
	if err != nil {
		t.Fatal(err)
	}
	d := g.FeatDim
	rdEq(t, "LINQS FeatDim", lin.FeatDim, d)
	key := func(f []float32) string {
		var b strings.Builder
		for k, v := range f {
			if v != 0 {
				fmt.Fprintf(&b, "%d:%g,", k, v)
			}
		}
		return b.String()
	}
	papers := map[string][]uint32{}
	for i := range lin.NumNodes {
		k := key(lin.Feat[i*d : (i+1)*d])
		papers[k] = append(papers[k], uint32(i))
	}
	nodes := map[string]int{}
	for v := range g.NumNodes {
		nodes[key(g.Feat[v*d:(v+1)*d])]++
	}
	m := &linqsMatch{lin: lin, paper: map[uint32]uint32{}}
	className := map[int32]string{}
	unmatched := 0
	for v := range g.NumNodes {
		if g.Labels[v] < 0 {
			continue // CiteSeer's nodes without a row
		}
		k := key(g.Feat[v*d : (v+1)*d])
		ps := papers[k]
		if len(ps) == 0 {
			unmatched++
			continue
		}
		if len(ps) != 1 || nodes[k] != 1 {
			continue
		}
		p := ps[0]
		m.paper[uint32(v)] = p
		name := lin.ClassNames[lin.Labels[p]]
		if prev, ok := className[g.Labels[v]]; ok && prev != name {
			t.Fatalf("class %d is LINQS %s and %s", g.Labels[v], prev, name)
		}
		className[g.Labels[v]] = name
	}
	rdEq(t, "nodes without a LINQS row", unmatched, 0)
	if len(m.paper) < g.NumNodes*99/100-20 {
		t.Errorf("%d of %d nodes matched by features", len(m.paper), g.NumNodes)
	}
	rdEq(t, "classes named", len(className), g.NumClasses)
	return m
}

// checkEdges checks that every Planetoid edge between two matched nodes
// is a LINQS citation, one way or the other.
func (m *linqsMatch) checkEdges(t *testing.T, adj *Adj) {
	t.Helper()
	cites := map[[2]uint32]bool{}
	for e := range m.lin.Src {
		cites[[2]uint32{m.lin.Src[e], m.lin.Dst[e]}] = true
		cites[[2]uint32{m.lin.Dst[e], m.lin.Src[e]}] = true
	}
	checked := 0
	for v := range uint32(adj.NumNodes()) {
		pv, ok := m.paper[v]
		if !ok {
			continue
		}
		for _, u := range adj.Row(v) {
			if pu, ok := m.paper[u]; ok {
				checked++
				if !cites[[2]uint32{pu, pv}] {
					t.Fatalf("edge %d - %d: papers %s and %s do not cite each other", u, v, m.lin.IDs.Names[pu], m.lin.IDs.Names[pv])
				}
			}
		}
	}
	if checked < int(adj.NumEdges())*9/10 {
		t.Errorf("%d of %d edges checked", checked, adj.NumEdges())
	}
}

// TestReadPlanetoidPubMed: the PubMed copy lacks ind.pubmed.allx, the
// features of 18,657 of its nodes; the reader refuses it, naming the file.
func TestReadPlanetoidPubMed(t *testing.T) {
	dir := rdDataDir(t, "pubmed")
	_, err := Read(context.Background(), dir, ReadOptions{})
	want := "partition: " + dir + ": Planetoid dataset pubmed lacks ind.pubmed.allx (allx holds the features of every node but the test nodes: without it they would have none): bad input"
	rdEq(t, "err", fmt.Sprint(err), want)
}
