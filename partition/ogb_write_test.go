package partition

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// ogbTestGraph has the awkward values: a missing label, floats that need
// all nine digits, negative zero, a denormal, and large ids.
func ogbTestGraph() *Graph {
	g := &Graph{
		NumNodes: 5,
		Src:      []uint32{0, 1, 4, 4, 3},
		Dst:      []uint32{1, 2, 0, 4, 3},
		FeatDim:  3,
		Feat: []float32{
			0.1, -2.5e-8, 3.4028235e38,
			float32(math.Copysign(0, -1)), 1e-45, 1,
			16777217, -0.33333334, 7,
			0, 0, 0,
			math.Pi, math.E, -1e10,
		},
		LabelDim: 1, NumClasses: 3,
		Labels: []int32{2, -1, 0, 1, 2},
		Train:  []uint32{0, 2}, Val: []uint32{3}, Test: []uint32{4},
	}
	return g
}

func TestWriteOGB(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			g := ogbTestGraph()
			dir := filepath.Join(t.TempDir(), "out")
			if err := WriteOGB(context.Background(), dir, g, OGBWriteOptions{Gzip: gz, Workers: 2}); err != nil {
				t.Fatal(err)
			}
			ext := ".csv"
			if gz {
				ext = ".csv.gz"
			}
			read := func(rel string) []string { return ogbTestLines(t, filepath.Join(dir, rel+ext), gz) }

			if got := read("raw/edge"); !slices.Equal(got, []string{"0,1", "1,2", "4,0", "4,4", "3,3"}) {
				t.Errorf("edge.csv = %q", got)
			}
			if got := read("raw/num-node-list"); !slices.Equal(got, []string{"5"}) {
				t.Errorf("num-node-list = %q", got)
			}
			if got := read("raw/num-edge-list"); !slices.Equal(got, []string{"5"}) {
				t.Errorf("num-edge-list = %q", got)
			}
			if got := read("raw/node-label"); !slices.Equal(got, []string{"2", "nan", "0", "1", "2"}) {
				t.Errorf("node-label = %q", got)
			}
			feat := ogbTestFloats(t, read("raw/node-feat"), g.FeatDim)
			for i := range g.Feat {
				if math.Float32bits(feat[i]) != math.Float32bits(g.Feat[i]) {
					t.Errorf("feature %d: read %g (%#x), wrote %g (%#x)", i, feat[i], math.Float32bits(feat[i]), g.Feat[i], math.Float32bits(g.Feat[i]))
				}
			}
			for name, want := range map[string][]string{"train": {"0", "2"}, "valid": {"3"}, "test": {"4"}} {
				if got := read("split/random/" + name); !slices.Equal(got, want) {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			// Nothing else: no temporary files left behind.
			var files []string
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(dir, p)
					files = append(files, rel)
				}
				return nil
			})
			if len(files) != 8 {
				t.Errorf("files = %q, want 8", files)
			}
		})
	}
}

func TestWriteOGBRandomFeatures(t *testing.T) {
	cfg := DefaultRMATConfig()
	cfg.Nodes, cfg.Edges, cfg.FeatDim, cfg.Classes = 3000, 200_000, 7, 4
	g := genTestRMAT(t, cfg)
	dir := t.TempDir()
	if err := WriteOGB(context.Background(), dir, g, OGBWriteOptions{Gzip: true, Scheme: "x", Workers: 3}); err != nil {
		t.Fatal(err)
	}
	edges := ogbTestLines(t, filepath.Join(dir, "raw/edge.csv.gz"), true)
	if len(edges) != len(g.Src) {
		t.Fatalf("%d edge lines, want %d", len(edges), len(g.Src))
	}
	for e, l := range edges {
		if want := fmt.Sprintf("%d,%d", g.Src[e], g.Dst[e]); l != want {
			t.Fatalf("edge %d = %q, want %q", e, l, want)
		}
	}
	feat := ogbTestFloats(t, ogbTestLines(t, filepath.Join(dir, "raw/node-feat.csv.gz"), true), 7)
	if !slices.Equal(feat, g.Feat) {
		t.Error("features do not round-trip")
	}
	if got := ogbTestLines(t, filepath.Join(dir, "split/x/train.csv.gz"), true); len(got) != len(g.Train) {
		t.Errorf("train lines %d, want %d", len(got), len(g.Train))
	}
}

