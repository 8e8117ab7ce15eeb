package node_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"graphnode/node/client"
	"graphnode/node/control"
)

// partitionings are the ways the semantics tests split a graph: 1, 2 and
// 4 parts, random and metis, some with a 20% hot-node cache so that
// features come from the part, the cache and the peers.
var partitionings = []struct {
	method string
	parts  int
	cache  float64
	out    bool // --direction out: hops expand out-neighbours
}{
	{"random", 1, 0, false}, {"metis", 1, 0, false},
	{"random", 2, 0, false}, {"metis", 2, 0.2, false},
	{"random", 4, 0.2, false}, {"metis", 4, 0, false},
	{"random", 2, 0, true}, {"metis", 2, 0.2, true},
}

// startRefCluster starts one node per part of pv.
func startRefCluster(t *testing.T, pv *partView) *testCluster {
	t.Helper()
	return startCluster(t, pv.dir, pv.parts, "10s")
}

// readEpochs reads every batch of every epoch of l, calling f for each.
func readEpochs(t *testing.T, ctx context.Context, l *client.Loader, epochs int, f func(b *client.Batch) error) {
	t.Helper()
	for e := range epochs {
		n := 0
		for b, err := range l.All(ctx) {
			if err != nil {
				t.Fatalf("epoch %d batch %d: %v", e, n, err)
			}
			if err := f(&b); err != nil {
				t.Fatalf("epoch %d: %v", e, err)
			}
			n++
		}
		if n != l.BatchesPerEpoch() {
			t.Fatalf("epoch %d: %d batches, want %d", e, n, l.BatchesPerEpoch())
		}
	}
}

// TestSamplingSemantics{Cora,RMAT}{Random,Metis}: Cora (undirected) and a
// directed R-MAT, partitioned by `node partition` into 1, 2 and 4 parts
// with random or metis (some with a 20% cache), served by a cluster on
// 127.0.0.1. In the input's ids, every batch is what DESIGN.md §5 says:
// seeds first, each hop's new nodes once, every edge an input in-edge, a
// node of in-degree ≤ fanout gets all its in-neighbours and one above
// exactly fanout distinct ones, wherever its neighbours live; x and y are
// the input's rows for local, cached and remote nodes alike, whether a
// serving node or a client node (server-client mode) hands the batches
// out, and with --direction out hops expand out-neighbours. With fanout
// −1 the sampled subgraph is the input's 2-hop in-neighbourhood under
// every partitioning; with a smaller fanout the choices differ between
// partitionings (they are keyed by the relabelled ids) but each is
// uniform: over 80 epochs every neighbour's count stays within Pearson's
// bound.
func TestSamplingSemanticsCoraRandom(t *testing.T) { testSamplingSemantics(t, "cora", "random") }

func TestSamplingSemanticsCoraMetis(t *testing.T) { testSamplingSemantics(t, "cora", "metis") }

func TestSamplingSemanticsRMATRandom(t *testing.T) { testSamplingSemantics(t, "rmat", "random") }

func TestSamplingSemanticsRMATMetis(t *testing.T) { testSamplingSemantics(t, "rmat", "metis") }

