package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"graphnode/internal/datasets"
	"graphnode/node/client"
	"graphnode/node/control"
	"graphnode/train"
)

// built is `node` built once for the tests that start processes, without
// the race detector: they train for hundreds of steps.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func nodeBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and starts a cluster; skipped with -short")
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "graphnode-cmd-test-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "node")
		cmd := exec.Command("go", "build", "-o", built.path, "graphnode/cmd/node")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

func TestMain(m *testing.M) {
	// node demo starts os.Executable() as its nodes, samplers and
	// trainers: in a test that runs it in this process, that is this
	// binary, which then has to be the node. Run as a test binary again
	// it ran every test, and each demo among them started more.
	if len(os.Args) > 1 {
		if _, ok := commands()[os.Args[1]]; ok {
			main()
		}
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// demoRings lists the demo's ring directories in /dev/shm.
func demoRings(t *testing.T) map[string]bool {
	t.Helper()
	m, _ := filepath.Glob("/dev/shm/graphnode-demo-*")
	out := map[string]bool{}
	for _, p := range m {
		out[p] = true
	}
	return out
}

// TestDemo runs `node demo` on a small graph: the accuracy it prints
// beats chance (1/16) by far, and it leaves nothing behind.
func TestDemo(t *testing.T) {
	bin := nodeBinary(t)
	before := demoRings(t)
	work := filepath.Join(t.TempDir(), "work")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--nodes", "6000", "--epochs", "4", "--batch-size", "64", "--workdir", work)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("node demo: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errb)
	}
	var last []string
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 {
			if _, err := strconv.Atoi(f[0]); err == nil {
				last = f
			}
		}
	}
	if last == nil || last[0] != "3" {
		t.Fatalf("no line for epoch 3 in:\n%s", &out)
	}
	test, err := strconv.ParseFloat(last[4], 64)
	if err != nil || test < 0.3 {
		t.Fatalf("test accuracy %q after 4 epochs, want ≥ 0.3 (chance 0.0625):\n%s", last[4], &out)
	}
	if !strings.Contains(out.String(), "nothing left in /dev/shm") {
		t.Fatalf("no clean shutdown line:\n%s", &out)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Fatalf("work directory %s left behind (%v)", work, err)
	}
	for p := range demoRings(t) {
		if !before[p] {
			t.Fatalf("ring directory %s left behind", p)
		}
	}
}

// smallParts partitions a stochastic block model graph of nodes nodes
// with featDim features and 4 classes into 2 random parts (the demo's
// generator, batch 64, seed 1) in t's temp dir.
func smallParts(t *testing.T, nodes, featDim int, fanouts string) string {
	t.Helper()
	parts := filepath.Join(t.TempDir(), "parts")
	f := demoFlags{nodes: nodes, featDim: featDim, classes: 4, parts: 2, method: "random", fanouts: fanouts, batch: 64, seed: 1}
	if err := f.partition(context.Background(), newApp(io.Discard, io.Discard), parts); err != nil {
		t.Fatal(err)
	}
	return parts
}

// cluster starts a two-node demo cluster over parts in t's temp dir.
func testCluster(t *testing.T, bin, parts string) *demoCluster {
	t.Helper()
	cl, err := startDemoCluster(context.Background(), bin, t.TempDir(), parts, 2, "64MB", 1)
	return stoppedAtEnd(t, cl, err)
}