// TestWriteOGBRead round-trips generated graphs through the ogb reader.
func TestWriteOGBRead(t *testing.T) {
	cfg := DefaultRMATConfig()
	cfg.Nodes, cfg.Edges, cfg.FeatDim, cfg.Classes, cfg.Undirected = 2000, 30_000, 5, 6, true
	rmat := genTestRMAT(t, cfg)
	sbm, err := SBM(context.Background(), SBMConfig{Nodes: 3000, FeatDim: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		g    *Graph
		gz   bool
	}{{"fixed", ogbTestGraph(), false}, {"rmat", rmat, true}, {"sbm", sbm, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteOGB(context.Background(), dir, tc.g, OGBWriteOptions{Gzip: tc.gz}); err != nil {
				t.Fatal(err)
			}
			got, err := Read(context.Background(), dir, ReadOptions{Format: FormatOGB})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.g
			if got.NumNodes != want.NumNodes || !slices.Equal(got.Src, want.Src) || !slices.Equal(got.Dst, want.Dst) {
				t.Errorf("graph: %d nodes, %d edges; want %d, %d (or edges differ)", got.NumNodes, len(got.Src), want.NumNodes, len(want.Src))
			}
			if got.FeatDim != want.FeatDim || len(got.Feat) != len(want.Feat) {
				t.Fatalf("features %d x %d, want %d x %d", len(got.Feat), got.FeatDim, len(want.Feat), want.FeatDim)
			}
			for i := range want.Feat {
				if math.Float32bits(got.Feat[i]) != math.Float32bits(want.Feat[i]) {
					t.Fatalf("feature %d: read %g, wrote %g", i, got.Feat[i], want.Feat[i])
				}
			}
			if !slices.Equal(got.Labels, want.Labels) || got.LabelDim != want.LabelDim || got.NumClasses != want.NumClasses {
				t.Errorf("labels differ (dim %d, classes %d; want %d, %d)", got.LabelDim, got.NumClasses, want.LabelDim, want.NumClasses)
			}
			if !slices.Equal(got.Train, want.Train) || !slices.Equal(got.Val, want.Val) || !slices.Equal(got.Test, want.Test) {
				t.Error("splits differ")
			}
		})
	}
}

func TestWriteOGBExisting(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "README")
	os.WriteFile(keep, []byte("mine"), 0o644)
	os.MkdirAll(filepath.Join(dir, "raw"), 0o755)
	stale := filepath.Join(dir, "raw", "edge.csv.gz")
	os.WriteFile(stale, []byte("old"), 0o644)

	err := WriteOGB(context.Background(), dir, ogbTestGraph(), OGBWriteOptions{})
	if !errors.Is(err, ErrOutputNotEmpty) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("err = %v, want ErrOutputNotEmpty naming %s", err, dir)
	}
	if err := WriteOGB(context.Background(), dir, ogbTestGraph(), OGBWriteOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale %s survived --force: %v", stale, err)
	}
	if b, _ := os.ReadFile(keep); string(b) != "mine" {
		t.Errorf("force touched %s", keep)
	}
}

