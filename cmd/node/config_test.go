package main

import (
	"bytes"
	"context"
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

func writeNodeTOML(t *testing.T, body string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	parts := filepath.Join(dir, "parts")
	if err := os.MkdirAll(parts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parts, "graph.toml"), nil, 0o644); err != nil {
		t.Fatal(err)
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
// [[mesh.peers]] address; config check printed listen = "" and no word
// of the address the node binds.
func TestConfigCheckSaysDerivedListen(t *testing.T) {
	_, path := writeNodeTOML(t, "version = 1\n[node]\nparts = \"$DIR/parts\"\n[control]\nsocket = \"$DIR/s.sock\"\n"+
		"[mesh]\ncerts = \"$DIR/certs\"\ncluster = \"c1\"\n"+
		"[[mesh.peers]]\npart = 0\nname = \"host0\"\naddr = \"127.0.0.1:7100\"\n"+
		"[[mesh.peers]]\npart = 1\nname = \"host1\"\naddr = \"127.0.0.1:7101\"\n")
	_, out, _ := cliRun("config", "check", "-c", path)
	if want := "# mesh.listen: 127.0.0.1:7100, this part's [[mesh.peers]] entry\n"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