// stoppedAtEnd is cl, made (or started) with err, stopped when t ends
// (whatever of it err left running); err fails t.
func stoppedAtEnd(t *testing.T, cl *demoCluster, err error) *demoCluster {
	t.Helper()
	t.Cleanup(func() {
		if err := cl.stop(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// trainer is one `node train --json` process.
type trainer struct {
	cmd    *exec.Cmd
	lines  chan map[string]any
	stderr bytes.Buffer
	done   chan error
}

func startTrainer(t *testing.T, bin string, args ...string) *trainer {
	t.Helper()
	tr := &trainer{lines: make(chan map[string]any, 1024), done: make(chan error, 1)}
	tr.cmd = exec.Command(bin, append([]string{"train", "--json"}, args...)...)
	tr.cmd.Stderr = &tr.stderr
	tr.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := tr.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				tr.lines <- m
			}
		}
		io.Copy(io.Discard, out)
		close(tr.lines)
		tr.done <- tr.cmd.Wait()
	}()
	t.Cleanup(func() {
		tr.cmd.Process.Kill()
		for range tr.lines {
		}
	})
	return tr
}

// planetoidArgs are the hyper-parameters of train's Planetoid accuracy
// test (train/accuracy_test.go), as `node train` flags.
func planetoidArgs(socket string, rank int) []string {
	return []string{"--socket", socket, "--rank", strconv.Itoa(rank), "--world-size", "2",
		"--fanouts", "25,10", "--eval-fanouts", "-1,-1", "--batch-size", "70", "--eval-batch-size", "1000",
		"--hidden", "64", "--dropout", "0.6", "--input-dropout", "0.6", "--normalize",
		"--lr", "0.01", "--weight-decay", "5e-3", "--epochs", "200", "--seed", "1", "--workers", "1", "--threads", "1"}
}

// TestTrainPlanetoid partitions Cora and CiteSeer into two parts, starts
// two nodes and two `node train` processes, and checks the test accuracy
// at the best validation epoch, with every batch and gradient crossing
// the rings, the control sockets, kv and the mesh. The split is the
// Planetoid-sized one drawn from seed 1; one model seed by default (test
// accuracy ≥ 0.77 / 0.65); GRAPHNODE_PLANETOID_SEEDS=1,2,3,4,5 trains with
// every model seed and checks the bar on the mean (≥ 0.79 / 0.67),
// logging mean and standard deviation.
func TestTrainPlanetoid(t *testing.T) {
	seeds := []string{"1"}
	if v := os.Getenv("GRAPHNODE_PLANETOID_SEEDS"); v != "" {
		seeds = strings.Split(v, ",")
	}
	for _, c := range []struct {
		name      string
		min, mean float64
	}{{"cora", 0.77, 0.79}, {"citeseer", 0.65, 0.67}} {
		t.Run(c.name, func(t *testing.T) {
			dir := datasets.Dir(t, c.name)
			var accs []float64
			for _, seed := range seeds {
				// A subtest per seed, so that its cluster stops before the next.
				t.Run("seed="+seed, func(t *testing.T) {
					acc := trainPlanetoid(t, dir, seed)
					t.Logf("%s seed %s: test accuracy %.4f", c.name, seed, acc)
					accs = append(accs, acc)
				})
			}
			if len(accs) != len(seeds) {
				t.FailNow() // a seed's run failed and said why
			}
			if len(accs) == 1 {
				if accs[0] < c.min {
					t.Fatalf("%s: test accuracy %.4f, want ≥ %.2f", c.name, accs[0], c.min)
				}
				return
			}
			var sum, sq float64
			for _, a := range accs {
				sum += a
			}
			mean := sum / float64(len(accs))
			for _, a := range accs {
				sq += (a - mean) * (a - mean)
			}
			std := math.Sqrt(sq / float64(len(accs)-1))
			t.Logf("%s: mean test accuracy %.4f ± %.4f over seeds %v", c.name, mean, std, seeds)
			if mean < c.mean {
				t.Fatalf("%s: mean test accuracy %.4f, want ≥ %.2f", c.name, mean, c.mean)
			}
		})
	}
}

// trainPlanetoid partitions dataset dir (the Planetoid-sized split from
// seed 1) into two metis parts, trains on two nodes with two `node train`
// processes from model seed, and returns the test accuracy at the best
// validation epoch.
func trainPlanetoid(t *testing.T, dir, seed string) float64 {
	t.Helper()
	bin := nodeBinary(t)
	parts := filepath.Join(t.TempDir(), "parts")
	out, err := exec.Command(bin, "partition", "--input", dir, "--format", "linqs", "--undirected",
		"--split", "per-class:20,500,1000", "--seed", "1", "--parts", "2", "--method", "metis", "-o", parts).CombinedOutput()
	if err != nil {
		t.Fatalf("partition: %v\n%s", err, out)
	}
	cl := testCluster(t, bin, parts)
	began := time.Now()
	args := func(r int) []string {
		a := planetoidArgs(cl.sockets[r], r)
		for i := range a {
			if a[i] == "--seed" {
				a[i+1] = seed
			}
		}
		return a
	}
	trs := []*trainer{startTrainer(t, bin, args(0)...), startTrainer(t, bin, args(1)...)}
	var best []map[string]any
	for r, tr := range trs {
		var last map[string]any
		for m := range tr.lines {
			last = m
		}
		if err := <-tr.done; err != nil {
			t.Fatalf("trainer %d: %v\n%s", r, err, &tr.stderr)
		}
		best = append(best, last)
	}
	acc, _ := best[0]["test_acc"].(float64)
	t.Logf("seed %s: best epoch %v: val %v test %v, %.1fs", seed, best[0]["best_epoch"], best[0]["val_acc"], acc, time.Since(began).Seconds())
	if fmt.Sprint(best[0]) != fmt.Sprint(best[1]) {
		t.Fatalf("trainers disagree: %v vs %v", best[0], best[1])
	}
	return acc
}

// TestTrainerKilled: two `node train` processes on two nodes; killing one
// mid-training makes the other fail its synchronous step with an error
// naming the dead trainer, long before the sync timeout (30 s). Then a
// job of another model size is told that the first job's sync table is
// in its way, and how to pass it.
func TestTrainerKilled(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 4000, 16, "10,5")
	cl := testCluster(t, bin, parts)
	args := func(r int) []string {
		return []string{"--socket", cl.sockets[r], "--rank", strconv.Itoa(r), "--world-size", "2", "--fanouts", "10,5",
			"--batch-size", "64", "--epochs", "1000", "--eval-every", "1000", "--workers", "1", "--threads", "1"}
	}
	t0, t1 := startTrainer(t, bin, args(0)...), startTrainer(t, bin, args(1)...)
	for _, tr := range []*trainer{t0, t1} {
		select {
		case _, ok := <-tr.lines:
			if !ok {
				t.Fatalf("trainer ended before its first epoch: %v\n%s", <-tr.done, &tr.stderr)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("no epoch after 60 s")
		}
	}
	killed := time.Now()
	t1.cmd.Process.Kill()
	for range t0.lines {
	}
	err := <-t0.done
	took := time.Since(killed)
	if err == nil || !strings.Contains(t0.stderr.String(), "trainer 1") || !strings.Contains(t0.stderr.String(), "synchronous step failed") {
		t.Fatalf("surviving trainer: %v, stderr:\n%s\nwant a failed step naming trainer 1", err, &t0.stderr)
	}
	if took > 10*time.Second {
		t.Fatalf("the step failed %v after the kill: the sync timeout, not the trainer's departure", took)
	}
	t.Logf("rank 0 failed %v after rank 1 was killed: %s", took.Round(time.Millisecond), strings.TrimSpace(t0.stderr.String()))

	// A later job of another model size meets that job's sync table,
	// still on the nodes, and is told how to get past it.
	other := startTrainer(t, bin, "--socket", cl.sockets[0], "--fanouts", "10,5", "--hidden", "8", "--epochs", "1", "--eval=false", "--workers", "1")
	for range other.lines {
	}
	if err := <-other.done; err == nil || !strings.Contains(other.stderr.String(), `keeps the name "graphsage.sync" until kv_drop: pass another --table`) {
		t.Fatalf("a job of another model on the same table: %v, stderr:\n%s\nwant the way out named", err, &other.stderr)
	}
	out, err := exec.Command(bin, "train", "--socket", cl.sockets[0], "--fanouts", "10,5", "--hidden", "8", "--epochs", "2",
		"--eval=false", "--workers", "1", "--table", "small.sync").CombinedOutput()
	if err != nil {
		t.Fatalf("the same job on another --table: %v, output:\n%s", err, out)
	}
	// Without evaluation there is no best epoch: it printed "best epoch
	// -1: val 0.0000 test 0.0000".
	if last := lastLine(string(out)); last != "trained 2 epochs without evaluation (--eval=false): no best epoch" {
		t.Errorf("last line of a run with --eval=false: %q, output:\n%s", last, out)
	}
}

// TestTrainRanksDisagree: trainers of one job started with another
// --seed and --epochs are refused in the rounds before their first step,
// each naming both flags. Rank 1 trained parameters of its own seed under
// averaged gradients, and ended past rank 0's last epoch waiting for a
// round rank 0 never ran. The seeds, 105 and 303, have one 16-bit hash
// (client's TestAgreeOldCollision), which was all the ranks compared; a
// model of --hidden 8 on 8 features and 4 classes is a sync table of one
// row, whose round holds fewer settings than node train compares.
func TestTrainRanksDisagree(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 8, "5,5")
	cl := testCluster(t, bin, parts)
	var trs []*trainer
	for r, extra := range [][]string{{"--seed", "105", "--epochs", "2"}, {"--seed", "303", "--epochs", "3"}} {
		trs = append(trs, startTrainer(t, bin, append([]string{"--socket", cl.sockets[r], "--rank", strconv.Itoa(r), "--world-size", "2",
			"--fanouts", "5,5", "--batch-size", "64", "--hidden", "8", "--workers", "1", "--threads", "1"}, extra...)...))
	}
	for r, tr := range trs {
		n := 0
		for range tr.lines {
			n++
		}
		err := <-tr.done
		if want := "the trainers of this job were started with different --epochs, --seed: every trainer of a job needs the same"; err == nil || n > 0 || !strings.Contains(tr.stderr.String(), want) {
			t.Errorf("rank %d: %v after %d epochs, stderr:\n%s\nwant no epoch and %q", r, err, n, &tr.stderr, want)
		}
	}
}

