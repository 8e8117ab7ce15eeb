package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"graphnode/partition"
)

// fetchConfig writes a copy of the node config at base whose node.parts
// is parts, with node.fetch = true and a mesh timeout of a second, and
// returns its path.
func fetchConfig(t *testing.T, base string, parts string) string {
	t.Helper()
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	at := strings.Index(s, "parts = ")
	end := at + strings.IndexByte(s[at:], '\n')
	s = s[:at] + "parts = " + strconv.Quote(parts) + "\nfetch = true" + s[end:]
	s = strings.Replace(s, `cluster = "demo"`, "cluster = \"demo\"\ntimeout = \"1s\"", 1)
	path := filepath.Join(t.TempDir(), filepath.Base(base))
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sameFile fails t unless the file at rel under a and under b hold the
// same bytes.
func sameFile(t *testing.T, a, b, rel string) {
	t.Helper()
	x, err := os.ReadFile(filepath.Join(a, rel))
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(filepath.Join(b, rel))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Fatalf("%s: %d bytes fetched differ from the %d of the source", rel, len(y), len(x))
	}
}

// TestFetch: hosts that hold nothing of the partitioning get it from a
// peer. `node fetch` before any peer runs waits and then names the peer;
// with node 0 serving the whole directory it fetches graph.toml (over a
// connection without a checksum) and part 1, going on from the bytes an
// earlier fetch left; again, it finds both present. `node run` with
// node.fetch = true fetches into an empty directory and serves. Then the
// failures: bytes that do not match graph.toml's CRC (removed), a file
// of the wrong size already there (kept), --all from a peer that holds
// only its own part (not found, named), and --all from one that holds
// everything (every file, inspect --verify passes).
func TestFetch(t *testing.T) {
	bin := nodeBinary(t)
	work := t.TempDir()
	g := filepath.Join(work, "g")
	if code, _, stderr := runNode(t, "gen", "rmat", "--nodes", "20000", "--edges", "200000", "--feat-dim", "16", "--seed", "5", "-o", g); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	full := filepath.Join(work, "parts")
	if code, _, stderr := runNode(t, "partition", "--input", g, "--parts", "2", "-o", full); code != 0 {
		t.Fatalf("partition: %s", stderr)
	}
	part1 := partition.PartFile(1)
	src, err := os.ReadFile(filepath.Join(full, part1))
	if err != nil {
		t.Fatal(err)
	}
	c, err := newDemoCluster(bin, filepath.Join(work, "cluster"), full, 2, "64MB", 1)
	t.Cleanup(func() {
		if err := c.stop(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	base := slices.Clone(c.configs)

	host1 := filepath.Join(work, "host1")
	cfg1 := fetchConfig(t, base[1], host1)
	start := time.Now()
	code, _, stderr := runNode(t, "fetch", "-c", cfg1, "--wait", "1s")
	if code == 0 || !strings.Contains(stderr, "fetch graph.toml: no peer could give it") || !strings.Contains(stderr, "peer node0") {
		t.Fatalf("fetch with no peer up: exit %d\n%s", code, stderr)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("fetch with no peer up took %v, want about --wait plus a call", d)
	}

	// An earlier fetch left the first 100000 bytes.
	if err := os.MkdirAll(filepath.Join(host1, "part-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host1, part1+".fetch"), src[:100000], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.start(0, nil); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runNode(t, "fetch", "-c", cfg1)
	if code != 0 {
		t.Fatalf("fetch: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"graph.toml: fetched ", " from node0 ", "part-1/part.csr: fetched " + strconv.Itoa(len(src)-100000) + " bytes from node0", "going on from 100000 bytes fetched before"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("fetch output lacks %q:\n%s", want, stdout)
		}
	}
	sameFile(t, full, host1, part1)
	if _, err := partition.OpenPart(host1, 1); err != nil {
		t.Fatalf("fetched directory: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(host1, "part-1", "*.fetch")); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
	if code, stdout, _ := runNode(t, "fetch", "-c", cfg1); code != 0 || stdout != "graph.toml: present\npart-1/part.csr: present\n" {
		t.Fatalf("second fetch: exit %d\n%s", code, stdout)
	}

	// node run with node.fetch = true, from nothing, under systemd: the
	// transfer shows in its status before it is ready.
	run1 := filepath.Join(work, "run1")
	c.configs[1] = fetchConfig(t, base[1], run1)
	sd := newNotifySocket(t)
	if err := c.start(1, []string{"NOTIFY_SOCKET=" + sd.path}); err != nil {
		t.Fatal(err)
	}
	if m := sd.await(t, 30*time.Second, prefix("STATUS=fetching part-1/part.csr from node0: ")); m == "" {
		t.Fatalf("no fetching status from node 1; got %q", sd.got)
	}
	if m := sd.await(t, 30*time.Second, prefix("READY=1")); m == "" {
		t.Fatalf("node 1 not ready after fetching; got %q", sd.got)
	}
	if err := c.waitReady(context.Background(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	sameFile(t, full, run1, part1)
	sameFile(t, host1, run1, partition.ManifestFile)

	t.Run("corrupt bytes", func(t *testing.T) {
		dir := filepath.Join(work, "corrupt")
		os.MkdirAll(filepath.Join(dir, "part-1"), 0o755)
		bad := bytes.Clone(src[:5000])
		bad[4000] ^= 0xff
		os.WriteFile(filepath.Join(dir, part1+".fetch"), bad, 0o644)
		// An earlier fetch's bytes that were bad make the whole
		// download's CRC wrong: the file is fetched again from its
		// start, and the good copy lands.
		code, _, stderr := runNode(t, "fetch", "-c", fetchConfig(t, base[1], dir))
		if code != 0 || !strings.Contains(stderr, "went on from an earlier fetch's bytes, has a wrong CRC-32C; fetching it again from its start") {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, part1+".fetch")); !os.IsNotExist(err) {
			t.Fatalf("the bad download is still there (%v)", err)
		}
		sameFile(t, full, dir, part1)
	})

	t.Run("wrong size there", func(t *testing.T) {
		dir := filepath.Join(work, "wrong")
		os.MkdirAll(filepath.Join(dir, "part-1"), 0o755)
		os.WriteFile(filepath.Join(dir, part1), []byte("mine"), 0o644)
		code, _, stderr := runNode(t, "fetch", "-c", fetchConfig(t, base[1], dir))
		if code == 0 || !strings.Contains(stderr, "is there with 4 bytes") || !strings.Contains(stderr, "remove it to fetch it again") {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, part1)); string(b) != "mine" {
			t.Fatalf("the file there was changed: %q", b)
		}
	})

	t.Run("all from a host of one part", func(t *testing.T) {
		// As node 0, whose only peer (node 1) holds graph.toml and part 1.
		dir := filepath.Join(work, "all0")
		code, stdout, stderr := runNode(t, "fetch", "-c", fetchConfig(t, base[0], dir), "--all", "--wait", "1s")
		if code == 0 || !strings.Contains(stderr, "node node1 does not hold orig_ids.bin") || !strings.Contains(stderr, "not found") {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		if !strings.Contains(stdout, "graph.toml: fetched ") {
			t.Fatalf("graph.toml not reported:\n%s", stdout)
		}
	})

	t.Run("all", func(t *testing.T) {
		dir := filepath.Join(work, "all1")
		code, stdout, stderr := runNode(t, "fetch", "-c", fetchConfig(t, base[1], dir), "--all")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		m, err := partition.OpenDir(full)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.File {
			if !strings.Contains(stdout, f.Path+": fetched ") {
				t.Errorf("%s not fetched:\n%s", f.Path, stdout)
			}
			sameFile(t, full, dir, f.Path)
		}
		if code, _, stderr := runNode(t, "inspect", dir, "--verify"); code != 0 {
			t.Fatalf("inspect --verify of the fetched directory: %s", stderr)
		}
	})

	t.Run("full disk", func(t *testing.T) {
		mnt := filepath.Join(work, "mnt")
		os.Mkdir(mnt, 0o755)
		cfg := fetchConfig(t, base[1], filepath.Join(mnt, "parts"))
		out := onFullDisk(t, mnt, int64(len(src))/2, `"$2" fetch -c `+cfg+`
echo "exit $?"`)
		for _, want := range []string{"node fetch: ", "fetch part-1/part.csr: needs ", "MB more on disk", "exit 1\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestRunStoppedWhileFetching: `node run` with node.fetch = true that is
// stopped (SIGTERM: its context ends) before the fetch is done exits 0
// and says so, as a node stopped while it serves does. It exited 1 with
// "context canceled", which leaves a systemd unit stopped during a long
// fetch failed.
func TestRunStoppedWhileFetching(t *testing.T) {
	work := t.TempDir()
	c, err := newDemoCluster("/nonexistent", filepath.Join(work, "cluster"), filepath.Join(work, "parts"), 2, "64MB", 1)
	t.Cleanup(func() {
		if err := c.stop(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fetchConfig(t, c.configs[1], filepath.Join(work, "host1"))
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), `level = "warn"`, `level = "info"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	stop()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"run", "-c", cfg}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stderr.String(), "stopped while fetching; the next start goes on from the bytes fetched") ||
		strings.Contains(stderr.String(), "node run:") {
		t.Fatalf("node run stopped while fetching: exit %d, want 0 and the stop logged; stderr:\n%s", code, &stderr)
	}
}

// TestFetchLogsAsConfigured: node fetch logs in the [log] format and
// level of its node.toml, as node run does (it logged text at info
// whatever the file said, so a fetch under a unit wrote another format
// into the same journal).
func TestFetchLogsAsConfigured(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if code, _, stderr := runNode(t, "cert", "init", "--cluster", "c", "--nodes", "h0,h1", "-o", certs); code != 0 {
		t.Fatalf("cert init: %s", stderr)
	}
	cfg := filepath.Join(dir, "node.toml")
	// Peer h0 is down (nothing serves 127.0.0.1:1): the fetch logs that
	// it failed, then gives up after --wait.
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`version = 1
[node]
parts = %q
fetch = true
name = "h1"
part = 1
[control]
socket = %q
[mesh]
listen = "127.0.0.1:2"
cluster = "c"
certs = %q
timeout = "1s"
[[mesh.peers]]
part = 0
name = "h0"
addr = "127.0.0.1:1"
[[mesh.peers]]
part = 1
name = "h1"
addr = "127.0.0.1:2"
[log]
level = "debug"
format = "json"
`, filepath.Join(dir, "parts"), filepath.Join(dir, "n.sock"), certs)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runNode(t, "fetch", "-c", cfg, "--wait", "1s")
	var rec struct{ Level, Msg string }
	first, _, _ := strings.Cut(stderr, "\n")
	if code != 1 || json.Unmarshal([]byte(first), &rec) != nil || rec.Level != "WARN" || rec.Msg != "fetch: peer failed; trying again (another peer first, if there is one)" {
		t.Fatalf("node fetch with [log] format json: exit %d, stderr:\n%s\nwant a JSON record of the failed peer first", code, stderr)
	}
}
