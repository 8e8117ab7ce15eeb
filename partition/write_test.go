package partition

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"graphnode/csr"
)

// testGraph builds a graph of n nodes and m random edges (self loops and
// duplicates included) with ids 1000+7i (or names "n<i>"), 3 features,
// labels of 4 classes (every 11th node unlabelled) and splits.
func testGraph(n, m int, names, weights bool) *Graph {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(m)))
	g := &Graph{Name: "test", NumNodes: n, Src: make([]uint32, m), Dst: make([]uint32, m),
		FeatDim: 3, Feat: make([]float32, 3*n), LabelDim: 1, NumClasses: 4, Labels: make([]int32, n),
		ClassNames: []string{"a", "b", "c", "d"}}
	for e := range m {
		g.Src[e], g.Dst[e] = uint32(rng.IntN(n)), uint32(rng.IntN(n))
	}
	if weights {
		g.Weights = make([]float32, m)
		for e := range g.Weights {
			g.Weights[e] = float32(e) / 4
		}
	}
	for v := range n {
		if names {
			g.IDs.Names = append(g.IDs.Names, fmt.Sprintf("n%d", v))
		} else {
			g.IDs.Ints = append(g.IDs.Ints, uint64(1000+7*v))
		}
		for j := range 3 {
			g.Feat[3*v+j] = float32(10*v+j) + 0.5
		}
		g.Labels[v] = int32(v % 4)
		if v%11 == 10 {
			g.Labels[v] = -1
			continue
		}
		switch v % 5 {
		case 0, 1:
			g.Train = append(g.Train, uint32(v))
		case 2:
			g.Val = append(g.Val, uint32(v))
		case 3:
			g.Test = append(g.Test, uint32(v))
		}
	}
	return g
}

// graphView is a graph keyed by the input's ids, for comparisons.
type graphView struct {
	edges  map[[2]string]float32 // (src, dst) -> weight
	feat   map[string][]float32
	labels map[string]int32
	splits [3]map[string]bool
}

// inputView is what g should look like after the default cleaning.
func inputView(g *Graph) graphView {
	id := func(v uint32) string {
		if g.IDs.Names != nil {
			return g.IDs.Names[v]
		}
		return fmt.Sprint(g.IDs.Ints[v])
	}
	gv := graphView{edges: map[[2]string]float32{}, feat: map[string][]float32{}, labels: map[string]int32{}}
	for e := range g.Src {
		k := [2]string{id(g.Src[e]), id(g.Dst[e])}
		if _, ok := gv.edges[k]; !ok {
			gv.edges[k] = 0
			if g.Weights != nil {
				gv.edges[k] = g.Weights[e]
			}
		}
	}
	for v := range g.NumNodes {
		gv.feat[id(uint32(v))] = g.Feat[3*v : 3*v+3]
		gv.labels[id(uint32(v))] = g.Labels[v]
	}
	for s, ids := range [3][]uint32{g.Train, g.Val, g.Test} {
		gv.splits[s] = map[string]bool{}
		for _, v := range ids {
			gv.splits[s][id(v)] = true
		}
	}
	return gv
}