// TestTrainUnevenShares: ranks whose shares of the split differ by a
// seed, and so by a batch (201 training seeds in batches of 100: 2 and 1
// batches), train together; the ranks' comparison took the batches per
// epoch for a setting and refused the job.
func TestTrainUnevenShares(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2010, 8, "5,5")
	cl := testCluster(t, bin, parts)
	var trs []*trainer
	for r := range 2 {
		trs = append(trs, startTrainer(t, bin, "--socket", cl.sockets[r], "--rank", strconv.Itoa(r), "--world-size", "2",
			"--fanouts", "5,5", "--batch-size", "100", "--epochs", "2", "--workers", "1", "--threads", "1"))
	}
	for r, tr := range trs {
		n := 0
		for m := range tr.lines {
			if _, ok := m["epoch"]; ok {
				n++
			}
		}
		if err := <-tr.done; err != nil || n != 2 {
			t.Errorf("rank %d: %v after %d epochs, stderr:\n%s\nwant 2 epochs", r, err, n, &tr.stderr)
		}
	}
}

// TestTrainSecondJob: a second job started on the sync table of a
// running job (both on the default --table) is refused alone, naming the
// way out, and the running job goes on. Before, both failed with "two
// trainers push as rank 0 … give each trainer its own --rank".
func TestTrainSecondJob(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 8, "5,5")
	cl := testCluster(t, bin, parts)
	job := func(node, r, world int, epochs string) []string {
		return []string{"--socket", cl.sockets[node], "--rank", strconv.Itoa(r), "--world-size", strconv.Itoa(world),
			"--fanouts", "5,5", "--batch-size", "64", "--epochs", epochs, "--eval-every", "0", "--workers", "1", "--threads", "1"}
	}
	a := []*trainer{startTrainer(t, bin, job(0, 0, 2, "100000")...), startTrainer(t, bin, job(1, 1, 2, "100000")...)}
	for r, tr := range a {
		if _, ok := <-tr.lines; !ok {
			t.Fatalf("job A, rank %d, ended before its first epoch: %v\n%s", r, <-tr.done, &tr.stderr)
		}
	}
	out, err := exec.Command(bin, append([]string{"train"}, job(1, 0, 1, "2")...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `table "graphsage.sync"`) || !strings.Contains(string(out), "the table belongs to a running job of world 2, not 1") ||
		!strings.Contains(string(out), "a second job on the table needs its own (node train --table") {
		t.Errorf("a second job on the running job's table: %v, output:\n%s\nwant it refused, naming --table", err, out)
	}
	for r, tr := range a {
		for range 3 {
			if _, ok := <-tr.lines; !ok {
				t.Fatalf("job A, rank %d, ended after the second job: %v\n%s", r, <-tr.done, &tr.stderr)
			}
		}
	}
}

