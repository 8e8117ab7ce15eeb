// Command freq measures the feature-read shares a real cluster sees and
// sets them beside those `node inspect` expects (partition/freq.go).
//
//	go run ./perf/freq -node /tmp/node -parts parts/ -fanouts 10,5 -batch 64 -epochs 5
//
// It makes certificates with `node cert init`, starts one `node run` per
// part on 127.0.0.1, opens on node p the loader of rank p of as many
// trainers as parts over split "train" (the seeds of the estimate,
// partition.TrainerSeeds; -own: part p's own training nodes as seed_ids)
// and reads every batch of every epoch. Each n_id entry (seeds included) is one feature
// read: local when part p owns it, cached when it is in p's cache_ids,
// remote otherwise. The node's own counters (cache_hits, cache_misses)
// are read as well and must agree with the batches.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"graphnode/csr"
	"graphnode/mesh"
	"graphnode/node/client"
	"graphnode/partition"
	"graphnode/perf/internal/localnode"
)

func main() {
	bin := flag.String("node", "", "path of the node binary (required)")
	parts := flag.String("parts", "", "partition directory (required)")
	fanouts := flag.String("fanouts", "", "fanouts (default: graph.toml's)")
	batch := flag.Int("batch", 0, "batch size (default: graph.toml's)")
	epochs := flag.Int("epochs", 5, "epochs per loader")
	own := flag.Bool("own", false, "seed each part's loader with the training nodes it owns instead of rank = part, world = parts on split \"train\"")
	flag.Parse()
	if err := run(*bin, *parts, *fanouts, *batch, *epochs, !*own); err != nil {
		fmt.Fprintln(os.Stderr, "freq:", err)
		os.Exit(1)
	}
}

// counts are one part's measured reads.
type counts struct{ local, cached, remote, hits, misses uint64 }

func run(bin, parts, fanoutList string, batch, epochs int, split bool) error {
	if bin == "" || parts == "" {
		return errors.New("-node and -parts are required")
	}
	m, err := partition.OpenManifest(parts)
	if err != nil {
		return err
	}
	fo := m.Fanouts
	if fanoutList != "" {
		fo = nil
		for _, f := range strings.Split(fanoutList, ",") {
			v, err := strconv.Atoi(f)
			if err != nil {
				return err
			}
			fo = append(fo, v)
		}
	}
	if batch == 0 {
		batch = m.BatchSize
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := partition.Inspect(ctx, parts, partition.InspectOptions{Fanouts: fo, BatchSize: batch})
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "graphnode-perf-freq-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	rings, err := os.MkdirTemp("/dev/shm", "graphnode-perf-freq-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(rings)
	n := m.Parts
	names := make([]string, n)
	var peers strings.Builder
	addrs, err := mesh.LoopbackAddrs(n)
	if err != nil {
		return err
	}
	for p := range n {
		names[p] = fmt.Sprintf("host%d", p)
		fmt.Fprintf(&peers, "[[mesh.peers]]\npart = %d\nname = %q\naddr = %q\n", p, names[p], addrs[p])
	}
	certs := filepath.Join(work, "certs")
	if out, err := exec.Command(bin, "cert", "init", "--cluster", "freq", "--nodes", strings.Join(names, ","), "-o", certs).CombinedOutput(); err != nil {
		return fmt.Errorf("node cert init: %v: %s", err, out)
	}
	sockets := make([]string, n)
	procs := make([]*exec.Cmd, n)
	defer func() {
		for _, c := range procs {
			if c != nil {
				c.Process.Signal(syscall.SIGTERM)
				c.Wait()
			}
		}
	}()
	for p := range n {
		sockets[p] = filepath.Join(work, fmt.Sprintf("node%d.sock", p))
		text := fmt.Sprintf("version = 1\n[node]\nparts = %q\npart = %d\nname = %q\n[control]\nsocket = %q\n[rings]\ndir = %q\nsize = \"256MB\"\n[log]\nlevel = \"warn\"\nformat = \"text\"\n"+
			"[mesh]\ncerts = %q\ncluster = \"freq\"\n%s", parts, p, names[p], sockets[p], rings, certs, peers.String())
		cfg := filepath.Join(work, names[p]+".toml")
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			return err
		}
		procs[p] = exec.Command(bin, "run", "-c", cfg)
		procs[p].Stderr = os.Stderr
		if err := procs[p].Start(); err != nil {
			return err
		}
	}
	for p, s := range sockets {
		if err := localnode.WaitReady(ctx, s); err != nil {
			return fmt.Errorf("node %d: %w", p, err)
		}
	}
	got := make([]counts, n)
	for p := range n {
		if got[p], err = measure(ctx, parts, p, n, sockets[p], fo, batch, epochs, split); err != nil {
			return fmt.Errorf("part %d: %w", p, err)
		}
	}
	fmt.Printf("%s: fanouts %v, batch %d, %d epochs\n", parts, fo, batch, epochs)
	fmt.Printf("%4s %10s %8s %8s %8s   %8s %8s %8s   %8s %8s\n", "part", "reads/ep", "local%", "cached%", "remote%", "est loc%", "est cac%", "est rem%", "est reads", "hits ok")
	var sum counts
	for p, c := range got {
		t := float64(c.local + c.cached + c.remote)
		e := rep.Parts[p].Reads
		ok := c.hits == c.cached && c.misses == c.remote
		fmt.Printf("%4d %10.0f %8.2f %8.2f %8.2f   %8.2f %8.2f %8.2f   %8.0f %8v\n", p, t/float64(epochs),
			100*float64(c.local)/t, 100*float64(c.cached)/t, 100*float64(c.remote)/t, 100*e.Local, 100*e.Cached, 100*e.Remote, e.Reads, ok)
		sum.local, sum.cached, sum.remote = sum.local+c.local, sum.cached+c.cached, sum.remote+c.remote
	}
	t := float64(sum.local + sum.cached + sum.remote)
	e := rep.Reads
	fmt.Printf("%4s %10.0f %8.2f %8.2f %8.2f   %8.2f %8.2f %8.2f   %8.0f\n", "all", t/float64(epochs),
		100*float64(sum.local)/t, 100*float64(sum.cached)/t, 100*float64(sum.remote)/t, 100*e.Local, 100*e.Cached, 100*e.Remote, e.Reads)
	return nil
}

