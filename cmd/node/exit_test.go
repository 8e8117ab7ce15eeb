package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"graphnode/mesh"
)

// TestRunExitsConfigError: node run exits 78 (EX_CONFIG) for what is
// wrong with its configuration or the files it names, found before it
// serves, so that the unit's RestartPreventExitStatus=78 ends the
// restarts: each of these failed every start alike, every 5 s, with
// exit 1. What a later start may mend stays 1.
func TestRunExitsConfigError(t *testing.T) {
	if exitConfig != 78 {
		t.Fatalf("exitConfig = %d, want 78 (EX_CONFIG), as the unit and README say", exitConfig)
	}
	good := "version = 1\n[node]\nparts = \"$DIR/parts\"\n[control]\nsocket = \"$DIR/s.sock\"\n[log]\nformat = \"text\"\n"
	for _, tc := range []struct {
		name   string
		body   string
		before func(t *testing.T, dir string) // makes the problem
		code   int
		want   string // in stderr, $DIR replaced
	}{
		{name: "no graph.toml at node.parts", code: 78,
			body: strings.Replace(good, `"$DIR/parts"`, `"/nonexistent"`, 1),
			want: "node run: $DIR/node.toml: node.parts: \"/nonexistent\": no graph.toml there (no such file or directory)\n"},
		{name: "every problem of the file", code: 78,
			body: good + "[samplers]\nworkers = 0\nwrkers = 2\n",
			want: "node run: $DIR/node.toml: unknown key \"samplers.wrkers\"\n$DIR/node.toml: samplers.workers: 0 is out of range 1..64\n"},
		{name: "no config file", code: 78, body: good,
			before: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "node.toml")) },
			want:   "node run: node: $DIR/node.toml: no such file or directory\n"},
		{name: "part file missing", code: 78, body: good,
			before: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "parts", "part-0", "part.csr")) },
			want:   "node run: node: node.part = 0: csr: open $DIR/parts/part-0/part.csr: "},
		{name: "control.socket is a directory", code: 78, body: good,
			before: func(t *testing.T, dir string) { os.Mkdir(filepath.Join(dir, "s.sock"), 0o755) },
			want:   "control.socket: \"$DIR/s.sock\" exists and is not a socket (a directory)"},
		{name: "another node serves control.socket", code: 1, body: good,
			before: func(t *testing.T, dir string) {
				ln, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ln.Close() })
			},
			want: "node run: node: control.socket: another node is serving socket $DIR/s.sock: socket in use\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, path := writeNodeTOML(t, tc.body)
			if tc.before != nil {
				tc.before(t, dir)
			}
			code, _, stderr := cliRun("run", "-c", path)
			want := strings.ReplaceAll(tc.want, "$DIR", dir)
			if code != tc.code || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, want %d with %q; stderr:\n%s", code, tc.code, want, stderr)
			}
		})
	}
}

// TestRunExitsConfigErrorCerts: certificates of another cluster than
// mesh.cluster, found at start, exit 78 too.
func TestRunExitsConfigErrorCerts(t *testing.T) {
	dir := t.TempDir()
	parts := twoParts(t, dir)
	certs := hostCerts(t, dir, "certs", "c1")
	// Whether the node fetches its files first (which loads the
	// certificates before New does) or not, the same problem is the
	// same exit: with fetch = true a bad key exited 1, and the unit
	// restarted it every 5 s.
	for _, fetch := range []bool{false, true} {
		for _, tc := range []struct {
			name, cluster, keyMode, want string
		}{
			{"another cluster", "c2", "", `node run: node: mesh.cluster = "c2", but the CA in ` + certs + ` is of cluster "c1": invalid configuration` + "\n"},
			{"key readable by others", "c1", "0644", "node run: node: mesh.certs: "},
		} {
			key := filepath.Join(certs, "host0.key")
			mode := os.FileMode(0o600)
			if tc.keyMode == "0644" {
				mode = 0o644
			}
			if err := os.Chmod(key, mode); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(dir, "node.toml")
			body := fmt.Sprintf("version = 1\n[node]\nparts = %q\nname = \"host0\"\npart = 0\nfetch = %t\n[control]\nsocket = %q\n"+
				"[mesh]\nlisten = \"127.0.0.1:1\"\ncerts = %q\ncluster = %q\n"+
				"[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:1\"\n"+
				"[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:2\"\n", parts, fetch, filepath.Join(dir, "s.sock"), certs, tc.cluster)
			if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := cliRun("run", "-c", cfg)
			if code != 78 || !strings.Contains(stderr, tc.want) {
				t.Errorf("%s, fetch = %t: exit %d, want 78 with %q; stderr:\n%s", tc.name, fetch, code, tc.want, stderr)
			}
		}
	}
}

