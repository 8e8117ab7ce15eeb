package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func cliRun(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// writeNodeTOML writes body, with $DIR replaced by a new directory that
// holds a partitioning of one part in $DIR/parts, as $DIR/node.toml.
func writeNodeTOML(t *testing.T, body string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	parts := filepath.Join(dir, "parts")
	if code, _, stderr := cliRun("partition", "--input", writeEdgeList(t, 20), "--format", "edgelist", "--parts", "1", "--method", "random", "-o", parts); code != 0 {
		t.Fatalf("partition: exit %d: %s", code, stderr)
	}
	body = strings.ReplaceAll(body, "$DIR", dir)
	path = filepath.Join(dir, "node.toml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// TestConfigCheckPrintsEffectiveConfig: a good file prints every key with
// defaults filled in and exits 0.
func TestConfigCheckPrintsEffectiveConfig(t *testing.T) {
	_, path := writeNodeTOML(t, "version = 1\n[node]\nparts = \"$DIR/parts\"\n[control]\nsocket = \"$DIR/s.sock\"\n[samplers]\nworkers = 3\n")
	code, out, errs := cliRun("config", "check", "-c", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"version = 1", "[node]", "[control]", `mode = "0660"`, "[rings]", `dir = "/dev/shm"`,
		`size = "1GB"`, "[samplers]", "workers = 3", "concurrency = 4", "max_loaders = 16", `drain_timeout = "10s"`,
		"[log]", `level = "info"`, `format = "auto"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestConfigCheckListsEveryProblem: a bad file still prints what was
// understood, then exits 1 listing each problem with its key.
func TestConfigCheckListsEveryProblem(t *testing.T) {
	_, path := writeNodeTOML(t, "version = 1\n[node]\nparts = \"$DIR/parts\"\n[control]\nsocket = \"$DIR/s.sock\"\n"+
		"[samplers]\nwrkers = 3\nconcurrency = 0\n[log]\nformat = \"yaml\"\n")
	code, out, errs := cliRun("config", "check", "-c", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(out, "[samplers]") {
		t.Errorf("effective config not printed:\n%s", out)
	}
	for _, want := range []string{"3 problem(s)", `unknown key "samplers.wrkers"`, "samplers.concurrency: 0 is out of range", `log.format: "yaml"`} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

// TestConfigCheckListsEveryWrongType: values of the wrong type are each
// a problem with key and line, not only the first, beside the others.
func TestConfigCheckListsEveryWrongType(t *testing.T) {
	_, path := writeNodeTOML(t, "version = 1\n[node]\nparts = \"$DIR/parts\"\n[control]\nsocket = \"$DIR/s.sock\"\n"+
		"[samplers]\nworkers = \"3\"\nconcurrency = 0\n[log]\nlevel = true\nformat = \"yaml\"\n")
	code, out, errs := cliRun("config", "check", "-c", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(out, "[samplers]") {
		t.Errorf("effective config not printed:\n%s", out)
	}
	for _, want := range []string{"4 problem(s)", `samplers.workers: line 7: want an integer, not the string "3"`,
		"log.level: line 10: want a string, not the boolean true", "samplers.concurrency: 0 is out of range", `log.format: "yaml"`} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

func TestConfigUsage(t *testing.T) {
	if code, _, errs := cliRun("config"); code != 2 || !strings.Contains(errs, "node config check -c node.toml") {
		t.Errorf("node config: exit %d, %q", code, errs)
	}
	if code, _, _ := cliRun("config", "check"); code != 2 {
		t.Errorf("node config check without -c: exit %d, want 2", code)
	}
	// check is config's only subcommand: its help is config's.
	for _, args := range [][]string{{"help", "config"}, {"config", "--help"}, {"config", "check", "--help"}} {
		code, _, errs := cliRun(args...)
		if code != 0 || !strings.Contains(errs, "usage: node config check -c node.toml") || !strings.Contains(errs, "-c file") {
			t.Errorf("node %s: exit %d, %q, want check's usage and its flags", strings.Join(args, " "), code, errs)
		}
	}
	if code, _, errs := cliRun("config", "print", "-c", "x.toml"); code != 2 || !strings.HasPrefix(errs, "node config: unknown subcommand \"print\" (want check)\n") {
		t.Errorf("node config print: exit %d, %q, want the unknown subcommand named", code, errs)
	}
	if code, _, errs := cliRun("run"); code != 2 || !strings.Contains(errs, "-c node.toml is required") {
		t.Errorf("node run without -c: exit %d, %q", code, errs)
	}
	if code, _, errs := cliRun("sampler", "--help"); code != 0 || !strings.Contains(errs, "Internal") {
		t.Errorf("node sampler --help: exit %d, %q", code, errs)
	}
}

func TestResolveLogFormat(t *testing.T) {
	var b bytes.Buffer
	for _, tc := range []struct{ in, want string }{{"auto", "json"}, {"text", "text"}, {"json", "json"}} {
		if got := resolveLogFormat(tc.in, &b); got != tc.want {
			t.Errorf("resolveLogFormat(%q, buffer) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestConfigCheckSaysDerivedListen: mesh.listen left out is this part's
// [[mesh.peers]] address, which the node binds; config check printed
// listen = "" under [mesh] (with a comment after the whole config).
func TestConfigCheckSaysDerivedListen(t *testing.T) {
	_, path := writeNodeTOML(t, "version = 1\n[node]\nparts = \"$DIR/parts\"\npart = 1\n[control]\nsocket = \"$DIR/s.sock\"\n"+
		"[mesh]\ncerts = \"$DIR/certs\"\ncluster = \"c1\"\n"+
		"[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:7100\"\n"+
		"[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:7101\"\n")
	_, out, _ := cliRun("config", "check", "-c", path)
	_, meshTable, _ := strings.Cut(out, "\n[mesh]\n")
	meshTable, _, _ = strings.Cut(meshTable, "\n[kv]\n")
	if want := "  listen = \"127.0.0.1:7101\"\n"; !strings.HasPrefix(meshTable, want) {
		t.Errorf("[mesh] does not start %q:\n%s", want, out)
	}
	if strings.Contains(out, "# mesh.listen") {
		t.Errorf("output says mesh.listen twice:\n%s", out)
	}
}

// twoParts partitions an edge list of 20 nodes into 2 random parts in
// dir/parts, its path.
func twoParts(t *testing.T, dir string) string {
	t.Helper()
	parts := filepath.Join(dir, "parts")
	if code, _, stderr := cliRun("partition", "--input", writeEdgeList(t, 20), "--format", "edgelist", "--parts", "2", "--method", "random", "-o", parts); code != 0 {
		t.Fatalf("partition: exit %d: %s", code, stderr)
	}
	return parts
}

// hostCerts writes the certificates of cluster's nodes host0 and host1
// into dir/name, its path.
func hostCerts(t *testing.T, dir, name, cluster string) string {
	t.Helper()
	certs := filepath.Join(dir, name)
	if code, _, stderr := cliRun("cert", "init", "--cluster", cluster, "--nodes", "host0,host1", "-o", certs); code != 0 {
		t.Fatalf("cert init: exit %d: %s", code, stderr)
	}
	return certs
}

// TestConfigCheckFiles: config check reads what the keys name on disk as
// node run does at start, and lists each problem with its key: a CA of
// another cluster, another node's certificate, a key others may read, a
// graph.toml that does not parse. Each passed the check (exit 0) and
// failed the run.
func TestConfigCheckFiles(t *testing.T) {
	dir := t.TempDir()
	parts := twoParts(t, dir)
	hostCerts(t, dir, "certs", "c1")
	hostCerts(t, dir, "certs2", "c2")
	body := func(certs, cluster string) string {
		return fmt.Sprintf("version = 1\n[node]\nparts = %q\nname = \"host0\"\n[control]\nsocket = %q\n"+
			"[mesh]\ncerts = %q\ncluster = %q\n"+
			"[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:7100\"\n"+
			"[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:7101\"\n",
			parts, filepath.Join(dir, "s.sock"), filepath.Join(dir, certs), cluster)
	}
	cfgPath := filepath.Join(dir, "node.toml")
	check := func(t *testing.T, cfg string) (int, string) {
		t.Helper()
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := cliRun("config", "check", "-c", cfgPath)
		return code, stderr
	}
	if code, stderr := check(t, body("certs", "c1")); code != 0 {
		t.Fatalf("good files: exit %d: %s", code, stderr)
	}
	otherCluster := cfgPath + `: mesh.cluster: "c1", but the CA in ` + filepath.Join(dir, "certs2") + ` is of cluster "c2"`
	if code, stderr := check(t, body("certs2", "c1")); code != 1 || !strings.Contains(stderr, otherCluster) {
		t.Errorf("CA of another cluster: exit %d: %s", code, stderr)
	}
	key := filepath.Join(dir, "certs", "host0.key")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	keyMode := cfgPath + ": mesh.certs: " + key + ": mode 0644: a private key must not be readable"
	if code, stderr := check(t, body("certs", "c1")); code != 1 || !strings.Contains(stderr, keyMode) {
		t.Errorf("key readable by others: exit %d: %s", code, stderr)
	}
	// Each problem of the certificates is listed, with the others: the
	// key's mode hid the CA's cluster, and node.part = 5 hid both.
	otherCA := cfgPath + `: mesh.cluster: "c2", but the CA in ` + filepath.Join(dir, "certs") + ` is of cluster "c1"`
	if code, stderr := check(t, body("certs", "c2")); code != 1 || !strings.Contains(stderr, "2 problem(s)") ||
		!strings.Contains(stderr, keyMode) || !strings.Contains(stderr, otherCA) {
		t.Errorf("key readable by others and a CA of another cluster: exit %d: %s", code, stderr)
	}
	partOut := strings.Replace(body("certs", "c2"), "name = \"host0\"\n", "name = \"host0\"\npart = 5\n", 1)
	if code, stderr := check(t, partOut); code != 1 || !strings.Contains(stderr, "4 problem(s)") || !strings.Contains(stderr, cfgPath+": node.part: 5, but") ||
		!strings.Contains(stderr, cfgPath+": mesh.listen: missing") || !strings.Contains(stderr, keyMode) || !strings.Contains(stderr, otherCA) {
		t.Errorf("node.part out of range, key readable by others and a CA of another cluster: exit %d: %s", code, stderr)
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(parts, "graph.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("garbage = [\n")
	f.Close()
	// With fetch = true the run fetches the parts first: no graph.toml yet
	// is no problem.
	fetching := strings.Replace(body("certs", "c1"), "name = \"host0\"\n", "name = \"host0\"\nfetch = true\n", 1)
	if code, stderr := check(t, strings.Replace(fetching, parts, filepath.Join(dir, "not-yet"), 1)); code != 0 {
		t.Errorf("fetch = true, parts not fetched yet: exit %d: %s", code, stderr)
	}
	// Both problems at once, each with its key.
	if code, stderr := check(t, body("certs2", "c1")); code != 1 || !strings.Contains(stderr, "2 problem(s)") ||
		!strings.Contains(stderr, cfgPath+": node.parts: partition: "+filepath.Join(parts, "graph.toml")) || !strings.Contains(stderr, otherCluster) {
		t.Errorf("graph.toml that does not parse and a CA of another cluster: exit %d: %s", code, stderr)
	}
	// And with a problem of a key the files do not depend on.
	if code, stderr := check(t, body("certs2", "c1")+"[samplers]\nworkers = 0\n"); code != 1 || !strings.Contains(stderr, "3 problem(s)") ||
		!strings.Contains(stderr, "samplers.workers: 0 is out of range") ||
		!strings.Contains(stderr, cfgPath+": node.parts: partition: "+filepath.Join(parts, "graph.toml")) || !strings.Contains(stderr, otherCluster) {
		t.Errorf("samplers.workers = 0, graph.toml that does not parse and a CA of another cluster: exit %d: %s", code, stderr)
	}
}

// missingRunDir is a directory under /run that does not exist, as the
// unit's RuntimeDirectory= before the first start or while the unit is
// stopped; removed after the test if the test makes it.
func missingRunDir(t *testing.T) string {
	t.Helper()
	run, err := os.MkdirTemp("/run", "graphnode-test-")
	if err != nil {
		t.Skipf("cannot make a directory under /run: %v", err)
	}
	os.Remove(run)
	t.Cleanup(func() { os.Remove(run) })
	return run
}

// socketDirWarning is what config check and node run say of run, the
// missing directory of control.socket.
func socketDirWarning(run string) string {
	return `control.socket: "` + run + `/node.sock": directory "` + run + `" does not exist, and node run starts only once it does: ` +
		"systemd makes it as it starts a unit with RuntimeDirectory=" + filepath.Base(run) + " (and removes it at stop); without such a unit, create it"
}

// TestConfigCheckSocketDirUnderRun: a control.socket under /run whose
// directory the unit makes at each start (RuntimeDirectory=) and removes
// at stop passes config check with a warning, before the first start and
// while the unit is stopped; it failed it ("directory does not exist").
// node run still refuses to start without it, exit 78.
func TestConfigCheckSocketDirUnderRun(t *testing.T) {
	run := missingRunDir(t)
	_, path := writeNodeTOML(t, "version = 1\n[node]\nparts = \"$DIR/parts\"\n[control]\nsocket = \""+run+"/node.sock\"\n[log]\nformat = \"text\"\n")
	code, out, errs := cliRun("config", "check", "-c", path)
	if want := "node config: warning: " + path + ": " + socketDirWarning(run) + "\n"; code != 0 || errs != want {
		t.Errorf("config check: exit %d, stderr %q\nwant exit 0 and %q", code, errs, want)
	}
	if !strings.Contains(out, `socket = "`+run+`/node.sock"`) {
		t.Errorf("effective config not printed:\n%s", out)
	}
	code, _, errs = cliRun("run", "-c", path)
	if want := "node run: node: " + socketDirWarning(run) + "\n"; code != 78 || !strings.HasSuffix(errs, want) {
		t.Errorf("node run: exit %d, stderr:\n%s\nwant exit 78 and %q", code, errs, want)
	}
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cliRun("config", "check", "-c", path); code != 0 || errs != "" {
		t.Errorf("config check once the directory exists: exit %d, stderr %q; want 0 and nothing", code, errs)
	}
}
