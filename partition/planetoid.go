package partition

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A Planetoid dataset (Cora, CiteSeer, PubMed as Kipf and Welling's GCN,
// DGL's CoraGraphDataset and PyG's Planetoid read them) is eight files
// ind.<name>.<suffix> in one directory:
//
//	x, tx, allx   scipy csr_matrix float32: features of the training nodes,
//	              the test nodes, every node but the test nodes
//	y, ty, ally   numpy int32 one-hot labels of the same rows
//	graph         defaultdict(list): node index -> neighbour indices
//	test.index    text, one node index per line: row k of tx and ty is
//	              node test.index[k]
//
// (pickles of Python 2, protocol 2: see planetoid_pickle.go). Node i <
// len(allx) is row i of allx/ally; the rows of x/y are the first len(x)
// of those, and the reader checks that they are. Nodes between len(allx)
// and the largest test index that test.index leaves out (15 of CiteSeer's)
// have zero features, as in DGL and PyG, and no label (-1), where DGL and
// PyG take the argmax of a zero row, class 0; they are in no split either
// way. A zero label row elsewhere is no label too. Features are kept as
// the files hold them, 0/1, as PyG's Planetoid reads them; DGL's
// CitationGraphDataset divides each row by its sum when it loads them,
// which the trainer's Normalize does.
//
// The graph is undirected: every listed pair is an edge key ->
// neighbour, and the reverse of a pair the file lists one way only is
// added (Stats.ReverseAdded), as networkx's from_dict_of_lists in DGL
// makes it; pairs listed twice are duplicates and self loops are self
// loops, for Clean. Cora's 10,858 listed pairs are 10,556 edges
// (duplicates dropped, DGL's and PyG's count); CiteSeer's 9,464 are 9,228
// with its 124 self loops kept (DGL) and 9,104 with them dropped (PyG).
//
// The split is the public one of the GCN paper: train = the first len(y)
// nodes, val = the next 500, test = test.index. Node ids are the Planetoid
// indices, so IDs stays empty; classes have no names.
//
// Path is the directory (name picks ind.<name>.* when it holds several
// datasets) or one of the files.
func readPlanetoid(ctx context.Context, path string, opts ReadOptions) (*Graph, error) {
	dir, name, err := planetoidFiles(path, opts.Name)
	if err != nil {
		return nil, err
	}
	r := &planetoidReader{ctx: ctx, opts: opts, dir: dir, name: name}
	return r.read()
}

// planetoidSuffixes are the files of a dataset, ind.<name>.<suffix>.
var planetoidSuffixes = []string{"x", "y", "tx", "ty", "allx", "ally", "graph", "test.index"}

// planetoidVal is the GCN split's number of validation nodes, the ones
// after the training nodes.
const planetoidVal = 500

// planetoidMaxDense bounds the dense feature matrix by the bytes of the
// feature files: at most this many values a byte. A stored value costs 8
// bytes (column and value), so this admits a density down to 1/2048;
// Cora's dense matrix is 9 values a byte, CiteSeer's 14. A file that
// states a width beyond it is refused rather than allocated.
const planetoidMaxDense = 256

// planetoidName is the dataset name of a file named ind.<name>.<suffix>
// (optionally .gz), or "".
func planetoidName(file string) string {
	base := strings.TrimSuffix(filepath.Base(file), ".gz")
	rest, ok := strings.CutPrefix(base, "ind.")
	if !ok {
		return ""
	}
	for _, s := range planetoidSuffixes {
		if n, ok := strings.CutSuffix(rest, "."+s); ok && n != "" {
			return n
		}
	}
	return ""
}

// planetoidNames lists the dataset names of the ind.* files in dir.
func planetoidNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if n := planetoidName(e.Name()); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// planetoidFiles finds the directory and dataset name for path.
func planetoidFiles(path, name string) (dir, dataset string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("partition: %w", err)
	}
	if !st.IsDir() {
		n := planetoidName(path)
		if n == "" {
			return "", "", formatErrorf("%s: not a Planetoid file (ind.<name>.{%s})", path, strings.Join(planetoidSuffixes, ","))
		}
		return filepath.Dir(path), n, nil
	}
	names := planetoidNames(path)
	list := func() string {
		s := make([]string, len(names))
		for i, n := range names {
			s[i] = "ind." + n + ".*"
		}
		return strings.Join(s, ", ")
	}
	switch {
	case name != "" && slices.Contains(names, name):
		return path, name, nil
	case name != "" && len(names) > 0:
		return "", "", formatErrorf("%s: no Planetoid files ind.%s.*; there are %s", path, name, list())
	case len(names) == 0:
		return "", "", formatErrorf("%s: no Planetoid files (ind.<name>.{%s})", path, strings.Join(planetoidSuffixes, ","))
	case name == "" && len(names) > 1:
		return "", "", formatErrorf("%s: several Planetoid datasets (%s); choose one with the name (--name)", path, list())
	case name == "":
		return path, names[0], nil
	}
	return "", "", formatErrorf("%s: no Planetoid files ind.%s.*", path, name)
}

