package node_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"graphnode/kv"
	"graphnode/node/client"
	"graphnode/node/control"
	"graphnode/partition"
)

// kvTables are the tables of the kv cluster tests: a dense synchronous
// table with Adam and an entity table ("nodes" rows, sharded by the
// partition book) with DGL-KE's Adagrad.
func kvTables() []control.TableSpec {
	return []control.TableSpec{
		{Name: "dense", Rows: control.Rows{N: 11}, Dim: 3, Init: "uniform", InitScale: 0.1, InitSeed: 5, Optimizer: "adam", LR: 0.01, Mode: "sync"},
		{Name: "emb", Rows: control.Rows{Nodes: true}, Dim: 4, Init: "uniform", InitScale: 0.5, InitSeed: 9, Optimizer: "adagrad", LR: 0.1, Mode: "async"},
	}
}

// refStore is one in-process store holding every row of the tables: what
// the cluster's shards together must equal.
func refStore(t *testing.T, nodes uint64) *kv.Store {
	t.Helper()
	specs := []kv.Spec{
		{Name: "dense", Rows: 11, Dim: 3, Init: kv.Init{Kind: kv.InitUniform, Scale: 0.1, Seed: 5},
			Opt: kv.Adam(0.01, 0.9, 0.999, 1e-8), Mode: kv.Sync, Bounds: kv.EvenBounds(11, 1)},
		{Name: "emb", Rows: nodes, Dim: 4, Init: kv.Init{Kind: kv.InitUniform, Scale: 0.5, Seed: 9},
			Opt: kv.Adagrad(0.1, 1e-10), Mode: kv.Async, Bounds: kv.EvenBounds(nodes, 1)},
	}
	s, err := kv.New(kv.Config{Part: 0, Tables: specs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dialKV(t *testing.T, socket string) *client.KV {
	t.Helper()
	k, err := client.DialKV(context.Background(), socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// grad is trainer k's deterministic gradient of n values at step s.
func grad(k, s, n int) []float32 {
	g := make([]float32, n)
	for i := range g {
		g[i] = float32((k+1)*(i%7)-3*s) / 16
	}
	return g
}

// TestKVCluster: trainers on different nodes pull, push and step through
// their own nodes and see exactly the values of one in-process store.
func TestKVCluster(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("nodes=%d", n), func(t *testing.T) {
			parts := clusterParts(t, n)
			c := startCluster(t, parts, n, "5s")
			m, err := partition.OpenDir(parts)
			if err != nil {
				t.Fatal(err)
			}
			book, _ := m.Book()
			ref := refStore(t, book.NumNodes())
			ctx := context.Background()
			kvs := make([]*client.KV, n)
			for p := range n {
				kvs[p] = dialKV(t, c.sockets[p])
			}
			// Every trainer declares the tables; the second declaration is a
			// no-op, a different spec is refused naming the field.
			for p := range n {
				for _, ts := range kvTables() {
					info, err := kvs[p].Create(ctx, ts)
					if err != nil {
						t.Fatalf("node %d: create %s: %v", p, ts.Name, err)
					}
					if info.Created != (p == 0) || len(info.Bounds) != n+1 {
						t.Fatalf("node %d: create %s: created %v, bounds %v", p, ts.Name, info.Created, info.Bounds)
					}
				}
			}
			bad := kvTables()[0]
			bad.Dim = 4
			// kv.ErrSpec crosses the control socket (kv_code): a trainer
			// tells a clash from other failures without reading the text.
			if _, err := kvs[n-1].Create(ctx, bad); !errors.Is(err, kv.ErrSpec) || !strings.Contains(err.Error(), "dim 4 differs from the existing table's 3") {
				t.Fatalf("create with another dim: %v, want kv.ErrSpec naming dim", err)
			}

			// Async pushes, in a fixed order, of ids spread over every part
			// (with a duplicate).
			total := book.NumNodes()
			ids := []uint64{0, total - 1, total / 2, 7, total / 3, 7}
			g := make([]float32, len(ids)*4)
			for round := range 2 {
				for p := range n {
					copy(g, grad(p, round, len(g)))
					if err := kvs[p].Push(ctx, "emb", ids, g); err != nil {
						t.Fatal(err)
					}
					if err := ref.Push("emb", ids, g); err != nil {
						t.Fatal(err)
					}
				}
			}
			want, _ := ref.Pull("emb", ids, nil)
			for p := range n {
				got, err := kvs[p].Pull(ctx, "emb", ids, nil)
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("node %d: emb rows %v, %v; want %v", p, got, err, want)
				}
			}

			// Synchronous steps: every trainer pushes concurrently.
			dense := make([]uint64, 11)
			for i := range dense {
				dense[i] = uint64(i)
			}
			for step := range 3 {
				var wg sync.WaitGroup
				errs := make([]error, 2*n)
				for p := range n {
					wg.Go(func() {
						errs[p] = kvs[p].PushSync(ctx, "dense", uint64(step), p, n, grad(p, step, 33))
					})
					wg.Go(func() {
						errs[n+p] = ref.PushSync(ctx, "dense", uint64(step), p, n, grad(p, step, 33))
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}
				want, _ := ref.Pull("dense", dense, nil)
				for p := range n {
					got, v, err := kvs[p].PullVersion(ctx, "dense", uint64(step+1), dense, nil)
					if err != nil || v != uint64(step+1) || !slices.Equal(got, want) {
						t.Fatalf("node %d after step %d: version %d, %v; rows %v want %v", p, step, v, err, got, want)
					}
				}
			}
			for p := range n {
				if err := kvs[p].Done(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestKVTrainerLeaves: when a trainer's connection drops in the middle
// of a synchronous step, the step fails at once for the others with an
// error naming it, well before the sync timeout.
func TestKVTrainerLeaves(t *testing.T) {
	parts := clusterParts(t, 2)
	c := startClusterWith(t, parts, 2, "5s", func(int) string { return "[kv]\nsync_timeout = \"60s\"\nmax_memory = \"1MiB\"\n" })
	ctx := context.Background()
	k0, k1 := dialKV(t, c.sockets[0]), dialKV(t, c.sockets[1])
	// A table past kv.max_memory fails that trainer's kv_create, naming
	// the limit, and nothing else: the node serves on.
	big := control.TableSpec{Name: "big", Rows: control.Rows{N: 1 << 20}, Dim: 64, Init: "zeros", Optimizer: "adam", LR: 0.01, Mode: "async"}
	var ce *control.Error
	if _, err := k0.Create(ctx, big); !errors.As(err, &ce) || ce.Key != "table" ||
		!strings.Contains(ce.Msg, `kv: table "big": part 0: 524288 rows × 64 (adam) need 386.0 MiB, with the 0 B of the tables held more than this node's limit of 1.0 MiB`) {
		t.Fatalf("kv_create past max_memory: %v", err)
	}
	ts := kvTables()[0]
	for _, k := range []*client.KV{k0, k1} {
		if _, err := k.Create(ctx, ts); err != nil {
			t.Fatal(err)
		}
	}
	// Step 0 completes with both.
	var wg sync.WaitGroup
	var e0, e1 error
	wg.Go(func() { e0 = k0.PushSync(ctx, "dense", 0, 0, 2, grad(0, 0, 33)) })
	wg.Go(func() { e1 = k1.PushSync(ctx, "dense", 0, 1, 2, grad(1, 0, 33)) })
	wg.Wait()
	if e0 != nil || e1 != nil {
		t.Fatal(e0, e1)
	}
	// Step 1: trainer 0 pushes and waits; trainer 1 hangs up instead.
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- k0.PushSync(ctx, "dense", 1, 0, 2, grad(0, 1, 33)) }()
	time.Sleep(200 * time.Millisecond)
	k1.Close()
	select {
	case err := <-done:
		if !errors.Is(err, kv.ErrStepFailed) || !strings.Contains(err.Error(), "trainer 1") {
			t.Fatalf("step 1: %v, want ErrStepFailed naming trainer 1", err)
		}
		if d := time.Since(began); d > 10*time.Second {
			t.Fatalf("step failed after %v: the sync timeout, not the leave", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("step 1 still waiting 30 s after trainer 1 hung up")
	}
}

// TestKVTrainerLeavesOnlyItsTable: two synchronous jobs share the
// cluster, each with its own table and its own ranks 0 and 1. When job
// A's trainer 0 hangs up without kv_done, it leaves job A's table only:
// job B's step, still waiting for its own trainer 0, completes when that
// trainer pushes. Leaving every table failed job B's step at once,
// naming a trainer 0 that never left it.
func TestKVTrainerLeavesOnlyItsTable(t *testing.T) {
	parts := clusterParts(t, 2)
	c := startClusterWith(t, parts, 2, "5s", func(int) string { return "[kv]\nsync_timeout = \"60s\"\n" })
	ctx := context.Background()
	ka, ka1 := dialKV(t, c.sockets[0]), dialKV(t, c.sockets[1])
	kb0, kb1 := dialKV(t, c.sockets[0]), dialKV(t, c.sockets[1])
	ta, tb := kvTables()[0], kvTables()[0]
	ta.Name, tb.Name = "job-a", "job-b"
	for _, k := range []*client.KV{ka, ka1, kb0, kb1} {
		for _, ts := range []control.TableSpec{ta, tb} {
			if _, err := k.Create(ctx, ts); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Job A (world 2): its trainers step once, so their connections
	// speak for trainers 0 and 1 of job-a.
	var wg sync.WaitGroup
	var ea0, ea1 error
	wg.Go(func() { ea0 = ka.PushSync(ctx, "job-a", 0, 0, 2, grad(0, 0, 33)) })
	wg.Go(func() { ea1 = ka1.PushSync(ctx, "job-a", 0, 1, 2, grad(1, 0, 33)) })
	wg.Wait()
	if ea0 != nil || ea1 != nil {
		t.Fatal(ea0, ea1)
	}
	// Job B (world 2): trainer 1 pushes step 0 through the other node and
	// waits for trainer 0.
	done := make(chan error, 1)
	go func() { done <- kb1.PushSync(ctx, "job-b", 0, 1, 2, grad(1, 0, 33)) }()
	time.Sleep(200 * time.Millisecond)
	ka.Close() // job A's trainer 0 crashes
	select {
	case err := <-done:
		t.Fatalf("job B's step ended when job A's trainer left: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := kb0.PushSync(ctx, "job-b", 0, 0, 2, grad(0, 0, 33)); err != nil {
		t.Fatalf("job B, trainer 0: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("job B, trainer 1: %v", err)
	}
	// Job A's table did see its trainer leave: its trainer 1's next step
	// fails at once.
	err := ka1.PushSync(ctx, "job-a", 1, 1, 2, grad(1, 1, 33))
	if !errors.Is(err, kv.ErrStepFailed) || !strings.Contains(err.Error(), "trainer 0 left") {
		t.Fatalf("job A after its trainer 0 left: %v, want ErrStepFailed naming trainer 0", err)
	}
}

// TestKVRerunAfterInterrupt: rank 0 of a job is interrupted (its
// connection drops) while rank 1 waits in a step; rank 1 fails, naming
// it, and says kv_done on its way out (or its departure never reached the
// shards, as when its node died). A rerun whose rank 1 pushes first
// trains: before, its first step failed at once ("trainer 0 left;
// missing trainers [0]") and its rank 0 waited out the sync timeout.
func TestKVRerunAfterInterrupt(t *testing.T) {
	parts := clusterParts(t, 2)
	c := startClusterWith(t, parts, 2, "5s", func(int) string { return "[kv]\nsync_timeout = \"60s\"\n" })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts := kvTables()[0]
	job := func() [2]*client.KV {
		ks := [2]*client.KV{dialKV(t, c.sockets[0]), dialKV(t, c.sockets[1])}
		for _, k := range ks {
			if _, err := k.Create(ctx, ts); err != nil {
				t.Fatal(err)
			}
		}
		return ks
	}
	step := func(ks [2]*client.KV, s int) {
		t.Helper()
		var errs [2]error
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Go(func() { errs[r] = ks[r].PushSync(ctx, "dense", uint64(s), r, 2, grad(r, s, 33)) })
			time.Sleep(100 * time.Millisecond) // rank 1 pushes last
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("step %d: %v, %v", s, errs[0], errs[1])
		}
	}
	a := job()
	step(a, 0)
	done := make(chan error, 1)
	go func() { done <- a[1].PushSync(ctx, "dense", 1, 1, 2, grad(1, 1, 33)) }()
	time.Sleep(200 * time.Millisecond)
	a[0].Close()
	if err := <-done; !errors.Is(err, kv.ErrStepFailed) || !strings.Contains(err.Error(), "trainer 0 left") {
		t.Fatalf("job A, rank 1: %v, want ErrStepFailed naming trainer 0", err)
	}
	if err := a[1].Done(ctx); err != nil {
		t.Fatal(err)
	}
	a[1].Close()

	b := job()
	began := time.Now()
	go func() { done <- b[1].PushSync(ctx, "dense", 1, 1, 2, grad(1, 1, 33)) }()
	time.Sleep(200 * time.Millisecond)
	if err := b[0].PushSync(ctx, "dense", 1, 0, 2, grad(0, 1, 33)); err != nil {
		t.Fatalf("rerun, rank 0: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("rerun, rank 1 (pushed first): %v", err)
	}
	step(b, 2)
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the rerun's steps took %v", d)
	}
}

// TestKVDuplicateRank: two trainers started with --rank 0 (world 2), on
// different nodes. Both are told that two trainers push as rank 0;
// before, one read "trainer 0 pushed twice" and the other waited for the
// sync timeout, or read "trainer 0 left" once the first went.
func TestKVDuplicateRank(t *testing.T) {
	parts := clusterParts(t, 2)
	c := startClusterWith(t, parts, 2, "5s", func(int) string { return "[kv]\nsync_timeout = \"60s\"\n" })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ka, kb := dialKV(t, c.sockets[0]), dialKV(t, c.sockets[1])
	for _, k := range []*client.KV{ka, kb} {
		if _, err := k.Create(ctx, kvTables()[0]); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- ka.PushSync(ctx, "dense", 0, 0, 2, grad(0, 0, 33)) }()
	time.Sleep(200 * time.Millisecond)
	errb := kb.PushSync(ctx, "dense", 0, 0, 2, grad(0, 0, 33))
	for i, err := range []error{<-done, errb} {
		if !errors.Is(err, kv.ErrStepFailed) || !strings.Contains(err.Error(), "two trainers push as rank 0 (sessions ") ||
			!strings.Contains(err.Error(), "give each trainer its own --rank") {
			t.Errorf("trainer %d: %v, want two trainers named as rank 0", i, err)
		}
	}
}

// TestKVSaveFromEveryRank: every rank of a job asks its own node for
// kv_save as it ends (node train --save on every host), all at once.
// Each node coordinating its own save held its shards while asking the
// other to prepare, and both failed after savePrepareWait; the saves now
// go through one coordinator, one after the other, and all succeed.
func TestKVSaveFromEveryRank(t *testing.T) {
	parts := clusterParts(t, 2)
	dirs := []string{t.TempDir(), t.TempDir()}
	c := startClusterWith(t, parts, 2, "5s", func(p int) string {
		return fmt.Sprintf("[kv]\ncheckpoint_dir = %q\n", dirs[p])
	})
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second) // less than the 30 s a peer waits to prepare
	defer cancel()
	ks := []*client.KV{dialKV(t, c.sockets[0]), dialKV(t, c.sockets[1])}
	for _, ts := range kvTables() {
		if _, err := ks[0].Create(ctx, ts); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		errs := make([]error, len(ks))
		infos := make([]*control.SaveInfo, len(ks))
		var wg sync.WaitGroup
		for i, k := range ks {
			wg.Go(func() { infos[i], errs[i] = k.Save(ctx) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: save asked of node %d: %v", round, i, err)
			}
			if infos[i].Dir != dirs[i] || !slices.Equal(infos[i].Tables, []string{"dense", "emb"}) {
				t.Fatalf("round %d: save asked of node %d: %+v, want dir %s and both tables", round, i, infos[i], dirs[i])
			}
		}
	}
	for p, d := range dirs {
		if entries, err := os.ReadDir(d); err != nil || len(entries) == 0 {
			t.Fatalf("node %d wrote no checkpoint into %s: %v", p, d, err)
		}
	}
}

// TestKVCheckpoint: kv_save writes every shard on every node; SIGTERM
// checkpoints too; restarted nodes with kv.load resume the tables with
// the same rows and version.
func TestKVCheckpoint(t *testing.T) {
	parts := clusterParts(t, 2)
	dirs := []string{t.TempDir(), t.TempDir()}
	c := startClusterWith(t, parts, 2, "5s", func(p int) string {
		return fmt.Sprintf("[kv]\ncheckpoint_dir = %q\nload = true\n", dirs[p])
	})
	ctx := context.Background()
	for p, d := range dirs {
		if st, err := client.Stats(ctx, c.sockets[p]); err != nil || st.KV == nil || st.KV.CheckpointDir != d {
			t.Fatalf("node %d stats: kv %+v, %v; want checkpoint_dir %s", p, st.KV, err, d)
		}
	}
	k0, k1 := dialKV(t, c.sockets[0]), dialKV(t, c.sockets[1])
	for _, ts := range kvTables() {
		for _, k := range []*client.KV{k0, k1} {
			if _, err := k.Create(ctx, ts); err != nil {
				t.Fatal(err)
			}
		}
	}
	ids := []uint64{0, 1, 2999, 1500}
	if err := k0.Push(ctx, "emb", ids, grad(0, 0, 16)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { k0.PushSync(ctx, "dense", 0, 0, 2, grad(0, 0, 33)) })
	wg.Go(func() { k1.PushSync(ctx, "dense", 0, 1, 2, grad(1, 0, 33)) })
	wg.Wait()
	info, err := k1.Save(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.Tables, []string{"dense", "emb"}) {
		t.Fatalf("saved %v", info.Tables)
	}
	for p, d := range dirs {
		for _, name := range []string{"dense", "emb"} {
			if _, err := os.Stat(filepath.Join(d, kv.FileName(name, p))); err != nil {
				t.Fatalf("kv_save: %v", err)
			}
		}
	}
	// A push after the save: only the SIGTERM checkpoint has it.
	if err := k1.Push(ctx, "emb", ids, grad(1, 1, 16)); err != nil {
		t.Fatal(err)
	}
	emb, _ := k0.Pull(ctx, "emb", ids, nil)
	dense, _ := k0.Pull(ctx, "dense", []uint64{0, 5, 10}, nil)
	k0.Done(ctx)
	k1.Done(ctx)
	k0.Close()
	k1.Close()
	for p := range 2 {
		c.nodes[p].stop()
		if !c.nodes[p].logHas("kv checkpoint written") {
			t.Fatalf("node %d: no checkpoint at SIGTERM:\n%s", p, c.nodes[p].log)
		}
	}
	// A save that stopped before its journal was committed left a
	// temporary file: the restarted node removes it and says so.
	stale := filepath.Join(dirs[0], ".emb.part0.kvt.tmp-77")
	if err := os.WriteFile(stale, []byte("half a table"), 0o644); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		c.nodes[p] = startDaemon(t, c.bin, c.configs[p], c.sockets[p], c.rings[p])
	}
	for p := range 2 {
		c.waitReady(p)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) || !c.nodes[0].logHas(".emb.part0.kvt.tmp-77") {
		t.Fatalf("restarted node 0 left %s (%v) or did not log it:\n%s", stale, err, c.nodes[0].log)
	}
	k0 = dialKV(t, c.sockets[0])
	k1 = dialKV(t, c.sockets[1])
	for _, ts := range kvTables() {
		if _, err := k1.Create(ctx, ts); err != nil {
			t.Fatal(err)
		}
	}
	gotEmb, _ := k0.Pull(ctx, "emb", ids, nil)
	gotDense, v, err := k0.PullVersion(ctx, "dense", 0, []uint64{0, 5, 10}, nil)
	if err != nil || v != 1 || !slices.Equal(gotEmb, emb) || !slices.Equal(gotDense, dense) {
		t.Fatalf("after restart: version %d (%v), emb %v want %v, dense %v want %v", v, err, gotEmb, emb, gotDense, dense)
	}
	// A checkpoint that cannot be written at shutdown (here the directory
	// has become a file) is the exit status, not only a log line.
	k0.Close()
	k1.Close()
	if err := os.RemoveAll(dirs[1]); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dirs[1], nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.nodes[1].stop()
	var exit *exec.ExitError
	if !errors.As(c.nodes[1].err, &exit) || exit.ExitCode() != 1 || !c.nodes[1].logHas("node run: kv checkpoint at shutdown: kv: save") {
		t.Fatalf("node 1 with an unwritable checkpoint_dir exited with %v:\n%s", c.nodes[1].err, c.nodes[1].log)
	}
}

// TestKVStopWithoutTables: `node run` with a checkpoint_dir and no kv
// table, stopped, says that its exit save had nothing to save, and no
// more: it logged "kv exit save written" after save "legacy" and "kv
// checkpoint written" with tables [].
func TestKVStopWithoutTables(t *testing.T) {
	d, ckpt := stoppedWithCheckpoints(t, "")
	if d.err != nil || !d.logHas(`"msg":"kv exit save: nothing to save, this node holds no kv table"`, `"dir":"`+ckpt+`"`) ||
		d.logHas(`"msg":"kv exit save written`) || d.logHas(`"msg":"kv checkpoint written"`) {
		t.Errorf("node run without kv tables stopped with %v, logging:\n%s\nwant only that its exit save had nothing to save", d.err, d.log)
	}
	if ents, err := os.ReadDir(ckpt); err != nil || len(ents) != 0 {
		t.Errorf("checkpoint_dir after the stop: %v, %v; want it empty", ents, err)
	}
}

// TestKVStopBeforeAnySave: a node with a table that no kv_save has
// written says so of its exit save, not that it came after save
// "legacy" (which is a save of a build before save ids).
func TestKVStopBeforeAnySave(t *testing.T) {
	d, _ := stoppedWithCheckpoints(t, "[[kv.tables]]\nname = \"w\"\nrows = 10\ndim = 4\noptimizer = \"sgd\"\nlr = 0.1\nmode = \"async\"\n")
	if d.err != nil || !d.logHas(`"msg":"kv exit save written`, `"after":"none (no kv_save yet, or one of a build before save ids)"`, `"tables":1`) {
		t.Errorf("node run with a table never saved stopped with %v, logging:\n%s\nwant its exit save written after no kv_save", d.err, d.log)
	}
}

// stoppedWithCheckpoints runs `node run` with a checkpoint_dir (ckpt, a
// new directory) and the TOML of tables after its [kv] section, and
// stops it.
func stoppedWithCheckpoints(t *testing.T, tables string) (d *daemon, ckpt string) {
	t.Helper()
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	ckpt = t.TempDir()
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(f, "[kv]\ncheckpoint_dir = %q\n%s", ckpt, tables); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, bin, cfg, socket, rings)
	d.stop()
	return d, ckpt
}

// TestKVDrop: kv_drop removes a table from every node, after which it may
// be created again with another spec; a kv_create that a peer refuses
// leaves no table behind on the node that created it for that request.
func TestKVDrop(t *testing.T) {
	parts := clusterParts(t, 2)
	// Node 1 declares "conf" (dim 4) in its node.toml; node 0 does not.
	c := startClusterWith(t, parts, 2, "5s", func(p int) string {
		if p == 1 {
			return "[[kv.tables]]\nname = \"conf\"\nrows = 10\ndim = 4\noptimizer = \"sgd\"\nlr = 0.1\nmode = \"async\"\n" +
				"[[kv.tables]]\nname = \"only1\"\nrows = 10\ndim = 4\noptimizer = \"sgd\"\nlr = 0.1\nmode = \"async\"\n"
		}
		return ""
	})
	ctx := context.Background()
	k0, k1 := dialKV(t, c.sockets[0]), dialKV(t, c.sockets[1])
	emb := kvTables()[1]
	if _, err := k0.Create(ctx, emb); err != nil {
		t.Fatal(err)
	}
	ids := []uint64{0, 1, 2, 3}
	if err := k0.Push(ctx, "emb", ids, make([]float32, 16)); err != nil {
		t.Fatal(err)
	}
	info, err := k1.Drop(ctx, "emb")
	if err != nil || !info.Dropped || info.Name != "emb" {
		t.Fatalf("drop emb through node 1: %+v, %v", info, err)
	}
	for p, k := range []*client.KV{k0, k1} {
		if _, err := k.Pull(ctx, "emb", ids, nil); !errors.Is(err, kv.ErrUnknownTable) {
			t.Errorf("node %d: pull after the drop: %v, want an unknown table", p, err)
		}
	}
	if info, err := k1.Drop(ctx, "emb"); err != nil || info.Dropped || info.Any() {
		t.Errorf("second drop: %+v, %v; want dropped false, no error", info, err)
	}
	// A table only node 1 holds, dropped through node 0: the answer
	// says node 1 held it, not that no node did.
	if info, err := k0.Drop(ctx, "only1"); err != nil || info.Dropped || !slices.Equal(info.DroppedParts, []int{1}) || len(info.UnknownParts) > 0 {
		t.Errorf("drop only1 (node 1's) through node 0: %+v, %v; want dropped false, dropped_parts [1]", info, err)
	}
	if _, err := k1.Pull(ctx, "only1", ids, nil); !errors.Is(err, kv.ErrUnknownTable) {
		t.Errorf("node 1: pull of only1 after the drop: %v, want an unknown table", err)
	}
	if info, err := k0.Drop(ctx, "only1"); err != nil || info.Any() || len(info.UnknownParts) > 0 {
		t.Errorf("second drop of only1: %+v, %v; want no node", info, err)
	}
	wider := emb
	wider.Dim = 8
	if ti, err := k0.Create(ctx, wider); err != nil || !ti.Created || ti.Dim != 8 {
		t.Fatalf("re-create emb with dim 8: %+v, %v", ti, err)
	}
	if rows, err := k1.Pull(ctx, "emb", ids, nil); err != nil || len(rows) != 32 {
		t.Fatalf("pull of the new emb through node 1: %d values, %v", len(rows), err)
	}

	// Node 0 creates "conf" with dim 8; node 1 refuses (its dim is 4): the
	// error names the part and the field, and node 0 keeps no half-made
	// table, so the spec node 1 has is then accepted everywhere.
	conf := control.TableSpec{Name: "conf", Rows: control.Rows{N: 10}, Dim: 8, Optimizer: "sgd", LR: 0.1, Mode: "async"}
	var ce *control.Error
	if _, err := k0.Create(ctx, conf); !errors.As(err, &ce) || ce.Key != "table" || !strings.Contains(ce.Msg, "part 1") ||
		!strings.Contains(ce.Msg, "dim 8 differs from the existing table's 4") || !strings.Contains(ce.Msg, "dropped again") || !errors.Is(err, kv.ErrSpec) {
		t.Fatalf("create conf dim 8 against node 1's dim 4: %v", err)
	}
	conf.Dim = 4
	if ti, err := k0.Create(ctx, conf); err != nil || !ti.Created {
		t.Fatalf("create conf with node 1's spec after the refusal: %+v, %v", ti, err)
	}
}