// TestTrainSaveParams: node train --save on two nodes and two trainers
// stores the trained parameters in kv table graphsage.params and
// checkpoints it on every node; a trainer given the pulled parameters
// scores on the test split exactly the accuracy the job reported for its
// last epoch. --save checkpointed only the sync table, whose rows hold
// the last round's averaged statistics: the trained model was lost.
func TestTrainSaveParams(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 16, "10,5")
	ck := t.TempDir()
	cl := ckCluster(t, bin, parts, [2]string{ck, ck}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := func(r int) []string {
		return []string{"--socket", cl.sockets[r], "--rank", strconv.Itoa(r), "--world-size", "2", "--fanouts", "10,5",
			"--eval-fanouts", "-1,-1", "--batch-size", "64", "--hidden", "8", "--epochs", "8", "--eval-every", "0",
			"--workers", "1", "--threads", "1", "--save"}
	}
	trs := []*trainer{startTrainer(t, bin, args(0)...), startTrainer(t, bin, args(1)...)}
	var reported float64
	for r, tr := range trs {
		for m := range tr.lines {
			if e, ok := m["epoch"].(float64); ok && e == 7 {
				reported, _ = m["test_acc"].(float64)
			}
		}
		if err := <-tr.done; err != nil {
			t.Fatalf("trainer %d: %v\n%s", r, err, &tr.stderr)
		}
	}
	for p := range 2 {
		if _, err := os.Stat(filepath.Join(ck, "graphsage.params.part"+strconv.Itoa(p)+".kvt")); err != nil {
			t.Errorf("checkpoint of the parameters on part %d: %v", p, err)
		}
	}

	if acc := storedTestAccuracy(t, ctx, cl, "graphsage.params"); acc != reported {
		t.Fatalf("stored parameters score %.4f on the test seeds, the job reported %.4f for its last epoch", acc, reported)
	}

	// --save-best stores the epoch of the best val accuracy (the first of
	// the highest), evaluated every epoch, and not the last. At --lr 1 the
	// val accuracy peaks before the last epoch (epoch 18 of 20 here, test
	// accuracy 0.31 against the last epoch's 0.29), so the last epoch's
	// parameters score another test accuracy.
	bestArgs := func(r int) []string {
		return append(args(r), "--save-best", "--eval-every", "1", "--epochs", "20", "--lr", "1", "--table", "best.sync", "--params-table", "best.params")
	}
	trs = []*trainer{startTrainer(t, bin, bestArgs(0)...), startTrainer(t, bin, bestArgs(1)...)}
	var val, test []float64
	for r, tr := range trs {
		for m := range tr.lines {
			if _, ok := m["epoch"].(float64); ok && r == 0 {
				v, _ := m["val_acc"].(float64)
				a, _ := m["test_acc"].(float64)
				val, test = append(val, v), append(test, a)
			}
		}
		if err := <-tr.done; err != nil {
			t.Fatalf("--save-best trainer %d: %v\n%s", r, err, &tr.stderr)
		}
	}
	best := 0
	for e := range val {
		if val[e] > val[best] {
			best = e
		}
	}
	if acc := storedTestAccuracy(t, ctx, cl, "best.params"); len(val) != 20 || acc != test[best] {
		t.Fatalf("--save-best: stored parameters score %.4f on the test seeds; the job reported %.4f at its best epoch %d of %d (val %v, test %v)",
			acc, test[best], best, len(val), val, test)
	}
	t.Logf("--save-best: epoch %d of %d, test accuracy %.4f (last epoch's %.4f)", best, len(val), test[best], test[len(test)-1])

	// --save given to one rank only is refused on both before training:
	// rank 1's --save saved nothing, without a word.
	one := func(r int, save bool) []string {
		a := append(args(r)[:len(args(r))-1], "--table", "one.sync", "--epochs", "1")
		if save {
			a = append(a, "--save")
		}
		return a
	}
	trs = []*trainer{startTrainer(t, bin, one(0, false)...), startTrainer(t, bin, one(1, true)...)}
	for r, tr := range trs {
		for range tr.lines {
		}
		if err := <-tr.done; err == nil || !strings.Contains(tr.stderr.String(), "were started with different --save:") {
			t.Errorf("rank %d of a job with --save on rank 1 alone: %v, stderr:\n%s\nwant --save named", r, err, &tr.stderr)
		}
	}

	// A --params-table that is a table of another kind (a user's
	// embedding table) is refused and left as it is: it was dropped,
	// checkpoint included, for the parameters.
	kvc, err := client.DialKV(ctx, cl.sockets[0])
	if err != nil {
		t.Fatal(err)
	}
	defer kvc.Close()
	if _, err := kvc.Create(ctx, control.TableSpec{Name: "user.emb", Rows: control.Rows{N: 5}, Dim: 4, Init: "uniform", InitScale: 1, InitSeed: 3,
		Optimizer: "adagrad", LR: 0.1, Mode: "async"}); err != nil {
		t.Fatal(err)
	}
	ids := []uint64{0, 1, 2, 3, 4}
	before, err := kvc.Pull(ctx, "user.emb", ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The trained parameters are kept in a file all the same: the
	// refusal came once training was over, and lost them.
	keep := t.TempDir()
	cmd := exec.Command(bin, "train", "--socket", cl.sockets[0], "--fanouts", "10,5", "--hidden", "8", "--epochs", "1", "--eval=false",
		"--workers", "1", "--table", "alone.sync", "--save", "--params-table", "user.emb")
	cmd.Env = append(os.Environ(), "TMPDIR="+keep)
	out, err := cmd.CombinedOutput()
	kept, _ := filepath.Glob(filepath.Join(keep, "graphnode-user.emb-*.npy"))
	if err == nil || !strings.Contains(string(out), `--params-table "user.emb": `) || !strings.Contains(string(out), "it is not a table of parameters that node train --save stored") ||
		len(kept) != 1 || !strings.Contains(string(out), "; the trained parameters are kept in "+kept[0]+" (NumPy, float32, the rows --params-table would hold)") {
		t.Errorf("--params-table of a user's table: %v, output:\n%s\nwant it refused, naming the file the parameters are kept in (found %q)", err, out, kept)
	}
	if after, err := kvc.Pull(ctx, "user.emb", ids, nil); err != nil || !slices.Equal(before, after) {
		t.Errorf("the user's table after the refused --save: %v, %v; want its rows %v", after, err, before)
	}
	if len(kept) == 1 {
		// 8 hidden, 16 features, 4 classes: two layers of W_l, W_r and b.
		n := 2*16*8 + 8 + 2*8*4 + 4
		nonzero := func(x float32) bool { return x != 0 }
		if got := readNPY(t, kept[0], (n+client.SyncDim-1)/client.SyncDim, client.SyncDim); !slices.ContainsFunc(got[:n], nonzero) || slices.ContainsFunc(got[n:], nonzero) {
			t.Errorf("%s: want %d parameters, not all zero, then zeros: %v", kept[0], n, got)
		}
	}
	// storeParams leaves the table free at once: the next save, of
	// another process, replaces it (last save wins). The job's own
	// connection held it until the job ended, and a second job saving
	// meanwhile was refused as a second job on the table.
	for i, v := range []float32{1, 2} {
		if _, err := storeParams(ctx, cl.sockets[1], "race.params", []float32{v, v, v}); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
	}
	if got, err := kvc.Pull(ctx, "race.params", []uint64{0}, nil); err != nil || got[0] != 2 || got[2] != 2 || got[3] != 0 {
		t.Errorf("race.params after two saves: %v, %v; want the second's", got[:4], err)
	}
	// The parameters of a model of another size replace the stored ones.
	out, err = exec.Command(bin, "train", "--socket", cl.sockets[0], "--fanouts", "10,5", "--hidden", "4", "--epochs", "1", "--eval=false",
		"--workers", "1", "--table", "small.sync", "--save").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `trained parameters in kv table "graphsage.params" (replacing the model of another size saved under that name) and checkpointed every kv table into each node's [kv] checkpoint_dir (`+ck+" on the node at "+cl.sockets[0]+")\n") {
		t.Errorf("--save of a smaller model over the stored parameters: %v, output:\n%s", err, out)
	}
}