type planetoidReader struct {
	ctx        context.Context
	opts       ReadOptions
	dir, name  string
	paths      map[string]string // suffix -> file
	done, size int64             // bytes read of all files, for progress
	featBytes  int64             // bytes of x, tx, allx
}

func (r *planetoidReader) path(suffix string) string { return r.paths[suffix] }

// errorf is a format error about the file of suffix.
func (r *planetoidReader) errorf(suffix, format string, args ...any) error {
	return formatErrorf("%s: %s", r.path(suffix), fmt.Sprintf(format, args...))
}

func (r *planetoidReader) read() (*Graph, error) {
	r.paths = map[string]string{}
	var missing []string
	for _, s := range planetoidSuffixes {
		name := filepath.Join(r.dir, "ind."+r.name+"."+s)
		p, err := existing(name)
		if err != nil {
			missing = append(missing, filepath.Base(name))
			continue
		}
		r.paths[s] = p
		if st, err := os.Stat(p); err == nil {
			r.size += st.Size()
		}
	}
	if len(missing) > 0 {
		why := ""
		if slices.Contains(missing, "ind."+r.name+".allx") {
			why = " (allx holds the features of every node but the test nodes: without it they would have none)"
		}
		return nil, formatErrorf("%s: Planetoid dataset %s lacks %s%s", r.dir, r.name, strings.Join(missing, ", "), why)
	}
	x, err := r.csr("x")
	if err != nil {
		return nil, err
	}
	tx, err := r.csr("tx")
	if err != nil {
		return nil, err
	}
	allx, err := r.csr("allx")
	if err != nil {
		return nil, err
	}
	y, err := r.oneHot("y")
	if err != nil {
		return nil, err
	}
	ty, err := r.oneHot("ty")
	if err != nil {
		return nil, err
	}
	ally, err := r.oneHot("ally")
	if err != nil {
		return nil, err
	}
	test, err := r.testIndex()
	if err != nil {
		return nil, err
	}
	v, err := r.unpickle("graph")
	if err != nil {
		return nil, err
	}
	src, dst, keys, err := pickleAdjacency(v)
	if err != nil {
		return nil, r.errorf("graph", "%v", err)
	}

	// Shapes: D columns and C classes everywhere; x/y the first rows
	// of allx/ally; tx/ty one row per test node.
	d, c, a := allx.cols, ally.cols, allx.rows
	for _, m := range []struct {
		suffix string
		cols   int
	}{{"x", x.cols}, {"tx", tx.cols}} {
		if m.cols != d {
			return nil, r.errorf(m.suffix, "%d feature columns, allx has %d", m.cols, d)
		}
	}
	for _, l := range []struct {
		suffix string
		cols   int
	}{{"y", y.cols}, {"ty", ty.cols}} {
		if l.cols != c {
			return nil, r.errorf(l.suffix, "%d classes, ally has %d", l.cols, c)
		}
	}
	switch {
	case ally.rows != a:
		return nil, r.errorf("ally", "%d rows, allx has %d", ally.rows, a)
	case y.rows != x.rows:
		return nil, r.errorf("y", "%d rows, x has %d", y.rows, x.rows)
	case ty.rows != tx.rows:
		return nil, r.errorf("ty", "%d rows, tx has %d", ty.rows, tx.rows)
	case len(test) != tx.rows:
		return nil, r.errorf("test.index", "%d test nodes, tx has %d rows", len(test), tx.rows)
	case x.rows+planetoidVal > a:
		return nil, r.errorf("x", "%d training rows and %d validation nodes after them pass the %d rows of allx", x.rows, planetoidVal, a)
	}
	if i, ok := x.firstRowDiff(allx); ok {
		return nil, r.errorf("x", "row %d differs from row %d of allx (x must be the first rows of allx)", i, i)
	}
	for i := range y.rows {
		if y.labels[i] != ally.labels[i] {
			return nil, r.errorf("y", "row %d differs from row %d of ally (y must be the first rows of ally)", i, i)
		}
	}

	// Nodes: allx's rows, then up to the largest test index; a node in
	// between that is no test node must be a key of the graph, so that
	// every node is stated by the input and the arrays stay within what
	// it justifies.
	n := a
	for _, t := range test {
		if int(t) < a {
			return nil, r.errorf("test.index", "test node %d is a row of allx (%d rows)", t, a)
		}
		n = max(n, int(t)+1)
	}
	if n-a > len(test)+len(keys) { // checked before the flags below are allocated
		return nil, r.errorf("test.index", "test node %d: the %d nodes after allx's %d rows are more than the %d test nodes and %d graph keys can state",
			n-1, n-a, a, len(test), len(keys))
	}
	isTest := make([]bool, n-a)
	for _, t := range test {
		isTest[int(t)-a] = true
	}
	isKey := make([]bool, n-a)
	for _, k := range keys {
		if int(k) >= a && int(k) < n {
			isKey[int(k)-a] = true
		}
	}
	for i := range isTest {
		if !isTest[i] && !isKey[i] {
			return nil, r.errorf("test.index", "node %d, below the largest test node %d, is neither a test node nor in the graph", a+i, n-1)
		}
	}
	for e := range src {
		if int(max(src[e], dst[e])) >= n {
			return nil, r.errorf("graph", "node %d beyond the %d nodes of allx and test.index", max(src[e], dst[e]), n)
		}
	}
	if int64(n)*int64(d) > planetoidMaxDense*max(r.featBytes, 1) {
		return nil, r.errorf("allx", "%d nodes × %d feature columns is %d values dense, more than %d a byte of the %d bytes of x, tx and allx; the partition files hold features dense",
			n, d, int64(n)*int64(d), planetoidMaxDense, r.featBytes)
	}

	g := &Graph{NumNodes: n, FeatDim: d, LabelDim: 1, NumClasses: c}
	g.Feat = make([]float32, n*d)
	allx.fill(g.Feat, d, func(row int) int { return row })
	tx.fill(g.Feat, d, func(row int) int { return int(test[row]) })
	g.Labels = make([]int32, n)
	for i := range g.Labels {
		g.Labels[i] = -1
	}
	copy(g.Labels, ally.labels)
	for k, t := range test {
		g.Labels[t] = ty.labels[k]
	}
	// Not missingLabels: the file that lacks a node's label depends on
	// the node (it named ally for CiteSeer's node 2407, of 2312 rows).
	for v, l := range g.Labels {
		if l != -1 {
			continue
		}
		g.Stats.MissingLabels++
		if r.opts.MissingLabel == Error {
			return nil, r.noLabel(v, a, n, test)
		}
	}
	g.Src, g.Dst = src, dst
	g.Stats.EdgesRead = int64(len(src))
	for e := range src {
		if src[e] == dst[e] {
			g.Stats.SelfLoops++
		}
	}
	addReverses(g)

	g.Train = make([]uint32, x.rows)
	for i := range g.Train {
		g.Train[i] = uint32(i)
	}
	g.Val = make([]uint32, planetoidVal)
	for i := range g.Val {
		g.Val[i] = uint32(x.rows + i)
	}
	g.Test = slices.Clone(test)
	return g, nil
}

