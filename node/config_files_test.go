package node

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigListsEveryFileProblem: config check reads the
// certificate files whatever the problems of keys they do not depend on,
// and lists each of their problems as a key's, "<file>: <key>: …". A key
// readable by others hid the CA of another cluster, and node.part = 5
// (or samplers.workers = 0) hid both.
func TestCheckConfigListsEveryFileProblem(t *testing.T) {
	dir, pre := meshDir(t, 2)
	certs := filepath.Join(dir, "certs")
	if err := os.Chmod(filepath.Join(certs, "host0.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	meshTable := "[mesh]\ncerts = " + quote(certs) + "\ncluster = \"c2\"\n" +
		"[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:7100\"\n" +
		"[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:7101\"\n"
	keyMode := "mesh.certs: " + filepath.Join(certs, "host0.key") + ": mode 0644: a private key must not be readable"
	cluster := `mesh.cluster: "c2", but the CA in ` + certs + ` is of cluster "c1"`
	// The graph.toml of meshDir is no partition's: fetch = true leaves it
	// to the run, or the part file's problem would be one more here.
	fetch := strings.Replace(pre, "[node]\n", "[node]\nfetch = true\n", 1)
	for _, tc := range []struct {
		name, text string
		want       []string // every problem, in order, after "<file>: "
	}{
		{"key readable by others, CA of another cluster", fetch + meshTable, []string{keyMode, cluster}},
		{"node.part out of range", strings.Replace(pre, "[node]\n", "[node]\npart = 5\n", 1) + meshTable,
			[]string{"node.part: 5, but", "mesh.listen: missing", keyMode, cluster}},
		{"samplers.workers = 0", fetch + "[samplers]\nworkers = 0\n" + meshTable,
			[]string{"samplers.workers: 0 is out of range", keyMode, cluster}},
		// What Validate said already is not said again by the files.
		{"no key, CA of another cluster", strings.Replace(fetch, "name = \"host0\"", "name = \"host5\"", 1) +
			strings.Replace(meshTable, "name = \"host0\"", "name = \"host5\"", 1),
			[]string{`mesh.certs: "` + certs + `": no host5.crt there`, `mesh.certs: "` + certs + `": no host5.key there`, cluster}},
		{"bad node name", strings.Replace(fetch, "name = \"host0\"", "name = \"a b\"", 1) + meshTable,
			[]string{"node.name: mesh: node name \"a b\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, dir, tc.text)
			_, warnings, err := CheckConfig(path)
			if len(warnings) > 0 {
				t.Errorf("warnings %q, want none", warnings)
			}
			problems := unjoinAll(err)
			if len(problems) != len(tc.want) {
				t.Fatalf("%d problems, want %d:\n%v", len(problems), len(tc.want), err)
			}
			for i, p := range problems {
				if !strings.HasPrefix(p.Error(), path+": "+tc.want[i]) {
					t.Errorf("problem %d = %q\nwant it to start %q", i, p, path+": "+tc.want[i])
				}
			}
		})
	}
}

// TestSocketDirUnderRun: a control.socket directory under /run that does
// not exist yet is no problem of the file (systemd makes it as it starts
// the unit, RuntimeDirectory=, and removes it at stop: config check failed
// before the first start and whenever the unit was stopped), but New
// refuses to start without it, naming the key and RuntimeDirectory=. A
// missing directory elsewhere stays a problem of the file.
func TestSocketDirUnderRun(t *testing.T) {
	if !isDir("/run") {
		t.Skip("no /run")
	}
	dir, pre := configDir(t)
	run, err := os.MkdirTemp("/run", "graphnode-test-")
	if err != nil {
		t.Skipf("cannot make a directory under /run: %v", err)
	}
	os.Remove(run) // a directory there that does not exist
	t.Cleanup(func() { os.Remove(run) })
	sock := filepath.Join(run, "node.sock")
	text := strings.Replace(pre, quote(filepath.Join(dir, "node.sock")), quote(sock), 1)
	cfg, err := LoadConfig(writeConfig(t, dir, text))
	if err != nil {
		t.Fatalf("LoadConfig: %v, want no problem", err)
	}
	want := `control.socket: "` + sock + `": directory "` + run + `" does not exist, and node run starts only once it does: ` +
		"systemd makes it as it starts a unit with RuntimeDirectory=" + filepath.Base(run) + " (and removes it at stop); without such a unit, create it"
	if err := cfg.CheckSocketDir(); err == nil || err.Error() != want || !errors.Is(err, ErrConfig) {
		t.Errorf("CheckSocketDir: %v\nwant %s", err, want)
	}
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || err.Error() != "node: "+want || !errors.Is(err, ErrConfig) {
		t.Errorf("New: %v\nwant node: %s", err, want)
	}
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckSocketDir(); err != nil {
		t.Errorf("CheckSocketDir once the directory exists: %v", err)
	}

	// Elsewhere nothing makes it: the file's problem, as before.
	gone := filepath.Join(dir, "gone", "node.sock")
	_, err = LoadConfig(writeConfig(t, dir, strings.Replace(pre, quote(filepath.Join(dir, "node.sock")), quote(gone), 1)))
	if want := fmt.Sprintf("control.socket: %q: directory %q does not exist", gone, filepath.Dir(gone)); err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("LoadConfig of a socket in a missing directory outside /run: %v, want %q", err, want)
	}
}

func TestRuntimeDirectory(t *testing.T) {
	for dir, want := range map[string]string{
		"/run/graphnode": "graphnode", "/run/a/b": "a/b", "/var/run/graphnode": "graphnode", "/run/graphnode/": "graphnode",
		"/run": "", "/run/": "", "/runx/a": "", "/tmp/run/a": "", "/run/../tmp": "", "run/a": "", ".": "",
	} {
		if got := runtimeDirectory(dir); got != want {
			t.Errorf("runtimeDirectory(%q) = %q, want %q", dir, got, want)
		}
	}
}
