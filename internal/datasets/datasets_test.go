package datasets

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFind: $GRAPHNODE_DATA wins; a dataset not there is an error that
// names it; without the variable the data folder is ../shared/data from
// the module's root.
func TestFind(t *testing.T) {
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, "cora"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GRAPHNODE_DATA", base)
	if dir, err := find("cora"); err != nil || dir != filepath.Join(base, "cora") {
		t.Errorf("find(cora) = %q, %v", dir, err)
	}
	if _, err := find("pubmed2"); err == nil || !os.IsNotExist(err) {
		t.Errorf("find(pubmed2) = %v, want not found", err)
	}
	t.Setenv("GRAPHNODE_DATA", "")
	root, err := moduleRoot()
	if want := filepath.Dir(filepath.Dir(mustWd(t))); err != nil || root != want {
		t.Fatalf("module root %q, %v; want %q (internal/datasets is two levels down)", root, err, want)
	}
	want := filepath.Join(root, "..", "shared", "data", "cora")
	if dir, err := find("cora"); err == nil && dir != want {
		t.Errorf("find(cora) = %q, want %q", dir, want)
	}
}

func mustWd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
