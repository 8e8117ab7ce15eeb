package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"graphnode/node/client"
	"graphnode/node/control"
	"graphnode/train"
)

// ckCluster starts a two-node cluster over parts whose node i
// checkpoints into dirs[i] and, with load, loads from it.
func ckCluster(t *testing.T, bin, parts string, dirs [2]string, load bool) *demoCluster {
	t.Helper()
	cl, err := newDemoCluster(bin, t.TempDir(), parts, 2, "64MB", 1)
	stoppedAtEnd(t, cl, err)
	for i, path := range cl.configs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		kv := fmt.Sprintf("[kv]\ncheckpoint_dir = %q\nload = %v\n", dirs[i], load)
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), "[kv]\n", kv, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startNodes(t, cl)
	return cl
}

// startNodes starts every node of cl and waits until all are ready.
func startNodes(t *testing.T, cl *demoCluster) {
	t.Helper()
	for i := range cl.configs {
		if err := cl.start(i, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := cl.waitReady(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
}

// restartNodes stops every node of cl with SIGTERM (each writes its exit
// save) and starts it again.
func restartNodes(t *testing.T, cl *demoCluster) {
	t.Helper()
	for _, p := range cl.procs {
		p.Process.Signal(syscall.SIGTERM)
	}
	for i := range cl.procs {
		select {
		case err := <-cl.exited[i]:
			if err != nil {
				t.Fatalf("node%d stopped with %v; its log:\n%s", i, err, tail(cl.logs[i]))
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("node%d did not stop within 30 s of SIGTERM", i)
		}
	}
	startNodes(t, cl)
}

// jobResult is one trainer process's exit and output.
type jobResult struct {
	err error
	out string
}

// runJob runs one `node train` (or other command) per node, rank r with
// args(r), all at once, and returns each one's exit and combined output.
func runJob(t *testing.T, bin string, ranks int, args func(r int) []string) []jobResult {
	t.Helper()
	res := make([]jobResult, ranks)
	tmp := t.TempDir() // what a failed --save keeps (keepParams)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args(r)...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			out, err := cmd.CombinedOutput()
			res[r] = jobResult{err, string(out)}
		})
	}
	wg.Wait()
	return res
}

// graphsageParams is the number of parameters node train --hidden
// hidden has on smallParts' graph of featDim features (4 classes, 2
// layers).
func graphsageParams(t *testing.T, featDim, hidden int) int {
	t.Helper()
	cfg := train.DefaultConfig()
	cfg.FeatDim, cfg.Classes, cfg.Layers, cfg.Hidden = featDim, 4, 2, hidden
	tr, err := train.New(cfg, train.NoSync{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.NumParams()
}

// TestTrainSaveResized: with [kv] load = true, node train --save of a
// model of another size than the one saved under --params-table replaces
// it, on both ranks, as --help says, and the nodes load the new one
// after a restart. Rank 0 failed once training was over ("field rows:
// file has 81, table has 11: checkpoint does not match the configured
// table"), for good (every kv_create loaded the old files again), and
// lost the trained model, while rank 1 exited 0. The nodes' checkpoint
// directories differ, and the job says so rather than naming rank 0's
// as every node's.
func TestTrainSaveResized(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 16, "10,5")
	dirs := [2]string{t.TempDir(), t.TempDir()}
	cl := ckCluster(t, bin, parts, dirs, true)
	job := func(hidden int) func(r int) []string {
		return func(r int) []string {
			return []string{"train", "--socket", cl.sockets[r], "--rank", strconv.Itoa(r), "--world-size", "2", "--fanouts", "10,5",
				"--batch-size", "64", "--hidden", strconv.Itoa(hidden), "--epochs", "1", "--eval=false", "--workers", "1", "--threads", "1",
				"--save", "--params-table", "p", "--table", "sync" + strconv.Itoa(hidden)}
		}
	}
	for r, res := range runJob(t, bin, 2, job(8)) {
		if res.err != nil {
			t.Fatalf("the first job, rank %d: %v\n%s", r, res.err, res.out)
		}
	}
	restartNodes(t, cl)
	res := runJob(t, bin, 2, job(4))
	n := graphsageParams(t, 16, 4)
	want := []string{
		fmt.Sprintf("saved the %d trained parameters in kv table \"p\" (replacing the model of another size saved under that name) and checkpointed every kv table into each node's [kv] checkpoint_dir (%s on the node at %s)\n", n, dirs[0], cl.sockets[0]),
		"rank 0 saved the trained parameters in kv table \"p\" and checkpointed every kv table\n",
	}
	for r := range res {
		if res[r].err != nil || !strings.Contains(res[r].out, want[r]) {
			t.Errorf("--save of --hidden 4 over a saved --hidden 8, rank %d: %v, output:\n%s\nwant %q", r, res[r].err, res[r].out, want[r])
		}
	}
	ctx := t.Context()
	rows := (n + client.SyncDim - 1) / client.SyncDim
	ids := make([]uint64, rows)
	for i := range ids {
		ids[i] = uint64(i)
	}
	pull := func() []float32 {
		t.Helper()
		kvc, err := client.DialKV(ctx, cl.sockets[1])
		if err != nil {
			t.Fatal(err)
		}
		defer kvc.Close()
		info, err := kvc.Create(ctx, client.SyncSpec("p", n))
		if err != nil {
			t.Fatalf("kv_create of the saved parameters' table: %v", err)
		}
		got, err := kvc.Pull(ctx, "p", ids, nil)
		if err != nil {
			t.Fatal(err)
		}
		if info.Version == 0 || !slices.ContainsFunc(got[:n], func(x float32) bool { return x != 0 }) {
			t.Fatalf("table p: version %d, rows %v; want the stored parameters", info.Version, got)
		}
		return got
	}
	stored := pull()
	restartNodes(t, cl)
	if loaded := pull(); !slices.Equal(loaded, stored) {
		t.Errorf("after a restart with load the nodes hold %v, want the stored %v", loaded, stored)
	}
	for p, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "p.part"+strconv.Itoa(p)+".kvt")); err != nil {
			t.Errorf("part %d's checkpoint: %v", p, err)
		}
	}
}