// storedTestAccuracy is the test accuracy of the model whose parameters
// node train --save stored in kv table table (hidden 8, seed 1), scored on
// every test seed with all neighbours (no sampling left to differ) by a
// trainer of the same model.
func storedTestAccuracy(t *testing.T, ctx context.Context, cl *demoCluster, table string) float64 {
	t.Helper()
	var correct, count int
	var tr *train.Trainer
	for r, sock := range cl.sockets {
		o := client.DefaultOptions()
		o.Split, o.Fanouts, o.BatchSize, o.Epochs, o.Shuffle = "test", []int{-1, -1}, 1024, 1, false
		o.Seed, o.Rank, o.WorldSize, o.Workers = 1, r, 2, 1
		l, err := client.OpenLoader(ctx, sock, o)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if tr == nil {
			cfg := train.DefaultConfig()
			cfg.Hidden, cfg.Seed, cfg.Threads = 8, 1, 1
			cfg.FeatDim, cfg.Classes = l.Info().FeatDim, l.Info().NumClasses
			if tr, err = train.New(cfg, train.NoSync{}); err != nil {
				t.Fatal(err)
			}
			kvc, err := client.DialKV(ctx, sock)
			if err != nil {
				t.Fatal(err)
			}
			defer kvc.Close()
			n := tr.NumParams()
			ids := make([]uint64, (n+client.SyncDim-1)/client.SyncDim)
			for i := range ids {
				ids[i] = uint64(i)
			}
			got, err := kvc.Pull(ctx, table, ids, nil)
			if err != nil {
				t.Fatalf("pull the stored parameters: %v", err)
			}
			if slices.Equal(got[:n], tr.Params()) {
				t.Fatal("the stored parameters are the initial ones")
			}
			copy(tr.Params(), got[:n])
		}
		c, n, err := tr.Evaluate(ctx, &timedBatches{l: l})
		if err != nil {
			t.Fatal(err)
		}
		correct, count = correct+c, count+n
	}
	if count == 0 {
		t.Fatal("no test seeds")
	}
	return float64(correct) / float64(count)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestTrainFlagErrors: node train refuses a bad flag with exit 2 before
// it connects (the socket here does not exist). A batch size or world
// size of 0 used to go to the node as "not given" (512, 1), and the
// model's settings were checked once the loaders had started samplers.
func TestTrainFlagErrors(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--batch-size", "0"}, "--batch-size 0: want ≥ 1"},
		{[]string{"--eval-batch-size", "-1"}, "--eval-batch-size -1: want ≥ 1"},
		{[]string{"--world-size", "0"}, "--world-size 0: want 1 to 65536"},
		{[]string{"--rank", "2", "--world-size", "2"}, "--rank 2: want 0 to 1 (--world-size 2)"},
		{[]string{"--workers", "-1"}, "--workers -1: want 0 (the node's default) to 64"},
		// The node's and kv's limits, refused once the loaders were open
		// (exit 1); --world-size 100000 trained a batch first, then
		// failed with "bad synchronous step".
		{[]string{"--epochs", "9223372036854775807"}, "--epochs 9223372036854775807: want at most 1048576 (a loader's epochs)"},
		{[]string{"--batch-size", "100000000"}, "--batch-size 100000000: want at most 1048576 (a loader's batch_size)"},
		{[]string{"--eval-batch-size", "2000000000"}, "--eval-batch-size 2000000000: want at most 1048576 (a loader's batch_size)"},
		{[]string{"--workers", "1000"}, "--workers 1000: want 0 (the node's default) to 64"},
		{[]string{"--world-size", "100000", "--rank", "5"}, "--world-size 100000: want 1 to 65536 (the trainers of a kv synchronous step)"},
		{[]string{"--ring-size", "4KB"}, `--ring-size "4KB": want at least 8KiB, what a loader's one sub-ring needs to hold a sampler's error record`},
		{[]string{"--ring-size", "16KiB", "--workers", "4"}, `--ring-size "16KiB": want at least 32KiB, what the 4 sub-rings of a loader (--workers) need`},
		// Allocated once the loaders were open: the runtime's "out of
		// memory" crash, and for 2^40 a makeslice panic. A kv sync table
		// carries 16776960 values at most.
		{[]string{"--hidden", "3000000000"}, "--hidden 3000000000: a model of 2 layers that wide, even on 1 feature and 2 classes, is 21000000011 values to average each step, more than the 16776960 a kv sync table (--table) carries in one 64MiB control frame"},
		{[]string{"--hidden", "1099511627776", "--fanouts", "5,5,5"}, "--hidden 1099511627776: a model of 3 layers that wide, even on 1 feature and 2 classes, is more values than memory holds"},
		{[]string{"--hidden", "2897", "--fanouts", "5,5,5"}, "--hidden 2897: a model of 3 layers that wide, even on 1 feature and 2 classes, is 16808405 values"},
		{[]string{"--eval-fanouts", "5,x"}, `--eval-fanouts "5,x": "x" is not an integer`},
		{[]string{"--lr", "NaN"}, "lr NaN: want > 0"},
		{[]string{"--epochs", "0"}, "epochs 0: want ≥ 1"},
		{[]string{"--layers", "4"}, "layers 4: want 2 or 3"},
		// A layer per hop: this said "layers 1: want 2 or 3", naming a
		// flag that was not given, and not --fanouts.
		{[]string{"--fanouts", "-1"}, `--fanouts "-1" samples 1 hop, and the model has a layer per hop: want 2 or 3 hops`},
		{[]string{"--fanouts", "5,5,5,5"}, `--fanouts "5,5,5,5" samples 4 hops, and the model has a layer per hop: want 2 or 3 hops`},
		// A batch of fewer hops than layers does not fit the model: these
		// failed at the first batch, or at the first evaluation.
		{[]string{"--layers", "3", "--fanouts", "5,5"}, `--layers 3: --fanouts "5,5" samples 2 hops; the model needs one per layer`},
		{[]string{"--fanouts", "5,5", "--eval-fanouts", "5"}, `--eval-fanouts "5" samples 1 hop; the model (2 layers) needs one per layer`},
		{[]string{"--fanouts", "5", "--layers", "2"}, `--layers 2: --fanouts "5" samples 1 hop;`},
		// More hops than layers were sampled and sent, then not read.
		{[]string{"--fanouts", "5,5,5,5", "--layers", "2"}, `--layers 2: --fanouts "5,5,5,5" samples 4 hops, and the model reads 2 hops: give one fanout per layer`},
		{[]string{"--fanouts", "5,5", "--eval-fanouts", "-1,-1,-1"}, `--eval-fanouts "-1,-1,-1" samples 3 hops, and the model (2 layers) reads 2 hops: give one fanout per layer`},
		{[]string{"--save-best"}, "--save-best chooses the epoch --save stores: give --save too"},
		{[]string{"--save", "--save-best", "--eval=false"}, "--save-best stores the epoch of the best val accuracy, which --eval=false does not measure"},
		// The node's loaders refuse a hop of 0, once node train connected.
		{[]string{"--fanouts", "5,0"}, `--fanouts "5,0": hop 2 samples 0 neighbours: want -1 (all) or a count ≥ 1`},
		// The rule applied, ≥ 1, not node partition's ≥ 0.
		{[]string{"--fanouts", "5,-2"}, `node train: --fanouts "5,-2": hop 2 is -2: want -1 (all) or a count ≥ 1` + "\n"},
		{[]string{"--fanouts", "5,5", "--eval-fanouts", "-1,-7"}, `node train: --eval-fanouts "-1,-7": hop 2 is -7: want -1 (all) or a count ≥ 1` + "\n"},
		{[]string{"--eval-fanouts", "0,-1"}, `--eval-fanouts "0,-1": hop 1 samples 0 neighbours: want -1 (all) or a count ≥ 1`},
		// Refused by kv_create only once the loaders were open.
		{[]string{"--table", "my/job.sync"}, `--table "my/job.sync": must be 1-64 bytes of [A-Za-z0-9_.-], not starting with '.'`},
		{[]string{"--save", "--params-table", "graphsage.sync"}, `--params-table "graphsage.sync": the same as --table`},
		// Refused by open_loader, once node train had connected.
		{[]string{"--ring-size", "1x"}, `--ring-size "1x": shm: size "1x": unknown unit "x"`},
		{[]string{"--ring-size", "0"}, `--ring-size "0": want a positive size such as 256MB ("": the node's rings.size)`},
		// Trained every epoch without a word: no val accuracy, no stopping.
		{[]string{"--patience", "3", "--eval=false"}, "--patience 3: early stopping watches the val accuracy, which --eval=false turns off"},
	} {
		code, _, stderr := runNode(t, append([]string{"train", "--socket", socket}, tc.flags...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "dial") {
			t.Errorf("%v: exit %d, want 2 and %q before any dial; stderr:\n%s", tc.flags, code, tc.want, stderr)
		}
	}
}

// TestTrainModelTooWide: a --hidden that passes on the smallest graph
// but whose model, on the partition's features, is more than a kv sync
// table all-reduces is refused once a loader says the features, before
// the model is allocated, naming the flag.
func TestTrainModelTooWide(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 2000, "5,5")
	cl := testCluster(t, bin, parts)
	code, _, stderr := runNode(t, "train", "--socket", cl.sockets[0], "--world-size", "2", "--fanouts", "5,5", "--hidden", "5000", "--workers", "1")
	// 2·2000·5000 + 5000 + 2·5000·4 + 4 parameters, and 9 statistics.
	want := "node train: --hidden 5000: a model of 2 layers that wide, on the partition's 2000 features and 4 classes, is 20045013 values to average each step, more than the 16776960 a kv sync table (--table) carries"
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, want 1 and %q; stderr:\n%s", code, want, stderr)
	}
}

