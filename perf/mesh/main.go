// Command mesh measures distributed sampling: it starts one `node run`
// per partition of a parts/ directory on 127.0.0.1 (QUIC mesh, generated
// certificates), opens one loader per node (rank = part, world = parts),
// reads batches from all of them at once and prints one table row:
// batches/s summed over nodes, sampled edges/s, and mesh bytes per batch
// (from every node's per-peer stats). With one part it measures the
// local baseline through the same path (no mesh).
//
//	go run ./perf/mesh -node /tmp/node -parts parts-2/ -label "random 2"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"graphnode/mesh"
	"graphnode/node/client"
	"graphnode/partition"
	"graphnode/perf/internal/localnode"
)

func main() {
	var (
		bin         = flag.String("node", "", "built node binary (required)")
		parts       = flag.String("parts", "", "parts/ directory (required)")
		label       = flag.String("label", "", "row label")
		batches     = flag.Int("batches", 60, "batches read per node after warm-up")
		warm        = flag.Int("warm", 30, "warm-up batches per node: more than the ring holds, so that the timed batches are made while they are read")
		ringSize    = flag.String("ring", "1GB", "[rings] size of every node (one loader's ring)")
		batch       = flag.Int("batch", 1024, "batch size")
		fanouts     = flag.String("fanouts", "15,10,5", "fanouts")
		workers     = flag.Int("workers", 2, "sampler processes per loader")
		concurrency = flag.Int("concurrency", 4, "batches in flight per sampler")
		meshTimeout = flag.String("mesh-timeout", "10s", "[mesh] timeout of every node: one mesh call, retries included")
		header      = flag.Bool("header", false, "print the table header first")
		viaClient   = flag.Bool("client", false, "server-client mode: open every rank's loader on one client node (node.role = \"client\") that the part nodes stream batches to, instead of on each part's own node")
	)
	flag.Parse()
	if *header {
		fmt.Printf("%-28s %5s %10s %14s %14s %10s\n", "config", "nodes", "batches/s", "edges/s", "wire KB/batch", "p99 ms")
	}
	if *bin == "" || *parts == "" {
		return
	}
	o := options{label: *label, batches: *batches, warm: *warm, batchSize: *batch, fanouts: *fanouts,
		workers: *workers, concurrency: *concurrency, meshTimeout: *meshTimeout, ring: *ringSize, client: *viaClient}
	if err := run(*bin, *parts, o); err != nil {
		fmt.Fprintln(os.Stderr, "mesh:", err)
		os.Exit(1)
	}
}

// options are one row's measurement settings.
type options struct {
	label                    string
	batches, warm, batchSize int
	fanouts                  string
	workers, concurrency     int
	meshTimeout              string
	ring                     string
	client                   bool
}

