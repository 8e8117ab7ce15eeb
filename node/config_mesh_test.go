package node

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"graphnode/mesh"
	"graphnode/partition"
)

// meshDir is configDir with a graph.toml of parts parts and certificates
// for host0 and host1 of cluster "c1".
func meshDir(t *testing.T, parts int) (dir, preamble string) {
	t.Helper()
	dir, pre := configDir(t)
	if err := os.WriteFile(filepath.Join(dir, "parts", "graph.toml"), []byte("parts = "+string(rune('0'+parts))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := mesh.WriteCluster(filepath.Join(dir, "certs"), mesh.ClusterSpec{Cluster: "c1", Nodes: []string{"host0", "host1", "trainer0"}}); err != nil {
		t.Fatal(err)
	}
	return dir, strings.Replace(pre, "[node]\n", "[node]\nname = \"host0\"\n", 1)
}

func TestMeshConfig(t *testing.T) {
	peers := "[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:7100\"\n" +
		"[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:7101\"\n"
	for _, tc := range []struct {
		name  string
		parts int
		mesh  string
		want  []string // every problem, each naming its key; none: valid
	}{
		{"one part needs no mesh", 1, "", nil},
		{"two parts without mesh", 2, "", []string{"mesh: missing: ", "holds 2 partitions"}},
		{"complete", 2, "[mesh]\ncerts = %CERTS%\ncluster = \"c1\"\n" + peers, nil},
		{"every problem", 2, "[mesh]\ncerts = \"/nonexistent\"\ncluster = \"bad name\"\ntimeout = \"0s\"\nretries = -1\n" +
			"[[mesh.peers]]\npart = 0\nname = \"host9\"\naddr = \"127.0.0.1:7100\"\n" +
			"[[mesh.peers]]\npart = 5\nname = \"-x\"\naddr = \"nohost\"\n",
			[]string{`mesh.certs: "/nonexistent" is not a directory`, "mesh.cluster: mesh: cluster name", "mesh.timeout: \"0s\"",
				"mesh.retries: -1", `mesh.peers[0].name: "host9" serves part 0, but this node (node.part) is "host0"`,
				"mesh.peers[1].part: 5 is not a partition", "mesh.peers[1].name: mesh: node name", "mesh.peers[1].addr: \"nohost\"",
				"mesh.peers: no entry for part 1"}},
		{"no listen address", 2, "[mesh]\ncerts = %CERTS%\ncluster = \"c1\"\n[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:7101\"\n",
			[]string{"mesh.listen: missing"}},
		{"name and addr of two parts", 3, "[mesh]\ncerts = %CERTS%\ncluster = \"c1\"\n" + peers + "[[mesh.peers]]\npart = 2\nname = \"host1\"\naddr = \"127.0.0.1:7101\"\n",
			[]string{`mesh.peers[2].name: "host1" serves part 1 too (mesh.peers[1]): each part has a node of its own`,
				`mesh.peers[2].addr: "127.0.0.1:7101" is part 1's too (mesh.peers[1]): each part has a node of its own`}},
		// The name picks the certificate: the files of a name that is
		// not one are not looked for ("no .crt there").
		{"bad node name", 2, "[mesh]\ncerts = %CERTS%\ncluster = \"c1\"\n" + peers,
			[]string{`node.name: mesh: node name "": want 1 to 253 characters (it names this node's certificate in mesh.certs)`}},
		// Copied from the wrong line: it bound the address its peers dial
		// for part 1 (on another host: exit 1, "cannot assign requested
		// address", restarted every 5 s for ever).
		{"listen at another part's address", 2, "[mesh]\nlisten = \"127.0.0.1:7101\"\ncerts = %CERTS%\ncluster = \"c1\"\n" + peers,
			[]string{`mesh.listen: "127.0.0.1:7101" is the address of part 1's node (mesh.peers[1]), not of this node's part 0`}},
		{"duplicate part", 2, "[mesh]\ncerts = %CERTS%\ncluster = \"c1\"\n" + peers + "[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:7102\"\n",
			[]string{"mesh.peers[2].part: part 1 listed twice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, pre := meshDir(t, tc.parts)
			if tc.name == "bad node name" {
				pre = strings.Replace(pre, `name = "host0"`, `name = ""`, 1)
			}
			text := pre + strings.ReplaceAll(tc.mesh, "%CERTS%", quote(filepath.Join(dir, "certs")))
			cfg, err := LoadConfig(writeConfig(t, dir, text))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if tc.mesh != "" && (cfg.MeshListen() != "127.0.0.1:7100" || len(cfg.meshPeers()) != 1 || cfg.MeshTimeoutDuration().Seconds() != 10 || cfg.meshRetries() != 3) {
					t.Fatalf("listen %q peers %v timeout %v retries %d", cfg.MeshListen(), cfg.meshPeers(), cfg.MeshTimeoutDuration(), cfg.meshRetries())
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("no problem containing %q in\n%v", w, err)
				}
			}
			if tc.name != "two parts without mesh" && len(lines) != len(tc.want) { // its two wants are of one problem
				t.Errorf("%d problems, want %d:\n%v", len(lines), len(tc.want), err)
			}
		})
	}
}

// TestMeshServerTimeouts: the mesh server gives a request as long as
// mesh.timeout lets a peer's call wait for it (never less than mesh's
// default), and a kv request as long as a kv call waits. It left the
// request bound at its 30 s default, so with mesh.timeout = "2m" a
// request that took 45 s failed with a timeout the operator had allowed.
func TestMeshServerTimeouts(t *testing.T) {
	for _, tc := range []struct {
		mesh, kv   string
		req, kvReq time.Duration
	}{
		{"", "", mesh.DefaultServerRequestTimeout, 70 * time.Second},
		{"timeout = \"1s\"\n", "", mesh.DefaultServerRequestTimeout, 70 * time.Second},
		{"timeout = \"30s\"\n", "", 30 * time.Second, 70 * time.Second},
		{"timeout = \"2m\"\n", "sync_timeout = \"5s\"\n", 2 * time.Minute, 15 * time.Second},
		{"timeout = \"5m\"\n", "sync_timeout = \"5m\"\n", 5 * time.Minute, 5*time.Minute + 10*time.Second},
	} {
		dir, pre := configDir(t)
		cfg, err := LoadConfig(writeConfig(t, dir, pre+"[mesh]\n"+tc.mesh+"[kv]\n"+tc.kv))
		if err != nil {
			t.Fatal(err)
		}
		n := &Node{cfg: cfg, manifest: &partition.Manifest{}}
		sc, cc := n.serverConfig(), n.clientConfig()
		if sc.RequestTimeout != tc.req || sc.KVTimeout != tc.kvReq || cc.Timeout != cfg.MeshTimeoutDuration() || cc.KVTimeout != tc.kvReq {
			t.Errorf("[mesh] %q [kv] %q: server request %v kv %v, client call %v kv %v; want server request %v, kv %v on both sides",
				tc.mesh, tc.kv, sc.RequestTimeout, sc.KVTimeout, cc.Timeout, cc.KVTimeout, tc.req, tc.kvReq)
		}
	}
}

// TestClientConfig: a client node (node.role = "client") needs [mesh]
// with an entry for every part, listens on no mesh port, serves no part
// and holds no kv; a role other than server and client is refused.
func TestClientConfig(t *testing.T) {
	peers := "[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:7100\"\n" +
		"[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:7101\"\n"
	mesh := "[mesh]\ncerts = %CERTS%\ncluster = \"c1\"\n"
	for _, tc := range []struct {
		name, node, rest string
		want             []string
	}{
		{"complete", "role = \"client\"\nname = \"trainer0\"\n", mesh + peers, nil},
		// A client node copied from a sampling node's file, its name
		// left: it would go by that node's certificate.
		{"name of a peer", "role = \"client\"\n", mesh + peers, []string{`node.name: "host0" is the name of mesh.peers[0], the node of part 0: a client node needs a name and certificate of its own (node cert add --node NAME)`}},
		{"no mesh", "role = \"client\"\n", "", []string{`mesh: missing: a client node (node.role = "client")`}},
		{"every problem", "role = \"client\"\nname = \"trainer0\"\npart = 1\n", "[kv]\ncheckpoint_dir = \"/tmp\"\n" + mesh + "listen = \"127.0.0.1:7102\"\n" +
			"[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:7100\"\n",
			[]string{`node.part: 1: a client node`, `kv: a client node`, `mesh.listen: "127.0.0.1:7102": a client node`, "mesh.peers: no entry for part 1"}},
		{"unknown role", "role = \"trainer\"\n", mesh + peers, []string{`node.role: "trainer" is not "server" or "client"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, pre := meshDir(t, 2)
			if strings.Contains(tc.node, "name =") {
				pre = strings.Replace(pre, "name = \"host0\"\n", "", 1)
			}
			text := strings.Replace(pre, "[node]\n", "[node]\n"+tc.node, 1) + strings.ReplaceAll(tc.rest, "%CERTS%", quote(filepath.Join(dir, "certs")))
			cfg, err := LoadConfig(writeConfig(t, dir, text))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !cfg.Client() || cfg.MeshListen() != "" || len(cfg.meshPeers()) != 2 || cfg.ownPart() != -1 {
					t.Fatalf("client %v listen %q peers %v own part %d", cfg.Client(), cfg.MeshListen(), cfg.meshPeers(), cfg.ownPart())
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("no problem containing %q in\n%v", w, err)
				}
			}
			if lines := strings.Split(err.Error(), "\n"); len(tc.want) > 2 && len(lines) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%v", len(lines), len(tc.want), err)
			}
		})
	}
}

// TestFetchConfig: with node.fetch (or through LoadFetchConfig, for node
// fetch) a parts directory without graph.toml is no problem, but a node
// without [mesh] has nobody to fetch from, said of what asked to fetch.
func TestFetchConfig(t *testing.T) {
	dir, pre := meshDir(t, 2)
	if err := os.Remove(filepath.Join(dir, "parts", "graph.toml")); err != nil {
		t.Fatal(err)
	}
	withFetch := strings.Replace(pre, "[node]\n", "[node]\nfetch = true\n", 1)
	meshTable := "[mesh]\ncerts = " + quote(filepath.Join(dir, "certs")) + "\ncluster = \"c1\"\n" +
		"[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:7100\"\n" +
		"[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:7101\"\n"
	for _, tc := range []struct {
		name  string
		text  string
		load  func(string) (Config, error)
		want  string // "" = valid
		fetch bool
	}{
		{"fetch with a mesh", withFetch + meshTable, LoadConfig, "", true},
		{"node fetch with a mesh", pre + meshTable, LoadFetchConfig, "", true},
		{"no fetch", pre + meshTable, LoadConfig, `node.parts: "` + filepath.Join(dir, "parts") + `": no graph.toml there`, false},
		{"fetch without a mesh", withFetch, LoadConfig, "node.fetch: true, but there is no [mesh]", true},
		// node fetch, not the file, asked for the fetch: the message
		// names the command, not a node.fetch the file does not set.
		{"node fetch without a mesh", pre, LoadFetchConfig, "mesh: missing: node fetch reads the partition's files from the peers of [mesh]", true},
		{"node fetch of a file with fetch, without a mesh", withFetch, LoadFetchConfig, "mesh: missing: node fetch reads", true},
	} {
		cfg, err := tc.load(writeConfig(t, dir, tc.text))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), "\n") > 0):
			t.Errorf("%s: err = %v, want only %q", tc.name, err, tc.want)
		case cfg.Node.Fetch != tc.fetch:
			t.Errorf("%s: node.fetch = %v, want %v", tc.name, cfg.Node.Fetch, tc.fetch)
		}
	}
}

// TestEncodeTOMLRoundTripsMesh: the printed config of a cluster node and
// of a client node, [[mesh.peers]] and a "nodes" table included, loads
// back to the same configuration, valid.
func TestEncodeTOMLRoundTripsMesh(t *testing.T) {
	dir, pre := meshDir(t, 2)
	meshTable := "[mesh]\ncerts = " + quote(filepath.Join(dir, "certs")) + "\ncluster = \"c1\"\n" +
		"[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:7100\"\n" +
		"[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:7101\"\n"
	table := "[[kv.tables]]\nname = \"e\"\nrows = \"nodes\"\ndim = 4\noptimizer = \"adam\"\nlr = 1e-3\ninit = \"normal\"\ninit_scale = 1e-30\ninit_seed = 9223372036854775807\nmode = \"async\"\n"
	for name, text := range map[string]string{
		"server": pre + meshTable + table,
		"client": strings.Replace(pre, "[node]\nname = \"host0\"\n", "[node]\nrole = \"client\"\nname = \"trainer0\"\n", 1) + meshTable + table,
	} {
		cfg, err := LoadConfig(writeConfig(t, dir, text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, err := cfg.EncodeTOML()
		if err != nil {
			t.Fatal(err)
		}
		back, err := LoadConfig(writeConfig(t, dir, string(out)))
		if err != nil {
			t.Errorf("%s: the printed config has problems: %v\n%s", name, err, out)
		}
		if !reflect.DeepEqual(back, cfg) || len(back.Mesh.Peers) != 2 || back.KV.Tables[0].InitSeed != 1<<63-1 {
			t.Errorf("%s: round trip\n%+v\nwant\n%+v", name, back, cfg)
		}
	}
}

// TestConfigMeshListenDefault: mesh.listen left out (or "") is this
// part's [[mesh.peers]] address in the loaded config, the address the
// node binds, so that node config check prints it; LoadConfig left it ""
// and config check printed listen = "". A client node listens on none.
func TestConfigMeshListenDefault(t *testing.T) {
	dir, pre := meshDir(t, 2)
	meshTable := func(listen string) string {
		return "[mesh]\n" + listen + "certs = " + quote(filepath.Join(dir, "certs")) + "\ncluster = \"c1\"\n" +
			"[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:7100\"\n" +
			"[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:7101\"\n"
	}
	part1 := strings.Replace(pre, "name = \"host0\"\n", "name = \"host1\"\npart = 1\n", 1)
	client := strings.Replace(pre, "[node]\nname = \"host0\"\n", "[node]\nrole = \"client\"\nname = \"trainer0\"\n", 1)
	for _, tc := range []struct{ name, text, want string }{
		{"left out", pre + meshTable(""), "127.0.0.1:7100"},
		{"left out, part 1", part1 + meshTable(""), "127.0.0.1:7101"},
		{"empty", pre + meshTable("listen = \"\"\n"), "127.0.0.1:7100"},
		{"given", pre + meshTable("listen = \"0.0.0.0:7200\"\n"), "0.0.0.0:7200"},
		{"client", client + meshTable(""), ""},
	} {
		cfg, err := LoadConfig(writeConfig(t, dir, tc.text))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cfg.Mesh.Listen != tc.want || cfg.MeshListen() != tc.want {
			t.Errorf("%s: mesh.listen %q, MeshListen %q, want %q", tc.name, cfg.Mesh.Listen, cfg.MeshListen(), tc.want)
		}
	}
}

// TestConfigListsItselfUnderAnotherPart: host0 (node.part 0) whose
// [[mesh.peers]] names host0 as part 1's node is refused: it passed, and
// at run time host0 refused part 1's real node as one claiming host0's
// part, and dialled part 1 expecting its own certificate.
func TestConfigListsItselfUnderAnotherPart(t *testing.T) {
	dir, pre := meshDir(t, 2)
	text := pre + "[mesh]\nlisten = \"127.0.0.1:7100\"\ncerts = " + quote(filepath.Join(dir, "certs")) + "\ncluster = \"c1\"\n" +
		"[[mesh.peers]]\npart = 1\nname = \"host0\"\naddr = \"127.0.0.1:7101\"\n"
	_, err := LoadConfig(writeConfig(t, dir, text))
	if err == nil || !strings.Contains(err.Error(), `mesh.peers[0].name: "host0" is this node (node.name), which serves part 0 (node.part), not 1`) {
		t.Fatalf("config listing this node as part 1's: %v", err)
	}
}
