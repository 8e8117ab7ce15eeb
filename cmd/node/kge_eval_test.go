package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"graphnode/node/client"
	"graphnode/partition"
)

// TestKGEEvalUntrained: node kge --epochs 0 (dglke_eval's job) on tables
// that no job trained (a mistyped --table-prefix, or nodes restarted
// without [kv] load) is refused on every rank, naming the prefix and
// what to do; it exports nothing and drops the tables it made. It
// evaluated and exported random rows, with a config.json that read as a
// trained model's, and exited 0. Untrained tables made before it (by a
// job refused before its first step) it refuses too, but leaves them. On
// tables a job trained it evaluates and exports, and rank 1 says rank 0
// did. Ranks started with another
// --batch-size are told that alone: --steps-per-epoch, which neither
// gave, follows from it.
func TestKGEEvalUntrained(t *testing.T) {
	bin := nodeBinary(t)
	parts := syntheticKG(t, 400, 2000, 50)
	cl := testCluster(t, bin, parts)
	exp := filepath.Join(t.TempDir(), "export")
	job := func(extra func(r int) []string) []jobResult {
		return runJob(t, bin, 2, func(r int) []string {
			return append([]string{"kge", "--socket", cl.sockets[r], "--parts", parts, "--rank", strconv.Itoa(r), "--world-size", "2",
				"--model", "distmult", "--hidden", "8", "--batch-size", "100", "--neg-size", "16", "--eval-sample", "20"}, extra(r)...)
		})
	}
	res := job(func(int) []string { return []string{"--epochs", "0", "--export", exp, "--table-prefix", "typo"} })
	want := `--epochs 0 evaluates and exports the kv tables typo.entity and typo.relation as they are, but no job trained them: they hold their initial, random rows (--table-prefix "typo" names tables that no job on these nodes trained, and no checkpoint of them was loaded). ` +
		"Pass the --table-prefix of the job that trained them, or, for the --save of a job on nodes restarted since, set [kv] load = true in their node.toml and restart them; "
	for r, end := range []string{"the tables this run made are dropped again\n", "rank 0 drops the tables this run made\n"} {
		if res[r].err == nil || !strings.HasSuffix(res[r].out, "node kge: "+want+end) {
			t.Errorf("rank %d of --epochs 0 on tables no job trained: %v, output:\n%s\nwant it refused: %q", r, res[r].err, res[r].out, want+end)
		}
	}
	if _, err := os.Stat(filepath.Join(exp, "config.json")); !os.IsNotExist(err) {
		t.Errorf("the refused job exported: %v", err)
	}
	kvc, err := client.DialKV(t.Context(), cl.sockets[1])
	if err != nil {
		t.Fatal(err)
	}
	defer kvc.Close()
	for _, name := range []string{"typo.entity", "typo.relation", "typo.model"} {
		if info, err := kvc.Drop(t.Context(), name); err != nil || info.Any() {
			t.Errorf("table %s after the refused job: %+v, %v; want no node to hold it", name, info, err)
		}
	}

	res = job(func(r int) []string {
		return []string{"--epochs", "1", "--eval", "none", "--batch-size", strconv.Itoa(100 * (r + 1))}
	})
	want = "node kge: the trainers of this job were started with different --batch-size: every trainer of a job needs the same (compare the command lines of its ranks)\n"
	for r := range res {
		if res[r].err == nil || !strings.HasSuffix(res[r].out, want) {
			t.Errorf("rank %d of ranks with another --batch-size: %v, output:\n%s\nwant %q", r, res[r].err, res[r].out, want)
		}
	}

	// The refused job made the tables, which no job trained: --epochs 0
	// says so, but leaves them, made before it.
	res = job(func(int) []string { return []string{"--epochs", "0", "--export", exp} })
	want = "; the tables were on the nodes before this run, which leaves them as they are: node kv drop --socket "
	for r := range res {
		if res[r].err == nil || !strings.Contains(res[r].out, "but no job trained them") || !strings.Contains(res[r].out, want) {
			t.Errorf("rank %d of --epochs 0 on untrained tables made before it: %v, output:\n%s\nwant it refused: %q", r, res[r].err, res[r].out, want)
		}
	}
	if v, err := kvc.Pull(t.Context(), "kge.entity", []uint64{0}, nil); err != nil || len(v) != 8 {
		t.Errorf("kge.entity after --epochs 0 refused on tables made before it: %v, %v; want it kept", v, err)
	}

	for r, res := range job(func(int) []string { return []string{"--epochs", "1", "--eval", "none"} }) {
		if res.err != nil {
			t.Fatalf("rank %d of the training job: %v\n%s", r, res.err, res.out)
		}
	}
	res = job(func(int) []string { return []string{"--epochs", "0", "--export", exp} })
	for r, want := range []string{"wrote " + exp + ": ", "rank 0 did the job's --export\n"} {
		if res[r].err != nil || !strings.Contains(res[r].out, want) {
			t.Errorf("rank %d of --epochs 0 on the trained tables: %v, output:\n%s\nwant %q", r, res[r].err, res[r].out, want)
		}
	}
	if _, err := os.Stat(filepath.Join(exp, "config.json")); err != nil {
		t.Errorf("--epochs 0 --export of the trained tables: %v", err)
	}
}

