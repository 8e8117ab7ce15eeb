package partition

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// writeOGBDir writes a small OGB raw layout; files maps a name under dir
// to its content ("" leaves it out).
func writeOGBDir(t *testing.T, files map[string]string, gz bool) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if gz {
			name += ".gz"
		}
		rdWrite(t, dir, name, content, gz)
	}
	return dir
}

func ogbFiles() map[string]string {
	return map[string]string{
		"raw/edge.csv":              "0,1\n1,2\n2,2\n3,0\n",
		"raw/num-node-list.csv":     "5\n",
		"raw/num-edge-list.csv":     "4\n",
		"raw/node-feat.csv":         "0.5,-1,2e-3\n1,2,3\n-0.0579110048711300,0,1\n4,5,6\n7,8,9.25\n",
		"raw/node-label.csv":        "1\nnan\n0\n\n2\n",
		"split/time/train.csv":      "0\n2\n",
		"split/time/valid.csv":      "1\n",
		"split/time/test.csv":       "3\n4\n",
		"split/time/extra-file.txt": "ignored",
	}
}

func TestReadOGB(t *testing.T) {
	for _, c := range []struct {
		name string
		drop []string
		gz   bool
	}{
		{"gzip", nil, true},
		{"plain", nil, false},
		{"no counts", []string{"raw/num-node-list.csv", "raw/num-edge-list.csv"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := ogbFiles()
			for _, d := range c.drop {
				delete(files, d)
			}
			dir := writeOGBDir(t, files, c.gz)
			g, err := Read(context.Background(), dir, ReadOptions{Format: FormatOGB})
			if err != nil {
				t.Fatal(err)
			}
			rdEq(t, "NumNodes", g.NumNodes, 5)
			rdEq(t, "Src", g.Src, []uint32{0, 1, 2, 3})
			rdEq(t, "Dst", g.Dst, []uint32{1, 2, 2, 0})
			rdEq(t, "FeatDim", g.FeatDim, 3)
			rdEq(t, "Feat", g.Feat, []float32{0.5, -1, 2e-3, 1, 2, 3, -0.0579110048711300, 0, 1, 4, 5, 6, 7, 8, 9.25})
			rdEq(t, "LabelDim", g.LabelDim, 1)
			rdEq(t, "Labels", g.Labels, []int32{1, -1, 0, -1, 2})
			rdEq(t, "NumClasses", g.NumClasses, 3)
			rdEq(t, "Train", g.Train, []uint32{0, 2})
			rdEq(t, "Val", g.Val, []uint32{1})
			rdEq(t, "Test", g.Test, []uint32{3, 4})
			rdEq(t, "IDs", g.IDs, IDMap{})
			rdEq(t, "Stats", g.Stats, Stats{Lines: 4, EdgesRead: 4, SelfLoops: 1, MissingLabels: 2})
		})
	}
}

func TestReadOGBErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		edit   map[string]string
		opts   ReadOptions
		want   string
		isLine bool
	}{
		{name: "feature columns", edit: map[string]string{"raw/node-feat.csv": "1,2,3\n4,5,6\n7,8\n1,1,1\n1,1,1\n"},
			want: "D/raw/node-feat.csv:3: got 2 columns, line 1 has 3", isLine: true},
		// A short first row sets the width: the error names it, not only
		// the correct row that disagrees with it.
		{name: "feature columns of the first row", edit: map[string]string{"raw/node-feat.csv": "1,2\n4,5,6\n7,8,9\n1,1,1\n1,1,1\n"},
			want: "D/raw/node-feat.csv:2: got 3 columns, line 1 has 2", isLine: true},
		{name: "label columns", edit: map[string]string{"raw/node-label.csv": "1,0\n0,1\n0\n0,0\nnan,nan\n"},
			want: "D/raw/node-label.csv:3: got 1 columns, line 1 has 2", isLine: true},
		{name: "feature number", edit: map[string]string{"raw/node-feat.csv": "1,2,3\n4,x,6\n7,8,9\n1,1,1\n1,1,1\n"},
			want: "D/raw/node-feat.csv:2: column 2: \"x\" is not a number", isLine: true},
		{name: "feature NaN", edit: map[string]string{"raw/node-feat.csv": "1,2,3\n4,5,6\n7,8,NaN\n1,1,1\n1,1,1\n"},
			want: "D/raw/node-feat.csv:3: column 3: \"NaN\" is not a finite number", isLine: true},
		{name: "feature rows", edit: map[string]string{"raw/node-feat.csv": "1,2,3\n4,5,6\n7,8,9\n1,1,1\n1,1,1\n1,1,1\n"},
			want: "D/raw/node-feat.csv:6: more rows than the 5 nodes", isLine: true},
		{name: "edge range", edit: map[string]string{"raw/edge.csv": "0,1\n1,7\n2,2\n3,0\n"},
			want: "D/raw/edge.csv:2: node 7 out of range: 5 nodes (num-node-list.csv)", isLine: true},
		{name: "edge columns", edit: map[string]string{"raw/edge.csv": "0,1\n1,2,3\n2,2\n3,0\n"},
			want: "D/raw/edge.csv:2: want 2 columns, got 3", isLine: true},
		{name: "edge count", edit: map[string]string{"raw/num-edge-list.csv": "5\n"},
			want: "D/raw/edge.csv: 4 edges, num-edge-list.csv says 5: bad input"},
		{name: "edge rows beyond the count", edit: map[string]string{"raw/edge.csv": "0,1\n1,2\n2,2\n3,0\n4,0\n"},
			want: "D/raw/edge.csv:5: more rows than the 4 edges (num-edge-list.csv)", isLine: true},
		{name: "edge count beyond the file", edit: map[string]string{"raw/num-edge-list.csv": "3000000000\n"},
			want: "D/raw/edge.csv: 4 edges, num-edge-list.csv says 3000000000: bad input"},
		{name: "node count beyond the labels", edit: map[string]string{"raw/num-node-list.csv": "4000000000\n"},
			want: "D/raw/node-label.csv: 5 rows, want 4000000000 nodes (num-node-list.csv): bad input"},
		{name: "node count beyond the features", edit: map[string]string{"raw/num-node-list.csv": "100\n", "raw/node-label.csv": strings.Repeat("0\n", 100)},
			want: "D/raw/node-feat.csv: 5 rows, want 100 nodes (num-node-list.csv): bad input"},
		{name: "label rows", edit: map[string]string{"raw/num-node-list.csv": "6\n"},
			want: "D/raw/node-label.csv: 5 rows, want 6 nodes (num-node-list.csv): bad input"},
		{name: "label value", edit: map[string]string{"raw/node-label.csv": "1\n2\nx\n0\n0\n"},
			want: "D/raw/node-label.csv:3: column 1: \"x\" is not a label", isLine: true},
		{name: "multi-hot label value", edit: map[string]string{"raw/node-label.csv": "1,0\n0,1\n0,3\n0,0\nnan,nan\n"},
			want: "D/raw/node-label.csv:3: column 2: 3: rows of 2 columns are multi-hot labels, each 0, 1 or missing", isLine: true},
		{name: "schemes", edit: map[string]string{"split/random/train.csv": "0\n"},
			want: "D/split: several split schemes (random, time); choose one: bad input"},
		{name: "scheme missing", edit: map[string]string{}, opts: ReadOptions{SplitScheme: "x"},
			want: "D/split: no split scheme \"x\"; there are: time: bad input"},
		{name: "split index", edit: map[string]string{"split/time/test.csv": "3\n5\n"},
			want: "D/split/time/test.csv:2: \"5\" is not a node index below 5", isLine: true},
		// The plain file was read, the .gz ignored without a word.
		{name: "plain and gz", edit: map[string]string{"raw/edge.csv.gz": "0,1\n"},
			want: "both D/raw/edge.csv and D/raw/edge.csv.gz: keep the one to read and move the other away: bad input"},
		// It was dropped later without a word.
		{name: "split index twice", edit: map[string]string{"split/time/train.csv": "0\n2\n0\n"},
			want: "D/split/time/train.csv:3: node 0 listed twice", isLine: true},
		{name: "missing label error", edit: map[string]string{}, opts: ReadOptions{MissingLabel: Error},
			want: "D/raw/node-label.csv: node 1 has no label: bad input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := ogbFiles()
			for k, v := range c.edit {
				files[k] = v
			}
			dir := writeOGBDir(t, files, false)
			c.opts.Format = FormatOGB
			_, err := Read(context.Background(), dir, c.opts)
			want := "partition: " + strings.ReplaceAll(c.want, "D/", dir+"/")
			if c.isLine {
				rdWantLineError(t, err, want)
			} else if err == nil || err.Error() != want {
				t.Errorf("err = %v, want %s", err, want)
			}
		})
	}
}