func run(bin, parts string, o options) error {
	label, batches, warm, batchSize, fanoutList := o.label, o.batches, o.warm, o.batchSize, o.fanouts
	workers, concurrency := o.workers, o.concurrency
	m, err := partition.OpenDir(parts)
	if err != nil {
		return err
	}
	n := m.Parts
	work, err := os.MkdirTemp("", "graphnode-perf-mesh-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	rings, err := os.MkdirTemp("/dev/shm", "graphnode-perf-mesh-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(rings)
	certs := filepath.Join(work, "certs")
	names := make([]string, n)
	addrs, err := mesh.LoopbackAddrs(n)
	if err != nil {
		return err
	}
	for p := range n {
		names[p] = fmt.Sprintf("host%d", p)
	}
	if err := mesh.WriteCluster(certs, mesh.ClusterSpec{Cluster: "perf", Nodes: append(names, "trainer0")}); err != nil {
		return err
	}
	var peers strings.Builder
	for p := range n {
		fmt.Fprintf(&peers, "[[mesh.peers]]\npart = %d\nname = %q\naddr = %q\n", p, names[p], addrs[p])
	}
	sockets := make([]string, n, n+1)
	procs := make([]*exec.Cmd, n, n+1)
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
		text := fmt.Sprintf("version = 1\n[node]\nparts = %q\npart = %d\nname = %q\n[control]\nsocket = %q\n[rings]\ndir = %q\nsize = %q\n[log]\nlevel = \"warn\"\nformat = \"text\"\n",
			parts, p, names[p], sockets[p], rings, o.ring)
		if n > 1 || o.client {
			text += fmt.Sprintf("[mesh]\ncerts = %q\ncluster = \"perf\"\ntimeout = %q\n%s", certs, o.meshTimeout, peers.String())
		}
		if procs[p], err = startNode(bin, work, fmt.Sprintf("node%d", p), text); err != nil {
			return err
		}
	}
	trainers := sockets // where the loaders open: each rank on its part's node
	if o.client {
		socket := filepath.Join(work, "client.sock")
		text := fmt.Sprintf("version = 1\n[node]\nrole = \"client\"\nparts = %q\nname = \"trainer0\"\n[control]\nsocket = %q\n[rings]\ndir = %q\n[log]\nlevel = \"warn\"\nformat = \"text\"\n"+
			"[mesh]\ncerts = %q\ncluster = \"perf\"\ntimeout = %q\n%s", parts, socket, rings, certs, o.meshTimeout, peers.String())
		c, err := startNode(bin, work, "client", text)
		if err != nil {
			return err
		}
		procs, sockets = append(procs, c), append(sockets, socket)
		trainers = make([]string, n)
		for p := range trainers {
			trainers[p] = socket
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for p, s := range sockets {
		if err := localnode.WaitReady(ctx, s); err != nil {
			return fmt.Errorf("node %d: %w", p, err)
		}
	}
	var fo []int
	for _, f := range strings.Split(fanoutList, ",") {
		v, err := strconv.Atoi(f)
		if err != nil {
			return err
		}
		fo = append(fo, v)
	}
	loaders := make([]*client.Loader, n)
	for p := range n {
		o := client.DefaultOptions()
		o.Split, o.Fanouts, o.BatchSize, o.Shuffle, o.Epochs = "train", fo, batchSize, true, 1000
		o.Rank, o.WorldSize, o.Workers, o.Concurrency = p, n, workers, concurrency
		if loaders[p], err = client.OpenLoader(ctx, trainers[p], o); err != nil {
			return fmt.Errorf("node %d: %w", p, err)
		}
		defer loaders[p].Close()
	}
	read := func(l *client.Loader, k int) (edges int64, err error) {
		for i := 0; i < k; {
			b, err := l.Next(ctx)
			if errors.Is(err, client.ErrEndOfEpoch) {
				continue
			}
			if err != nil {
				return edges, err
			}
			for _, e := range b.NumSampledEdges {
				edges += e
			}
			i++
		}
		return edges, nil
	}
	if err := each(n, func(p int) error { _, err := read(loaders[p], warm); return err }); err != nil {
		return err
	}
	before, _ := wire(ctx, sockets)
	var mu sync.Mutex
	var edges int64
	start := time.Now()
	err = each(n, func(p int) error {
		e, err := read(loaders[p], batches)
		mu.Lock()
		edges += e
		mu.Unlock()
		return err
	})
	elapsed := time.Since(start).Seconds()
	if err != nil {
		return err
	}
	after, p99 := wire(ctx, sockets)
	total := float64(n * batches)
	fmt.Printf("%-28s %5d %10.1f %14.3g %14.1f %10.1f\n", label, n, total/elapsed, float64(edges)/elapsed,
		float64(after-before)/total/1e3, p99)
	return nil
}

// startNode writes a node.toml of text into work and starts `node run` on it.
func startNode(bin, work, name, text string) (*exec.Cmd, error) {
	cfg := filepath.Join(work, name+".toml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		return nil, err
	}
	c := exec.Command(bin, "run", "-c", cfg)
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

// wire is the mesh bytes every node's samplers sent and received, and
// the largest outbound p99 latency.
func wire(ctx context.Context, sockets []string) (bytes uint64, p99 float64) {
	time.Sleep(250 * time.Millisecond) // samplers report every 100 ms
	for _, s := range sockets {
		st, err := client.Stats(ctx, s)
		if err != nil || st.Mesh == nil {
			continue
		}
		for _, p := range st.Mesh.Peers {
			bytes += p.Out.BytesSent + p.Out.BytesReceived
			p99 = max(p99, p.Out.P99Ms)
		}
	}
	return bytes, p99
}

func each(n int, f func(p int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for p := range n {
		wg.Go(func() { errs[p] = f(p) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
