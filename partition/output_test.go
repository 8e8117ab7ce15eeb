package partition

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"graphnode/csr"
)

// TestWriteChecked: what appears in the output after the caller's
// CheckOutput and before Write (while the input is read and
// partitioned) is kept, and so is the finished partitioning, in the
// temporary directory the error names. Write checked the output again
// before writing anything and refused it as "exists and is not empty":
// the hours of work were lost, and no directory was named. With --force
// what the output held as the run began is replaced, with what appeared
// in it since; an output that was absent or empty then is as without.
func TestWriteChecked(t *testing.T) {
	g := testGraph(50, 200, false, false)
	adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assign := make([]uint32, 50)
	const (
		plain = "and without --force nothing there is replaced or removed; the finished output is left whole in "
		force = "and --force replaces only what the output held when the run began; the finished output is left whole in "
	)
	for _, tt := range []struct {
		name   string
		before string // the output as the run begins: absent, empty, or full (holding old.txt)
		force  bool
		put    string // what appears in it before Write; "" a file in its place
		want   string // the error after "partition: output DIR: "; "" the write succeeds
	}{
		{"absent/user-file", "absent", false, "notes.txt", "notes.txt appeared in it during the run, " + plain},
		{"absent/another-run", "absent", false, ManifestFile, ManifestFile + " appeared in it during the run, " + plain},
		{"absent/file-in-place", "absent", false, "", "a file appeared in its place during the run, " + plain},
		{"empty/user-file", "empty", false, "notes.txt", "notes.txt appeared in it during the run, " + plain},
		{"force/absent/user-file", "absent", true, "notes.txt", "notes.txt appeared in it during the run, " + force},
		{"force/absent/file-in-place", "absent", true, "", "a file appeared in its place during the run, " + force},
		{"force/empty/user-file", "empty", true, "notes.txt", "notes.txt appeared in it during the run, " + force},
		{"force/full/user-file", "full", true, "notes.txt", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "parts")
			if tt.before != "absent" {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tt.before == "full" {
				if err := os.WriteFile(filepath.Join(dir, "old.txt"), []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			checked, err := CheckOutput(dir, tt.force)
			if err != nil {
				t.Fatal(err)
			}
			at := dir
			if tt.put != "" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				at = filepath.Join(dir, tt.put)
			}
			if err := os.WriteFile(at, []byte("keep-me"), 0o644); err != nil {
				t.Fatal(err)
			}

			m, err := Write(context.Background(), dir, g, adj, assign, WriteOptions{Parts: 1, Force: tt.force, Checked: checked})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got, err := OpenDir(dir); err != nil || got.Checksum != m.Checksum {
					t.Fatalf("OpenDir after --force: %v", err)
				}
				for _, gone := range []string{"old.txt", tt.put} {
					if _, err := os.Stat(filepath.Join(dir, gone)); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s survived --force: %v", gone, err)
					}
				}
				if ents, _ := os.ReadDir(parent); len(ents) != 1 {
					t.Errorf("%s holds %s, want parts alone", parent, entryNames(ents, 5))
				}
				return
			}
			if !errors.Is(err, ErrOutputNotEmpty) || !strings.Contains(err.Error(), "partition: output "+dir+": "+tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, "partition: output "+dir+": "+tt.want)
			}
			if b, err := os.ReadFile(at); err != nil || string(b) != "keep-me" {
				t.Errorf("%s after the refused write: %q, %v", at, b, err)
			}
			_, kept, _ := strings.Cut(err.Error(), "left whole in ")
			kept, _, _ = strings.Cut(kept, " (")
			if got, err := OpenDir(kept); err != nil || got.Nodes != 50 || got.Parts != 1 {
				t.Fatalf("the finished partitioning %s: %v", kept, err)
			}
			// In the output when it is a directory (an empty one is
			// written into), else beside it.
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

// TestWriteCheckedOther: a check is of one output and one --force: Write
// given another's refuses it, as a caller's mistake, before writing.
func TestWriteCheckedOther(t *testing.T) {
	g := testGraph(10, 20, false, false)
	adj, err := BuildAdj(context.Background(), g, csr.In, CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	checked, err := CheckOutput(a, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Write(context.Background(), b, g, adj, make([]uint32, 10), WriteOptions{Parts: 1, Checked: checked})
	if want := "partition: write " + b + " (force false): checked " + a + " (force false)"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	if _, err := os.Stat(b); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s was made: %v", b, err)
	}
}
