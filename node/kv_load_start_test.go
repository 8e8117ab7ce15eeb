package node_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKVLoadAtStartRefusesMixedSaves: a table of [[kv.tables]] is loaded
// at start (kv.load), before any trainer's kv_create, so the check that
// kv_create makes never ran for it, and node 1's exit save beside node
// 0's part of the last kv_save was served mixed. The nodes now compare
// what they loaded once their peers answer, before they say ready, and
// leave the table out on a mismatch; a trainer's kv_create of it then
// gets the error naming both files.
func TestKVLoadAtStartRefusesMixedSaves(t *testing.T) {
	parts := clusterParts(t, 2)
	dirs := []string{t.TempDir(), t.TempDir()}
	c := startClusterWith(t, parts, 2, "5s", func(p int) string {
		// Node 0 writes no exit save: its part of the kv_save stays the
		// newest it holds, while node 1's exit save is newer than its.
		return fmt.Sprintf("[kv]\ncheckpoint_dir = %q\nload = false\nsave_on_exit = %v\n"+
			"[[kv.tables]]\nname = \"emb\"\nrows = \"nodes\"\ndim = 4\ninit = \"uniform\"\ninit_scale = 0.5\ninit_seed = 9\noptimizer = \"adagrad\"\nlr = 0.1\nmode = \"async\"\n",
			dirs[p], p == 1)
	})
	ctx := context.Background()
	k1 := dialKV(t, c.sockets[1])
	ids := []uint64{0, 1, 2999, 1500}
	if err := k1.Push(ctx, "emb", ids, grad(0, 0, 16)); err != nil {
		t.Fatal(err)
	}
	if _, err := k1.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if err := k1.Push(ctx, "emb", ids, grad(1, 1, 16)); err != nil {
		t.Fatal(err)
	}
	k1.Done(ctx)
	k1.Close()
	for p := range 2 {
		c.nodes[p].stop()
	}
	if !c.nodes[1].logHas("kv exit save written") || c.nodes[0].logHas("kv exit save written") {
		t.Fatalf("want an exit save on node 1 alone; logs:\n%s\n%s", c.nodes[0].log, c.nodes[1].log)
	}
	for p := range 2 {
		b, err := os.ReadFile(c.configs[p])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(c.configs[p], bytes.Replace(b, []byte("load = false"), []byte("load = true"), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		c.nodes[p] = startDaemon(t, c.bin, c.configs[p], c.sockets[p], c.rings[p])
	}
	for p := range 2 {
		c.waitReady(p)
	}
	for p := range 2 {
		k := dialKV(t, c.sockets[p])
		if _, err := k.Pull(ctx, "emb", ids, nil); err == nil || !strings.Contains(err.Error(), "unknown table") {
			t.Errorf("node %d served the mixed table: pull %v", p, err)
		}
		if !c.nodes[p].logHas("different saves", "emb") {
			t.Errorf("node %d did not log the mix:\n%s", p, c.nodes[p].log)
		}
		k.Close()
	}
	k0 := dialKV(t, c.sockets[0])
	defer k0.Close()
	_, err := k0.Create(ctx, kvTables()[1])
	if err == nil || !strings.Contains(err.Error(), "emb.part0.kvt") || !strings.Contains(err.Error(), "emb.part1.exit.kvt") {
		t.Errorf("kv_create of the mixed table: %v, want the error naming both files", err)
	}
}

// TestKVRestartAfterKillRefusesLostTraining: a cluster stopped after a
// kv_save (SIGTERM: every node's exit save) is started with kv.load and
// trains on; node 1 is then killed (SIGKILL: no exit save) and
// restarted. It loads its exit save, the one node 0 loaded too, so the
// check of what the nodes loaded passes, while node 0 holds rows
// trained since: served together they were rows of two points of
// training, which kge then evaluated without a word. Node 1 now finds
// the marker of its lost training, and once node 0 answers, the table is
// dropped on every node (a node 0 serving it alone would save it alone);
// a trainer's kv_create then loads the exit saves on both nodes, one
// point of training.
func TestKVRestartAfterKillRefusesLostTraining(t *testing.T) {
	parts := clusterParts(t, 2)
	dirs := []string{t.TempDir(), t.TempDir()}
	c := startClusterWith(t, parts, 2, "5s", func(p int) string {
		return fmt.Sprintf("[kv]\ncheckpoint_dir = %q\nload = false\n"+
			"[[kv.tables]]\nname = \"emb\"\nrows = \"nodes\"\ndim = 4\ninit = \"uniform\"\ninit_scale = 0.5\ninit_seed = 9\noptimizer = \"adagrad\"\nlr = 0.1\nmode = \"async\"\n",
			dirs[p])
	})
	ctx := context.Background()
	ids := []uint64{0, 1, 2999, 1500}
	k1 := dialKV(t, c.sockets[1])
	if err := k1.Push(ctx, "emb", ids, grad(0, 0, 16)); err != nil {
		t.Fatal(err)
	}
	if _, err := k1.Save(ctx); err != nil {
		t.Fatal(err)
	}
	k1.Done(ctx)
	k1.Close()
	for p := range 2 {
		c.nodes[p].stop()
		b, err := os.ReadFile(c.configs[p])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(c.configs[p], bytes.Replace(b, []byte("load = false"), []byte("load = true"), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p := range 2 {
		c.nodes[p] = startDaemon(t, c.bin, c.configs[p], c.sockets[p], c.rings[p])
	}
	for p := range 2 {
		c.waitReady(p)
	}
	k1 = dialKV(t, c.sockets[1])
	if err := k1.Push(ctx, "emb", ids, grad(1, 1, 16)); err != nil {
		t.Fatal(err)
	}
	k1.Close()
	for p := range 2 {
		marker := filepath.Join(dirs[p], fmt.Sprintf("emb.part%d.trained", p))
		eventually(t, 5*time.Second, "marker "+marker+" says trained", func() bool {
			b, err := os.ReadFile(marker)
			return err == nil && strings.HasSuffix(string(b), "\ntrained\n")
		})
	}
	c.nodes[1].cmd.Process.Signal(syscall.SIGKILL)
	<-c.nodes[1].done
	c.restart(1)
	k := dialKV(t, c.sockets[1])
	defer k.Close()
	if _, err := k.Pull(ctx, "emb", ids, nil); err == nil || !strings.Contains(err.Error(), "unknown table") {
		t.Errorf("node 1 served its shard of the save beside node 0's trained rows: pull %v", err)
	}
	if !c.nodes[1].logHas("dropped on every node", "lost the rows trained since", "trained its rows since") {
		t.Errorf("node 1 did not log the lost training:\n%s", c.nodes[1].log)
	}
	k0 := dialKV(t, c.sockets[0])
	defer k0.Close()
	if _, err := k0.Pull(ctx, "emb", ids[:2], nil); err == nil || !strings.Contains(err.Error(), "unknown table") {
		t.Errorf("node 0 still serves its shard alone: pull %v", err)
	}
	if _, err := k0.Create(ctx, kvTables()[1]); err != nil {
		t.Errorf("kv_create once every node is back at its exit save: %v", err)
	}
	if _, err := k.Pull(ctx, "emb", ids, nil); err != nil {
		t.Errorf("pull after kv_create: %v", err)
	}
}
