package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"graphnode/csr"
	"graphnode/node/control"
	"graphnode/partition"
	"graphnode/sample"
	"graphnode/shm"
)

// writeSBMPart writes the stochastic block model graph of cfg as one
// partition in dir.
func writeSBMPart(dir string, cfg partition.SBMConfig) error {
	ctx := context.Background()
	g, err := partition.SBM(ctx, cfg, nil)
	if err != nil {
		return err
	}
	adj, err := partition.BuildAdj(ctx, g, csr.In, partition.CleanOptions{}, nil)
	if err != nil {
		return err
	}
	_, err = partition.Write(ctx, dir, g, adj, make([]uint32, g.NumNodes), partition.WriteOptions{Parts: 1, Method: "random"})
	return err
}

// loaderNode opens a Node over a one-part partitioning whose samplers are
// a script that appends its pid to the returned file and sleeps.
func loaderNode(t *testing.T) (n *Node, rings, pids string) {
	t.Helper()
	dir := t.TempDir()
	parts := filepath.Join(dir, "parts")
	if err := writeSBMPart(parts, partition.SBMConfig{Nodes: 500, Blocks: 2, AvgDegree: 6, FeatDim: 4, Seed: 1, TrainFrac: 0.5, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	rings = filepath.Join(dir, "rings")
	if err := os.Mkdir(rings, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(writeConfig(t, dir, "version = 1\n[node]\nparts = "+quote(parts)+
		"\n[control]\nsocket = "+quote(filepath.Join(dir, "node.sock"))+
		"\n[rings]\ndir = "+quote(rings)+"\nsize = \"4MiB\"\n[samplers]\ndrain_timeout = \"1s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err = New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	pids = filepath.Join(dir, "pids")
	script := filepath.Join(dir, "sampler")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $$ >> "+pids+"\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n.Executable = script
	return n, rings, pids
}

// smallLoader describes a loader of loaderNode's train split: 2 workers,
// a 4 MiB ring; openLoader's first steps, for tests that take the rest
// one at a time.
func smallLoader(t *testing.T, n *Node) (control.LoaderOptions, control.LoaderInfo, []uint64, int64) {
	t.Helper()
	o := control.DefaultLoaderOptions()
	o.Split, o.Fanouts = "train", []int{5}
	o.Workers, o.Concurrency, o.RingSize = 2, 1, "4MiB"
	info, seeds, err := n.describe(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ringBytes, _ := shm.ParseSize(o.RingSize)
	return o, info, seeds, ringBytes
}

// TestDrainDuringStartLoader: SIGTERM (drain) while a loader is between
// reserveLoader and the end of startLoader. drain waits for it; the
// loader stops the samplers it spawned, removes its ring and refuses with
// "node is stopping", and drain then returns with nothing left behind.
func TestDrainDuringStartLoader(t *testing.T) {
	n, rings, pids := loaderNode(t)
	ctx := context.Background()
	o, info, seeds, ringBytes := smallLoader(t, n)

	// openLoader's steps, with drain beginning after the reservation.
	l, err := n.reserveLoader()
	if err != nil {
		t.Fatal(err)
	}
	drained := make(chan struct{})
	go func() {
		n.drain()
		close(drained)
	}()
	for {
		n.mu.Lock()
		draining := n.mu.draining
		n.mu.Unlock()
		if draining {
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-drained:
		t.Fatal("drain returned while a loader was starting")
	case <-time.After(50 * time.Millisecond):
	}
	err = n.startLoader(ctx, l, o, info, seeds, ringBytes)
	n.doneStarting(l, err)
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("drain did not return once the loader was refused")
	}

	var ce *control.Error
	if !errors.As(err, &ce) || ce.Msg != "node is stopping" || ce.Key != "" {
		t.Errorf("startLoader during drain: err = %#v, want control.Error \"node is stopping\"", err)
	}
	if left, _ := os.ReadDir(rings); len(left) != 0 {
		t.Errorf("ring files left in rings.dir: %v", left)
	}
	n.mu.Lock()
	loaders := len(n.mu.loaders)
	n.mu.Unlock()
	if loaders != 0 {
		t.Errorf("%d loaders left after drain, want 0", loaders)
	}
	b, _ := os.ReadFile(pids) // a sampler killed before it wrote is gone too
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("sampler %d still running after drain", pid)
		}
	}
	if _, err := n.reserveLoader(); !errors.As(err, &ce) || ce.Msg != "node is stopping" {
		t.Errorf("reserveLoader after drain: err = %v, want node is stopping", err)
	}
}

// TestStatsListOnlyStartedLoaders: a loader reserved and still starting
// (a relayed open waits up to the mesh timeout for its sampling node) is
// not in stats' loaders, which list open loaders: it used to be listed
// with no ring, no samplers and sub-rings of 0 bytes (in the metrics too).
// Once started it is listed with its ring and samplers.
func TestStatsListOnlyStartedLoaders(t *testing.T) {
	n, _, _ := loaderNode(t)
	ctx := context.Background()
	o, info, seeds, ringBytes := smallLoader(t, n)
	l, err := n.reserveLoader()
	if err != nil {
		t.Fatal(err)
	}
	if st := n.stats(); len(st.Loaders) != 0 {
		t.Errorf("stats while the loader starts: %+v, want no loader", st.Loaders)
	}
	err = n.startLoader(ctx, l, o, info, seeds, ringBytes)
	n.doneStarting(l, err)
	if err != nil {
		t.Fatal(err)
	}
	defer n.closeLoader(l, "test over")
	st := n.stats()
	if len(st.Loaders) != 1 || st.Loaders[0].LoaderID != l.id || st.Loaders[0].Ring != l.info.Ring || len(st.Loaders[0].Samplers) != 2 {
		t.Errorf("stats once started: %+v, want loader %d with its ring and 2 samplers", st.Loaders, l.id)
	}
}

// TestEncodeSpecRefusesTooManySeeds: a loader whose seeds (the split
// over every part, or seed_ids) make a sampler spec larger than a sampler
// reads is refused with the key of the seeds, the count and the limit.
func TestEncodeSpecRefusesTooManySeeds(t *testing.T) {
	seeds := make([]uint64, MaxSamplerSpec/20) // 20 digits and a comma each
	for i := range seeds {
		seeds[i] = 10_000_000_000_000_000_000 + uint64(i)
	}
	split := control.DefaultLoaderOptions()
	split.Split, split.Fanouts, split.Workers, split.Concurrency = "train", []int{5}, 2, 1
	ids := split
	ids.Split = "" // seed_ids: startLoader leaves them out of the options, in Seeds
	for _, tc := range []struct {
		name, key, msg string
		o              control.LoaderOptions
	}{
		{"split", "split", `split "train" has 3355443 seeds over the partition set: too many for one loader ` +
			`(its sampler spec would be 70464897 bytes, a sampler reads at most 67108864)`, split},
		{"seed_ids", "seed_ids", `3355443 seed_ids: too many for one loader ` +
			`(its sampler spec would be 70464881 bytes, a sampler reads at most 67108864)`, ids},
	} {
		spec := SamplerSpec{Part: "/p/part-0/part.csr", Ring: "/dev/shm/r.ring", LoaderID: 1, Workers: 2,
			Options: tc.o, LogLevel: "info", LogFormat: "json", Seeds: seeds,
			Mesh: &SamplerMesh{Part: 0, Bounds: []uint64{0, 1 << 63, 1<<64 - 1}, Timeout: time.Second}}
		_, err := encodeSpec(spec, 1)
		var ce *control.Error
		if !errors.As(err, &ce) || ce.Key != tc.key || ce.Msg != tc.msg {
			t.Errorf("%s: err = %#v\nwant key %q, msg %q", tc.name, err, tc.key, tc.msg)
		}
	}
}

// TestSamplerSpecLimits: a sampler refuses a spec larger than it reads
// by saying so, and takes seed_ids from Seeds, where the node sends them.
func TestSamplerSpecLimits(t *testing.T) {
	_, err := ReadSamplerSpec(strings.NewReader(strings.Repeat(" ", MaxSamplerSpec+1)))
	if want := "node: sampler spec larger than 67108864 bytes: invalid configuration"; err == nil || err.Error() != want || !errors.Is(err, ErrConfig) {
		t.Errorf("oversized spec: err = %v, want %q", err, want)
	}
	o := control.DefaultLoaderOptions()
	o.Fanouts, o.Workers, o.Concurrency = []int{5}, 1, 1
	spec := &SamplerSpec{Part: "p.csr", PartID: csr.Identity{Size: 8192}, Ring: "r.ring", Workers: 1, Options: o, LogLevel: "info", LogFormat: "json",
		Seeds: []uint64{3, 1, 2}, Mesh: &SamplerMesh{Part: 0, Bounds: []uint64{0, 2, 4}, Timeout: time.Second}}
	body, err := spec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), "seed_ids") {
		t.Fatalf("spec carries seed_ids: %s", body)
	}
	got, err := ReadSamplerSpec(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("seed_ids as seeds: %v", err)
	}
	if len(got.Seeds) != 3 || got.Seeds[0] != 3 || got.Options.SeedIDs != nil {
		t.Fatalf("seeds %v, options.seed_ids %v", got.Seeds, got.Options.SeedIDs)
	}
	spec.Seeds = nil
	body, _ = spec.Encode()
	if _, err := ReadSamplerSpec(strings.NewReader(string(body))); err == nil || !strings.Contains(err.Error(), "split: missing") {
		t.Errorf("no split, seed_ids or seeds: err = %v, want split: missing", err)
	}
}

// TestRingSizeAdvice: the ring_size a refusal names as the least that
// works does work, and a byte less does not. It counted the worst-case
// record per sub-ring, not the whole pages a sub-ring is made of, so the
// advised size was refused again with the same advice. The least also
// holds the largest error record: a 4 KiB sub-ring took a small batch's
// records, but a sampler's error of more than 3.7 KB did not fit, and the
// trainer saw a dead producer instead of the error.
func TestRingSizeAdvice(t *testing.T) {
	n, _, _ := loaderNode(t)
	if want := sample.ControlSize(strings.Repeat("é", sample.MaxMessage)); maxControlRecord != want {
		t.Fatalf("maxControlRecord = %d, the largest error record takes %d", maxControlRecord, want)
	}
	advice := regexp.MustCompile(`raise ring_size to at least (\S+) or lower (batch_size|workers)$`)
	for _, tc := range []struct {
		workers, batch int
		fanouts        []int
		lower          string
	}{
		{1, 64, []int{5, 3}, "batch_size"},
		{2, 200, []int{5, 3}, "batch_size"},
		{3, 250, []int{5, 3}, "batch_size"},
		{1, 1, []int{1}, "workers"}, // a batch record of 640 bytes
		{2, 4, []int{2}, "workers"},
	} {
		t.Run(fmt.Sprintf("workers=%d,batch=%d,fanouts=%v", tc.workers, tc.batch, tc.fanouts), func(t *testing.T) {
			o := control.DefaultLoaderOptions()
			o.Split, o.Fanouts = "train", tc.fanouts
			o.Workers, o.Concurrency, o.BatchSize, o.RingSize = tc.workers, 1, tc.batch, "4KiB"
			l, err := n.openLoader(context.Background(), o)
			if err == nil {
				n.closeLoader(l, "test")
			}
			var ce *control.Error
			if !errors.As(err, &ce) || ce.Key != "ring_size" || !advice.MatchString(ce.Msg) {
				t.Fatalf("a 4KiB ring: %v, want a ring_size refusal that names the least size", err)
			}
			if got := advice.FindStringSubmatch(ce.Msg)[2]; got != tc.lower {
				t.Errorf("advice: lower %s, want lower %s (%s)", got, tc.lower, ce.Msg)
			}
			least, err := shm.ParseSize(advice.FindStringSubmatch(ce.Msg)[1])
			if err != nil {
				t.Fatal(err)
			}
			o.RingSize = strconv.FormatInt(least-1, 10)
			if l, err := n.openLoader(context.Background(), o); !errors.As(err, &ce) || ce.Key != "ring_size" {
				if err == nil {
					n.closeLoader(l, "test")
				}
				t.Fatalf("a byte less than the advised %d: %v, want a ring_size refusal", least, err)
			}
			o.RingSize = strconv.FormatInt(least, 10)
			l, err = n.openLoader(context.Background(), o)
			if err != nil {
				t.Fatalf("the advised %d bytes: %v", least, err)
			}
			defer n.closeLoader(l, "test")
			if got := l.ring.Capacity() - shm.RecordHeaderSize; got < maxControlRecord || got < roundUp(l.info.MaxRecord, shm.LineSize) {
				t.Errorf("sub-ring holds records of %d bytes: an error record takes up to %d, a batch record %d", got, maxControlRecord, l.info.MaxRecord)
			}
		})
	}
}

// TestRingError: a ring that could not be created is refused under
// ring_size only when its size is what failed; otherwise the refusal
// names the node's rings.dir, which a trainer cannot change (a read-only
// rings.dir was refused under ring_size, and lowering it did nothing).
// The errors are shm.Create's own where this process can cause them.
func TestRingError(t *testing.T) {
	dir := t.TempDir()
	opts := shm.Options{SubRings: 2, Capacity: 1 << 20}
	exists := filepath.Join(dir, "exists.ring")
	r, err := shm.Create(exists, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Remove()
	create := func(path string, o shm.Options) error {
		r, err := shm.Create(path, o)
		if err == nil {
			r.Remove()
			t.Fatalf("shm.Create %s: no error", path)
		}
		return err
	}
	n := &Node{cfg: Config{Rings: RingsConfig{Dir: dir}}}
	for _, tc := range []struct {
		name     string
		err      error
		sizeFail bool
	}{
		{"too small", create(filepath.Join(dir, "small.ring"), shm.Options{SubRings: 2, Capacity: shm.PageSize}), true},
		{"no space", fmt.Errorf("shm: create %s/x.ring: reserve 16.0MiB: %w", dir, syscall.ENOSPC), true},
		{"quota", fmt.Errorf("shm: create %s/x.ring: reserve 16.0MiB: %w", dir, syscall.EDQUOT), true},
		{"no memory", fmt.Errorf("shm: create %s/x.ring: %w", dir, shm.ErrNoMemory), true},
		{"map", fmt.Errorf("shm: create %s/x.ring: mmap 16777216 bytes: %w", dir, syscall.ENOMEM), true},
		{"exists", create(exists, opts), false},
		{"no dir", create(filepath.Join(dir, "gone", "x.ring"), opts), false},
		{"read-only", fmt.Errorf("shm: create %s/x.ring: %w", dir, &fs.PathError{Op: "open", Path: dir + "/x.ring", Err: syscall.EROFS}), false},
		{"permission", fmt.Errorf("shm: create %s/x.ring: %w", dir, &fs.PathError{Op: "open", Path: dir + "/x.ring", Err: syscall.EACCES}), false},
	} {
		ce := n.ringError(tc.err)
		switch {
		case tc.sizeFail && (ce.Key != "ring_size" || ce.Msg != tc.err.Error()):
			t.Errorf("%s (%v): key %q, msg %q; want ring_size and the error", tc.name, tc.err, ce.Key, ce.Msg)
		case !tc.sizeFail && (ce.Key != "" || ce.Msg != "the node's rings.dir "+dir+": "+tc.err.Error()):
			t.Errorf("%s (%v): key %q, msg %q; want no key and rings.dir named", tc.name, tc.err, ce.Key, ce.Msg)
		}
	}
}
