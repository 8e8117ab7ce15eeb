package node

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"graphnode/csr"
	"graphnode/node/control"
	"graphnode/partition"
	"graphnode/sample"
)

// TestMaxRecord pins the worst-case record bound: nodes and edges as if
// every sampled neighbour were new, capped by the graph's size.
func TestMaxRecord(t *testing.T) {
	f32 := sample.Schema{FeatDim: 100, XType: sample.F32, LabelDim: 1}
	for _, tc := range []struct {
		name         string
		fanouts      []int
		batch        int
		total        uint64
		maxDeg       int
		degExact     bool
		schema       sample.Schema
		nodes, edges uint64
		neg          int // > 0: a link loader of batch seed edges, neg negatives each
	}{
		// 1024 + 15360 + 153600 nodes, 15360 + 153600 edges
		{"products-like", []int{15, 10}, 1024, 1 << 30, 50, true, f32, 1024 + 15360 + 153600, 15360 + 153600, 0},
		// hop 2 would reach 1000·10 but the graph has 500 nodes; the
		// largest degree (9) is this part's only, so 10 counts as 10
		{"capped by graph", []int{10, 10}, 100, 500, 9, false, f32, 500, 1000 + 5000, 0},
		// the same with 9 the set's largest degree: no node gives 10
		{"capped by degree", []int{10, 10}, 100, 500, 9, true, f32, 500, 900 + 4500, 0},
		// a fanout of 1000 meant as "all": no more than fanout -1
		{"fanout past every degree", []int{1000}, 10, 1 << 20, 7, true, sample.Schema{}, 80, 70, 0},
		// -1 counts as the largest degree
		{"fanout -1", []int{-1}, 10, 1 << 20, 7, false, sample.Schema{}, 80, 70, 0},
		// 64 seed edges, 3 negatives each: up to 320 seed nodes, 256 pairs
		{"link", []int{5}, 64, 1 << 20, 9, true, f32, 320 + 1600, 1600, 3},
	} {
		o := control.LoaderOptions{Fanouts: tc.fanouts, BatchSize: tc.batch}
		seeds, pairs := tc.batch, 0
		if tc.neg > 0 {
			o.SeedEdges, o.NegRatio = &control.SeedEdges{Src: []uint64{0}, Dst: []uint64{1}}, tc.neg
			seeds, pairs = tc.batch*(2+tc.neg), tc.batch*(1+tc.neg)
		}
		got, err := maxRecord(o, tc.batch, tc.total, tc.maxDeg, tc.degExact, tc.schema)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		h := sample.Header{Kind: sample.KindBatch, BatchSize: uint64(seeds), NumNodes: tc.nodes, NumEdges: tc.edges,
			Hops: uint32(len(tc.fanouts)), FeatDim: uint32(tc.schema.FeatDim), XType: tc.schema.XType, LabelDim: uint32(tc.schema.LabelDim),
			Pairs: uint64(pairs)}
		_, want, _ := h.Layout()
		if got != int64(want) {
			t.Errorf("%s: maxRecord = %d, want %d (%d nodes, %d edges)", tc.name, got, want, tc.nodes, tc.edges)
		}
	}
	if _, err := maxRecord(control.LoaderOptions{Fanouts: []int{-1, -1, -1, -1}, BatchSize: 1 << 20}, 1<<20, 1<<40, 1<<30, true, f32); err == nil || !strings.Contains(err.Error(), "more than a record can hold") {
		t.Errorf("huge fanouts: err = %v", err)
	}
	// A batch_size above the loader's seeds (full-batch training) is a
	// batch of every seed: Cora's 1625 training nodes, one hop of 2.
	cora := sample.Schema{FeatDim: 1433, XType: sample.F32, LabelDim: 1}
	full := control.LoaderOptions{Fanouts: []int{2}, BatchSize: 100000}
	exact := control.LoaderOptions{Fanouts: []int{2}, BatchSize: 1625}
	got, err1 := maxRecord(full, 1625, 2708, 168, true, cora)
	want, err2 := maxRecord(exact, 1625, 2708, 168, true, cora)
	if err1 != nil || err2 != nil || got != want || got > 16<<20 {
		t.Errorf("batch_size 100000 over 1625 seeds: max record %d (%v), want %d (%v), the record of one batch of every seed", got, err1, want, err2)
	}
	// The same for a link loader's seed edges.
	edges := &control.SeedEdges{Src: []uint64{0}, Dst: []uint64{1}}
	link := control.LoaderOptions{Fanouts: []int{2}, BatchSize: 4096, SeedEdges: edges, NegRatio: 1}
	linkExact := control.LoaderOptions{Fanouts: []int{2}, BatchSize: 10, SeedEdges: edges, NegRatio: 1}
	got, err1 = maxRecord(link, 10, 2708, 168, true, cora)
	want, err2 = maxRecord(linkExact, 10, 2708, 168, true, cora)
	if err1 != nil || err2 != nil || got != want {
		t.Errorf("link batch_size 4096 over 10 seed edges: max record %d (%v), want %d (%v)", got, err1, want, err2)
	}
}