func testSamplingSemantics(t *testing.T, graph, method string) {
	for _, pt := range partitionings {
		if pt.method != method {
			continue
		}
		if pt.out && graph == "cora" {
			continue // undirected: out-neighbours are the in-neighbours
		}
		t.Run(fmt.Sprintf("%s/parts=%d/cache=%g/out=%v", pt.method, pt.parts, pt.cache, pt.out), func(t *testing.T) {
			g, pv := refParts(t, graph, pt.method, pt.parts, pt.cache, pt.out)
			seeds, hubs, full := semanticsSeeds(t, g)
			c := startRefCluster(t, pv)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ids := func(nodes []int) []uint64 {
				out := make([]uint64, len(nodes))
				for i, r := range nodes {
					out[i] = pv.fromRef[r]
				}
				return out
			}
			// The last node serves, so part 0's nodes are remote; on 2
			// parts a client node (server-client mode) serves too.
			sockets := []string{c.sockets[pt.parts-1]}
			if pt.parts == 2 && !pt.out {
				_, s := c.startClient("10s")
				sockets = append(sockets, s)
			}
			o := client.DefaultOptions()
			o.SeedIDs, o.Fanouts, o.BatchSize, o.Workers, o.Concurrency = ids(seeds), []int{4, 3}, 40, 2, 2
			for _, s := range sockets {
				l, err := client.OpenLoader(ctx, s, o)
				if err != nil {
					t.Fatal(err)
				}
				readEpochs(t, ctx, l, 1, func(b *client.Batch) error {
					_, err := checkBatch(g, pv, &b.View, seeds[b.Index*40:min(len(seeds), b.Index*40+40)], o.Fanouts, nil)
					return err
				})
				l.Close()
			}

			o.SeedIDs, o.Fanouts, o.BatchSize, o.Workers, o.RingSize = ids(seeds[:6]), []int{-1, -1}, 6, 1, "24MiB"
			l, err := client.OpenLoader(ctx, c.sockets[0], o)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			readEpochs(t, ctx, l, 1, func(b *client.Batch) error {
				if _, err := checkBatch(g, pv, &b.View, seeds[:6], o.Fanouts, nil); err != nil {
					return err
				}
				var hops [][]int
				at := 0
				for _, k := range b.NumSampledNodes {
					hop := slices.Clone(refOf(pv, b.NID[at:at+int(k)]))
					slices.Sort(hop)
					hops, at = append(hops, hop), at+int(k)
				}
				if !slices.EqualFunc(full, hops, slices.Equal) {
					return fmt.Errorf("full-fanout batch: per-hop node sets differ from the input's 2-hop in-neighbourhood")
				}
				return nil
			})
			l.Close()

			o.SeedIDs, o.Fanouts, o.BatchSize, o.Epochs, o.Workers = ids(hubs), []int{statFanout}, len(hubs), statEpochs, 1
			o.Features, o.Labels = false, false
			l, err = client.OpenLoader(ctx, c.sockets[0], o)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			counts := map[int]map[int]int{}
			for _, h := range hubs {
				counts[h] = map[int]int{}
			}
			var first sampled
			differ := false
			readEpochs(t, ctx, l, statEpochs, func(b *client.Batch) error {
				got, err := checkBatch(g, pv, &b.View, hubs, o.Fanouts, nil)
				if err != nil {
					return err
				}
				for w, nb := range got {
					for _, u := range nb {
						counts[w][u]++
					}
					if first == nil {
						continue
					}
					a, b := slices.Sorted(slices.Values(nb)), slices.Sorted(slices.Values(first[w]))
					differ = differ || !slices.Equal(a, b)
				}
				if first == nil {
					first = got
				}
				return nil
			})
			if !differ {
				t.Errorf("%d epochs chose the same neighbours every time", statEpochs)
			}
			stat, mean := uniformity(g, counts, statEpochs, statFanout)
			t.Logf("%d nodes expanded %d times: Pearson statistic %.1f, mean %.1f", len(hubs), statEpochs, stat, mean)
			if bound := 6 * math.Sqrt(2*mean); math.Abs(stat-mean) > bound {
				t.Errorf("neighbour counts over %d epochs: Pearson statistic %.1f, want %.1f ± %.1f for uniform choices", statEpochs, stat, mean, bound)
			}
			if pt.cache > 0 {
				var hits uint64
				for p := range pt.parts {
					st, err := client.Stats(ctx, c.sockets[p])
					if err != nil {
						t.Fatal(err)
					}
					hits += st.CacheHits
				}
				if hits == 0 {
					t.Errorf("no feature row came from the cache: the cached path is not checked")
				}
			}
		})
	}
}

// statFanout and statEpochs shape the uniformity check.
const statFanout, statEpochs = 3, 80

