package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"graphnode/mesh"
)

// TestDemoWorkdir: `node demo --workdir DIR` removes only what it wrote.
// A DIR that holds files is refused before anything is written (the demo
// used to remove it whole when done, the user's files with it); an empty
// DIR of the user's is emptied again and kept; a DIR the demo made goes.
func TestDemoWorkdir(t *testing.T) {
	// An input that is not there fails once the work directory is in
	// use.
	missing := filepath.Join(t.TempDir(), "no-such-graph")
	fail := []string{"--input", missing}

	full := t.TempDir()
	precious := filepath.Join(full, "precious.txt")
	if err := os.WriteFile(precious, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runNode(t, append([]string{"demo", "--workdir", full}, fail...)...)
	if code != 1 || !strings.Contains(stderr, "--workdir "+full+" is not empty (it holds precious.txt)") {
		t.Errorf("non-empty --workdir: code %d, stderr:\n%s", code, stderr)
	}
	if b, err := os.ReadFile(precious); err != nil || string(b) != "mine" {
		t.Errorf("the demo touched a file it did not write: %q, %v", b, err)
	}

	empty := t.TempDir()
	code, _, stderr = runNode(t, append([]string{"demo", "--workdir", empty}, fail...)...)
	if code != 1 || !strings.Contains(stderr, missing) {
		t.Errorf("empty --workdir: code %d, stderr:\n%s", code, stderr)
	}
	if entries, err := os.ReadDir(empty); err != nil || len(entries) != 0 {
		t.Errorf("empty --workdir after the demo: %v, %v; want it kept, empty", entries, err)
	}

	made := filepath.Join(t.TempDir(), "work")
	if code, _, stderr = runNode(t, append([]string{"demo", "--workdir", made}, fail...)...); code != 1 {
		t.Errorf("new --workdir: code %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(made); !os.IsNotExist(err) {
		t.Errorf("the --workdir the demo made is left: %v", err)
	}
}

// TestDemoZeroFlags: the generated graph's flags given as 0 mean 0, and
// are refused; --nodes 0 used to generate the default 200 k nodes.
func TestDemoZeroFlags(t *testing.T) {
	for _, c := range []struct{ flag, want string }{
		{"--nodes", "nodes = 0"},
		{"--classes", "--classes 0: want ≥ 2"},
	} {
		code, stdout, stderr := runNode(t, "demo", c.flag, "0", "--workdir", filepath.Join(t.TempDir(), "w"))
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Contains(stdout, "generated") {
			t.Errorf("%s 0: code %d, want 2 and %q\nstdout:\n%s\nstderr:\n%s", c.flag, code, c.want, stdout, stderr)
		}
	}
}

// TestDemoChecksFlagsFirst: a bad --method, --fanouts or --split is
// refused before the graph is generated or read, and so is what the
// nodes' config or the trainers refuse (--workers 0, --batch-size 0, a
// generated graph without features): those failed only once the graph
// was partitioned and the cluster started.
func TestDemoChecksFlagsFirst(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int // 2: a bad flag; 1: /dev/shm too small
		want string
	}{
		{[]string{"--method", "bogus"}, 2, `method "bogus": want random, metis or freq`},
		{[]string{"--fanouts", "5,x"}, 2, `"x"`},
		{[]string{"--input", "/nonexistent", "--split", "nonsense"}, 2, "nonsense"},
		{[]string{"--ring-size", "lots"}, 2, `--ring-size "lots"`},
		{[]string{"--workers", "0"}, 2, "--workers 0: want 1 to 64"},
		{[]string{"--workers", "65"}, 2, "--workers 65: want 1 to 64"},
		{[]string{"--batch-size", "0"}, 2, "--batch-size 0: want ≥ 1"},
		{[]string{"--epochs", "0"}, 2, "epochs 0: want ≥ 1"},
		{[]string{"--lr", "0"}, 2, "lr 0: want > 0"},
		{[]string{"--dropout", "1"}, 2, "dropout 1: want [0, 1)"},
		{[]string{"--hidden", "0"}, 2, "hidden 0: want ≥ 1"},
		{[]string{"--fanouts", "5"}, 2, `--fanouts "5" samples 1 hop, and the model has a layer per hop: want 2 or 3 hops`},
		{[]string{"--fanouts", "5,0"}, 2, `--fanouts "5,0": hop 2 samples 0 neighbours`},
		{[]string{"--feat-dim", "0"}, 2, "--feat-dim 0: want ≥ 1"},
		{[]string{"--classes", "1"}, 2, "--classes 1: want ≥ 2"},
		{[]string{"--cache-ratio", "-1", "--input", "/nonexistent"}, 2, "cache ratio -1: want a number ≥ 0"},
		// Flags of the other kind of graph were ignored: --split bogus
		// ran the demo on the generated graph's own split.
		{[]string{"--split", "bogus"}, 2, "--split: for --input only (the stochastic block model graph has its own split and format)"},
		// As the loaders take fanouts: -2 said "a count ≥ 0", 0 "≥ 1".
		{[]string{"--fanouts", "-2"}, 2, `--fanouts "-2": hop 1 is -2: want -1 (all) or a count ≥ 1`},
		{[]string{"--fanouts", "5,0"}, 2, `--fanouts "5,0": hop 2 samples 0 neighbours: want -1 (all) or a count ≥ 1`},
		{[]string{"--format", "bogus", "--undirected"}, 2, "--format: for --input only"},
		{[]string{"--input", "/nonexistent", "--nodes", "5000"}, 2, "--nodes: for the stochastic block model graph, not --input"},
		// Read refused it, once the demo had begun.
		{[]string{"--input", "/nonexistent", "--format", "bogus"}, 2, `partition: format "bogus": want one of edgelist, linqs, kg, ogb, metis, planetoid`},
		// Refused once the graph was generated and partitioned: too
		// small for the least the generated graph holds.
		{[]string{"--ring-size", "64KiB", "--nodes", "2000", "--epochs", "1"}, 2, "--ring-size 64KiB: the trainers' rings need at least 612KiB, for the train loaders' batches (100 or more seeds, fanouts 10,5, 64 features, 2000 nodes of largest degree 20 or more; --workers 1): raise --ring-size"},
		// The nodes refused it at start, once the graph was partitioned.
		{[]string{"--ring-size", "4KB"}, 2, "--ring-size 4KB: want at least 8KiB, what a loader's one sub-ring needs to hold a sampler's error record"},
		{[]string{"--ring-size", "16KiB", "--workers", "3"}, 2, "--ring-size 16KiB: want at least 24KiB, what the 3 sub-rings of a loader (--workers) need"},
		// The trainers refused them once the cluster ran.
		{[]string{"--epochs", "2000000"}, 2, "--epochs 2000000: want at most 1048576"},
		{[]string{"--batch-size", "2000000"}, 2, "--batch-size 2000000: want at most 1048576"},
		{[]string{"--hidden", "3000000000"}, 2, "--hidden 3000000000: a model of 2 layers that wide"},
		// node gen refuses this graph; the demo ended in the runtime's
		// "out of memory" crash, leaving its work directory.
		{[]string{"--nodes", "2000000000"}, 1, "--nodes 2000000000: the stochastic block model graph (40000000000 edges, 64 features, 16 classes) and its partitioning need at least "},
		// 2 nodes × 3 loaders (train, val, test) of 100 TB each.
		{[]string{"--ring-size", "100TB", "--input", "/nonexistent"}, 1, "--ring-size 100TB: the 6 rings of the demo's loaders (2 nodes × train, val and test) need 600.00 TB in /dev/shm, which has "},
		{[]string{"--ring-size", "100TB", "--eval=false", "--parts", "3", "--input", "/nonexistent"}, 1, "--ring-size 100TB: the 3 rings of the demo's loaders (3 nodes × train) need 300.00 TB in /dev/shm"},
	} {
		args := append([]string{"demo", "--workdir", filepath.Join(t.TempDir(), "w")}, c.args...)
		code, stdout, stderr := runNode(t, args...)
		if code != c.code || !strings.Contains(stderr, c.want) || strings.Contains(stdout, "generated") || strings.Contains(stderr, "generate") {
			t.Errorf("%v: code %d, want %d and %q before any work\nstdout:\n%s\nstderr:\n%s", c.args, code, c.code, c.want, stdout, stderr)
		}
	}
}

// TestDemoLongWorkdir: the demo runs in a --workdir (or $TMPDIR) too deep
// for a Unix socket path (107 bytes at most). Its nodes' sockets were in
// it, and they refused them once the graph was partitioned. It runs here
// in-process: its nodes and trainers are this test binary (TestMain).
func TestDemoLongWorkdir(t *testing.T) {
	work := filepath.Join(t.TempDir(), strings.Repeat("w", 100))
	code, stdout, stderr := runNode(t, "demo", "--nodes", "2000", "--epochs", "1", "--batch-size", "64", "--ring-size", "16MB", "--workdir", work)
	if code != 0 || !strings.Contains(stdout, "stopped 2 nodes; nothing left in /dev/shm") {
		t.Fatalf("demo in a --workdir of %d bytes: exit %d\nstdout:\n%s\nstderr:\n%s", len(work), code, stdout, stderr)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("the --workdir the demo made is left: %v", err)
	}
}

// TestDemoInputWithoutFeatures: an --input without features or labels is
// refused once read, saying what GraphSAGE needs, before it is
// partitioned; it failed at writing the parts ("the graph has no
// features to cache") or, with --cache-ratio 0, in the trainers.
func TestDemoInputWithoutFeatures(t *testing.T) {
	in := writeEdgeList(t, 12)
	for _, extra := range [][]string{nil, {"--cache-ratio", "0"}} {
		args := append([]string{"demo", "--input", in, "--format", "edgelist", "--workdir", filepath.Join(t.TempDir(), "w")}, extra...)
		code, stdout, stderr := runNode(t, args...)
		want := in + ": 12 nodes without features or labels: GraphSAGE trains on features to predict labels"
		if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stdout, "partitioned") {
			t.Errorf("%v: exit %d, want 1 and %q before partitioning\nstdout:\n%s\nstderr:\n%s", extra, code, want, stdout, stderr)
		}
	}
}

