package graphnode_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// layout is DESIGN.md §3: for each folder, the project packages its
// non-test code may import. A folder missing here is an error too, so a
// new package forces this table (and DESIGN.md) to be updated with it.
// "*" means anything; subfolders of a folder share its row.
var layout = map[string][]string{
	"csr":       {},
	"partition": {"csr"},
	"sample":    {"csr", "partition"},
	"shm":       {},
	"mesh":      {},
	"cache":     {"cuda"},
	"cuda":      {},
	"kv":        {},
	"train":     {"sample", "kv"},
	"node":      {"csr", "partition", "sample", "shm", "mesh", "cache", "cuda", "kv", "train"},
	"cmd":       {"*"},
	"perf":      {"*"},
	// Not in DESIGN.md §3: support for tests (the real datasets' folder),
	// importing no project package and imported by tests alone.
	"internal": {},
}

// never lists packages that no project package may import, but for the
// importers named: the daemon is wired only by its command (and measured
// by perf); commands and benchmarks are imported by nobody.
var never = map[string][]string{
	"node":     {"cmd", "perf"},
	"cmd":      {},
	"perf":     {},
	"internal": {},
}

const module = "graphnode"

// TestImportsPointDown fails when a package imports against DESIGN.md §3.
func TestImportsPointDown(t *testing.T) {
	problems, err := checkLayout(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestLayoutCheckCatchesViolations proves the check can fail: a tree whose
// csr imports sample, whose sample imports node, and an unknown folder.
func TestLayoutCheckCatchesViolations(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("csr/a.go", "package csr\nimport _ \"graphnode/sample\"\n")
	write("sample/a.go", "package sample\nimport _ \"graphnode/csr\"\nimport _ \"graphnode/node\"\n")
	write("sample/a_test.go", "package sample\nimport _ \"graphnode/shm\"\n") // tests are not checked
	write("stray/a.go", "package stray\n")
	write("node/a.go", "package node\nimport _ \"graphnode/shm\"\n")
	write("cmd/node/main.go", "package main\nimport _ \"graphnode/node\"\n")
	write("perf/x/main.go", "package main\nimport _ \"graphnode/cmd/node\"\n")
	problems, err := checkLayout(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`csr/a.go imports graphnode/sample: csr may import only []`,
		`sample/a.go imports graphnode/node: sample may import only [csr partition]`,
		`sample/a.go imports graphnode/node: nothing may import node`,
		`perf/x/main.go imports graphnode/cmd/node: nothing may import cmd`,
		`stray: folder is not in DESIGN.md §3 (add it to the table and to layout_test.go)`,
	}
	sort.Strings(problems)
	sort.Strings(want)
	if strings.Join(problems, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
}

func checkLayout(root string) ([]string, error) {
	var problems []string
	unknown := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "python" || name == "bin" || name == "build") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		top, _, nested := strings.Cut(rel, "/")
		if !nested {
			return nil // the module root holds only this test
		}
		allowed, known := layout[top]
		if !known {
			unknown[top] = true
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			ip := strings.Trim(imp.Path.Value, `"`)
			if !strings.HasPrefix(ip, module+"/") {
				continue
			}
			target, _, _ := strings.Cut(strings.TrimPrefix(ip, module+"/"), "/")
			if target == top {
				continue
			}
			if !contains(allowed, "*") && !contains(allowed, target) {
				problems = append(problems, rel+" imports "+ip+": "+top+" may import only "+list(allowed))
			}
			if exempt, ok := never[target]; ok && !contains(exempt, top) {
				problems = append(problems, rel+" imports "+ip+": nothing may import "+target)
			}
		}
		return nil
	})
	for u := range unknown {
		problems = append(problems, u+": folder is not in DESIGN.md §3 (add it to the table and to layout_test.go)")
	}
	return problems, err
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func list(s []string) string { return "[" + strings.Join(s, " ") + "]" }