// semanticsSeeds picks a semantics test's seeds of g (every 17th node, so
// that they spread over every part), the nodes of its uniformity check
// (degree a little above statFanout) and the full 2-hop neighbourhood of
// the first 6 seeds, per hop, sorted.
func semanticsSeeds(t *testing.T, g *refGraph) (seeds, hubs []int, full [][]int) {
	t.Helper()
	// Seeds: every 17th node, so that they spread over every part.
	for i := 0; i < len(g.names) && len(seeds) < 120; i += 17 {
		seeds = append(seeds, i)
	}
	// Nodes of degree a little above the stats fanout, for the
	// uniformity check.
	for i := range g.names {
		if d := len(g.in[i]); d >= statFanout+2 && d <= 25 && len(hubs) < 40 {
			hubs = append(hubs, i)
		}
	}
	if len(hubs) < 20 {
		t.Fatalf("%d nodes of degree %d to 25, want 20", len(hubs), statFanout+2)
	}
	// The full 2-hop in-neighbourhood of the first 6 seeds, per hop.
	full = [][]int{slices.Sorted(slices.Values(seeds[:6]))}
	reached := map[int]bool{}
	for _, s := range seeds[:6] {
		reached[s] = true
	}
	for range 2 {
		var next []int
		for _, w := range full[len(full)-1] {
			for u := range g.in[w] {
				if !reached[u] {
					reached[u] = true
					next = append(next, u)
				}
			}
		}
		slices.Sort(next)
		full = append(full, next)
	}
	return seeds, hubs, full
}

func refOf(pv *partView, nid []uint64) []int {
	out := make([]int, len(nid))
	for i, v := range nid {
		out[i] = pv.toRef[v]
	}
	return out
}

// TestLinkSemantics{Cora,RMAT}: link loaders over input edges of Cora and
// the R-MAT, on 2 and 4 parts: a batch's seeds are its edges' ends, in
// order of first appearance, then their negatives; edge_label_index pairs
// each seed edge (label 1) and each of its neg_ratio negatives (its source
// and a node of the graph, label 0); with exclude_seed_edges the edges
// joining the two ends of a seed edge of the batch, in either direction,
// are left out before the draw: none is sampled, and a seed gets every
// other in-neighbour when they are at most the fanout, exactly fanout of
// them otherwise; x and y are the input's rows. Negatives fall on every part in proportion to its
// nodes.
func TestLinkSemanticsCora(t *testing.T) { testLinkSemantics(t, "cora") }

func TestLinkSemanticsRMAT(t *testing.T) { testLinkSemantics(t, "rmat") }