func TestSamplerSpecRoundTrip(t *testing.T) {
	o := control.DefaultLoaderOptions()
	o.Split, o.Fanouts, o.Workers, o.Concurrency = "train", []int{5, 5}, 3, 2
	id := csr.Identity{Dev: 0x803, Ino: 1234, Size: 8192, HeaderCRC: 0xfeedf00d}
	spec := &SamplerSpec{Part: "p.csr", PartFD: 3, PartID: id, Ring: "r.ring", LoaderID: 4, Worker: 2, Workers: 3, Options: o, LogLevel: "info", LogFormat: "json"}
	body, err := spec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadSamplerSpec(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if got.Worker != 2 || got.Ring != "r.ring" || got.PartFD != 3 || got.PartID != id || got.Options.Concurrency != 2 || len(got.Options.Fanouts) != 2 {
		t.Fatalf("spec %+v", got)
	}
	bad := *spec
	bad.Worker, bad.Part, bad.PartFD, bad.PartID, bad.Options.Concurrency = 3, "", -1, csr.Identity{}, 0
	body, _ = bad.Encode()
	_, err = ReadSamplerSpec(bytes.NewReader(body))
	for _, key := range []string{"part: missing", "part_fd: -1 is negative", "part_id: missing", "worker: 3 is out of range 0..2", "options.concurrency"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("bad spec: err = %v, want %q", err, key)
		}
	}
	if _, err := ReadSamplerSpec(strings.NewReader(`{"part":"x","extra":1}`)); err == nil {
		t.Error("unknown field accepted")
	}
}

// TestEmptySplitHint: a loader over a split the partition has no nodes
// of is refused naming the split and saying where such a partitioning
// comes from: a LINQS Cora partitioned with the default --split keep,
// the first graph many try, failed with "partition 0 has no train nodes"
// and no word of --split.
func TestEmptySplitHint(t *testing.T) {
	ctx := context.Background()
	g, err := partition.SBM(ctx, partition.SBMConfig{Nodes: 200, Blocks: 2, AvgDegree: 4, Seed: 1, ValFrac: 0.1, TestFrac: 0.1, Workers: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	adj, err := partition.BuildAdj(ctx, g, csr.In, partition.CleanOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := partition.Write(ctx, dir, g, adj, make([]uint32, g.NumNodes), partition.WriteOptions{Parts: 1, Method: "random"}); err != nil {
		t.Fatal(err)
	}
	part, err := csr.Open(filepath.Join(dir, filepath.FromSlash(partition.PartFile(0))), csr.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer part.Close()
	_, err = loaderSeeds(part, control.LoaderOptions{Split: "train"})
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Key != "split" || ce.Msg != "partition 0 has no train nodes ("+emptySplitHint+")" {
		t.Fatalf("loader over an empty train split: %v, want a split error with the hint", err)
	}
	if seeds, err := loaderSeeds(part, control.LoaderOptions{Split: "val"}); err != nil || len(seeds) == 0 {
		t.Fatalf("val split: %d seeds, %v", len(seeds), err)
	}
}