// readView reads a parts/ directory back through orig_ids.bin (and
// names.txt) into the input's ids.
func readView(t *testing.T, dir string) graphView {
	t.Helper()
	m, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, OrigIDsFile))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	if m.IDKind == "string" {
		b, err := os.ReadFile(filepath.Join(dir, NamesFile))
		if err != nil {
			t.Fatal(err)
		}
		names = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	id := func(gid uint64) string {
		orig := binary.LittleEndian.Uint64(raw[8*gid:])
		if names != nil {
			return names[orig]
		}
		return fmt.Sprint(orig)
	}
	gv := graphView{edges: map[[2]string]float32{}, feat: map[string][]float32{}, labels: map[string]int32{}}
	for s := range gv.splits {
		gv.splits[s] = map[string]bool{}
	}
	for p := range m.Parts {
		pg, err := csr.Open(filepath.Join(dir, PartFile(p)), csr.OpenOptions{Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		meta := pg.Meta()
		for v := range pg.NumNodes() {
			gid := meta.Start + uint64(v)
			nbrs := pg.Neighbors(uint32(v))
			if !slices.IsSorted(nbrs) {
				t.Errorf("part %d: row %d not sorted: %v", p, v, nbrs)
			}
			for i, nb := range nbrs {
				k := [2]string{id(nb), id(gid)}
				if meta.Direction == csr.Out {
					k = [2]string{id(gid), id(nb)}
				}
				if _, dup := gv.edges[k]; dup {
					t.Errorf("edge %v stored twice", k)
				}
				gv.edges[k] = 0
				if w := pg.Weights(); w != nil {
					gv.edges[k] = w[pg.Indptr()[v]+uint64(i)]
				}
			}
			gv.feat[id(gid)] = slices.Clone(pg.FeatF32()[3*v : 3*v+3])
			gv.labels[id(gid)] = pg.Labels()[v]
		}
		for s, name := range []string{csr.SecTrain, csr.SecVal, csr.SecTest} {
			b, err := pg.Mask(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range b.ToArray() {
				gv.splits[s][id(meta.Start+uint64(v))] = true
			}
		}
		pg.Close()
	}
	return gv
}

func compareViews(t *testing.T, got, want graphView) {
	t.Helper()
	if len(got.edges) != len(want.edges) {
		t.Errorf("%d edges, want %d", len(got.edges), len(want.edges))
	}
	for k, w := range want.edges {
		if gw, ok := got.edges[k]; !ok || gw != w {
			t.Errorf("edge %v: weight %v present %v, want %v", k, gw, ok, w)
			break
		}
	}
	for k, f := range want.feat {
		if !slices.Equal(got.feat[k], f) || got.labels[k] != want.labels[k] {
			t.Errorf("node %s: feat %v label %d, want %v %d", k, got.feat[k], got.labels[k], f, want.labels[k])
			break
		}
	}
	for s := range want.splits {
		if len(got.splits[s]) != len(want.splits[s]) {
			t.Errorf("split %d: %d nodes, want %d", s, len(got.splits[s]), len(want.splits[s]))
		}
		for k := range want.splits[s] {
			if !got.splits[s][k] {
				t.Errorf("split %d lacks %s", s, k)
				break
			}
		}
	}
}

// partitionTo runs BuildAdj, Assign and Write on g into dir.
func partitionTo(t *testing.T, g *Graph, dir string, d csr.Direction, parts int, opts WriteOptions) *Manifest {
	t.Helper()
	ctx := context.Background()
	adj, err := BuildAdj(ctx, g, d, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assign, err := Assign(ctx, g, adj, AssignOptions{Method: MethodRandom, Parts: parts, Seed: opts.Seed})
	if err != nil {
		t.Fatal(err)
	}
	opts.Parts, opts.Method = parts, MethodRandom
	m, err := Write(ctx, dir, g, adj, assign, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWriteRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		names, weights bool
	}{{false, false}, {true, true}} {
		for _, parts := range []int{1, 2, 3} {
			for _, d := range []csr.Direction{csr.In, csr.Out} {
				t.Run(fmt.Sprintf("names=%v/parts=%d/%s", tt.names, parts, d), func(t *testing.T) {
					g := testGraph(200, 1500, tt.names, tt.weights)
					want := inputView(g)
					dir := filepath.Join(t.TempDir(), "parts")
					m := partitionTo(t, g, dir, d, parts, WriteOptions{Seed: 5})
					compareViews(t, readView(t, dir), want)
					if m.Nodes != 200 || m.Edges != uint64(len(want.edges)) || m.Parts != parts || m.Direction != d.String() {
						t.Errorf("manifest nodes %d edges %d parts %d direction %s", m.Nodes, m.Edges, m.Parts, m.Direction)
					}
					if m.Stats["duplicates"] != 1500-int64(len(want.edges)) || m.Stats["self_loops"] == 0 {
						t.Errorf("stats %v: want %d duplicates and some self loops", m.Stats, 1500-len(want.edges))
					}
					// Each part records its largest degree, and the set's
					// is the largest of the graph.
					var setMax uint64
					for p, e := range m.Part {
						g, err := csr.Open(filepath.Join(dir, PartFile(p)), csr.OpenOptions{})
						if err != nil {
							t.Fatal(err)
						}
						ip := g.Indptr()
						var d uint64
						for v := 0; v+1 < len(ip); v++ {
							d = max(d, ip[v+1]-ip[v])
						}
						g.Close()
						if e.MaxDegree != d {
							t.Errorf("part %d: max_degree %d, the file's largest degree %d", p, e.MaxDegree, d)
						}
						setMax = max(setMax, d)
					}
					if got, ok := m.MaxDegree(); !ok || got != setMax {
						t.Errorf("MaxDegree() = %d, %v; want %d", got, ok, setMax)
					}
				})
			}
		}
	}
}

func TestWriteDeterministic(t *testing.T) {
	base := t.TempDir()
	for _, name := range []string{"a", "b"} {
		partitionTo(t, testGraph(300, 2000, false, true), filepath.Join(base, name), csr.In, 3, WriteOptions{Seed: 9})
	}
	var files []string
	filepath.WalkDir(filepath.Join(base, "a"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(filepath.Join(base, "a"), p)
			files = append(files, rel)
		}
		return err
	})
	if len(files) != 5 { // graph.toml, orig_ids.bin, 3 part files
		t.Errorf("files %v, want 5", files)
	}
	for _, f := range files {
		a, _ := os.ReadFile(filepath.Join(base, "a", f))
		b, err := os.ReadFile(filepath.Join(base, "b", f))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs with one seed (%v)", f, err)
		}
	}
}

func TestWriteForce(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "parts")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	partitionTo(t, testGraph(50, 200, false, false), dir, csr.In, 2, WriteOptions{}) // empty dir: fine
	g := testGraph(50, 200, false, false)
	adj, _ := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	assign := make([]uint32, 50)
	_, err := Write(context.Background(), dir, g, adj, assign, WriteOptions{Parts: 1})
	if err == nil || !strings.Contains(err.Error(), "exists and is not empty (--force replaces it)") {
		t.Fatalf("err = %v", err)
	}
	m, err := Write(context.Background(), dir, g, adj, assign, WriteOptions{Parts: 1, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := OpenDir(dir)
	if err != nil || got.Parts != 1 || got.Checksum != m.Checksum {
		t.Fatalf("after --force: %+v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "part-1")); !os.IsNotExist(err) {
		t.Errorf("part-1 of the old partitioning survived: %v", err)
	}
	ents, _ := os.ReadDir(parent)
	if len(ents) != 1 {
		t.Errorf("parent holds %d entries (temporary dirs left?)", len(ents))
	}
}

// TestWriteForceDot: -o . --force replaces the working directory's
// partitioning. It ran the whole partitioning and then failed to move
// "." aside (EBUSY), having made its temporary directory inside ".".
func TestWriteForceDot(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "parts")
	partitionTo(t, testGraph(50, 200, false, false), dir, csr.In, 2, WriteOptions{})
	t.Chdir(dir)
	g := testGraph(50, 200, false, false)
	adj, _ := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	if _, err := CheckOutput(".", true); err != nil {
		t.Fatalf("CheckOutput: %v", err)
	}
	m, err := Write(context.Background(), ".", g, adj, make([]uint32, 50), WriteOptions{Parts: 1, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenDir(dir); err != nil || got.Parts != 1 || got.Checksum != m.Checksum {
		t.Fatalf("after -o . --force: %+v, %v", got, err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("parent holds %d entries (temporary dirs left?)", len(ents))
	}
}

// TestCheckOutputDanglingLink: an output that is a link to nothing is
// refused before the work, naming where it points; Write made the
// partitioning beside the link and failed to rename it over the link.
func TestCheckOutputDanglingLink(t *testing.T) {
	root := t.TempDir()
	link, target := filepath.Join(root, "parts"), filepath.Join(root, "missing")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	want := "partition: output " + link + " is a link to " + target + ", which does not exist"
	if _, err := CheckOutput(link, false); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckOutput: %v, want %q", err, want)
	}
	g := testGraph(20, 40, false, false)
	adj, _ := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	if _, err := Write(context.Background(), link, g, adj, make([]uint32, 20), WriteOptions{Parts: 1}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Write: %v, want %q", err, want)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 1 {
		t.Errorf("%s holds %d entries, want the link alone", root, len(ents))
	}
}

// TestWriteMakesParents: an output whose parent directories do not exist
// yet is written, the parents made as by mkdir -p (as node gen makes its
// output); it failed once the whole partitioning was done.
func TestWriteMakesParents(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "parts")
	if _, err := CheckOutput(dir, false); err != nil {
		t.Fatalf("CheckOutput: %v", err)
	}
	m := partitionTo(t, testGraph(30, 60, false, false), dir, csr.In, 2, WriteOptions{})
	if got, err := OpenDir(dir); err != nil || got.Checksum != m.Checksum {
		t.Fatalf("OpenDir: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 1 {
		t.Errorf("%s holds %d entries, want 1", filepath.Dir(dir), len(ents))
	}
}

// TestWriteThroughSymlink: an output that is a symbolic link to a
// directory (parts/ linked to a larger disk) is written where the link
// points, and the link stays; the directory was written beside the link,
// on the link's file system, and replaced it.
func TestWriteThroughSymlink(t *testing.T) {
	for _, force := range []bool{false, true} {
		root := t.TempDir()
		target := filepath.Join(root, "disk2", "parts")
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		if force {
			if err := os.WriteFile(filepath.Join(target, "old"), []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		link := filepath.Join(root, "work", "parts")
		if err := os.Mkdir(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		g := testGraph(50, 200, false, false)
		adj, _ := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
		m, err := Write(context.Background(), link, g, adj, make([]uint32, 50), WriteOptions{Parts: 1, Force: force})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("force %v: the link is no longer one: %v, %v", force, st.Mode(), err)
		}
		if got, err := OpenDir(target); err != nil || got.Checksum != m.Checksum {
			t.Errorf("force %v: the link's target: %v", force, err)
		}
		if _, err := os.Stat(filepath.Join(target, "old")); !os.IsNotExist(err) {
			t.Errorf("force %v: the target's old file survived: %v", force, err)
		}
		for _, d := range []string{filepath.Dir(link), filepath.Dir(target)} {
			if ents, _ := os.ReadDir(d); len(ents) != 1 {
				t.Errorf("force %v: %s holds %d entries, want 1", force, d, len(ents))
			}
		}
	}
}

// TestWriteDirMode: the parts/ directory gets the mode of a plain mkdir
// under the process's umask, like the part-K directories in it, not the
// 0700 of a private temporary directory: the daemon and the trainers may
// run as other users than the one who partitioned.
func TestWriteDirMode(t *testing.T) {
	parent := t.TempDir()
	ref := filepath.Join(parent, "ref")
	if err := os.Mkdir(ref, 0o777); err != nil {
		t.Fatal(err)
	}
	want, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "parts")
	partitionTo(t, testGraph(50, 200, false, false), dir, csr.In, 2, WriteOptions{})
	for _, d := range []string{dir, filepath.Join(dir, "part-0")} {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want.Mode().Perm() {
			t.Errorf("%s: mode %v, want %v (mkdir under the umask)", d, st.Mode().Perm(), want.Mode().Perm())
		}
	}
}

func TestWriteFailureLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	g := testGraph(20, 50, true, false)
	g.IDs.Names[3] = "bad\nname"
	adj, _ := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	_, err := Write(context.Background(), filepath.Join(parent, "parts"), g, adj, make([]uint32, 20), WriteOptions{Parts: 1})
	if err == nil || !strings.Contains(err.Error(), `names.txt: partition: name 3 ("bad\nname") holds a line break`) {
		t.Errorf("err = %v", err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Errorf("failed write left %d entries", len(ents))
	}
}

// graph.toml is TOML, which holds UTF-8 only: a graph or class name that
// is not (a Latin-1 label, a file name in another encoding) is refused
// before anything is written; it made a directory whose graph.toml no
// reader could decode.
func TestWriteRefusesNonUTF8Names(t *testing.T) {
	for _, tt := range []struct {
		edit func(g *Graph)
		want string
	}{
		{func(g *Graph) { g.Name = "th\xe9se" }, `graph name "th\xe9se" is not UTF-8`},
		{func(g *Graph) { g.ClassNames[2] = "Th\xe9orie" }, `class 2 is named "Th\xe9orie", not UTF-8`},
	} {
		parent := t.TempDir()
		g := testGraph(20, 50, false, false)
		tt.edit(g)
		adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Write(context.Background(), filepath.Join(parent, "parts"), g, adj, make([]uint32, 20), WriteOptions{Parts: 1})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want %q", err, tt.want)
		}
		if ents, _ := os.ReadDir(parent); len(ents) != 0 {
			t.Errorf("%s: refused write left %d entries", tt.want, len(ents))
		}
	}
}

// testKG is a knowledge graph of 3 entities and 2 relations: a -r0-> b,
// a -r1-> b, c -r0-> a; valid (c, r1, b); test (b, r0, c), (a, r0, c).
func testKG() *Graph {
	return &Graph{Name: "kg", NumNodes: 3,
		Src: []uint32{0, 0, 2}, Dst: []uint32{1, 1, 0}, Etypes: []uint32{0, 1, 0},
		IDs: IDMap{Names: []string{"a", "b", "c"}},
		KG: &KG{RelationNames: []string{"likes", "knows"},
			Valid: Triples{Head: []uint32{2}, Rel: []uint32{1}, Tail: []uint32{1}},
			Test:  Triples{Head: []uint32{1, 0}, Rel: []uint32{0, 0}, Tail: []uint32{2, 2}}}}
}

func TestWriteKnowledgeGraph(t *testing.T) {
	g := testKG()
	dir := filepath.Join(t.TempDir(), "parts")
	ctx := context.Background()
	adj, err := BuildAdj(ctx, g, csr.In, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assign := []uint32{1, 0, 1} // new ids: b=0, a=1, c=2
	m, err := Write(ctx, dir, g, adj, assign, WriteOptions{Parts: 2, Method: "given"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Edges != 3 || m.Relations != 2 || m.TriplesValid != 1 || m.TriplesTest != 2 || m.IDKind != "string" {
		t.Errorf("manifest %+v", m)
	}
	p0, err := csr.Open(filepath.Join(dir, PartFile(0)), csr.OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p0.Close()
	// Part 0 owns b (new 0): in-edges from a (new 1) with relations 0 and 1.
	if !slices.Equal(p0.Indices(), []uint64{1, 1}) || !slices.Equal(p0.Etypes(), []uint32{0, 1}) {
		t.Errorf("part 0: indices %v etypes %v", p0.Indices(), p0.Etypes())
	}
	for _, f := range []struct {
		name string
		want []uint64
	}{{TriplesValidFile, []uint64{2, 1, 0}}, {TriplesTestFile, []uint64{0, 0, 2, 1, 0, 2}}} {
		b, _ := os.ReadFile(filepath.Join(dir, f.name))
		got := make([]uint64, len(b)/8)
		for i := range got {
			got[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
		if !slices.Equal(got, f.want) {
			t.Errorf("%s = %v, want %v", f.name, got, f.want)
		}
	}
	for name, want := range map[string]string{RelationsFile: "likes\nknows\n", NamesFile: "a\nb\nc\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != want {
			t.Errorf("%s = %q, want %q", name, b, want)
		}
	}
}

func TestWriteF16Features(t *testing.T) {
	g := testGraph(30, 60, false, false)
	g.Feat[0] = 1.0 / 3
	dir := filepath.Join(t.TempDir(), "parts")
	m := partitionTo(t, g, dir, csr.In, 1, WriteOptions{FeatType: csr.TypeF16})
	if m.FeatDtype != "f16" {
		t.Errorf("feat_dtype %q", m.FeatDtype)
	}
	pg, err := csr.Open(filepath.Join(dir, PartFile(0)), csr.OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	row := pg.FeatRow(0) // one part, so new id 0 = old 0
	if got := binary.LittleEndian.Uint16(row); got != 0x3555 {
		t.Errorf("f16 of 1/3 = %#04x, want 0x3555", got)
	}
	if pg.RowBytes() != 6 {
		t.Errorf("row bytes %d, want 6", pg.RowBytes())
	}
}

// A feature that float16 cannot hold is refused, naming the node and the
// feature, before anything is written; it became +Inf in the part file.
// The largest that rounds to a finite half is kept.
func TestWriteF16Range(t *testing.T) {
	for _, tt := range []struct {
		v    float32
		want string // "" = written
	}{
		{65504, ""},
		{65519.99, ""},
		{-65504, ""},
		{65520, "node 1028: feature 3 of 3 is 65520, beyond float16's range"},
		{-70000, "node 1028: feature 3 of 3 is -70000, beyond float16's range"},
		{3e38, "node 1028: feature 3 of 3 is 3e+38, beyond float16's range"},
	} {
		g := testGraph(30, 60, false, false)
		g.Feat[3*4+2] = tt.v // node index 4 has id 1028
		parent := t.TempDir()
		dir := filepath.Join(parent, "parts")
		ctx := context.Background()
		adj, err := BuildAdj(ctx, g, csr.In, CleanOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Write(ctx, dir, g, adj, make([]uint32, 30), WriteOptions{Parts: 1, FeatType: csr.TypeF16})
		if tt.want == "" {
			if err != nil {
				t.Errorf("%g: %v", tt.v, err)
				continue
			}
			pg, err := csr.Open(filepath.Join(dir, PartFile(0)), csr.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := F16ToF32(binary.LittleEndian.Uint16(pg.FeatRow(4)[4:])); got != float32(math.Copysign(65504, float64(tt.v))) {
				t.Errorf("%g written as %g", tt.v, got)
			}
			pg.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%g: err = %v, want %q", tt.v, err, tt.want)
		}
		if ents, _ := os.ReadDir(parent); len(ents) != 0 {
			t.Errorf("%g: refused write left %d entries", tt.v, len(ents))
		}
	}
}

// BenchmarkWrite writes 4 partitions of a random graph with 1 M edges,
// 100 k nodes and 16 features.
func BenchmarkWrite(b *testing.B) {
	const n, m = 100_000, 1_000_000
	g := testGraph(n, m, false, false)
	g.FeatDim, g.Feat = 16, make([]float32, 16*n)
	adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	assign, _ := Assign(context.Background(), g, adj, AssignOptions{Method: MethodRandom, Parts: 4})
	dir := filepath.Join(b.TempDir(), "parts")
	var written int64
	b.ReportAllocs()
	for b.Loop() {
		m, err := Write(context.Background(), dir, g, adj, assign, WriteOptions{Parts: 4, Force: true})
		if err != nil {
			b.Fatal(err)
		}
		written = m.Bytes()
	}
	b.SetBytes(written)
	b.ReportMetric(float64(adj.NumEdges())*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
}

// TestCheckOutputUnwritable: an output where nothing can be made (a
// read-only file system, a directory of another user; /proc here, which
// refuses root too) is refused by the checks callers run first, for the
// output itself and for one whose parents mkdir -p would make. It was
// found by Write's mkdir, after the input was read and partitioned. The
// checks leave nothing behind where they may write.
func TestCheckOutputUnwritable(t *testing.T) {
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no /proc")
	}
	for _, dir := range []string{"/proc/graphnode-out", "/proc/graphnode-out/a/parts"} {
		if _, err := CheckOutput(dir, false); err == nil || !strings.Contains(err.Error(), "output "+dir+": cannot write in /proc") {
			t.Errorf("CheckOutput(%s) = %v", dir, err)
		}
		if _, err := CheckOGBOutput(dir, false); err == nil || !strings.Contains(err.Error(), "output "+dir+": cannot write in /proc") {
			t.Errorf("CheckOGBOutput(%s) = %v", dir, err)
		}
	}
	root := t.TempDir()
	if _, err := CheckOutput(filepath.Join(root, "parts"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckOGBOutput(filepath.Join(root, "a", "ogb"), false); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("the checks left %d entries in %s", len(ents), root)
	}
}

// TestWriteIntoEmptyDir: an existing empty output (a disk mounted for
// the partitions, a directory made for the user, -o .) is written into
// and stays, with its mode: it was removed and replaced by a directory
// renamed from beside it, which fails for a mount point or for ".", and
// put the files on the parent's disk first.
func TestWriteIntoEmptyDir(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "parts")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(dir)
	m := partitionTo(t, testGraph(50, 200, false, false), dir, csr.In, 2, WriteOptions{})
	after, err := os.Stat(dir)
	if err != nil || !os.SameFile(before, after) || after.Mode().Perm() != 0o750 {
		t.Errorf("the output directory was replaced: same %v, mode %v", os.SameFile(before, after), after.Mode())
	}
	if got, err := OpenDir(dir); err != nil || got.Checksum != m.Checksum {
		t.Fatalf("OpenDir: %v", err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("parent holds %d entries", len(ents))
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 4 { // graph.toml, orig_ids.bin, part-0, part-1
		t.Errorf("dir holds %v", names)
	}
}

// TestCheckOutputNamesEntries: a non-empty output is refused with what
// it holds, hidden names too: a run killed while writing into an empty
// output leaves its .tmp- directory there, and the next run's "not
// empty" pointed at a directory that ls shows empty.
func TestCheckOutputNamesEntries(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".tmp-123"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := CheckOutput(dir, false)
	if err == nil || !strings.Contains(err.Error(), "exists and is not empty (--force replaces it): it holds .tmp-123") {
		t.Errorf("err = %v", err)
	}
}

// TestWriteKeepsWhatAppears: what appears in the output while Write
// runs (a user's file, another run's partitioning) is neither replaced
// nor removed, and the finished partitioning is kept whole where the
// error says. An output made during the run was moved aside and removed
// with all it held; one that existed empty had its files overwritten by
// the moves. With Force too, the output being absent or empty as Write
// began: the user's file was removed, or the moves replaced a file of
// the same name, and failed on a directory and removed the finished
// partitioning.
func TestWriteKeepsWhatAppears(t *testing.T) {
	g := testGraph(50, 200, false, false)
	adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assign := make([]uint32, 50)
	for _, tt := range []struct {
		name   string
		exists bool   // the output exists, empty, before Write
		put    string // what appears in it during the run
		force  bool
	}{
		{"new/user-file", false, "notes.txt", false},
		{"new/same-name", false, ManifestFile, false},
		{"empty/user-file", true, "notes.txt", false},
		{"empty/same-name", true, "orig_ids.bin", false},
		{"force/new/user-file", false, "notes.txt", true},
		{"force/empty/user-file", true, "notes.txt", true},
		{"force/empty/same-name", true, "orig_ids.bin", true},
		{"force/empty/same-dir", true, "part-0/part.csr", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "parts")
			if tt.exists {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			put := func(string, int64, int64) {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, tt.put)), 0o755)
				if err := os.WriteFile(filepath.Join(dir, tt.put), []byte("keep-me"), 0o644); err != nil {
					t.Error(err)
				}
			}
			_, err := Write(context.Background(), dir, g, adj, assign, WriteOptions{Parts: 1, Force: tt.force, Progress: put})
			first, _, _ := strings.Cut(tt.put, "/")
			held := "without --force nothing there is replaced or removed"
			if tt.force {
				held = "--force replaces only what the output held when the run began"
			}
			if want := "output " + dir + ": " + first + " appeared in it during the run, and " + held + "; the finished output is left whole in "; !errors.Is(err, ErrOutputNotEmpty) || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, want)
			}
			if b, err := os.ReadFile(filepath.Join(dir, tt.put)); err != nil || string(b) != "keep-me" {
				t.Errorf("%s after the refused write: %q, %v", tt.put, b, err)
			}
			_, kept, found := strings.Cut(err.Error(), "left whole in ")
			kept, _, _ = strings.Cut(kept, " (")
			if !found {
				t.Fatalf("the error names no place for the finished output: %v", err)
			}
			if m, err := OpenDir(kept); err != nil || m.Parts != 1 {
				t.Errorf("the kept partitioning %s: %v", kept, err)
			}
			// The kept temporary directory is in dir when it existed,
			// else beside it.
			inDir, inParent := 1, 2
			if tt.exists {
				inDir, inParent = 2, 1
			}
			if ents, _ := os.ReadDir(dir); len(ents) != inDir {
				t.Errorf("%s holds %s", dir, entryNames(ents, 5))
			}
			if ents, _ := os.ReadDir(parent); len(ents) != inParent {
				t.Errorf("%s holds %s", parent, entryNames(ents, 5))
			}
		})
	}
}

// TestWriteConcurrentRuns: two runs into one output that is new when
// both start: the second to finish is refused and keeps its result,
// where both said "wrote" and the first's partitioning was removed.
func TestWriteConcurrentRuns(t *testing.T) {
	g := testGraph(50, 200, false, false)
	adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "parts")
	var first *Manifest
	var firstErr error
	started := false
	inner := func(string, int64, int64) {
		if !started { // run the first write to its end inside the second's
			started = true
			first, firstErr = Write(context.Background(), dir, g, adj, make([]uint32, 50), WriteOptions{Parts: 1})
		}
	}
	assign := make([]uint32, 50)
	for v := range assign {
		assign[v] = uint32(v % 2)
	}
	_, err = Write(context.Background(), dir, g, adj, assign, WriteOptions{Parts: 2, Progress: inner})
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if !errors.Is(err, ErrOutputNotEmpty) {
		t.Fatalf("second write: err = %v, want ErrOutputNotEmpty", err)
	}
	if m, err := OpenDir(dir); err != nil || m.Checksum != first.Checksum {
		t.Errorf("the first write's partitioning is gone: %v", err)
	}
}

// TestMoveIntoNoReplace: a name that exists in the output fails the
// move without replacing it, and the entries moved before it go back
// into the temporary directory, which is whole again.
func TestMoveIntoNoReplace(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, ".tmp-1")
	for _, f := range []string{"a", "b", ManifestFile} {
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), []byte("new"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := moveIntoNoReplace(tmp, dir)
	if !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("err = %v, want EEXIST", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b")); string(b) != "mine" {
		t.Errorf("b = %q, want mine", b)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 3 {
		t.Errorf("tmp holds %s, want a, b and %s", entryNames(ents, 5), ManifestFile)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("dir holds %s, want .tmp-1 and b", entryNames(ents, 5))
	}
}
