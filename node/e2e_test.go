package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"graphnode/node/client"
	"graphnode/node/control"
)

func baseOptions() client.Options {
	o := client.DefaultOptions()
	o.Split = "train"
	o.Fanouts = []int{5, 3}
	o.BatchSize = 64
	o.Shuffle = true
	o.Epochs = 2
	o.Seed = 42
	return o
}

// TestLoaderMatchesInProcessSampling: with 1, 2 and 4 sampler processes
// the trainer reads, in order, exactly the records that sampling in this
// process produces, then end of epoch and end of stream; closing the
// loader removes its ring and its samplers.
func TestLoaderMatchesInProcessSampling(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "")
	d := startDaemon(t, bin, cfg, socket, rings)
	for _, tc := range []struct{ workers, concurrency int }{{1, 1}, {2, 3}, {4, 2}} {
		t.Run(fmt.Sprintf("workers=%d", tc.workers), func(t *testing.T) {
			o := baseOptions()
			o.Workers, o.Concurrency = tc.workers, tc.concurrency
			want := unionReference(t, parts, o) // one part: the union of one
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := client.OpenLoader(ctx, socket, o)
			if err != nil {
				t.Fatal(err)
			}
			info := l.Info()
			if info.SubRings != tc.workers || l.BatchesPerEpoch() != len(want[0]) || info.FeatDim != 16 || info.XDtype != "float32" || info.LabelDim != 1 || info.TotalNodes != 3000 {
				t.Fatalf("info %+v: want %d sub-rings, %d batches, feat 16 float32, label 1, 3000 nodes", info, tc.workers, len(want[0]))
			}
			// The default socket (0660) lets the node's group connect:
			// its ring lets the group map it.
			if st, err := os.Stat(info.Ring); err != nil || st.Mode().Perm() != 0o660 {
				t.Fatalf("ring %s: %v, mode %v; want 0660", info.Ring, err, st.Mode())
			}
			for e := range o.Epochs {
				n := 0
				for b, err := range l.All(ctx) {
					if err != nil {
						t.Fatalf("epoch %d batch %d: %v", e, n, err)
					}
					if b.Epoch != e || b.Index != n || b.Header.BatchSize == 0 {
						t.Fatalf("got epoch %d batch %d, want %d %d", b.Epoch, b.Index, e, n)
					}
					if !bytes.Equal(b.Record, want[e][n]) {
						t.Fatalf("epoch %d batch %d: record differs from in-process sampling (%d vs %d bytes)", e, n, len(b.Record), len(want[e][n]))
					}
					n++
				}
				if n != len(want[e]) {
					t.Fatalf("epoch %d: %d batches, want %d", e, n, len(want[e]))
				}
				if l.Epoch() != e+1 {
					t.Fatalf("after epoch %d, Epoch() = %d", e, l.Epoch())
				}
			}
			if _, err := l.Next(ctx); !errors.Is(err, io.EOF) {
				t.Fatalf("after the last epoch: %v, want io.EOF", err)
			}
			st, err := l.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Loaders) != 1 || st.Loaders[0].Batches != uint64(o.Epochs*len(want[0])) {
				// progress lines arrive every 100 ms: allow them to land
				time.Sleep(300 * time.Millisecond)
				st, _ = l.Stats(ctx)
			}
			if got := st.Loaders[0].Batches; got != uint64(o.Epochs*len(want[0])) {
				t.Errorf("stats: %d batches written, want %d", got, o.Epochs*len(want[0]))
			}
			pids := samplerPIDs(st)
			if len(pids) != tc.workers {
				t.Fatalf("stats lists %d samplers, want %d", len(pids), tc.workers)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "ring file removed after Close", func() bool {
				_, err := os.Stat(info.Ring)
				return errors.Is(err, os.ErrNotExist)
			})
			for _, pid := range pids {
				eventually(t, 5*time.Second, fmt.Sprintf("sampler pid %d exited", pid), func() bool { return pidGone(pid) })
			}
		})
	}
	if !d.logHas(`"msg":"node ready"`, `"nodes":3000`, `"socket":`) {
		t.Errorf("no ready line with socket and node count in the log:\n%s", d.log)
	}
}

func samplerPIDs(st *control.Stats) []int {
	var pids []int
	for _, l := range st.Loaders {
		for _, s := range l.Samplers {
			pids = append(pids, s.PID)
		}
	}
	return pids
}

// TestOpenLoaderErrors: requests the node must refuse, each naming the
// field at fault.
func TestOpenLoaderErrors(t *testing.T) {
	bin, parts := setup(t)
	cfg, socket, rings := newConfig(t, parts, "max_loaders = 1\n")
	startDaemon(t, bin, cfg, socket, rings)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name   string
		change func(*client.Options)
		key    string
		msg    string
	}{
		{"ring too small", func(o *client.Options) { o.RingSize = "64KiB"; o.Workers = 4; o.Fanouts = []int{15, 10} }, "ring_size", "per sub-ring"},
		{"bad fanout", func(o *client.Options) { o.Fanouts = []int{5, 0} }, "fanouts", "fanouts[1] = 0"},
		{"rank", func(o *client.Options) { o.Rank, o.WorldSize = 2, 2 }, "rank", "out of range"},
		{"seed not owned", func(o *client.Options) { o.Split = ""; o.SeedIDs = []uint64{1, 99999} }, "seed_ids", "seed_ids[1] = 99999"},
		{"workers", func(o *client.Options) { o.Workers = 65 }, "workers", "65"},
	} {
		o := baseOptions()
		tc.change(&o)
		_, err := client.OpenLoader(ctx, socket, o)
		var ce *control.Error
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(ce.Msg, tc.msg) {
			t.Errorf("%s: err = %v, want key %q and %q", tc.name, err, tc.key, tc.msg)
		}
	}
	l, err := client.OpenLoader(ctx, socket, baseOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := client.OpenLoader(ctx, socket, baseOptions()); err == nil || !strings.Contains(err.Error(), "max_loaders = 1") {
		t.Errorf("second loader with max_loaders = 1: %v", err)
	}
	if left := ringFiles(t, rings); len(left) != 1 {
		t.Errorf("refused loaders left rings: %v", left)
	}
}

// TestGroupModes: with a group configured, the socket is 0660 and the ring
// 0660, both owned by that group.
func TestGroupModes(t *testing.T) {
	bin, parts := setup(t)
	gid := os.Getgid()
	cfg, socket, rings := newConfigGroup(t, parts, "", fmt.Sprint(gid))
	startDaemon(t, bin, cfg, socket, rings)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := client.OpenLoader(ctx, socket, baseOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, path := range []string{socket, l.Info().Ring} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if st.Mode().Perm() != 0o660 || int(sys.Gid) != gid {
			t.Errorf("%s: mode %v gid %d, want 0660 and gid %d", path, st.Mode().Perm(), sys.Gid, gid)
		}
	}
}
