package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"graphnode/csr"
	"graphnode/mesh"
	"graphnode/node"
	"graphnode/node/client"
	"graphnode/node/control"
	"graphnode/partition"
	"graphnode/sample"
)

// clusterName is the cluster of every test cluster's certificates.
const clusterName = "test"

// clusterParts writes, once per size, the fixture graph of writeParts
// split into n random partitions (as `node partition --method random`).
var clusterFixture struct {
	mu    sync.Mutex
	parts map[string]string
}

func clusterParts(t *testing.T, n int) string { return clusterPartsCached(t, n, 0) }

// clusterPartsCached is clusterParts with every part caching the hottest
// cacheRatio × (its node count) nodes of the others (as `node partition
// --cache-ratio`; 0 = no cache).
func clusterPartsCached(t *testing.T, n int, cacheRatio float64) string {
	t.Helper()
	return clusterPartsOf(t, n, cacheRatio, csr.TypeF32)
}

// clusterPartsOf is clusterPartsCached with features stored as featType
// (csr.TypeF32 or csr.TypeF16).
func clusterPartsOf(t *testing.T, n int, cacheRatio float64, featType csr.ElemType) string {
	t.Helper()
	bin, _ := setup(t)
	clusterFixture.mu.Lock()
	defer clusterFixture.mu.Unlock()
	name := fmt.Sprintf("parts-%d", n)
	if cacheRatio > 0 {
		name += fmt.Sprintf("-cache%g", cacheRatio)
	}
	if featType != csr.TypeF32 {
		name += "-" + featType.String()
	}
	if dir, ok := clusterFixture.parts[name]; ok {
		return dir
	}
	dir := filepath.Join(filepath.Dir(bin), name)
	node.SBMPartsForTest(t, dir, 3000, 12, 16, n, cacheRatio, featType)
	if clusterFixture.parts == nil {
		clusterFixture.parts = map[string]string{}
	}
	clusterFixture.parts[name] = dir
	return dir
}

// testCluster is n `node run` processes on 127.0.0.1, one per part.
type testCluster struct {
	t       *testing.T
	bin     string
	parts   string
	certs   string
	addrs   []string // UDP address of each part's mesh server
	configs []string
	sockets []string
	rings   []string
	peers   string // the [[mesh.peers]] tables of every node
	nodes   []*daemon
	client  *daemon    // startClient's
	mu      sync.Mutex // guards pids: loaders of several ranks note theirs at once
	pids    []int      // every sampler pid seen; checked gone after the test
}