// TestTrainBatchTooLarge: a --hidden whose activations, for as many
// nodes as a batch reaches through the fanouts (here the whole graph of
// 2000), cannot fit the machine's memory (posed as 64 MiB) is refused as
// a usage error once the train loader says the graph's size, naming the
// flags, the estimate and the memory; a narrower model trains. The
// trainer allocated until the OOM killer ended it.
func TestTrainBatchTooLarge(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 8, "5,5")
	cl := testCluster(t, bin, parts)
	train := func(hidden string) (int, string, string) {
		var out, errb bytes.Buffer
		a := newApp(&out, &errb)
		a.memory = func() uint64 { return 64 << 20 }
		code := a.run(context.Background(), []string{"train", "--socket", cl.sockets[0], "--fanouts", "5,5", "--batch-size", "128",
			"--hidden", hidden, "--epochs", "1", "--workers", "1", "--threads", "1", "--table", "h" + hidden + ".sync"})
		return code, out.String(), errb.String()
	}
	// Training batches (of 128 seeds: the rank has about 200) reach 128,
	// 768 and 2000 nodes within 0, 1 and 2 hops, evaluation batches 1024,
	// 2000 and 2000; of each buffer the largest (train.Config.BatchBytes):
	// 2000·8 + 1024 features and labels; per layer 1/degree, output, and
	// gather or projection, 2000 + 2000·4096 + 2000·4096 and 1024 +
	// 1024·4 + 1024·4096; gradients 128·4, 2000·4096 and 128·4096 +
	// 768·4096; and 4·102413 for the model: 32 874 628 float32s.
	code, _, stderr := train("4096")
	want := "node train: --hidden 4096 with --batch-size 128 and --fanouts 5,5, --eval-batch-size 1024 and --eval-fanouts 5,5: " +
		"the trainer's buffers for its largest batches may take 125.41 MiB (a training batch may reach 2000 and an evaluation batch 2000 nodes of the graph's 2000 within 2 hops; 8 features, 4 classes), " +
		"more than the 64.00 MiB of memory and swap of this machine: lower --hidden, --batch-size, --eval-batch-size or the fanouts"
	if code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("--hidden 4096: exit %d, want 2 and %q; stderr:\n%s", code, want, stderr)
	}
	if code, out, stderr := train("64"); code != 0 || !strings.Contains(out, "best epoch 0:") {
		t.Errorf("--hidden 64: exit %d, stdout:\n%s\nstderr:\n%s\nwant it trained", code, out, stderr)
	}
}