func testLinkSemantics(t *testing.T, graph string) {
	{
		g, _ := refGraphNamed(t, graph)
		var edges [][2]int
		for i := 0; i < len(g.edges) && len(edges) < 60; i += 37 {
			edges = append(edges, g.edges[i])
		}
		for _, pt := range []struct {
			method  string
			parts   int
			cache   float64
			exclude bool
		}{{"random", 2, 0, true}, {"metis", 4, 0.2, true}, {"metis", 2, 0.2, false}} {
			t.Run(fmt.Sprintf("%s/parts=%d/exclude=%v", pt.method, pt.parts, pt.exclude), func(t *testing.T) {
				_, pv := refParts(t, graph, pt.method, pt.parts, pt.cache, false)
				c := startRefCluster(t, pv)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				const batch, neg, epochs = 20, 2, 6
				o := client.DefaultOptions()
				o.Split, o.Fanouts, o.BatchSize, o.Epochs, o.Workers = "", []int{4, 2}, batch, epochs, 2
				o.SeedEdges, o.NegRatio, o.ExcludeSeedEdges = &control.SeedEdges{}, neg, pt.exclude
				for _, e := range edges {
					o.SeedEdges.Src = append(o.SeedEdges.Src, pv.fromRef[e[0]])
					o.SeedEdges.Dst = append(o.SeedEdges.Dst, pv.fromRef[e[1]])
				}
				l, err := client.OpenLoader(ctx, c.sockets[pt.parts-1], o)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				perPart := make([]int, pt.parts)
				readEpochs(t, ctx, l, epochs, func(b *client.Batch) error {
					mine := edges[b.Index*batch : b.Index*batch+batch]
					seeds, err := linkSeeds(pv, b, mine, neg)
					if err != nil {
						return err
					}
					excluded := map[[2]int]bool{}
					if pt.exclude {
						for _, e := range mine {
							excluded[e] = true
						}
					}
					if _, err := checkBatch(g, pv, &b.View, seeds, o.Fanouts, excluded); err != nil {
						return err
					}
					n := batch * (1 + neg)
					for _, c := range b.EdgeLabelIndex[n+batch : 2*n] {
						perPart[pv.owner(b.NID[c])]++
					}
					return nil
				})
				// Negatives are uniform over the graph's nodes: each part
				// gets them in proportion to its node count.
				total := float64(epochs * len(edges) * neg)
				stat := 0.0
				for p, got := range perPart {
					exp := total * float64(pv.bounds[p+1]-pv.bounds[p]) / float64(len(g.names))
					stat += (float64(got) - exp) * (float64(got) - exp) / exp
				}
				if dof := float64(pt.parts - 1); stat > dof+6*math.Sqrt(2*dof) {
					t.Errorf("negatives per part %v of %.0f: Pearson statistic %.1f, want at most %.1f for uniform negatives", perPart, total, stat, dof+6*math.Sqrt(2*dof))
				}
			})
		}
	}
}

// linkSeeds checks a link batch's pairs against its seed edges (reference
// nodes) and neg negatives per edge, and returns the seeds the batch must
// start with: the edges' ends in order of first appearance, then the
// negatives'.
func linkSeeds(pv *partView, b *client.Batch, edges [][2]int, neg int) ([]int, error) {
	p, n := len(edges), len(edges)*(1+neg)
	if len(b.EdgeLabelIndex) != 2*n || len(b.EdgeLabel) != n {
		return nil, fmt.Errorf("batch %d: %d pair positions, %d labels; want %d pairs", b.Index, len(b.EdgeLabelIndex), len(b.EdgeLabel), n)
	}
	rows, cols := b.EdgeLabelIndex[:n], b.EdgeLabelIndex[n:]
	for _, x := range b.EdgeLabelIndex {
		if x < 0 || x >= int64(b.Header.BatchSize) {
			return nil, fmt.Errorf("batch %d: pair position %d outside the %d seeds", b.Index, x, b.Header.BatchSize)
		}
	}
	var seeds []int
	have := map[int]bool{}
	add := func(r int) {
		if !have[r] {
			have[r] = true
			seeds = append(seeds, r)
		}
	}
	for i, e := range edges {
		add(e[0])
		add(e[1])
		if pv.toRef[b.NID[rows[i]]] != e[0] || pv.toRef[b.NID[cols[i]]] != e[1] || b.EdgeLabel[i] != 1 {
			return nil, fmt.Errorf("batch %d: pair %d is (%d, %d) labelled %g, want seed edge %d → %d labelled 1",
				b.Index, i, b.NID[rows[i]], b.NID[cols[i]], b.EdgeLabel[i], pv.fromRef[e[0]], pv.fromRef[e[1]])
		}
	}
	for i := p; i < n; i++ {
		src := edges[(i-p)/neg][0]
		if pv.toRef[b.NID[rows[i]]] != src || b.EdgeLabel[i] != 0 {
			return nil, fmt.Errorf("batch %d: negative pair %d starts at %d labelled %g, want its edge's source %d labelled 0",
				b.Index, i, b.NID[rows[i]], b.EdgeLabel[i], pv.fromRef[src])
		}
		add(pv.toRef[b.NID[cols[i]]])
	}
	return seeds, nil
}