// TestDemoNodesOwnProcessGroup: the demo's nodes run in their own process
// group, so a terminal's Ctrl-C (or hangup) reaches the demo alone, which
// stops them with one SIGTERM. In the demo's group they got the Ctrl-C
// too, and the demo's SIGTERM was their second signal, which ends a
// process at once, without its drain.
func TestDemoNodesOwnProcessGroup(t *testing.T) {
	bin := nodeBinary(t)
	dir := t.TempDir()
	parts := onePart(t, bin, dir)
	cl, err := startDemoCluster(t.Context(), bin, t.TempDir(), parts, 1, "16MB", 1)
	defer func() {
		if err := cl.stop(); err != nil {
			t.Error(err)
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	pid := cl.procs[0].Process.Pid
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	if pgid != pid {
		t.Errorf("node0 (pid %d) runs in process group %d (the demo's is %d), want its own", pid, pgid, syscall.Getpgrp())
	}
}

// TestDemoPorts: the addresses of a demo cluster's nodes are distinct and
// free, and a node log that says its address was taken is what makes the
// cluster start again on other ports.
func TestDemoPorts(t *testing.T) {
	addrs, err := mesh.LoopbackAddrs(64)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("address %s chosen twice in %v", a, addrs)
		}
		seen[a] = true
		c, err := net.ListenPacket("udp", a)
		if err != nil {
			t.Fatalf("chosen address %s is not free: %v", a, err)
		}
		c.Close()
	}
	dir := t.TempDir()
	c := &demoCluster{logs: []string{filepath.Join(dir, "node0.log"), filepath.Join(dir, "node1.log")}}
	os.WriteFile(c.logs[0], []byte("node ready\n"), 0o600)
	if c.portTaken() {
		t.Fatal("portTaken with no bind failure in any log")
	}
	os.WriteFile(c.logs[1], []byte("node run: node: mesh.listen: mesh: listen 127.0.0.1:35228: listen udp 127.0.0.1:35228: bind: address already in use\n"), 0o600)
	if !c.portTaken() {
		t.Fatal("portTaken missed a node that could not bind its address")
	}
}