// TestTrainRingTooSmallNamesFlags: a loader whose ring cannot hold its
// largest batch is refused by open_loader in the request's words
// ("raise ring_size … or lower batch_size"); node train adds its own
// flags, --eval-batch-size for the val and test loaders, whose batch
// size the message called batch_size too.
func TestTrainRingTooSmallNamesFlags(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 512, "5,5")
	cl := testCluster(t, bin, parts)
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--ring-size", "64KiB"}, "node train: train loader: client: open_loader: control: ring_size: "},
		{[]string{"--ring-size", "256KiB", "--batch-size", "1", "--fanouts", "2,2"}, "node train: val loader: client: open_loader: control: ring_size: "},
	} {
		flags := append([]string{"train", "--socket", cl.sockets[0], "--workers", "1", "--epochs", "1", "--table", "ring.sync"}, c.flags...)
		code, _, stderr := runNode(t, flags...)
		batch := "--batch-size"
		if strings.Contains(c.want, "val loader") {
			batch = "--eval-batch-size"
		}
		hint := "(node train: raise --ring-size, or lower " + batch + ", the fanouts or --workers)"
		if code != 1 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, hint) {
			t.Errorf("%v: exit %d, want 1, %q and %q; stderr:\n%s", c.flags, code, c.want, hint, stderr)
		}
	}
}

