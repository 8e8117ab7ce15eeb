package node

import (
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
			_, err := CheckConfig(path)
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
