package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"graphnode/csr"
	"graphnode/node"
	"graphnode/node/client"
	"graphnode/partition"
)

// copyParts copies the fixture's parts/ directory, so that a test may
// change its files.
func copyParts(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "parts")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// advice ends every report of a part file changed under the node.
const advice = ": file changed while mapped); partition files are replaced with the node stopped, " +
	"or by writing a new file and renaming it over the old (restart the node to serve the new one)"

// changedText is how the node reports its part file changed under it.
func changedText(part, why string) string {
	return fmt.Sprintf("node: partition file changed under the running node (csr: %s: %s%s", part, why, advice)
}

// changeLines counts the node's log lines that report the change.
func changeLines(d *daemon) int {
	n := 0
	for _, line := range strings.Split(d.log.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) && strings.Contains(line, `"msg":"partition file changed under the running node`) {
			n++
		}
	}
	return n
}

// TestPartFileTruncatedUnderNode: a part file truncated under a running
// node (as cp or scp over it do first) no longer kills the node with
// SIGBUS. A node-data request, a running loader's sampler and a new
// loader each get an error that names the file and says what to do; the
// node logs the change once, still answers stats, and stops cleanly.
func TestPartFileTruncatedUnderNode(t *testing.T) {
	bin, fixtureParts := setup(t)
	parts := copyParts(t, fixtureParts)
	part := node.PartPath(parts, 0)
	rows, labels := partRows(t, parts)
	cfg, socket, rings := newConfig(t, parts, "")
	d := startDaemon(t, bin, cfg, socket, rings)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := []uint64{0, 7, 2999}
	checkData(t, ctx, socket, ids, rows, labels)
	o := baseOptions()
	o.Epochs, o.Workers, o.Concurrency = 1000, 1, 1
	l := openReading(t, ctx, socket, o, 1)

	fi, err := os.Stat(part)
	if err != nil {
		t.Fatal(err)
	}
	size, cut := fi.Size(), fi.Size()/2
	if err := os.Truncate(part, cut); err != nil {
		t.Fatal(err)
	}
	want := changedText(part, fmt.Sprintf("the file is %d bytes, %d when opened: it was truncated or rewritten in place", cut, size))

	dd, err := client.DialData(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	for range 2 { // the change sticks
		if _, err := dd.Features(ctx, ids); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("features after the truncation: %v\nwant %s", err, want)
		}
	}
	if _, _, err := dd.Labels(ctx, ids); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("labels after the truncation: %v\nwant %s", err, want)
	}
	// The running loader's sampler finds it at its next batch, before
	// its reads or as a fault during them (it was sampling as the file
	// shrank); the batches already in the ring come first.
	var lerr error
	for range 10000 {
		if _, lerr = l.Next(ctx); lerr != nil {
			break
		}
	}
	sampler := fmt.Sprintf("node: partition file changed under the running node (csr: %s: ", part)
	if lerr == nil || !strings.Contains(lerr.Error(), sampler) || !strings.Contains(lerr.Error(), advice) {
		t.Fatalf("running loader: %v\nwant %s…%s", lerr, sampler, advice)
	}
	if _, err := client.OpenLoader(ctx, socket, baseOptions()); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("open_loader after the truncation: %v\nwant %s", err, want)
	}
	if _, err := client.Stats(ctx, socket); err != nil {
		t.Fatalf("stats after the truncation: %v", err)
	}
	select {
	case <-d.done:
		t.Fatalf("node run exited: %v\n%s", d.err, d.log)
	default:
	}
	if n := changeLines(d); n != 1 {
		t.Errorf("the node logged the change %d times, want once:\n%s", n, d.log)
	}
	if s := d.log.String(); strings.Contains(s, "fatal error") || strings.Contains(s, "SIGBUS") {
		t.Errorf("a fault reached the log:\n%s", s)
	}
}