// TestWriteOGBDanglingLink: an output that is a link to nothing is
// refused by the check before generating, naming where it points (node
// gen said "mkdir DIR: file exists" once the graph was drawn).
func TestWriteOGBDanglingLink(t *testing.T) {
	root := t.TempDir()
	link, target := filepath.Join(root, "g"), filepath.Join(root, "missing")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	want := "partition: output " + link + " is a link to " + target + ", which does not exist"
	if _, err := CheckOGBOutput(link, false); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckOGBOutput: %v, want %q", err, want)
	}
	if err := WriteOGB(context.Background(), link, ogbTestGraph(), OGBWriteOptions{}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("WriteOGB: %v, want %q", err, want)
	}
}

// TestWriteOGBForceFailureKeepsOld: a forced write that fails half way
// (here its context is cancelled once the edge file is written; a full
// disk fails the same way, see cmd/node's TestFullDisk) leaves the
// dataset it was to replace byte for byte, and no temporary directory.
// A later forced write replaces it, and clears the temporary directory a
// killed write left behind.
func TestWriteOGBForceFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	old := ogbTestGraph()
	if err := WriteOGB(context.Background(), dir, old, OGBWriteOptions{}); err != nil {
		t.Fatal(err)
	}
	snapshot := func() map[string]string {
		files := map[string]string{}
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				rel, _ := filepath.Rel(dir, p)
				files[rel] = string(b)
			}
			return err
		})
		return files
	}
	before := snapshot()
	next := ogbTestGraph()
	next.Src, next.Dst = next.Src[:1], next.Dst[:1]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := WriteOGB(ctx, dir, next, OGBWriteOptions{Force: true, Progress: func(stage string, done, total int64) {
		if strings.HasPrefix(stage, "write raw/edge") && done == total {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), filepath.Join(dir, "raw")) {
		t.Fatalf("err = %v, want context.Canceled naming a file of %s/raw", err, dir)
	}
	if after := snapshot(); !maps.Equal(after, before) {
		t.Errorf("failed forced write changed the dataset:\nbefore %q\nafter  %q", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	stale := filepath.Join(dir, ogbTmpPrefix+"1")
	if err := os.MkdirAll(filepath.Join(stale, "raw"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteOGB(context.Background(), dir, next, OGBWriteOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := ogbTestLines(t, filepath.Join(dir, "raw/num-edge-list.csv"), false); !slices.Equal(got, []string{"1"}) {
		t.Errorf("num-edge-list after the forced write = %q, want 1", got)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 { // raw, split
		t.Errorf("%s holds %d entries after the forced write, want raw and split", dir, len(ents))
	}
}

// TestWriteOGBEmpty writes a graph without edges, features, labels or
// splits: the edge file is a valid empty gzip stream and nothing else of
// the optional files appears.
func TestWriteOGBEmpty(t *testing.T) {
	dir := t.TempDir()
	if err := WriteOGB(context.Background(), dir, &Graph{NumNodes: 3}, OGBWriteOptions{Gzip: true}); err != nil {
		t.Fatal(err)
	}
	if got := ogbTestLines(t, filepath.Join(dir, "raw/edge.csv.gz"), true); got != nil {
		t.Errorf("edge.csv.gz = %q, want no lines", got)
	}
	if got := ogbTestLines(t, filepath.Join(dir, "raw/num-node-list.csv.gz"), true); !slices.Equal(got, []string{"3"}) {
		t.Errorf("num-node-list = %q", got)
	}
	for _, f := range []string{"raw/node-feat.csv.gz", "raw/node-label.csv.gz", "split/random/train.csv.gz"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want it absent", f, err)
		}
	}
}

func TestWriteOGBErrors(t *testing.T) {
	g := ogbTestGraph()
	g.Feat = g.Feat[:4]
	if err := WriteOGB(context.Background(), t.TempDir(), g, OGBWriteOptions{}); err == nil || !strings.Contains(err.Error(), "feature values") {
		t.Errorf("short features: err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WriteOGB(ctx, t.TempDir(), ogbTestGraph(), OGBWriteOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func ogbTestLines(t *testing.T, path string, gz bool) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if gz {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	s := string(b)
	if s == "" {
		return nil
	}
	if !strings.HasSuffix(s, "\n") {
		t.Fatalf("%s does not end in a newline", path)
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func ogbTestFloats(t *testing.T, lines []string, dim int) []float32 {
	t.Helper()
	var out []float32
	for i, l := range lines {
		fields := strings.Split(l, ",")
		if len(fields) != dim {
			t.Fatalf("row %d has %d fields, want %d", i, len(fields), dim)
		}
		for _, f := range fields {
			v, err := strconv.ParseFloat(f, 32)
			if err != nil {
				t.Fatalf("row %d: %v", i, err)
			}
			out = append(out, float32(v))
		}
	}
	return out
}

func BenchmarkWriteOGB(b *testing.B) {
	cfg := DefaultRMATConfig()
	cfg.Nodes, cfg.Edges, cfg.FeatDim, cfg.Classes = 1<<15, 1<<19, 100, 47
	g := genTestRMAT(b, cfg)
	for _, gz := range []bool{false, true} {
		b.Run(fmt.Sprintf("gzip=%v", gz), func(b *testing.B) {
			dir := b.TempDir()
			var size int64
			b.ReportAllocs()
			for b.Loop() {
				if err := WriteOGB(context.Background(), dir, g, OGBWriteOptions{Gzip: gz, Force: true}); err != nil {
					b.Fatal(err)
				}
			}
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if fi, err := d.Info(); err == nil && !d.IsDir() {
					size += fi.Size()
				}
				return nil
			})
			b.SetBytes(size)
			b.ReportMetric(float64(len(g.Src))*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
		})
	}
}

// TestCheckOGBOutput: the check before generating refuses what WriteOGB
// would refuse and, unlike WriteOGB with force, removes nothing.
func TestCheckOGBOutput(t *testing.T) {
	dir := t.TempDir()
	if _, err := CheckOGBOutput(filepath.Join(dir, "new"), false); err != nil {
		t.Errorf("absent dir: %v", err)
	}
	stale := filepath.Join(dir, ogbTmpPrefix+"1")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckOGBOutput(dir, false); !errors.Is(err, ErrOutputNotEmpty) {
		t.Errorf("non-empty dir without force: %v", err)
	}
	if _, err := CheckOGBOutput(dir, true); err != nil {
		t.Errorf("non-empty dir with force: %v", err)
	}
	if _, err := os.Stat(stale); err != nil {
		t.Errorf("the check removed %s: %v", stale, err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckOGBOutput(file, true); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file: %v", err)
	}
}

// TestWriteOGBSwapFailureKeepsOld: when moving the new split/ into place
// fails after the new raw/ went in, the old raw/ is moved back, so the
// dataset is the old one whole, not new edges beside old splits.
func TestWriteOGBSwapFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	if err := WriteOGB(context.Background(), dir, ogbTestGraph(), OGBWriteOptions{}); err != nil {
		t.Fatal(err)
	}
	before := ogbTestLines(t, filepath.Join(dir, "raw/num-edge-list.csv"), false)
	defer func(r func(string, string) error) { ogbRename = r }(ogbRename)
	failed := false
	ogbRename = func(from, to string) error {
		if !failed && strings.HasPrefix(filepath.Base(from), "split") && filepath.Base(to) == "split" { // once: the new split/ into place
			failed = true
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EIO}
		}
		return os.Rename(from, to)
	}
	next := ogbTestGraph()
	next.Src, next.Dst = next.Src[:1], next.Dst[:1]
	err := WriteOGB(context.Background(), dir, next, OGBWriteOptions{Force: true})
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "move split into place") {
		t.Fatalf("err = %v, want EIO moving split into place", err)
	}
	if got := ogbTestLines(t, filepath.Join(dir, "raw/num-edge-list.csv"), false); !slices.Equal(got, before) {
		t.Errorf("num-edge-list after the failed swap = %q, want the old %q", got, before)
	}
	if _, err := os.Stat(filepath.Join(dir, "split/random/train.csv")); err != nil {
		t.Errorf("old split gone: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%s holds %d entries, want raw and split", dir, len(ents))
	}
}

// TestWriteOGBSchemeIsOneFolder: a scheme that is not one folder name is
// refused before anything is written.
func TestWriteOGBSchemeIsOneFolder(t *testing.T) {
	for _, scheme := range []string{"../x", "a/b", "..", "."} {
		dir := t.TempDir()
		err := WriteOGB(context.Background(), dir, ogbTestGraph(), OGBWriteOptions{Scheme: scheme})
		if err == nil || !strings.Contains(err.Error(), "not a single folder name") {
			t.Errorf("scheme %q: err = %v", scheme, err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("scheme %q: %d entries written", scheme, len(ents))
		}
	}
}

// TestWriteOGBFailureLeavesNoNewDir: a write into a directory it had to
// make (node gen -o NEW) that fails half way (here its context is
// cancelled once the edge file is written; a full disk fails the same
// way) removes that directory again, leaving nothing behind.
func TestWriteOGBFailureLeavesNoNewDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := WriteOGB(ctx, dir, ogbTestGraph(), OGBWriteOptions{Progress: func(stage string, done, total int64) {
		if strings.HasPrefix(stage, "write raw/edge") && done == total {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed write left %s behind: %v", dir, err)
	}
}

// TestWriteOGBKeepsWhatAppears: without Force, what appears in the
// output while WriteOGB runs is neither replaced nor removed (a raw/ made
// there was moved aside and removed with the user's files in it), and
// the finished dataset is kept where the error says.
func TestWriteOGBKeepsWhatAppears(t *testing.T) {
	for _, put := range []string{"notes.txt", "raw/mine.txt"} {
		t.Run(put, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "g")
			at := filepath.Join(dir, put)
			err := WriteOGB(context.Background(), dir, ogbTestGraph(), OGBWriteOptions{Progress: func(stage string, done, total int64) {
				if strings.HasPrefix(stage, "write raw/edge") && done == total {
					os.MkdirAll(filepath.Dir(at), 0o755)
					os.WriteFile(at, []byte("keep-me"), 0o644)
				}
			}})
			first, _, _ := strings.Cut(put, "/")
			if !errors.Is(err, ErrOutputNotEmpty) || !strings.Contains(err.Error(), "output "+dir+": "+first+" appeared in it during the run, and without --force nothing there is replaced or removed; the finished output is left whole in ") {
				t.Fatalf("err = %v, want the output named as written to", err)
			}
			if b, err := os.ReadFile(at); err != nil || string(b) != "keep-me" {
				t.Errorf("%s after the refused write: %q, %v", put, b, err)
			}
			_, kept, _ := strings.Cut(err.Error(), "left whole in ")
			kept, _, _ = strings.Cut(kept, " (")
			if got := ogbTestLines(t, filepath.Join(kept, "raw/num-node-list.csv"), false); !slices.Equal(got, []string{fmt.Sprint(ogbTestGraph().NumNodes)}) {
				t.Errorf("the kept dataset %s: num-node-list %q", kept, got)
			}
		})
	}
}

// TestWriteOGBNoReplace: without Force, a raw/ that appears between the
// last look at the output and the move is not replaced, even empty.
func TestWriteOGBNoReplace(t *testing.T) {
	dir, tmp := t.TempDir(), t.TempDir()
	for _, d := range []string{filepath.Join(tmp, "raw"), filepath.Join(tmp, "split"), filepath.Join(dir, "split")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := ogbSwap(dir, tmp, nil); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("err = %v, want EEXIST", err)
	}
	for _, d := range []string{filepath.Join(tmp, "raw"), filepath.Join(tmp, "split"), filepath.Join(dir, "split")} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "raw")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the new raw/ was left in %s beside the old split/: %v", dir, err)
	}
}