// TestTrainSaveRanksAgree: when rank 0's --save fails once training is
// over (its --params-table is a user's table, which it leaves as it is),
// rank 1 fails too, saying so, and rank 0 keeps the trained parameters
// in a file it names. Rank 1 exited 0 as if the job had saved.
func TestTrainSaveRanksAgree(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 16, "10,5")
	cl := ckCluster(t, bin, parts, [2]string{t.TempDir(), t.TempDir()}, false)
	ctx := t.Context()
	kvc, err := client.DialKV(ctx, cl.sockets[0])
	if err != nil {
		t.Fatal(err)
	}
	defer kvc.Close()
	if _, err := kvc.Create(ctx, control.TableSpec{Name: "user.emb", Rows: control.Rows{N: 5}, Dim: 4, Optimizer: "adagrad", LR: 0.1, Mode: "async"}); err != nil {
		t.Fatal(err)
	}
	res := runJob(t, bin, 2, func(r int) []string {
		return []string{"train", "--socket", cl.sockets[r], "--rank", strconv.Itoa(r), "--world-size", "2", "--fanouts", "10,5",
			"--batch-size", "64", "--hidden", "8", "--epochs", "1", "--eval=false", "--workers", "1", "--threads", "1",
			"--save", "--params-table", "user.emb"}
	})
	want := []string{"it is not a table of parameters that node train --save stored", "; the trained parameters are kept in "}
	if res[0].err == nil || !strings.Contains(res[0].out, want[0]) || !strings.Contains(res[0].out, want[1]) {
		t.Errorf("rank 0: %v, output:\n%s\nwant the refusal and the file the parameters are kept in", res[0].err, res[0].out)
	}
	if want := "node train: --save: rank 0, which does the job's --save once training is over, failed at it: its output says why\n"; res[1].err == nil || !strings.HasSuffix(res[1].out, want) {
		t.Errorf("rank 1: %v, output:\n%s\nwant it to fail too: %q", res[1].err, res[1].out, want)
	}
}