// freeUDPs returns n distinct 127.0.0.1 UDP addresses nobody listens on
// now (mesh.LoopbackAddrs).
func freeUDPs(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := mesh.LoopbackAddrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

func hostName(p int) string { return fmt.Sprintf("host%d", p) }

// startCluster starts one node per part of parts, with the given mesh
// timeout, and waits until every node reports ready.
func startCluster(t *testing.T, parts string, n int, timeout string) *testCluster {
	t.Helper()
	return startClusterWith(t, parts, n, timeout, nil)
}

// startClusterWith is startCluster with extra TOML (a [kv] table) for
// part p's config, when extra is not nil.
func startClusterWith(t *testing.T, parts string, n int, timeout string, extra func(p int) string) *testCluster {
	t.Helper()
	bin, _ := setup(t)
	c := &testCluster{t: t, bin: bin, parts: parts, certs: filepath.Join(t.TempDir(), "certs")}
	// Registered first, so it runs after every daemon has stopped.
	t.Cleanup(c.assertNoSamplers)
	nodes := []string{"intruder", clientName}
	for p := range n {
		nodes = append(nodes, hostName(p))
	}
	c.addrs = freeUDPs(t, n)
	if err := mesh.WriteCluster(c.certs, mesh.ClusterSpec{Cluster: clusterName, Nodes: nodes}); err != nil {
		t.Fatal(err)
	}
	var peers strings.Builder
	for p := range n {
		fmt.Fprintf(&peers, "[[mesh.peers]]\npart = %d\nname = %q\naddr = %q\n", p, hostName(p), c.addrs[p])
	}
	c.peers = peers.String()
	for p := range n {
		dir, rings := nodeDirs(t)
		socket := filepath.Join(dir, "node.sock")
		// Each host holds graph.toml and its own part, as on a cluster.
		host := hostParts(t, parts, filepath.Join(dir, "parts"), partition.PartFile(p))
		text := fmt.Sprintf("version = 1\n[node]\nparts = %q\npart = %d\nname = %q\n[control]\nsocket = %q\n"+
			"[rings]\ndir = %q\nsize = \"16MiB\"\n[samplers]\ndrain_timeout = \"5s\"\n"+
			"[mesh]\ncerts = %q\ncluster = %q\ntimeout = %q\n%s[log]\nformat = \"json\"\nlevel = \"debug\"\n",
			host, p, hostName(p), socket, rings, c.certs, clusterName, timeout, peers.String())
		if extra != nil {
			text += extra(p)
		}
		cfg := filepath.Join(dir, "node.toml")
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		c.configs, c.sockets, c.rings = append(c.configs, cfg), append(c.sockets, socket), append(c.rings, rings)
	}
	// Start in reverse order: a node must not care who comes first.
	c.nodes = make([]*daemon, n)
	for p := n - 1; p >= 0; p-- {
		c.nodes[p] = startDaemon(t, bin, c.configs[p], c.sockets[p], c.rings[p])
	}
	for p := range n {
		c.waitReady(p)
	}
	return c
}

// hostParts makes dir a partition directory holding graph.toml of the
// set at parts and the given files of it (hard links, or copies).
func hostParts(t *testing.T, parts, dir string, files ...string) string {
	t.Helper()
	for _, f := range append([]string{partition.ManifestFile}, files...) {
		from, to := filepath.Join(parts, f), filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Link(from, to) != nil {
			b, err := os.ReadFile(from)
			if err == nil {
				err = os.WriteFile(to, b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// clientName is the certificate name of a test cluster's client node.
const clientName = "trainer0"

// startClient starts a client node (node.role = "client") of the
// cluster, with the given mesh timeout, and waits until it is ready.
func (c *testCluster) startClient(timeout string) (d *daemon, socket string) {
	t := c.t
	t.Helper()
	dir, rings := nodeDirs(t)
	socket = filepath.Join(dir, "node.sock")
	parts := hostParts(t, c.parts, filepath.Join(dir, "parts")) // graph.toml alone
	text := fmt.Sprintf("version = 1\n[node]\nrole = \"client\"\nparts = %q\nname = %q\n[control]\nsocket = %q\n"+
		"[rings]\ndir = %q\n[mesh]\ncerts = %q\ncluster = %q\ntimeout = %q\n%s[log]\nformat = \"json\"\nlevel = \"debug\"\n",
		parts, clientName, socket, rings, c.certs, clusterName, timeout, c.peers)
	cfg := filepath.Join(dir, "node.toml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, c.bin, cfg, socket, rings)
	c.client = d
	eventually(t, 20*time.Second, "client node ready", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := client.Stats(ctx, socket)
		return err == nil && st.Ready
	})
	return d, socket
}

// restart starts part p's node again (after a kill) and waits until it
// is ready.
func (c *testCluster) restart(p int) {
	c.nodes[p] = startDaemon(c.t, c.bin, c.configs[p], c.sockets[p], c.rings[p])
	c.waitReady(p)
}

func (c *testCluster) waitReady(p int) {
	c.t.Helper()
	eventually(c.t, 20*time.Second, fmt.Sprintf("node %d ready", p), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := client.Stats(ctx, c.sockets[p])
		return err == nil && st.Ready
	})
}

// note records the sampler pids a stats response lists.
func (c *testCluster) note(st *control.Stats) {
	c.mu.Lock()
	c.pids = append(c.pids, samplerPIDs(st)...)
	c.mu.Unlock()
}

func (c *testCluster) assertNoSamplers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pid := range c.pids {
		if !pidGone(pid) {
			c.t.Errorf("sampler pid %d still running after the test", pid)
		}
	}
	for _, d := range c.nodes {
		if d != nil && !pidGone(d.cmd.Process.Pid) {
			c.t.Errorf("node run pid %d still running after the test", d.cmd.Process.Pid)
		}
	}
}

// unionReference samples o's batches for rank/world in this process over
// sample.NewUnion of the same part files: what every node's ring must
// carry, byte for byte.
func unionReference(t *testing.T, parts string, o client.Options) [][][]byte {
	t.Helper()
	m, err := partition.OpenDir(parts)
	if err != nil {
		t.Fatal(err)
	}
	book, err := m.Book()
	if err != nil {
		t.Fatal(err)
	}
	var ps []sample.Partition
	var seeds []uint64
	for p := range book.Parts() {
		g, err := csr.Open(node.PartPath(parts, p), csr.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		cp, err := sample.FromCSR(g)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, cp)
		if o.SeedEdges != nil {
			continue
		}
		mask, err := g.Mask(o.Split)
		if err != nil {
			t.Fatal(err)
		}
		for it := mask.Iterator(); it.HasNext(); {
			seeds = append(seeds, g.Meta().Start+uint64(it.Next()))
		}
	}
	if o.SeedEdges != nil { // a link loader orders its edges' indices
		for i := range o.SeedEdges.Src {
			seeds = append(seeds, uint64(i))
		}
	}
	u, err := sample.NewUnion(book, ps)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sample.NewPlan(seeds, sample.PlanOptions{BatchSize: o.BatchSize, Shuffle: o.Shuffle,
		DropLast: o.DropLast, Seed: o.Seed, Rank: o.Rank, WorldSize: o.WorldSize})
	if err != nil {
		t.Fatal(err)
	}
	src := sample.NewLocalSource(u)
	s, err := sample.New(sample.Config{Fanouts: o.Fanouts, Local: u, Schema: u.Schema(), Features: src, Labels: src})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out := make([][][]byte, o.Epochs)
	for e := range o.Epochs {
		ep := plan.Epoch(uint64(e), nil)
		for b := range ep.NumBatches() {
			var batch *sample.Batch
			if e := o.SeedEdges; e != nil {
				var src, dst []uint64
				for _, i := range ep.Batch(b) {
					src, dst = append(src, e.Src[i]), append(dst, e.Dst[i])
				}
				batch, err = s.SampleLink(ctx, ep.Key(b), src, dst, sample.LinkOptions{NegRatio: o.NegRatio, NumNodes: book.NumNodes(), Exclude: o.ExcludeSeedEdges})
			} else {
				batch, err = s.Sample(ctx, ep.Key(b), ep.Batch(b))
			}
			if err == nil {
				err = s.Gather(ctx, batch)
			}
			if err != nil {
				t.Fatal(err)
			}
			size, _ := sample.EncodedSize(batch)
			rec := make([]byte, size)
			if _, err := sample.Encode(rec, batch); err != nil {
				t.Fatal(err)
			}
			out[e] = append(out[e], rec)
		}
	}
	return out
}

// meshClient is an in-test mesh client of node name, with the identity
// in certs, aimed at part p's server.
func meshClient(t *testing.T, certs, name, checksum string, p int, addr string) *mesh.Client {
	t.Helper()
	return meshClientAs(t, certs, name, checksum, -1, p, addr)
}

// meshClientAs is meshClient whose hello claims part own (-1: none, as a
// client node's).
func meshClientAs(t *testing.T, certs, name, checksum string, own, p int, addr string) *mesh.Client {
	t.Helper()
	id, err := mesh.LoadIdentity(certs, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := mesh.NewClient(mesh.ClientConfig{
		Identity: id, Cluster: id.Cluster, Checksum: checksum, Part: own,
		Peers: map[int]mesh.Peer{p: {Name: hostName(p), Addr: addr}}, Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