// TestDemoRemovedLogs: a trainer that fails once the cluster runs (here
// its ring cannot hold a batch) is reported with the tail of its log,
// named by path; the demo then removes its work directory, and says so
// and how to keep it: the path named led nowhere. The demo refuses such
// a ring before it starts the cluster (checkRings), so the test tells
// that check the ring is large.
func TestDemoRemovedLogs(t *testing.T) {
	work := filepath.Join(t.TempDir(), "w")
	a := newApp(io.Discard, io.Discard)
	fs, f := newDemoFlags(a)
	if err := fs.Parse([]string{"--nodes", "2000", "--epochs", "1", "--ring-size", "20KB", "--workdir", work}); err != nil {
		t.Fatal(err)
	}
	f.ringBytes = 1 << 40
	err := f.run(t.Context(), a)
	if err == nil || !strings.Contains(err.Error(), "its log "+work) || !strings.Contains(err.Error(), "raise ring_size") {
		t.Fatalf("demo with a ring too small for a batch: %v, want a trainer's log named", err)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Fatalf("the --workdir the demo made is left: %v", err)
	}
	if want := "(the logs named above were removed with the work directory " + work + ": --keep keeps it)"; !strings.Contains(err.Error(), want) {
		t.Errorf("want %q in:\n%v", want, err)
	}
}

