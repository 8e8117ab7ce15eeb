package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"graphnode/node/client"
	"graphnode/node/control"
	"graphnode/partition"
	"graphnode/sample"
)

// linkOptions are a link loader's over n random edges of a graph of
// total nodes (their ends in every part), 2 negatives each, the seed
// edges' own edges left out.
func linkOptions(n int, total uint64) client.Options {
	o := baseOptions()
	o.Split = ""
	o.SeedEdges = &control.SeedEdges{}
	for i := range n {
		u := uint64(i*7919) % total
		o.SeedEdges.Src = append(o.SeedEdges.Src, u)
		o.SeedEdges.Dst = append(o.SeedEdges.Dst, (u*31+5)%total)
	}
	o.NegRatio, o.ExcludeSeedEdges, o.BatchSize = 2, true, 32
	return o
}

// TestLinkLoader: a link loader (seed_edges, neg_ratio, exclude) on a
// 2-node cluster, on its client node and on a one-part node reads
// exactly the records of one process sampling the union of the part
// files (negatives and exclusions included), for 2 ranks; the loader
// describes its shape; bad link options are refused naming the field.
func TestLinkLoader(t *testing.T) {
	parts := clusterParts(t, 2)
	m, err := partition.OpenDir(parts)
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, parts, 2, "10s")
	_, clientSocket := c.startClient("10s")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	o := linkOptions(200, m.Nodes)
	o.WorldSize, o.Workers, o.Concurrency = 2, 2, 2
	for r := range 2 {
		o := o
		o.Rank = r
		want := unionReference(t, parts, o)
		if v, err := sample.Decode(want[0][0]); err != nil || v.Header.Pairs != 32*3 || len(v.EdgeLabel) != 96 {
			t.Fatalf("reference link batch: %d pairs (%v), want 96", v.Header.Pairs, err)
		}
		for _, s := range []string{c.sockets[r], clientSocket} {
			l, err := client.OpenLoader(ctx, s, o)
			if err != nil {
				t.Fatalf("rank %d through %s: %v", r, s, err)
			}
			if info := l.Info(); info.NumSeeds != 100 || info.BatchesPerEpoch != 4 {
				t.Errorf("rank %d: %d seeds, %d batches; want 100 seed edges in 4 batches", r, info.NumSeeds, info.BatchesPerEpoch)
			}
			if err := compare(ctx, l, want, fmt.Sprintf("link rank %d via %s", r, s)); err != nil {
				t.Fatal(err)
			}
			l.Close()
		}
	}

	bin, one := setup(t)
	cfg, socket, rings := newConfig(t, one, "")
	startDaemon(t, bin, cfg, socket, rings)
	m1, err := partition.OpenDir(one)
	if err != nil {
		t.Fatal(err)
	}
	o1 := linkOptions(100, m1.Nodes)
	l, err := client.OpenLoader(ctx, socket, o1)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, ctx, l, unionReference(t, one, o1), "one part")
	l.Close()

	for _, tc := range []struct {
		edit func(*client.Options)
		key  string
		text string
	}{
		{func(o *client.Options) { o.SeedEdges.Dst = o.SeedEdges.Dst[:3] }, "seed_edges", "as many"},
		{func(o *client.Options) { o.SeedEdges.Src[5] = m1.Nodes }, "seed_edges", fmt.Sprintf("seed_edges.src[5] = %d is not a node of the graph", m1.Nodes)},
		{func(o *client.Options) { o.Split = "train" }, "seed_edges", "one of them"},
		{func(o *client.Options) { o.NegRatio = control.MaxNegRatio + 1 }, "neg_ratio", "out of range"},
		{func(o *client.Options) { o.SeedEdges, o.Split = nil, "train" }, "neg_ratio", "need seed_edges"},
	} {
		bad := linkOptions(10, m1.Nodes)
		tc.edit(&bad)
		_, err := client.OpenLoader(ctx, socket, bad)
		var ce *control.Error
		if err == nil || !strings.Contains(err.Error(), tc.text) || !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("%s: %v, want an error on %q containing %q", tc.key, err, tc.key, tc.text)
		}
	}
}