// measure reads every batch of a loader over part p's training nodes on
// node p and classifies every n_id entry.
func measure(ctx context.Context, parts string, p, n int, socket string, fo []int, batch, epochs int, split bool) (counts, error) {
	var c counts
	g, err := csr.Open(filepath.Join(parts, filepath.FromSlash(partition.PartFile(p))), csr.OpenOptions{})
	if err != nil {
		return c, err
	}
	defer g.Close()
	meta := g.Meta()
	mask, err := g.Mask(csr.SecTrain)
	if err != nil {
		return c, err
	}
	var seeds []uint64
	for it := mask.Iterator(); it.HasNext(); {
		seeds = append(seeds, meta.Start+uint64(it.Next()))
	}
	cache := slices.Clone(g.CacheIDs())
	before, err := client.Stats(ctx, socket)
	if err != nil {
		return c, err
	}
	o := client.DefaultOptions()
	o.SeedIDs, o.Fanouts, o.BatchSize, o.Shuffle, o.Epochs = seeds, fo, batch, true, epochs
	if split {
		o.SeedIDs, o.Split, o.Rank, o.WorldSize = nil, "train", p, n
	}
	l, err := client.OpenLoader(ctx, socket, o)
	if err != nil {
		return c, err
	}
	defer l.Close()
	for e := 0; e < epochs; {
		b, err := l.Next(ctx)
		if errors.Is(err, client.ErrEndOfEpoch) {
			e++
			continue
		}
		if err != nil {
			return c, err
		}
		for _, id := range b.NID {
			switch _, hit := slices.BinarySearch(cache, id); {
			case id >= meta.Start && id < meta.End:
				c.local++
			case hit:
				c.cached++
			default:
				c.remote++
			}
		}
	}
	time.Sleep(300 * time.Millisecond) // samplers report their counters every 100 ms
	after, err := client.Stats(ctx, socket)
	if err != nil {
		return c, err
	}
	c.hits, c.misses = after.CacheHits-before.CacheHits, after.CacheMisses-before.CacheMisses
	return c, nil
}