func TestReadOGBScheme(t *testing.T) {
	files := ogbFiles()
	files["split/random/train.csv"] = "4\n"
	dir := writeOGBDir(t, files, true)
	g, err := Read(context.Background(), dir, ReadOptions{Format: FormatOGB, SplitScheme: "random"})
	if err != nil {
		t.Fatal(err)
	}
	rdEq(t, "Train", g.Train, []uint32{4})
	rdEq(t, "Val", g.Val, []uint32(nil))
}

// TestReadOGBBlocks reads files of many blocks, with and without counts
// (preallocated slots and grown ones), and checks every value against
// strconv.
func TestReadOGBBlocks(t *testing.T) {
	const n, d = 30000, 24
	rng := rand.New(rand.NewPCG(3, 4))
	var feat, edges strings.Builder
	want := make([]float32, 0, n*d)
	for i := range n {
		for j := range d {
			var s string
			switch rng.IntN(4) {
			case 0:
				s = strconv.FormatFloat(rng.NormFloat64(), 'f', 16, 64)
			case 1:
				s = strconv.FormatFloat(float64(float32(rng.NormFloat64()*1e3)), 'g', -1, 32)
			case 2:
				s = strconv.FormatFloat(rng.ExpFloat64()*1e-20, 'e', 9, 64)
			default:
				s = strconv.Itoa(rng.IntN(2))
			}
			v, _ := strconv.ParseFloat(s, 32)
			want = append(want, float32(v))
			if j > 0 {
				feat.WriteByte(',')
			}
			feat.WriteString(s)
		}
		feat.WriteString("\r\n")
		fmt.Fprintf(&edges, "%d,%d\n", i, rng.IntN(n))
	}
	for _, counts := range []bool{true, false} {
		files := map[string]string{"raw/edge.csv": edges.String(), "raw/node-feat.csv": feat.String()}
		if counts {
			files["raw/num-node-list.csv"] = strconv.Itoa(n)
			files["raw/num-edge-list.csv"] = strconv.Itoa(n)
		}
		dir := writeOGBDir(t, files, false)
		g, err := Read(context.Background(), dir, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rdEq(t, "NumNodes", g.NumNodes, n)
		rdEq(t, "edges", len(g.Src), n)
		for i := range want {
			if g.Feat[i] != want[i] {
				t.Fatalf("counts=%v: feat[%d] = %v, want %v", counts, i, g.Feat[i], want[i])
			}
		}
		for i := range n {
			if g.Src[i] != uint32(i) {
				t.Fatalf("src[%d] = %d", i, g.Src[i])
			}
		}
	}
}

// TestReadOGBLongRows reads feature rows longer than the row reader's
// 4 MiB blocks (about 200K full-precision floats), plain and gzip: each
// row is carried from block to block until its line end.
func TestReadOGBLongRows(t *testing.T) {
	const dim = rowBlockSize/4 + 3 // "0.5," is 4 bytes: rows just over a block
	for _, gz := range []bool{false, true} {
		var b strings.Builder
		for i := range 5 {
			b.WriteString(strings.Repeat("0.5,", dim-1))
			fmt.Fprintf(&b, "%d\n", i)
		}
		files := ogbFiles()
		files["raw/node-feat.csv"] = b.String()
		g, err := Read(context.Background(), writeOGBDir(t, files, gz), ReadOptions{Format: FormatOGB})
		if err != nil {
			t.Fatalf("gzip %v: %v", gz, err)
		}
		rdEq(t, "FeatDim", g.FeatDim, dim)
		for i := range 5 {
			row := g.Feat[i*dim : (i+1)*dim]
			if row[dim-1] != float32(i) || slices.ContainsFunc(row[:dim-1], func(v float32) bool { return v != 0.5 }) {
				t.Fatalf("gzip %v: row %d: last %v, want %d after %d × 0.5", gz, i, row[dim-1], i, dim-1)
			}
		}
	}
}

// TestReadOGBWriteOGB reads back what WriteOGB wrote.
func TestReadOGBWriteOGB(t *testing.T) {
	g := &Graph{NumNodes: 4, Src: []uint32{0, 1, 3}, Dst: []uint32{1, 2, 3},
		FeatDim: 2, Feat: []float32{0.1, -2.5e-8, 3, 4, 5, 6, 1e30, 0},
		LabelDim: 1, Labels: []int32{2, -1, 0, 1}, NumClasses: 3,
		Train: []uint32{0, 3}, Val: []uint32{2}, Test: []uint32{1}}
	dir := filepath.Join(t.TempDir(), "ds")
	if err := WriteOGB(context.Background(), dir, g, OGBWriteOptions{Gzip: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "raw", "edge.csv.gz")); err != nil {
		t.Fatal(err)
	}
	h, err := Read(context.Background(), dir, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"NumNodes", h.NumNodes, g.NumNodes}, {"Src", h.Src, g.Src}, {"Dst", h.Dst, g.Dst},
		{"Feat", h.Feat, g.Feat}, {"Labels", h.Labels, g.Labels}, {"NumClasses", h.NumClasses, g.NumClasses},
		{"Train", h.Train, g.Train}, {"Val", h.Val, g.Val}, {"Test", h.Test, g.Test},
	} {
		rdEq(t, f.name, f.got, f.want)
	}
}

