package node_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"graphnode/internal/datasets"
	"graphnode/partition"
	"graphnode/sample"
)

// The semantics tests check batches against the input graph itself, read
// here from its files without the partition package, so that a defect
// shared by the sampler and the in-process reference (unionReference)
// cannot hide: every id is mapped back to the input's through the
// partitioning's orig_ids.bin (and names.txt).

// refGraph is an input graph as its files state it.
type refGraph struct {
	names []string       // input id of node i
	index map[string]int // input id → i
	in    []map[int]bool // in-neighbours of node i (the nodes a hop expands it to)
	feat  [][]float32
	label []int64 // class index: labels numbered in their sorted order
	edges [][2]int
}

func (g *refGraph) node(name string) int {
	i, ok := g.index[name]
	if !ok {
		i = len(g.names)
		g.index[name] = i
		g.names = append(g.names, name)
		g.in = append(g.in, map[int]bool{})
	}
	return i
}

// addEdge records the edge u → v: v's in-neighbour u.
func (g *refGraph) addEdge(u, v int) {
	g.in[v][u] = true
	g.edges = append(g.edges, [2]int{u, v})
}

// reverse is g with every edge turned around.
func (g *refGraph) reverse() *refGraph {
	r := &refGraph{names: g.names, index: g.index, feat: g.feat, label: g.label, in: make([]map[int]bool, len(g.in))}
	for i := range r.in {
		r.in[i] = map[int]bool{}
	}
	for _, e := range g.edges {
		r.addEdge(e[1], e[0])
	}
	return r
}

