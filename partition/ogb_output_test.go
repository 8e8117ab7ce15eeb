package partition

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWriteOGBChecked: with the caller's check (node gen runs it before
// generating), what appears in the output between the check and WriteOGB
// is kept, the run failing at its end naming it and the temporary
// directory that holds the finished raw/ and split/: WriteOGB refused it
// up front ("holds 1 entries (overwrite with force)"), throwing the
// generated graph away. With Force, the raw/ and split/ the output held
// at the check are replaced, what appeared in them with them, and
// anything else is left beside them; a raw/ or split/ that appeared
// where there was none is kept as without Force.
func TestWriteOGBChecked(t *testing.T) {
	const (
		plain = "and without --force nothing there is replaced or removed; the finished output is left whole in "
		force = "and --force replaces only what the output held when the run began; the finished output is left whole in "
	)
	for _, tt := range []struct {
		name   string
		before string // the output at the check: absent, empty, or old (an earlier dataset)
		force  bool
		put    string // what appears in it before WriteOGB; "" a file in its place
		want   string // the error after "partition: output DIR: "; "" the write succeeds
	}{
		{"absent/user-file", "absent", false, "notes.txt", "notes.txt appeared in it during the run, " + plain},
		{"empty/raw", "empty", false, "raw/mine.txt", "raw appeared in it during the run, " + plain},
		{"absent/file-in-place", "absent", false, "", "a file appeared in its place during the run, " + plain},
		{"force/absent/user-file", "absent", true, "notes.txt", ""},
		{"force/empty/split", "empty", true, "split/other/train.csv", "split appeared in it during the run, " + force},
		{"force/absent/file-in-place", "absent", true, "", "a file appeared in its place during the run, " + force},
		{"force/old/user-file", "old", true, "notes.txt", ""},
		{"force/old/raw", "old", true, "raw/mine.txt", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "g")
			switch tt.before {
			case "empty":
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			case "old":
				old := ogbTestGraph()
				old.Src, old.Dst = old.Src[:1], old.Dst[:1]
				if err := WriteOGB(context.Background(), dir, old, OGBWriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			checked, err := CheckOGBOutput(dir, tt.force)
			if err != nil {
				t.Fatal(err)
			}
			at := dir
			if tt.put != "" {
				at = filepath.Join(dir, tt.put)
			}
			if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(at, []byte("keep-me"), 0o644); err != nil {
				t.Fatal(err)
			}

			err = WriteOGB(context.Background(), dir, ogbTestGraph(), OGBWriteOptions{Force: tt.force, Checked: checked})
			replaced := tt.before == "old" && strings.HasPrefix(tt.put, "raw/")
			if b, rerr := os.ReadFile(at); replaced != (rerr != nil) || rerr == nil && string(b) != "keep-me" {
				t.Errorf("%s after the write: %q, %v (replaced with the old raw/: %t)", at, b, rerr, replaced)
			}
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := ogbTestLines(t, filepath.Join(dir, "raw/num-edge-list.csv"), false); !slices.Equal(got, []string{"5"}) {
					t.Errorf("num-edge-list = %q, want the new 5", got)
				}
				ents, _ := os.ReadDir(dir)
				want := []string{"raw", "split"}
				if tt.put == "notes.txt" {
					want = []string{"notes.txt", "raw", "split"}
				}
				if got := names(ents); !slices.Equal(got, want) {
					t.Errorf("%s holds %q, want %q", dir, got, want)
				}
				return
			}
			if !errors.Is(err, ErrOutputNotEmpty) || !strings.Contains(err.Error(), "partition: output "+dir+": "+tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, "partition: output "+dir+": "+tt.want)
			}
			_, kept, _ := strings.Cut(err.Error(), "left whole in ")
			kept, _, _ = strings.Cut(kept, " (")
			if got := ogbTestLines(t, filepath.Join(kept, "raw/num-edge-list.csv"), false); !slices.Equal(got, []string{"5"}) {
				t.Errorf("the kept dataset %s: num-edge-list %q", kept, got)
			}
			// In the output when it is a directory, else beside it.
			where := dir
			if tt.put == "" {
				where = parent
			}
			if filepath.Dir(kept) != where {
				t.Errorf("kept in %s, want in %s", filepath.Dir(kept), where)
			}
		})
	}
}

// TestWriteOGBForceKeepsWhatAppears: without a check, the run is
// WriteOGB's: with Force, a raw/ that appears while the files are
// written, in an output that had none, is kept (it was moved aside and
// removed with the user's file in it), and the finished dataset with it.
func TestWriteOGBForceKeepsWhatAppears(t *testing.T) {
	dir := t.TempDir()
	at := filepath.Join(dir, "raw", "mine.txt")
	err := WriteOGB(context.Background(), dir, ogbTestGraph(), OGBWriteOptions{Force: true, Progress: func(stage string, done, total int64) {
		if strings.HasPrefix(stage, "write raw/edge") && done == total {
			os.MkdirAll(filepath.Dir(at), 0o755)
			os.WriteFile(at, []byte("keep-me"), 0o644)
		}
	}})
	want := "output " + dir + ": raw appeared in it during the run, and --force replaces only what the output held when the run began; the finished output is left whole in " + filepath.Join(dir, ogbTmpPrefix)
	if !errors.Is(err, ErrOutputNotEmpty) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to contain %q", err, want)
	}
	if b, err := os.ReadFile(at); err != nil || string(b) != "keep-me" {
		t.Errorf("%s after the refused write: %q, %v", at, b, err)
	}
}

// TestWriteOGBCheckedStale: with Force, the temporary directories of a
// killed run that the check saw are removed, and one made since, another
// run's at work, is left to it.
func TestWriteOGBCheckedStale(t *testing.T) {
	dir := t.TempDir()
	stale, running := filepath.Join(dir, ogbTmpPrefix+"killed"), filepath.Join(dir, ogbTmpPrefix+"running")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	checked, err := CheckOGBOutput(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(running, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteOGB(context.Background(), dir, ogbTestGraph(), OGBWriteOptions{Force: true, Checked: checked}); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if got, want := names(ents), []string{filepath.Base(running), "raw", "split"}; !slices.Equal(got, want) {
		t.Errorf("%s holds %q, want %q", dir, got, want)
	}
}

// TestWriteOGBCheckedOther: a check is of one output and one Force:
// WriteOGB given another's refuses it, as a caller's mistake, before
// writing.
func TestWriteOGBCheckedOther(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	checked, err := CheckOGBOutput(a, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dir   string
		force bool
		want  string
	}{
		{b, false, "partition: write ogb " + b + " (force false): checked " + a + " (force false)"},
		{a, true, "partition: write ogb " + a + " (force true): checked " + a + " (force false)"},
	} {
		err := WriteOGB(context.Background(), tt.dir, ogbTestGraph(), OGBWriteOptions{Force: tt.force, Checked: checked})
		if err == nil || err.Error() != tt.want {
			t.Errorf("err = %v, want %q", err, tt.want)
		}
		if _, err := os.Stat(tt.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was made: %v", tt.dir, err)
		}
	}
}

// names lists the names of ents.
func names(ents []os.DirEntry) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