// TestPartFileRewrittenUnderNode: the same bytes copied over the part
// file in place, 20 times, while trainers read node data and batches: a
// request that races a copy faults on the mapping, which used to kill
// the node with SIGBUS and 250 lines of stack. The node survives; every
// error a trainer sees is the change, named; none sticks unless one was
// seen. (Whether a request races a copy is timing: the fault itself is
// csr's TestReadChanged/fault.)
func TestPartFileRewrittenUnderNode(t *testing.T) {
	bin, fixtureParts := setup(t)
	parts := copyParts(t, fixtureParts)
	part := node.PartPath(parts, 0)
	orig, err := os.ReadFile(part)
	if err != nil {
		t.Fatal(err)
	}
	rows, labels := partRows(t, parts)
	cfg, socket, rings := newConfig(t, parts, "")
	d := startDaemon(t, bin, cfg, socket, rings)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := baseOptions()
	o.Epochs, o.Workers, o.Concurrency = 1000, 1, 1
	l := openReading(t, ctx, socket, o, 1)

	prefix := fmt.Sprintf("node: partition file changed under the running node (csr: %s: ", part)
	var mu sync.Mutex
	var seen []string // errors of the requests
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		dd, err := client.DialData(ctx, socket)
		if err != nil {
			t.Error(err)
			return
		}
		defer dd.Close()
		ids := []uint64{0, 1500, 2999}
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := dd.Features(ctx, ids); err != nil {
				mu.Lock()
				seen = append(seen, err.Error())
				mu.Unlock()
			}
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.Next(ctx); err != nil {
				mu.Lock()
				seen = append(seen, err.Error())
				mu.Unlock()
				return
			}
		}
	})
	for range 20 {
		if err := os.WriteFile(part, orig, 0o644); err != nil { // as cp does: truncate, write
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()

	if _, err := client.Stats(ctx, socket); err != nil {
		t.Fatalf("stats after the copies: %v\n%s", err, d.log)
	}
	for _, e := range seen {
		if !strings.Contains(e, prefix) || !strings.Contains(e, advice) {
			t.Errorf("error during the copies: %s\nwant one with %s…", e, prefix)
		}
	}
	// A node that saw the change says so from then on; one that did not
	// (no request raced a copy) serves the same bytes.
	dd, err := client.DialData(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	_, ferr := dd.Features(ctx, []uint64{3})
	switch logged := changeLines(d); {
	case logged > 1:
		t.Errorf("the node logged the change %d times, want once", logged)
	case logged == 1 && (ferr == nil || !strings.Contains(ferr.Error(), prefix)):
		t.Errorf("features after a change: %v, want the change", ferr)
	case logged == 0 && ferr != nil:
		t.Errorf("features, no change seen: %v", ferr)
	case logged == 0:
		checkData(t, ctx, socket, []uint64{3, 2999}, rows, labels)
	}
	t.Logf("%d requests failed during the copies; the node logged the change %d times", len(seen), changeLines(d))
	if s := d.log.String(); strings.Contains(s, "fatal error") || strings.Contains(s, "SIGBUS") {
		t.Errorf("a fault reached the log:\n%s", s)
	}
}

// TestPartDirReplacedUnderNode: the partition directory replaced under a
// running node (node partition --force to the same path) with a graph of
// another train split. A new loader's samplers map the file the node
// opened, which it describes: the same records as sampling the old
// partition, not the new graph's (whose epoch ended where the trainer
// wanted a batch).
func TestPartDirReplacedUnderNode(t *testing.T) {
	bin, fixtureParts := setup(t)
	parts := copyParts(t, fixtureParts)
	cfg, socket, rings := newConfig(t, parts, "")
	startDaemon(t, bin, cfg, socket, rings)
	o := baseOptions()
	o.Epochs, o.Workers = 1, 2
	want := unionReference(t, parts, o)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g, err := partition.SBM(ctx, partition.SBMConfig{
		Nodes: 3000, Blocks: 4, AvgDegree: 12, FeatDim: 16, Seed: 8,
		TrainFrac: 0.2, ValFrac: 0.1, TestFrac: 0.1, Workers: 1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	adj, err := partition.BuildAdj(ctx, g, csr.In, partition.CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := partition.Write(ctx, parts, g, adj, make([]uint32, g.NumNodes), partition.WriteOptions{Parts: 1, Method: "random", Force: true}); err != nil {
		t.Fatal(err)
	}
	if now := unionReference(t, parts, o); len(now[0]) == len(want[0]) {
		t.Fatalf("the new partition has %d batches per epoch, as the old: no test", len(now[0]))
	}

	l, err := client.OpenLoader(ctx, socket, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.BatchesPerEpoch() != len(want[0]) {
		t.Fatalf("the node describes %d batches per epoch, want the old partition's %d", l.BatchesPerEpoch(), len(want[0]))
	}
	n := 0
	for b, err := range l.All(ctx) {
		if err != nil {
			t.Fatalf("batch %d: %v", n, err)
		}
		if n >= len(want[0]) || string(b.Record) != string(want[0][n]) {
			t.Fatalf("batch %d differs from the old partition's", n)
		}
		n++
	}
	if n != len(want[0]) {
		t.Fatalf("%d batches, want %d", n, len(want[0]))
	}
	if _, err := l.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("after the epoch: %v, want io.EOF", err)
	}
}