// noLabel is the error for node v, which has no label, naming the file
// that lacks it: ally (v is one of its a rows), ty (v is a test node), or
// test.index, which leaves out v, a node among the test nodes a..n-1
// (CiteSeer's 15), so that ty holds no row for it.
func (r *planetoidReader) noLabel(v, a, n int, test []uint32) error {
	if v < a {
		return r.errorf("ally", "node %d has no label: row %d is all zeros", v, v)
	}
	if k := slices.Index(test, uint32(v)); k >= 0 {
		return r.errorf("ty", "test node %d has no label: its row, %d, is all zeros", v, k)
	}
	return r.errorf("test.index", "node %d has no label: it lies among the test nodes (%d..%d, after allx's %d rows) but test.index does not list it, so ty holds no label for it (and tx no features: they are zero)",
		v, a, n-1, a)
}

// addReverses appends to g the reverse of every edge whose reverse is not
// an edge, once per pair, and counts them in Stats.ReverseAdded.
func addReverses(g *Graph) {
	pairs := make([]uint64, len(g.Src))
	for e := range g.Src {
		pairs[e] = uint64(g.Src[e])<<32 | uint64(g.Dst[e])
	}
	slices.Sort(pairs)
	pairs = slices.Compact(pairs)
	for _, p := range pairs {
		u, v := uint32(p>>32), uint32(p)
		if u == v {
			continue
		}
		if _, ok := slices.BinarySearch(pairs, uint64(v)<<32|uint64(u)); !ok {
			g.Src, g.Dst = append(g.Src, v), append(g.Dst, u)
			g.Stats.ReverseAdded++
		}
	}
}