// TestKGESaveResized: node kge --save on nodes with [kv] load = true
// whose checkpoint holds the job's tables at another --hidden is refused
// on every rank before training, naming the fix (node train --save's
// failure once training was over had no match here, but the refusal
// said only that the checkpoint did not match); rank 1 of a job whose
// rank 0 saved says so.
func TestKGESaveResized(t *testing.T) {
	bin := nodeBinary(t)
	parts := syntheticKG(t, 400, 2000, 50)
	cl := ckCluster(t, bin, parts, [2]string{t.TempDir(), t.TempDir()}, true)
	job := func(hidden string) []jobResult {
		return runJob(t, bin, 2, func(r int) []string {
			return []string{"kge", "--socket", cl.sockets[r], "--parts", parts, "--rank", strconv.Itoa(r), "--world-size", "2",
				"--model", "distmult", "--hidden", hidden, "--batch-size", "100", "--neg-size", "16", "--epochs", "1", "--eval", "none", "--save"}
		})
	}
	res := job("8")
	for r, want := range []string{"checkpointed every kv table into each node's [kv] checkpoint_dir (", "rank 0 did the job's --save\n"} {
		if res[r].err != nil || !strings.Contains(res[r].out, want) {
			t.Fatalf("rank %d of the first job: %v, output:\n%s\nwant %q", r, res[r].err, res[r].out, want)
		}
	}
	restartNodes(t, cl)
	want := "checkpoint does not match the configured table (the table this request created on this node is dropped again) (the nodes' checkpoint of the table, which [kv] load brings back, holds another table, as the field above says: " +
		"of another --model or --hidden, pass those of the job that saved it to go on from it; of another partitioning or graph (field id set), serve that one; " +
		"or pass another --table-prefix to start afresh, or move its files aside in the nodes' [kv] checkpoint_dir)\n"
	for r, res := range job("16") {
		if res.err == nil || !strings.Contains(res.out, "node kge: create kv table kge.entity: ") || !strings.Contains(res.out, "field dim: file has 8, table has 16") ||
			!strings.HasSuffix(res.out, want) || strings.Contains(res.out, "epoch ") {
			t.Errorf("rank %d of --hidden 16 over a checkpoint of --hidden 8: %v, output:\n%s\nwant it refused before training: %q", r, res.err, res.out, want)
		}
	}
}