// TestRunExitsCertNotValidYet: a certificate whose validity has not
// begun (a host up before NTP set its clock) exits 1, which the unit
// restarts until the clock is right, not 78, which leaves the node down
// for good. With fetch = true it did; without, node run took every
// error of node.New for a configuration error and exited 78.
func TestRunExitsCertNotValidYet(t *testing.T) {
	dir := t.TempDir()
	parts := twoParts(t, dir)
	certs := filepath.Join(dir, "certs")
	spec := mesh.ClusterSpec{Cluster: "c1", Nodes: []string{"host0", "host1"}, NotBefore: time.Now().Add(time.Hour)}
	if err := mesh.WriteCluster(certs, spec); err != nil {
		t.Fatal(err)
	}
	for _, fetch := range []bool{false, true} {
		cfg := filepath.Join(dir, "node.toml")
		body := fmt.Sprintf("version = 1\n[node]\nparts = %q\nname = \"host0\"\npart = 0\nfetch = %t\n[control]\nsocket = %q\n"+
			"[mesh]\nlisten = \"127.0.0.1:1\"\ncerts = %q\ncluster = \"c1\"\n"+
			"[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:1\"\n"+
			"[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:2\"\n", parts, fetch, filepath.Join(dir, "s.sock"), certs)
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := cliRun("run", "-c", cfg)
		if want := "is this host's clock behind?"; code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("fetch = %t: exit %d, want 1 with %q; stderr:\n%s", fetch, code, want, stderr)
		}
	}
}

// TestRunFetchSocketDirMissing: with fetch = true, node run refuses a
// control.socket directory that does not exist before it fetches the
// part file (New, after the fetch, would refuse it), exit 78 at once
// rather than after waiting for peers.
func TestRunFetchSocketDirMissing(t *testing.T) {
	run := missingRunDir(t)
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if code, _, stderr := cliRun("cert", "init", "--cluster", "c", "--nodes", "h0,h1", "-o", certs); code != 0 {
		t.Fatalf("cert init: %s", stderr)
	}
	cfg := filepath.Join(dir, "node.toml")
	// Nothing serves peer h0: a fetch would wait for it.
	body := fmt.Sprintf("version = 1\n[node]\nparts = %q\nfetch = true\nname = \"h1\"\npart = 1\n[control]\nsocket = %q\n"+
		"[mesh]\nlisten = \"127.0.0.1:2\"\ncluster = \"c\"\ncerts = %q\n"+
		"[[mesh.peers]]\npart = 0\nname = \"h0\"\naddr = \"127.0.0.1:1\"\n[[mesh.peers]]\npart = 1\nname = \"h1\"\naddr = \"127.0.0.1:2\"\n"+
		"[log]\nformat = \"text\"\n", filepath.Join(dir, "parts"), filepath.Join(run, "node.sock"), certs)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cliRun("run", "-c", cfg)
	if want := "node run: node: " + socketDirWarning(run) + "\n"; code != 78 || !strings.HasSuffix(stderr, want) || strings.Contains(stderr, `msg="fetch`) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 78 with %q, before any fetch", code, stderr, want)
	}
}