// BenchmarkReadOGBFeatures reads a node-feat.csv of 20000 rows of 100
// floats in ogbn-products' spelling (up to 16 decimals).
func BenchmarkReadOGBFeatures(b *testing.B) {
	const n, d = 20000, 100
	rng := rand.New(rand.NewPCG(11, 12))
	var sb strings.Builder
	for range n {
		for j := range d {
			if j > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(strconv.FormatFloat(rng.NormFloat64()*0.1, 'f', 16, 64))
		}
		sb.WriteByte('\n')
	}
	for _, gz := range []bool{false, true} {
		dir := b.TempDir()
		files := map[string]string{"raw/edge.csv": "0,1\n", "raw/num-node-list.csv": strconv.Itoa(n), "raw/node-feat.csv": sb.String()}
		for name, content := range files {
			rdWrite(b, dir, name, content, gz)
		}
		size := int64(len(mustRead(b, filepath.Join(dir, "raw/node-feat.csv"))))
		b.Run(fmt.Sprintf("gzip=%v", gz), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(size)
			for b.Loop() {
				g, err := Read(context.Background(), dir, ReadOptions{Format: FormatOGB})
				if err != nil || len(g.Feat) != n*d {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(n*d)*float64(b.N)/b.Elapsed().Seconds(), "floats/s")
		})
	}
}

// TestRowsGrowWithinLimit: with a stated count (limit), rows never asks
// grow for more slots than the count, however far its size estimate
// runs ahead: a caller that allocated them all up front grows nothing.
// (It asked for the estimate, 2% and 1024 rows beyond the file, and the
// preallocated edges or features of an OGB dataset with count files
// were copied into arrays twice their size.)
func TestRowsGrowWithinLimit(t *testing.T) {
	const n = 5000
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d,%d\n", i, i)
	}
	path := rdWrite(t, t.TempDir(), "edge.csv", b.String(), false)
	for _, limit := range []int{n, -1} {
		var asked []int
		o := &ogbReader{ctx: context.Background()}
		rows, _, err := o.rows(path, limit, "edges", func(r int) { asked = append(asked, r) }, nil,
			func() any { return nil }, func(any, []byte, int, int64) error { return nil })
		if err != nil || rows != n || len(asked) == 0 {
			t.Fatalf("limit %d: %d rows, grow asked %v, %v", limit, rows, asked, err)
		}
		if limit >= 0 && slices.Max(asked) > limit {
			t.Errorf("limit %d: grow asked for %v", limit, asked)
		}
	}
}