// classes numbers labels as node partition does: integers numerically,
// names lexically.
func classes(labels []string) map[string]int64 {
	uniq := slices.Clone(labels)
	slices.SortFunc(uniq, func(a, b string) int {
		x, errA := strconv.ParseInt(a, 10, 64)
		y, errB := strconv.ParseInt(b, 10, 64)
		if errA == nil && errB == nil {
			return int(x - y)
		}
		return strings.Compare(a, b)
	})
	uniq = slices.Compact(uniq)
	m := map[string]int64{}
	for i, l := range uniq {
		m[l] = int64(i)
	}
	return m
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			lines = append(lines, s)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// readLINQS reads <dir>/<name>.content and .cites (`cited citing`: the
// edge citing → cited), both directions when undirected.
func readLINQS(t *testing.T, dir, name string, undirected bool) *refGraph {
	t.Helper()
	g := &refGraph{index: map[string]int{}}
	var labels []string
	for _, line := range readLines(t, filepath.Join(dir, name+".content")) {
		f := strings.Fields(line)
		i := g.node(f[0])
		row := make([]float32, len(f)-2)
		for j, s := range f[1 : len(f)-1] {
			x, err := strconv.ParseFloat(s, 32)
			if err != nil {
				t.Fatalf("%s.content: %v", name, err)
			}
			row[j] = float32(x)
		}
		g.feat = append(g.feat, row)
		if i != len(labels) {
			t.Fatalf("%s.content: node %s twice", name, f[0])
		}
		labels = append(labels, f[len(f)-1])
	}
	cls := classes(labels)
	for _, l := range labels {
		g.label = append(g.label, cls[l])
	}
	n := len(g.names)
	seen := map[[2]int]bool{}
	for _, line := range readLines(t, filepath.Join(dir, name+".cites")) {
		f := strings.Fields(line)
		cited, citing := g.node(f[0]), g.node(f[1])
		if len(g.names) != n {
			t.Fatalf("%s.cites: %q names a node absent from the content file", name, line)
		}
		for _, e := range [][2]int{{citing, cited}, {cited, citing}} {
			if !seen[e] {
				seen[e] = true
				g.addEdge(e[0], e[1])
			}
			if !undirected {
				break
			}
		}
	}
	return g
}

// readOGB reads the raw/ files of an OGB-layout graph (integer ids 0…n−1).
func readOGB(t *testing.T, dir string) *refGraph {
	t.Helper()
	g := &refGraph{index: map[string]int{}}
	feats := readLines(t, filepath.Join(dir, "raw", "node-feat.csv"))
	for i, line := range feats {
		g.node(strconv.Itoa(i))
		var row []float32
		for _, s := range strings.Split(line, ",") {
			x, err := strconv.ParseFloat(s, 32)
			if err != nil {
				t.Fatalf("node-feat.csv line %d: %v", i+1, err)
			}
			row = append(row, float32(x))
		}
		g.feat = append(g.feat, row)
	}
	labels := readLines(t, filepath.Join(dir, "raw", "node-label.csv"))
	cls := classes(labels)
	for _, l := range labels {
		g.label = append(g.label, cls[l])
	}
	seen := map[[2]int]bool{}
	for i, line := range readLines(t, filepath.Join(dir, "raw", "edge.csv")) {
		u, v, ok := strings.Cut(line, ",")
		a, errA := strconv.Atoi(u)
		b, errB := strconv.Atoi(v)
		if !ok || errA != nil || errB != nil || a >= len(g.names) || b >= len(g.names) {
			t.Fatalf("edge.csv line %d: %q", i+1, line)
		}
		if e := [2]int{a, b}; !seen[e] {
			seen[e] = true
			g.addEdge(a, b)
		}
	}
	return g
}

// refFixture holds the reference graphs and their partitionings, made
// once per test binary with the node binary's own `gen` and `partition`.
var refFixture struct {
	mu     sync.Mutex
	graphs map[string]*refGraph
	inputs map[string][]string // graph → `node partition` input flags
	parts  map[string]*partView
}

// partView is one partitioning as the semantics tests see it: relabelled
// id → reference node and back.
type partView struct {
	dir     string
	parts   int
	toRef   []int
	fromRef []uint64
	bounds  []uint64 // start of each part, then the node count
}

// refGraphNamed returns "cora" (LINQS, undirected) or "rmat" (generated
// R-MAT, directed, OGB layout) with the input flags that partition it.
func refGraphNamed(t *testing.T, name string) (*refGraph, []string) {
	t.Helper()
	bin, _ := setup(t)
	refFixture.mu.Lock()
	defer refFixture.mu.Unlock()
	if g, ok := refFixture.graphs[name]; ok {
		return g, refFixture.inputs[name]
	}
	var g *refGraph
	var input []string
	switch name {
	case "cora":
		dir := datasets.Dir(t, "cora")
		g = readLINQS(t, dir, "cora", true)
		input = []string{"--input", dir, "--format", "linqs", "--undirected", "--split", "per-class:20,500,1000"}
	case "rmat":
		dir := filepath.Join(filepath.Dir(bin), "ref-rmat")
		out, err := exec.Command(bin, "gen", "rmat", "--nodes", "2000", "--edges", "16000", "--feat-dim", "6",
			"--classes", "5", "--seed", "3", "--workers", "1", "-o", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("node gen rmat: %v\n%s", err, out)
		}
		g = readOGB(t, dir)
		input = []string{"--input", dir, "--format", "ogb"}
	default:
		t.Fatalf("no reference graph %q", name)
	}
	if refFixture.graphs == nil {
		refFixture.graphs, refFixture.inputs, refFixture.parts = map[string]*refGraph{}, map[string][]string{}, map[string]*partView{}
	}
	refFixture.graphs[name], refFixture.inputs[name] = g, input
	return g, input
}

// refParts partitions graph name into n parts with method (and a cache of
// cacheRatio; with out, --direction out) through `node partition`, and maps
// its ids to the graph's; it returns the graph whose in-neighbours a hop
// expands (with out, the reverse).
func refParts(t *testing.T, name, method string, n int, cacheRatio float64, out bool) (*refGraph, *partView) {
	t.Helper()
	g, input := refGraphNamed(t, name)
	bin, _ := setup(t)
	key := fmt.Sprintf("%s-%s-%d-cache%g", name, method, n, cacheRatio)
	if out {
		// Hops expand out-neighbours: the in-neighbours of the reverse graph.
		g = g.reverse()
		input = append(slices.Clone(input), "--direction", "out")
		key += "-out"
	}
	refFixture.mu.Lock()
	defer refFixture.mu.Unlock()
	if pv, ok := refFixture.parts[key]; ok {
		return g, pv
	}
	dir := filepath.Join(filepath.Dir(bin), "ref-"+key)
	args := append([]string{"partition"}, input...)
	args = append(args, "--parts", strconv.Itoa(n), "--method", method, "-o", dir)
	if cacheRatio > 0 {
		args = append(args, "--cache-ratio", strconv.FormatFloat(cacheRatio, 'g', -1, 64))
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("node %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	m, err := partition.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := partition.ReadOrigIDs(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if int(m.Nodes) != len(g.names) {
		t.Fatalf("%s: %d nodes, the input has %d", dir, m.Nodes, len(g.names))
	}
	var names []string
	if m.IDKind == "string" {
		names = readLines(t, filepath.Join(dir, partition.NamesFile))
	}
	pv := &partView{dir: dir, parts: m.Parts, toRef: make([]int, m.Nodes), fromRef: make([]uint64, m.Nodes)}
	for _, p := range m.Part {
		pv.bounds = append(pv.bounds, p.Start)
	}
	pv.bounds = append(pv.bounds, m.Nodes)
	seen := make([]bool, m.Nodes)
	for gid, o := range orig {
		name := strconv.FormatUint(o, 10)
		if names != nil {
			name = names[o]
		}
		i, ok := g.index[name]
		if !ok || seen[i] {
			t.Fatalf("%s: id %d maps to input id %q: unknown or taken twice", dir, gid, name)
		}
		seen[i] = true
		pv.toRef[gid], pv.fromRef[i] = i, uint64(gid)
	}
	refFixture.parts[key] = pv
	return g, pv
}

// owner is the part that owns relabelled id v.
func (pv *partView) owner(v uint64) int {
	p, _ := slices.BinarySearch(pv.bounds, v+1)
	return p - 1
}

// sampled is what one batch chose for each node it expanded: the
// reference node → its sampled in-neighbours (reference nodes).
type sampled map[int][]int

// checkBatch holds v, a batch of the partitioning pv of g with fanouts, to
// DESIGN.md §5 in the input's ids: seeds first, then each hop's new nodes
// once; every edge an input edge into the node it was sampled for; every
// node expanded once, at the hop after it was reached, with all of its
// eligible in-neighbours when they are at most the fanout and exactly
// fanout distinct ones otherwise, where the edges of excluded (both ends
// reference nodes, in either direction) are left out before the draw, as
// DGL does: none of them sampled, and not counted among the eligible; x
// and y the input's rows. It returns each expanded node's choice.
func checkBatch(g *refGraph, pv *partView, v *sample.View, seeds []int, fanouts []int, excluded map[[2]int]bool) (sampled, error) {
	h := &v.Header
	if int(h.BatchSize) != len(seeds) || len(v.NumSampledNodes) != len(fanouts)+1 || len(v.NumSampledEdges) != len(fanouts) {
		return nil, fmt.Errorf("batch %d: batch size %d, %d node counts, %d edge counts; want %d seeds, %d hops",
			h.Index, h.BatchSize, len(v.NumSampledNodes), len(v.NumSampledEdges), len(seeds), len(fanouts))
	}
	ref := make([]int, len(v.NID))
	pos := map[int]int{}
	for i, id := range v.NID {
		if id >= uint64(len(pv.toRef)) {
			return nil, fmt.Errorf("batch %d: n_id[%d] = %d outside the graph", h.Index, i, id)
		}
		ref[i] = pv.toRef[id]
		if j, dup := pos[ref[i]]; dup {
			return nil, fmt.Errorf("batch %d: node %s at n_id %d and %d", h.Index, g.names[ref[i]], j, i)
		}
		pos[ref[i]] = i
	}
	for i, s := range seeds {
		if ref[i] != s {
			return nil, fmt.Errorf("batch %d: n_id[%d] is %s, want seed %s", h.Index, i, g.names[ref[i]], g.names[s])
		}
	}
	rows, cols := v.Row(), v.Col()
	out := sampled{}
	lo, hi, e := 0, len(seeds), 0
	for k, fanout := range fanouts {
		if int(v.NumSampledNodes[k]) != hi-lo {
			return nil, fmt.Errorf("batch %d: num_sampled_nodes[%d] = %d, want %d", h.Index, k, v.NumSampledNodes[k], hi-lo)
		}
		next := hi + int(v.NumSampledNodes[k+1])
		ne := int(v.NumSampledEdges[k])
		if next > len(ref) || e+ne > len(rows) {
			return nil, fmt.Errorf("batch %d hop %d: counts past the batch's %d nodes, %d edges", h.Index, k, len(ref), len(rows))
		}
		chosen := map[int][]int{}
		for j := e; j < e+ne; j++ {
			c, r := int(cols[j]), int(rows[j])
			if c < lo || c >= hi || r < 0 || r >= next {
				return nil, fmt.Errorf("batch %d hop %d: edge %d (%d, %d) outside frontier [%d, %d) or n_id [0, %d)", h.Index, k, j, r, c, lo, hi, next)
			}
			u, w := ref[r], ref[c]
			if !g.in[w][u] {
				return nil, fmt.Errorf("batch %d hop %d: edge %s → %s is not in the input", h.Index, k, g.names[u], g.names[w])
			}
			chosen[w] = append(chosen[w], u)
		}
		// The new nodes of this hop: every sampled neighbour not seen
		// before, each once, in order of first appearance.
		var want []int
		have := map[int]bool{}
		for _, x := range ref[:hi] {
			have[x] = true
		}
		for j := e; j < e+ne; j++ {
			if u := ref[rows[j]]; !have[u] {
				have[u] = true
				want = append(want, u)
			}
		}
		if !slices.Equal(ref[hi:next], want) {
			return nil, fmt.Errorf("batch %d hop %d: %d new nodes, want the %d sampled neighbours first seen at this hop, in order", h.Index, k, next-hi, len(want))
		}
		for _, w := range ref[lo:hi] {
			got := chosen[w]
			distinct := slices.Clone(got)
			slices.Sort(distinct)
			distinct = slices.Compact(distinct)
			if len(distinct) != len(got) {
				return nil, fmt.Errorf("batch %d hop %d: node %s got a neighbour twice: %v", h.Index, k, g.names[w], names(g, got))
			}
			// Excluded edges are left out before the draw: the node
			// samples among the others (all, eligible).
			var all []int
			dropped := 0
			for u := range g.in[w] {
				if excluded[[2]int{u, w}] || excluded[[2]int{w, u}] {
					dropped++
					for _, x := range got {
						if x == u {
							return nil, fmt.Errorf("batch %d hop %d: excluded seed edge %s → %s sampled", h.Index, k, g.names[u], g.names[w])
						}
					}
					continue
				}
				all = append(all, u)
			}
			slices.Sort(all)
			deg := len(g.in[w])
			switch {
			case fanout < 0 || len(all) <= fanout:
				if !slices.Equal(distinct, all) {
					return nil, fmt.Errorf("batch %d hop %d: node %s (in-degree %d, %d excluded, fanout %d) got %v, want all of %v",
						h.Index, k, g.names[w], deg, dropped, fanout, names(g, distinct), names(g, all))
				}
			case len(got) != fanout:
				return nil, fmt.Errorf("batch %d hop %d: node %s (in-degree %d, %d excluded) got %d neighbours, want fanout %d",
					h.Index, k, g.names[w], deg, dropped, len(got), fanout)
			}
			out[w] = got
		}
		lo, hi, e = hi, next, e+ne
	}
	if int(v.NumSampledNodes[len(fanouts)]) != hi-lo || hi != len(ref) || e != len(rows) {
		return nil, fmt.Errorf("batch %d: %d nodes, %d edges; the hop counts add up to %d, %d", h.Index, len(ref), len(rows), hi, e)
	}
	if err := checkRows(g, v, ref); err != nil {
		return nil, err
	}
	return out, nil
}

// checkRows compares x and y of a batch with the input's rows of its
// nodes (ref: the reference node of each n_id position).
func checkRows(g *refGraph, v *sample.View, ref []int) error {
	h := &v.Header
	dim := int(h.FeatDim)
	if dim > 0 {
		if dim != len(g.feat[0]) || h.XType != sample.F32 || len(v.X) != 4*dim*len(ref) {
			return fmt.Errorf("batch %d: x is %d bytes of dim %d %v, want %d float32 rows of %d", h.Index, len(v.X), dim, h.XType, len(ref), len(g.feat[0]))
		}
		for i, r := range ref {
			for j, want := range g.feat[r] {
				got := math.Float32frombits(binary.LittleEndian.Uint32(v.X[4*(i*dim+j):]))
				if got != want {
					return fmt.Errorf("batch %d: x of node %s (n_id %d, position %d) column %d = %g, the input has %g", h.Index, g.names[r], v.NID[i], i, j, got, want)
				}
			}
		}
	}
	if h.LabelDim > 0 {
		if h.LabelDim != 1 || len(v.Y) != int(h.BatchSize) {
			return fmt.Errorf("batch %d: %d labels of dim %d, want one per seed", h.Index, len(v.Y), h.LabelDim)
		}
		for i, y := range v.Y {
			if y != g.label[ref[i]] {
				return fmt.Errorf("batch %d: y of seed %s = %d, the input's class is %d", h.Index, g.names[ref[i]], y, g.label[ref[i]])
			}
		}
	}
	return nil
}

func names(g *refGraph, nodes []int) []string {
	out := make([]string, len(nodes))
	for i, u := range nodes {
		out[i] = g.names[u]
	}
	return out
}

// uniformity is Pearson's statistic of the neighbour counts of nodes
// expanded trials times each with fanout f (every node of degree above
// f): each neighbour is chosen with probability f/deg, so the statistic's
// mean is Σ (deg − f) and its variance about twice that. It returns the
// statistic and that mean.
func uniformity(g *refGraph, counts map[int]map[int]int, trials, f int) (stat, mean float64) {
	for w, c := range counts {
		deg := len(g.in[w])
		exp := float64(trials) * float64(f) / float64(deg)
		for u := range g.in[w] {
			d := float64(c[u]) - exp
			stat += d * d / exp
		}
		mean += float64(deg - f)
	}
	return stat, mean
}