// TestTrainSaveReplacedKeepsSavedModel: --save of a model of another
// size whose store fails after its replace_resized kv_create (here a
// non-finite parameter; Ctrl-C, a refused push) drops the table it made
// again, and the nodes stopped afterwards (SIGTERM) still load the saved
// model; so do nodes stopped after a replace_resized kv_create that no
// store or save followed. The table stayed, and the nodes' exit saves
// wrote its initial rows to <table>.part<K>.exit.kvt, which a restart
// loaded over the saved model: created at the saved size it was refused,
// at the new size it held zeros as if loaded.
func TestTrainSaveReplacedKeepsSavedModel(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 200, 8, "5,5")
	cl := ckCluster(t, bin, parts, [2]string{t.TempDir(), t.TempDir()}, true)
	ctx := t.Context()
	n, small := 4*client.SyncDim, 2*client.SyncDim
	model := make([]float32, n)
	for i := range model {
		model[i] = float32(i%7) + 1
	}
	if _, err := storeParams(ctx, cl.sockets[0], "p", model); err != nil {
		t.Fatal(err)
	}
	if _, err := saveTables(ctx, cl.sockets[0]); err != nil {
		t.Fatal(err)
	}
	restartNodes(t, cl)

	kvc, err := client.DialKV(ctx, cl.sockets[1])
	if err != nil {
		t.Fatal(err)
	}
	defer func() { kvc.Close() }()
	bad := make([]float32, small)
	bad[3] = float32(math.NaN())
	replaced, err := storeParams(ctx, cl.sockets[0], "p", bad)
	const dropped = "; the table of the new size that --save made in place of the earlier model is dropped again, and the nodes' checkpoint files of the earlier model stay as they were"
	if err == nil || replaced || !strings.Contains(err.Error(), `--params-table "p": store the trained parameters: `) || !strings.HasSuffix(err.Error(), dropped) {
		t.Fatalf("store of a smaller model that kv refuses: %v, %v; want it refused, ending %q", replaced, err, dropped)
	}
	if info, err := kvc.Drop(ctx, "p"); err != nil || info.Any() {
		t.Errorf("table p after the refused store: %+v, %v; want no node to hold it", info, err)
	}
	restartNodes(t, cl)
	// A trainer that replaced the table and stopped before it stored
	// anything (killed, or of another build).
	kvc.Close()
	if kvc, err = client.DialKV(ctx, cl.sockets[1]); err != nil {
		t.Fatal(err)
	}
	if info, err := kvc.CreateReplacingResized(ctx, client.SyncSpec("p", small)); err != nil || !info.Created {
		t.Fatalf("replace_resized kv_create of the smaller table: %+v, %v", info, err)
	}
	restartNodes(t, cl)

	kvc.Close()
	if kvc, err = client.DialKV(ctx, cl.sockets[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := kvc.Create(ctx, client.SyncSpec("p", small)); err == nil || !strings.Contains(err.Error(), "field rows: file has 4, table has 2") {
		t.Errorf("kv_create of the smaller table after the restarts: %v; want the saved model's files refusing it", err)
	}
	info, err := kvc.Create(ctx, client.SyncSpec("p", n))
	if err != nil || info.Version != 1 {
		t.Fatalf("kv_create of the saved model's table after the restarts: %+v, %v; want it loaded at version 1", info, err)
	}
	got, err := kvc.Pull(ctx, "p", []uint64{0, 1, 2, 3}, nil)
	if err != nil || !slices.Equal(got, model) {
		t.Errorf("the saved model after the restarts: %v, %v; want the stored parameters", got, err)
	}
}