// TestReadOGBTruncatedGzip: a gzip file cut short is ErrFormat, and the
// error names the last whole line read before the damage, not the first
// line of the block being read.
func TestReadOGBTruncatedGzip(t *testing.T) {
	const n = 200000
	var edges strings.Builder
	for i := range n {
		fmt.Fprintf(&edges, "%d,%d\n", i%5, (i+1)%5)
	}
	files := ogbFiles()
	files["raw/edge.csv"] = edges.String()
	files["raw/num-edge-list.csv"] = fmt.Sprintf("%d\n", n)
	dir := writeOGBDir(t, files, true)
	path := filepath.Join(dir, "raw/edge.csv.gz")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Read(context.Background(), dir, ReadOptions{Format: FormatOGB})
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("err = %v, want ErrFormat", err)
	}
	var after int
	if i := strings.Index(err.Error(), "after line "); i < 0 {
		t.Fatalf("err = %v, want it to name the last line read", err)
	} else if _, serr := fmt.Sscanf(err.Error()[i:], "after line %d", &after); serr != nil {
		t.Fatalf("err = %v: %v", err, serr)
	}
	// Half the compressed bytes hold roughly half the lines.
	if after < n/4 || after >= n {
		t.Errorf("err = %v: after line %d, want the last whole line read, about %d", err, after, n/2)
	}
}

// TestReadTruncatedGzipSmall: in a file whose lines fit the first read,
// the damage names the last whole line that decompressed; it said "after
// line 0" (the lines handed out when the read met the damage), or some
// line thousands before it.
func TestReadTruncatedGzipSmall(t *testing.T) {
	var text strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&text, "%d\t%d\n", i, (i*7+1)%3000)
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write([]byte(text.String()))
	w.Close()
	for _, keep := range []int{z.Len() / 3, z.Len() / 2, z.Len() - 40} {
		// The whole lines the kept bytes decompress to.
		part, _ := io.ReadAll(func() io.Reader { r, _ := gzip.NewReader(bytes.NewReader(z.Bytes()[:keep])); return r }())
		want := bytes.Count(part, []byte("\n"))
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "graph.tsv.gz"), z.Bytes()[:keep], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Read(context.Background(), filepath.Join(dir, "graph.tsv.gz"), ReadOptions{Format: FormatEdgeList})
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), fmt.Sprintf("after line %d: gzip: ", want)) {
			t.Errorf("%d of %d compressed bytes (%d whole lines): %v, want it to say after line %d", keep, z.Len(), want, err, want)
		}
	}
}

// OGB ships ogbn-papers100M in its binary layout, raw/data.npz: it is
// refused as such, not as a folder that lacks raw/edge.csv.
func TestReadOGBBinaryLayout(t *testing.T) {
	dir := writeOGBDir(t, map[string]string{"raw/data.npz": "PK", "raw/node-label.npz": "PK"}, false)
	_, err := Read(context.Background(), dir, ReadOptions{Format: FormatOGB})
	want := "partition: " + dir + "/raw/data.npz: OGB's binary layout (numpy arrays: edge_index, node_feat), which this reader does not take: " +
		"write its arrays as the CSV files of the raw layout (edge.csv, node-feat.csv, node-label.csv, num-node-list.csv) beside it: bad input"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	// Without the .npz the missing edge.csv is said as before.
	dir = writeOGBDir(t, map[string]string{"raw/num-node-list.csv": "5\n"}, false)
	if _, err := Read(context.Background(), dir, ReadOptions{Format: FormatOGB}); err == nil || !strings.Contains(err.Error(), "edge.csv: no such file") {
		t.Errorf("err = %v, want edge.csv: no such file", err)
	}
}
