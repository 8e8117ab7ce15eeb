package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"graphnode/kv"
	"graphnode/node/client"
	"graphnode/node/control"
)

// TestMinRingSize: MinRingSize is the boundary Config.Validate draws for
// rings.size: the size itself passes, a byte less is refused.
func TestMinRingSize(t *testing.T) {
	dir, pre := configDir(t)
	for _, workers := range []int{1, 2, 5} {
		least := MinRingSize(workers)
		for _, size := range []int64{least - 1, least} {
			_, err := LoadConfig(writeConfig(t, dir, fmt.Sprintf("%s[rings]\nsize = \"%d\"\n[samplers]\nworkers = %d\n", pre, size, workers)))
			if refused := err != nil; refused != (size < least) {
				t.Errorf("workers %d, rings.size %d (MinRingSize %d): err = %v", workers, size, least, err)
			}
		}
	}
}

// TestRingNeed: RingNeed is the boundary open_loader draws for
// ring_size, from what the node knows of its partition.
func TestRingNeed(t *testing.T) {
	n, _, _ := loaderNode(t)
	for _, tc := range []struct {
		workers, batch int
		fanouts        []int
	}{
		{1, 64, []int{5, 3}},
		{2, 200, []int{-1, 3}},
		{3, 1000, []int{5}}, // more than the seeds: a batch holds them all
		{2, 1, []int{1}},    // the error record decides
	} {
		t.Run(fmt.Sprintf("workers=%d,batch=%d,fanouts=%v", tc.workers, tc.batch, tc.fanouts), func(t *testing.T) {
			o := control.DefaultLoaderOptions()
			o.Split, o.Fanouts = "train", tc.fanouts
			o.Workers, o.Concurrency, o.BatchSize = tc.workers, 1, tc.batch
			info, _, err := n.describe(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			schema, err := loaderSchema(n.graph, o)
			if err != nil {
				t.Fatal(err)
			}
			need, err := RingNeed(o, int(info.NumSeeds), n.graph.Meta().TotalNodes, n.maxDeg, schema)
			if err != nil {
				t.Fatal(err)
			}
			if least := MinRingSize(tc.workers); need < least {
				t.Errorf("RingNeed %d, under MinRingSize %d", need, least)
			}
			o.RingSize = strconv.FormatInt(need-1, 10)
			var ce *control.Error
			if l, err := n.openLoader(context.Background(), o); !errors.As(err, &ce) || ce.Key != "ring_size" {
				if err == nil {
					n.closeLoader(l, "test")
				}
				t.Fatalf("a byte less than RingNeed %d: %v, want a ring_size refusal", need, err)
			}
			o.RingSize = strconv.FormatInt(need, 10)
			l, err := n.openLoader(context.Background(), o)
			if err != nil {
				t.Fatalf("RingNeed's %d bytes: %v", need, err)
			}
			n.closeLoader(l, "test")
		})
	}
}

// TestMaxSyncLen: a sync table of client.MaxSyncLen values is one the
// node creates (checkSyncPush), one of a row more is refused.
func TestMaxSyncLen(t *testing.T) {
	for _, name := range []string{"graphsage.sync", strings.Repeat("t", kv.MaxNameLen)} {
		n := client.MaxSyncLen(name)
		if n%client.SyncDim != 0 {
			t.Fatalf("%s: MaxSyncLen %d is not whole rows of %d", name, n, client.SyncDim)
		}
		sp := kv.Spec{Name: name, Rows: uint64(n / client.SyncDim), Dim: client.SyncDim, Mode: kv.Sync}
		if err := checkSyncPush(sp); err != nil {
			t.Errorf("%s: %d rows (MaxSyncLen %d): %v", name, sp.Rows, n, err)
		}
		sp.Rows++
		if err := checkSyncPush(sp); err == nil {
			t.Errorf("%s: %d rows, a row over MaxSyncLen %d, passed", name, sp.Rows, n)
		}
	}
}
