// Package datasets finds the real datasets (Cora, BlogCatalog, FB15k-237
// ...) that tests and benchmarks may use: $GRAPHNODE_DATA, or the
// data folder of ../shared beside the checkout. The project builds and
// runs its demo without them; a test that needs one skips when it is
// absent, except under CI (CI set), where ../shared is always present
// and a missing dataset must fail rather than pass silently.
package datasets

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Dir is the folder of dataset name (e.g. "cora"), or skips t (fails it
// under CI) when there is none.
func Dir(t testing.TB, name string) string {
	t.Helper()
	dir, err := find(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("dataset %s absent under CI: %v", name, err)
		}
		t.Skipf("dataset %s absent: %v", name, err)
	}
	return dir
}

// find is the folder of dataset name under $GRAPHNODE_DATA, or under
// ../shared/data from the module's root (the first directory up from
// the working directory, a test's package directory, that holds go.mod).
func find(name string) (string, error) {
	base := os.Getenv("GRAPHNODE_DATA")
	if base == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		base = filepath.Join(root, "..", "shared", "data")
	}
	dir, err := filepath.Abs(filepath.Join(base, name))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dir); err != nil {
		return "", err
	}
	return dir, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}