// TestEvalEveryHelp: --eval-every 0 means after the last epoch only, for
// node train as for node kge (node train evaluated every epoch), and both
// --help texts say so.
func TestEvalEveryHelp(t *testing.T) {
	for _, cmd := range []string{"train", "kge"} {
		code, _, stderr := runNode(t, cmd, "--help")
		if want := "after every N-th epoch and after the last (0: after the last only"; code != 0 || !strings.Contains(stderr, want) {
			t.Errorf("node %s --help: exit %d, want %q in:\n%s", cmd, code, want, stderr)
		}
	}
}

// TestCheckSave: node train --save and node kge --save refuse, before
// training, a node that says it has no kv.checkpoint_dir (kv_save failed
// only once training was over); a node that does not say (a client node,
// an earlier build) is not refused.
func TestCheckSave(t *testing.T) {
	for _, c := range []struct {
		name string
		kv   *control.KVStats
		want string // "" accepted
	}{
		{"checkpoint_dir set", &control.KVStats{CheckpointDir: "/var/lib/graphnode/kv"}, ""},
		{"not said", nil, ""},
		{"no checkpoint_dir", &control.KVStats{}, "--save: the node at n.sock has no kv.checkpoint_dir, so kv_save would fail once training is over: set [kv] checkpoint_dir"},
	} {
		err := checkSave(&control.Stats{KV: c.kv}, "n.sock")
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestSaveFailed: node train --save and node kge --save whose kv_save
// fails once training is over say that the nodes keep the trained
// tables and how to checkpoint them, and keep kv_save's error: it read
// as if the job's training were lost.
func TestSaveFailed(t *testing.T) {
	refusal := &control.Error{Key: "", Msg: `nothing saved (every node keeps its checkpoint): the nodes hold different tables, …: run kv_create for table "w" again, with the spec it was created with (…), or kv_drop it`}
	err := saveFailed(refusal, "n.sock")
	var ce *control.Error
	want := "--save: " + refusal.Error() + " (the nodes keep the trained kv tables while they run: once the cause is fixed, node kv save --socket n.sock checkpoints them)"
	if !errors.As(err, &ce) || ce != refusal || err.Error() != want {
		t.Errorf("saveFailed: %v\nwant %s, wrapping kv_save's error", err, want)
	}
}

// TestAgreeMissingTrainer: a trainer whose job's other rank never joins
// the comparison of settings (it stopped at start, alone: another
// --hidden made its sync table another size) fails at the node's sync
// timeout saying that the missing trainer stopped or never started,
// where it said only which trainer it waited for.
func TestAgreeMissingTrainer(t *testing.T) {
	bin := nodeBinary(t)
	_, _, _, sock, _ := startRun(t, bin, "[kv]\nsync_timeout = \"1s\"\n")
	ctx := t.Context()
	k, err := client.DialKV(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	s, err := client.NewSync(ctx, k, "agree.sync", 40, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	err = agreeJob(ctx, s, []client.Setting{{Name: "--hidden", Value: "16"}}, nil)
	for _, want := range []string{"waiting for trainers [1] of world 2", "stopped before it, and its own output says why, was never started"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("agreeJob with rank 1 missing: %v, want %q", err, want)
		}
	}
}