// TestKGEEvalLostShard: node kge --epochs 0 after one node restarted
// without [kv] load (its shards made afresh by the job's kv_create, at
// version 0) beside a node that kept its trained shards is refused on
// every rank, saying that a node lost its shard, and drops nothing: it
// dropped the tables on every node, the other node's trained, unsaved
// rows with them, saying that no job trained them. The sync table, whose
// restarted shard is behind the other's version, is refused first,
// saying how to start it afresh.
func TestKGEEvalLostShard(t *testing.T) {
	bin := nodeBinary(t)
	parts := syntheticKG(t, 400, 2000, 50)
	cl := testCluster(t, bin, parts)
	exp := filepath.Join(t.TempDir(), "export")
	job := func(extra ...string) []jobResult {
		return runJob(t, bin, 2, func(r int) []string {
			return append([]string{"kge", "--socket", cl.sockets[r], "--parts", parts, "--rank", strconv.Itoa(r), "--world-size", "2",
				"--model", "distmult", "--hidden", "8", "--batch-size", "100", "--neg-size", "16", "--eval-sample", "20"}, extra...)
		})
	}
	for r, res := range job("--epochs", "2", "--eval", "none") {
		if res.err != nil {
			t.Fatalf("rank %d of the training job: %v\n%s", r, res.err, res.out)
		}
	}
	m, err := partition.OpenPart(parts, 0)
	if err != nil {
		t.Fatal(err)
	}
	var own []uint64 // part 0's entities: rows of node 0's shard
	for id := m.Part[0].Start; id < m.Part[0].End; id++ {
		own = append(own, id)
	}
	pull := func() ([]float32, error) {
		kvc, err := client.DialKV(t.Context(), cl.sockets[0])
		if err != nil {
			t.Fatal(err)
		}
		defer kvc.Close()
		return kvc.Pull(t.Context(), "kge.entity", own, nil)
	}
	trained, err := pull()
	if err != nil || len(trained) != 8*len(own) {
		t.Fatalf("part 0's trained rows: %d values, %v", len(trained), err)
	}

	cl.procs[1].Process.Signal(syscall.SIGTERM)
	if err := <-cl.exited[1]; err != nil {
		t.Fatalf("node1 stopped with %v", err)
	}
	if err := cl.start(1, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := cl.waitReady(ctx, 50*time.Second); err != nil {
		t.Fatal(err)
	}

	want := "bad synchronous step"
	drop := "node kv drop --socket <a node's control socket> kge.sync starts them afresh"
	for r, res := range job("--epochs", "0", "--export", exp) {
		if res.err == nil || !strings.Contains(res.out, want) || !strings.Contains(res.out, drop) {
			t.Errorf("rank %d of --epochs 0 with the sync table's shards at different versions: %v, output:\n%s\nwant %q saying %q", r, res.err, res.out, want, drop)
		}
	}
	kvc, err := client.DialKV(t.Context(), cl.sockets[1])
	if err != nil {
		t.Fatal(err)
	}
	info, err := kvc.Drop(t.Context(), "kge.sync")
	kvc.Close()
	if err != nil || !info.Dropped || !slices.Equal(info.DroppedParts, []int{0}) {
		t.Fatalf("drop kge.sync: %+v, %v; want it dropped on both nodes", info, err)
	}

	res := job("--epochs", "0", "--export", exp)
	want = "--epochs 0 evaluates and exports the kv tables kge.entity and kge.relation as they are, but the nodes of 1 of the job's 2 parts hold them at their initial, random rows while the nodes of 1 hold trained rows (part %d, this trainer's, %s): " +
		"a node restarted without [kv] load made its shard afresh and lost what it held, and its random rows would be evaluated and exported as trained ones. Nothing is dropped. " +
		"If a --save checkpointed the tables, restarting the nodes with [kv] load = true loads it back; otherwise what those parts trained is lost: " +
		"train the job again (node kge without --epochs 0 goes on from the rows the nodes hold), or drop the tables with node kv drop --socket %s kge.entity kge.relation kge.model and start afresh\n"
	for r, mine := range []string{"holds trained rows", "is at its initial rows"} {
		w := "node kge: " + fmt.Sprintf(want, r, mine, cl.sockets[r])
		if res[r].err == nil || !strings.HasSuffix(res[r].out, w) {
			t.Errorf("rank %d of --epochs 0 beside a node that lost its shard: %v, output:\n%s\nwant it refused: %q", r, res[r].err, res[r].out, w)
		}
	}
	if _, err := os.Stat(filepath.Join(exp, "config.json")); !os.IsNotExist(err) {
		t.Errorf("the refused job exported: %v", err)
	}
	if got, err := pull(); err != nil || !slices.Equal(got, trained) {
		t.Errorf("part 0's rows after the refused --epochs 0: %d values, %v; want its trained rows kept", len(got), err)
	}
}
