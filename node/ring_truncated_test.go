package node_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"graphnode/node/client"
	"graphnode/shm"
)

// TestTruncatedRingSparesTheNode: one trainer's ring file truncated (by
// that trainer, which maps it read-write, or by anyone in the rings
// group) fails that loader with shm.ErrCorrupt naming the ring; the node
// and every other loader go on. The node's own accesses to the ring (a
// dead sampler's last record, stats) raised SIGBUS and ended it, and with
// it every trainer's loader. The file is cut to nothing, and to its
// first page (header and control blocks: only the records fault).
func TestTruncatedRingSparesTheNode(t *testing.T) {
	for _, size := range []int64{0, 4096} {
		t.Run(fmt.Sprintf("to %d bytes", size), func(t *testing.T) { testTruncatedRing(t, size) })
	}
}

func testTruncatedRing(t *testing.T, size int64) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	d := startDaemon(t, bin, cfg, socket, rings)
	o := baseOptions()
	o.Workers, o.Epochs, o.RingSize = 2, 1000, "2MiB"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bad, err := client.OpenLoader(ctx, socket, o)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	good, err := client.OpenLoader(ctx, socket, o)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if _, err := bad.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(bad.Info().Ring, size); err != nil {
		t.Fatal(err)
	}
	// The truncated loader's samplers fault and fail; the node writes
	// their last records (which fault too) and answers stats meanwhile.
	_, err = bad.Next(ctx)
	if !errors.Is(err, shm.ErrCorrupt) {
		t.Errorf("next batch of the truncated ring: %v, want shm.ErrCorrupt", err)
	}
	bad.Close()
	eventually(t, 10*time.Second, "the node has closed the truncated loader", func() bool {
		st, err := client.Stats(ctx, socket)
		if err != nil {
			t.Fatalf("stats after a ring was truncated: %v", err)
		}
		for _, l := range st.Loaders {
			if l.LoaderID == bad.Info().LoaderID {
				return false
			}
		}
		return true
	})
	for i := range 20 {
		if _, err := good.Next(ctx); err != nil {
			t.Fatalf("batch %d of the other loader after the truncation: %v", i, err)
		}
	}
	select {
	case <-d.done:
		t.Fatalf("node run died after a trainer's ring was truncated: %v\n%.2000s", d.err, d.log)
	default:
	}
}