// TestDemoRingSizeForTheGraph: a --ring-size the nodes would refuse the
// trainers' loaders for is a bad flag (exit 2), refused before the
// cluster starts, naming the least that works; and that size works. The
// demo started its cluster, and its trainers failed. One too small for
// what the generated graph holds at least is refused before it is
// generated; one too small for the graph itself (with fanouts of -1,
// its largest degree) once it is partitioned.
func TestDemoRingSizeForTheGraph(t *testing.T) {
	args := []string{"demo", "--nodes", "2000", "--epochs", "1", "--batch-size", "64"}
	code, stdout, stderr := runNode(t, append(args, "--ring-size", "100KB", "--workdir", filepath.Join(t.TempDir(), "w"))...)
	re := regexp.MustCompile(`--ring-size 100KB: the trainers' rings need at least (\S+), for the (train|val|test) loaders' batches \(\d+( or more)? seeds, fanouts 10,5, 64 features, 2000 nodes of largest degree 20 or more; --workers 1\): raise --ring-size`)
	m := re.FindStringSubmatch(stderr)
	if code != 2 || m == nil || strings.Contains(stdout, "generated") {
		t.Fatalf("a 100KB ring: exit %d, want 2 and the least ring size before the graph is generated\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runNode(t, append(args, "--ring-size", m[1], "--workdir", filepath.Join(t.TempDir(), "w"))...)
	if code != 0 || !strings.Contains(stdout, "stopped 2 nodes; nothing left in /dev/shm") {
		t.Fatalf("the advised --ring-size %s: exit %d\nstdout:\n%s\nstderr:\n%s", m[1], code, stdout, stderr)
	}

	// Every neighbour: the generated graph's largest degree (32), not the
	// least it could have been (its mean, 20), sizes the batches.
	args = append(args, "--fanouts", "-1,-1", "--ring-size", "1MiB", "--workdir", filepath.Join(t.TempDir(), "w"))
	code, stdout, stderr = runNode(t, args...)
	re = regexp.MustCompile(`--ring-size 1MiB: the trainers' rings need at least \S+, for the (train|val|test) loaders' batches \(\d+ seeds, fanouts -1,-1, 64 features, 2000 nodes of largest degree (\d+); --workers 1\): raise --ring-size`)
	if m := re.FindStringSubmatch(stderr); code != 2 || m == nil || m[2] == "20" || !strings.Contains(stdout, "partitioned into 2 parts") || strings.Contains(stdout, "training") {
		t.Fatalf("a 1MiB ring with fanouts -1,-1: exit %d, want 2 and the ring size once partitioned\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
