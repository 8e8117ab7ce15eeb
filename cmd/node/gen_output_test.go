package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenKeepsWhatAppears: what appears in the output while the graph is
// generated fails the run at its end, naming it and the temporary
// directory that holds the finished raw/ and split/, and is neither
// replaced nor removed. WriteOGB checked the output again once the graph
// was generated and refused it ("holds 1 entries (overwrite with
// force)"): the graph was thrown away. --force replaces the raw/ and
// split/ the output held as the run began (with what appeared in them)
// and leaves anything else beside them; a raw/ or split/ that appears
// where there was none is kept as without --force.
func TestGenKeepsWhatAppears(t *testing.T) {
	const (
		plain = "and without --force nothing there is replaced or removed; the finished output is left whole in "
		force = "and --force replaces only what the output held when the run began; the finished output is left whole in "
	)
	for _, tt := range []struct {
		name  string
		old   bool   // the output holds an earlier graph (500 nodes) as the run begins
		force bool   // --force
		put   string // what appears in the output while the graph is generated; "" a file in its place
		want  string // stderr after "node gen: partition: output OUT: "; "" the run succeeds
	}{
		{"new/user-file", false, false, "notes.txt", "notes.txt appeared in it during the run, " + plain},
		{"new/raw", false, false, "raw/mine.txt", "raw appeared in it during the run, " + plain},
		{"new/file-in-place", false, false, "", "a file appeared in its place during the run, " + plain},
		{"force/new/user-file", false, true, "notes.txt", ""},
		{"force/new/raw", false, true, "raw/mine.txt", "raw appeared in it during the run, " + force},
		{"force/new/split", false, true, "split/other/train.csv", "split appeared in it during the run, " + force},
		{"force/new/file-in-place", false, true, "", "a file appeared in its place during the run, " + force},
		{"force/old/user-file", true, true, "notes.txt", ""},
		{"force/old/raw", true, true, "raw/mine.txt", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "g")
			args := []string{"gen", "rmat", "--nodes", "1000", "--edges", "5000", "-o", out}
			if tt.force {
				args = append(args, "--force")
			}
			if tt.old {
				if code, stdout, stderr := runNode(t, "gen", "rmat", "--nodes", "500", "--edges", "2000", "-o", out); code != 0 {
					t.Fatalf("the earlier run: code %d\n%s\n%s", code, stdout, stderr)
				}
			}
			at := out
			if tt.put != "" {
				at = filepath.Join(out, tt.put)
			}
			var stdout, stderr bytes.Buffer
			a := newApp(&stdout, &stderr)
			// The machine's memory is asked once the output is checked,
			// before the graph is generated: the file appears then.
			a.memory = func() uint64 {
				if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
					t.Error(err)
				}
				if err := os.WriteFile(at, []byte("mine\n"), 0o644); err != nil {
					t.Error(err)
				}
				return 0
			}
			code := a.run(context.Background(), args)
			if b, err := os.ReadFile(at); err != nil && !(tt.old && tt.put == "raw/mine.txt") || err == nil && string(b) != "mine\n" {
				t.Errorf("%s after the run: %q, %v", at, b, err)
			}
			if tt.want == "" {
				if code != 0 || !strings.Contains(stdout.String(), "gen rmat: 1000 nodes, 5000 edges") {
					t.Fatalf("code %d\n%s\n%s", code, stdout.String(), stderr.String())
				}
				if got := genNodes(t, out); got != "1000" {
					t.Errorf("num-node-list.csv after the run: %q, want 1000", got)
				}
				ents, _ := os.ReadDir(out)
				if names := entryList(ents); names != "notes.txt raw split" && names != "raw split" {
					t.Errorf("%s holds %s", out, names)
				}
				if tt.old && tt.put == "raw/mine.txt" {
					// The raw/ it held, the user's file in it with it.
					if _, err := os.Stat(at); !os.IsNotExist(err) {
						t.Errorf("%s, in the raw/ --force replaced, survived: %v", at, err)
					}
				}
				return
			}
			want := "node gen: partition: output " + out + ": " + tt.want
			if code != 1 || !strings.Contains(stderr.String(), want) {
				t.Fatalf("code %d, stderr:\n%s\nwant code 1 and %q", code, stderr.String(), want)
			}
			if strings.Contains(stdout.String(), "gen rmat:") {
				t.Errorf("stdout says it wrote:\n%s", stdout.String())
			}
			_, kept, _ := strings.Cut(stderr.String(), "left whole in ")
			kept, _, _ = strings.Cut(kept, " (")
			// In the output when it is a directory, else beside it.
			where := out
			if tt.put == "" {
				where = parent
			}
			if filepath.Dir(kept) != where {
				t.Errorf("kept in %s, want in %s", filepath.Dir(kept), where)
			}
			if got := genNodes(t, kept); got != "1000" {
				t.Errorf("the finished output in %s: num-node-list.csv %q, want 1000", kept, got)
			}
			if tt.put == "" {
				return
			}
			ents, _ := os.ReadDir(out)
			first, _, _ := strings.Cut(tt.put, "/")
			if names := entryList(ents); names != filepath.Base(kept)+" "+first {
				t.Errorf("%s holds %s, want the kept output and %s", out, names, first)
			}
		})
	}
}

// genNodes is the node count that the OGB raw layout in dir records.
func genNodes(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "raw", "num-node-list.csv"))
	if err != nil {
		t.Error(err)
	}
	return strings.TrimSpace(string(b))
}

// entryList is the names of ents, space-separated, in order.
func entryList(ents []os.DirEntry) string {
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}
