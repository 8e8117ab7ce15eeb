package partition

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"graphnode/internal/datasets"
)

// rdDataDir is a folder of the real datasets, or skips the test.
func rdDataDir(t testing.TB, name string) string {
	t.Helper()
	return datasets.Dir(t, name)
}

// writeFile writes content to dir/name, gzip-compressed when gz.
func rdWrite(t testing.TB, dir, name, content string, gz bool) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := []byte(content)
	if gz {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(data)
		w.Close()
		data = b.Bytes()
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantLineError checks that err is a *LineError with this exact text.
func rdWantLineError(t *testing.T, err error, want string) {
	t.Helper()
	var le *LineError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T), want a *LineError %q", err, err, want)
	}
	if !errors.Is(err, ErrFormat) {
		t.Errorf("error %v does not wrap ErrFormat", err)
	}
	if err.Error() != want {
		t.Errorf("error\n %q\nwant\n %q", err.Error(), want)
	}
}

func rdEq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestReadOptionsValidate(t *testing.T) {
	o := ReadOptions{Format: "csv", Header: "maybe", IDs: "hex", Dangling: Keep, MissingLabel: Drop}
	err := o.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`format "csv"`, `header "maybe"`, `ids "hex"`, "(dangling)", "(missing label)"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	o = ReadOptions{Format: FormatKG, NodeFile: "n.txt"}
	if err := o.Validate(); err == nil {
		t.Error("node file with kg: no error")
	}
	if err := (&ReadOptions{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
}

// Options of one format given with another are refused, the format
// given or guessed from the path: a guessed LINQS directory read with
// --label-file, --weighted or a node file that does not exist went on
// without a word of them.
func TestReadRefusesOptionsOfOtherFormats(t *testing.T) {
	dir := t.TempDir()
	rdWrite(t, dir, "cora/c.content", "p1\t1\t0\tA\np2\t0\t1\tB\n", false)
	rdWrite(t, dir, "cora/c.cites", "p1\tp2\n", false)
	edges := rdWrite(t, dir, "e.txt", "0 1\n", false)
	linqs := filepath.Join(dir, "cora")
	kg := filepath.Join(dir, "kg")
	rdWrite(t, dir, "kg/entities.dict", "0\ta\n1\tb\n", false)
	rdWrite(t, dir, "kg/relations.dict", "0\tr\n", false)
	rdWrite(t, dir, "kg/train.txt", "a\tr\tb\n", false)
	for _, tt := range []struct {
		path string
		opts ReadOptions
		want string // "" = read
	}{
		{linqs, ReadOptions{LabelFile: "l.txt"}, "label file applies to edge lists only, not linqs (guessed from " + linqs + "; --format sets it)"},
		{linqs, ReadOptions{Weighted: true}, "weighted applies to edge lists only, not linqs (guessed from"},
		{linqs, ReadOptions{NodeFile: "missing.txt"}, "node file applies to edge lists only, not linqs (guessed from"},
		{linqs, ReadOptions{Header: HeaderYes}, "header applies to edge lists only, not linqs (guessed from"},
		{linqs, ReadOptions{IDs: IDsString}, "ids applies to edge lists only, not linqs (guessed from"},
		{linqs, ReadOptions{SplitScheme: "random"}, "split scheme applies to ogb only, not linqs (guessed from"},
		{linqs, ReadOptions{Format: FormatLINQS, Weighted: true}, "weighted applies to edge lists only, not linqs"},
		{edges, ReadOptions{SplitScheme: "random"}, "split scheme applies to ogb only, not edgelist (guessed from"},
		// kg, ogb and metis refuse an unknown id whatever the policy
		{kg, ReadOptions{Dangling: Add}, "dangling applies to edge lists and linqs only, not kg (guessed from"},
		{kg, ReadOptions{Format: FormatKG, Dangling: Drop}, "dangling applies to edge lists and linqs only, not kg: an id it does not know is always an error there"},
		{linqs, ReadOptions{Dangling: Error}, ""},
		{edges, ReadOptions{Dangling: Add}, ""},
		{linqs, ReadOptions{Header: HeaderAuto, IDs: "auto"}, ""},
		{edges, ReadOptions{Header: HeaderNo, IDs: IDsInt, Weighted: false}, ""},
	} {
		// ValidateFor refuses before reading what Read refuses.
		verr := tt.opts.ValidateFor(tt.path)
		g, err := Read(context.Background(), tt.path, tt.opts)
		if tt.want == "" {
			if err != nil || g.NumNodes != 2 || verr != nil {
				t.Errorf("%+v: %v (ValidateFor: %v)", tt.opts, err, verr)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want %q", tt.opts, err, tt.want)
		}
		if verr == nil || verr.Error() != err.Error() {
			t.Errorf("%+v: ValidateFor = %v, want Read's %v", tt.opts, verr, err)
		}
	}
	// A path that is not there is Read's to report, as it reads.
	if err := (&ReadOptions{Weighted: true}).ValidateFor(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("ValidateFor of a missing path: %v", err)
	}
}

func TestDetectFormat(t *testing.T) {
	dir := t.TempDir()
	rdWrite(t, dir, "ogb/raw/edge.csv", "0,1\n", false)
	rdWrite(t, dir, "kg/entities.dict", "0\ta\n", false)
	rdWrite(t, dir, "lq/x.content", "", false)
	rdWrite(t, dir, "g.graph", "", false)
	rdWrite(t, dir, "e.txt.gz", "", true)
	// The readers take every file gzipped, and so does the guess: a
	// directory of gzipped files was "not OGB, KG or LINQS".
	rdWrite(t, dir, "kgz/entities.dict.gz", "0\ta\n", true)
	rdWrite(t, dir, "lqz/cora.content.gz", "", true)
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)
	for _, c := range []struct{ path, want string }{
		{"ogb", FormatOGB}, {"kg", FormatKG}, {"lq", FormatLINQS}, {"lq/x.content", FormatLINQS},
		{"g.graph", FormatMETIS}, {"e.txt.gz", FormatEdgeList},
		{"kgz", FormatKG}, {"lqz", FormatLINQS}, {"lqz/cora.content.gz", FormatLINQS},
	} {
		got, err := DetectFormat(filepath.Join(dir, c.path))
		if err != nil || got != c.want {
			t.Errorf("DetectFormat(%s) = %q, %v; want %q", c.path, got, err, c.want)
		}
	}
	if _, err := DetectFormat(filepath.Join(dir, "empty")); !errors.Is(err, ErrFormat) {
		t.Errorf("empty dir: %v, want ErrFormat", err)
	}
}

func TestReadCancelled(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	for i := range 3 * cancelInterval {
		b.WriteString("1 2\n")
		_ = i
	}
	path := rdWrite(t, dir, "e.txt", b.String(), false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(ctx, path, ReadOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestClasses(t *testing.T) {
	of, names := classes([]string{"10", "2", "07", "7"})
	rdEq(t, "classOf", of, []int32{2, 0, 1, 1})
	rdEq(t, "names", names, []string{"2", "07", "10"})
	of, names = classes([]string{"b", "a", "10"})
	rdEq(t, "classOf", of, []int32{2, 1, 0})
	rdEq(t, "names", names, []string{"10", "a", "b"})
}

// replaceDir puts dir where a wanted message says DIR.
func rdDir(msg, dir string) string {
	return string(bytes.ReplaceAll([]byte(msg), []byte("DIR"), []byte(dir)))
}

func readAll(path string) ([]byte, error) { return os.ReadFile(path) }

func TestReadProgress(t *testing.T) {
	var b bytes.Buffer
	for i := range 2*cancelInterval + 5 {
		b.WriteString("1 2\n")
		_ = i
	}
	path := rdWrite(t, t.TempDir(), "e.txt.gz", b.String(), true)
	st, _ := os.Stat(path)
	var calls [][2]int64
	_, err := Read(context.Background(), path, ReadOptions{Progress: func(stage string, done, total int64) {
		if stage != path {
			t.Errorf("stage %q", stage)
		}
		calls = append(calls, [2]int64{done, total})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) < 3 {
		t.Fatalf("%d progress calls, want 2 during and 1 at the end", len(calls))
	}
	for i, c := range calls {
		if c[1] != st.Size() || c[0] > c[1] || (i > 0 && c[0] < calls[i-1][0]) {
			t.Errorf("call %d: %d of %d (file %d bytes)", i, c[0], c[1], st.Size())
		}
	}
	rdEq(t, "last", calls[len(calls)-1], [2]int64{st.Size(), st.Size()})
}

// TestReadFormatFileOrDir: a file given with a format that reads a
// directory, or a directory with one that reads a file, is refused as
// such; the readers failed on "train.txt/entities.dict: no such file" or
// "read kg: is a directory".
func TestReadFormatFileOrDir(t *testing.T) {
	dir := t.TempDir()
	rdWrite(t, dir, "kg/train.txt", "a\tr\tb\n", false)
	for _, c := range []struct{ path, format, want string }{
		{"kg/train.txt", FormatKG, "kg/train.txt: a file, but format kg reads a directory (entities.dict, relations.dict, train.txt)"},
		{"kg/train.txt", FormatOGB, "kg/train.txt: a file, but format ogb reads a directory (raw/, split/)"},
		{"kg", FormatEdgeList, "kg: a directory, but format edgelist reads a file"},
		{"kg", FormatMETIS, "kg: a directory, but format metis reads a file"},
	} {
		_, err := Read(context.Background(), filepath.Join(dir, c.path), ReadOptions{Format: c.format})
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s as %s: %v, want %q", c.path, c.format, err, c.want)
		}
	}
}

// TestGraphName: the default graph name is the input's base name without
// extensions, of its absolute path: "." and "./" inside fb15k-237 name
// it, not "." (node kge --export refused that name).
func TestGraphName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fb15k-237")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(dir, "sub"))
	for path, want := range map[string]string{
		"..":                  "fb15k-237",
		"../":                 "fb15k-237",
		"../sub/..":           "fb15k-237",
		".":                   "sub",
		"./":                  "sub",
		"edges.txt.gz":        "edges",
		dir + "/cora.content": "cora",
	} {
		if got := graphName(path); got != want {
			t.Errorf("graphName(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestReadNameLineBreak: an id or name holding a carriage return (a line
// break inside a line; a trailing one is the CRLF line end, stripped) is
// refused at its line, by every reader of names. It was read, and the
// write refused it at the very end, after the partitioning, naming no
// line.
func TestReadNameLineBreak(t *testing.T) {
	const tail = ` holds a line break ("\r"), which names.txt, one name a line, cannot hold`
	for _, c := range []struct {
		name  string
		files map[string]string // written in the test's directory
		input string            // what Read reads in it: "" for the directory
		opts  ReadOptions
		want  string // D/ is the directory
	}{
		{"edge list", map[string]string{"e.txt": "a b\r\na\rb c\r\n"}, "e.txt", ReadOptions{},
			`D/e.txt:2: node id "a\rb"` + tail},
		{"edge list after ints", map[string]string{"e.txt": "0 1\n1 c\rd\n"}, "e.txt", ReadOptions{},
			`D/e.txt:2: node id "c\rd"` + tail},
		{"node file", map[string]string{"e.txt": "a b\n", "n.txt": "a\r\nb\rx\n"}, "e.txt", ReadOptions{NodeFile: "n.txt"},
			`D/n.txt:2: node id "b\rx"` + tail},
		{"edge list dangling add", map[string]string{"e.txt": "a b\nb c\rd\n", "n.txt": "a\nb\n"}, "e.txt", ReadOptions{NodeFile: "n.txt", Dangling: Add},
			`D/e.txt:2: node id "c\rd"` + tail},
		{"label file dangling add", map[string]string{"e.txt": "a b\n", "l.txt": "a 1\nc\rd 2\n"}, "e.txt", ReadOptions{LabelFile: "l.txt", Dangling: Add},
			`D/l.txt:2: node id "c\rd"` + tail},
		{"linqs content", map[string]string{"g.content": "a\t1\tX\r\nb\rc\t0\tY\n", "g.cites": ""}, "", ReadOptions{},
			`D/g.content:2: paper id "b\rc"` + tail},
		{"linqs cites dangling add", map[string]string{"g.content": "a\t1\tX\n", "g.cites": "a\ta\r\na\tb\rc\n"}, "", ReadOptions{Dangling: Add},
			`D/g.cites:2: paper id "b\rc"` + tail},
		{"kg entity", map[string]string{"entities.dict": "0\ta\r\n1\tb\rc\n", "relations.dict": "0\tr\n", "train.txt": ""}, "", ReadOptions{Format: FormatKG},
			`D/entities.dict:2: entity name "b\rc"` + tail},
		{"kg relation", map[string]string{"entities.dict": "0\ta\n", "relations.dict": "0\tr\rs\n", "train.txt": ""}, "", ReadOptions{Format: FormatKG},
			`D/relations.dict:1: relation name "r\rs"` + strings.Replace(tail, NamesFile, RelationsFile, 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range c.files {
				rdWrite(t, dir, name, text, false)
			}
			opts := c.opts
			for _, p := range []*string{&opts.NodeFile, &opts.LabelFile} {
				if *p != "" {
					*p = filepath.Join(dir, *p)
				}
			}
			_, err := Read(context.Background(), filepath.Join(dir, c.input), opts)
			rdWantLineError(t, err, "partition: "+strings.ReplaceAll(c.want, "D/", dir+"/"))
		})
	}
}
