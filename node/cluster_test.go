package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"graphnode/mesh"
	"graphnode/node/client"
	"graphnode/partition"
)

// readAll reads every batch of a loader and compares it with want.
func readAll(t *testing.T, ctx context.Context, l *client.Loader, want [][][]byte, label string) {
	t.Helper()
	if err := compare(ctx, l, want, label); err != nil {
		t.Fatal(err)
	}
}

// TestClusterMatchesUnion: on 2 and 4 nodes, and on 2 nodes whose parts
// cache a share of each other's rows, a loader of rank r on node r reads
// exactly the batches of one process sampling the union of the same part
// files, for several seeds and worker counts; every node is ready, its
// stats show traffic to and from its peers, and rows come from the cache
// exactly when the parts have one.
func TestClusterMatchesUnion(t *testing.T) {
	for _, tt := range []struct {
		n     int
		cache float64
	}{{2, 0}, {4, 0}, {2, 0.3}} {
		n := tt.n
		t.Run(fmt.Sprintf("nodes=%d,cache=%g", n, tt.cache), func(t *testing.T) {
			parts := clusterPartsCached(t, n, tt.cache)
			c := startCluster(t, parts, n, "10s")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for _, tc := range []struct {
				seed                 uint64
				workers, concurrency int
				shuffle              bool
			}{{1, 1, 1, false}, {42, 2, 3, true}, {7, 3, 2, true}} {
				o := baseOptions()
				o.Epochs, o.Seed, o.Workers, o.Concurrency, o.Shuffle, o.WorldSize = 1, tc.seed, tc.workers, tc.concurrency, tc.shuffle, n
				errs := make(chan error, n)
				for r := range n {
					o := o
					o.Rank = r
					want := unionReference(t, parts, o)
					go func() {
						errs <- func() (err error) {
							defer func() {
								if p := recover(); p != nil {
									err = fmt.Errorf("%v", p)
								}
							}()
							l, err := client.OpenLoader(ctx, c.sockets[r], o)
							if err != nil {
								return fmt.Errorf("rank %d: %w", r, err)
							}
							defer l.Close()
							if st, err := l.Stats(ctx); err == nil {
								c.note(st)
							}
							return compare(ctx, l, want, fmt.Sprintf("seed %d workers %d rank %d", tc.seed, tc.workers, r))
						}()
					}()
				}
				for range n {
					if err := <-errs; err != nil {
						t.Fatal(err)
					}
				}
			}
			for p := range n {
				st, err := client.Stats(ctx, c.sockets[p])
				if err != nil {
					t.Fatal(err)
				}
				if !st.Ready || st.Mesh == nil || len(st.Mesh.Peers) != n-1 {
					t.Fatalf("node %d stats: ready %v mesh %+v", p, st.Ready, st.Mesh)
				}
				for _, ps := range st.Mesh.Peers {
					if !ps.Ready || ps.Out.Requests == 0 || ps.In.Requests == 0 || ps.Out.BytesReceived == 0 || ps.Out.P99Ms <= 0 || ps.Out.Errors != 0 {
						t.Errorf("node %d peer %s: %+v, want traffic both ways, no errors", p, ps.Name, ps)
					}
				}
				switch {
				case tt.cache == 0 && (st.CacheMisses == 0 || st.CacheHits != 0 || st.CacheRows != 0):
					t.Errorf("node %d: cache rows %d hits %d misses %d, want remote rows pulled and no cache", p, st.CacheRows, st.CacheHits, st.CacheMisses)
				case tt.cache > 0 && (st.CacheMisses == 0 || st.CacheHits == 0 || st.CacheRows == 0):
					t.Errorf("node %d: cache rows %d hits %d misses %d, want rows both from the cache and pulled", p, st.CacheRows, st.CacheHits, st.CacheMisses)
				}
			}
			if !c.nodes[0].logHas(`"msg":"serving"`, `"mesh":"127.0.0.1:`) || !c.nodes[0].logHas(`"msg":"node ready"`, `"peers":[`) {
				t.Errorf("node 0 log lacks serving and ready lines:\n%s", c.nodes[0].log)
			}
		})
	}
}

// compare is readAll returning an error, for goroutines.
func compare(ctx context.Context, l *client.Loader, want [][][]byte, label string) error {
	for e := range want {
		n := 0
		for b, err := range l.All(ctx) {
			if err != nil {
				return fmt.Errorf("%s: epoch %d batch %d: %w", label, e, n, err)
			}
			if b.Epoch != e || b.Index != n || !bytes.Equal(b.Record, want[e][n]) {
				return fmt.Errorf("%s: epoch %d batch %d (got %d/%d): record differs from the union of the part files", label, e, n, b.Epoch, b.Index)
			}
			n++
		}
		if n != len(want[e]) {
			return fmt.Errorf("%s: epoch %d: %d batches, want %d", label, e, n, len(want[e]))
		}
	}
	if _, err := l.Next(ctx); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: after the last epoch: %v, want io.EOF", label, err)
	}
	return nil
}

// TestClusterPeerKilled: SIGKILL to a peer mid-epoch gives the trainer an
// error naming that peer within the mesh timeout, and closing the loader
// removes its ring; once the peer is
// restarted, a new loader on the surviving node works again, without
// restarting it.
func TestClusterPeerKilled(t *testing.T) {
	const timeout = 3 * time.Second
	parts := clusterParts(t, 2)
	c := startCluster(t, parts, 2, timeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := baseOptions()
	o.WorldSize, o.Workers, o.Epochs, o.BatchSize, o.RingSize = 2, 2, 1000, 16, "4MiB"
	l := openReading(t, ctx, c.sockets[0], o, 5)
	if st, err := l.Stats(ctx); err == nil {
		c.note(st)
	}
	c.nodes[1].cmd.Process.Signal(syscall.SIGKILL)
	<-c.nodes[1].done
	killed := time.Now()
	for {
		_, err := l.Next(ctx)
		if err == nil || errors.Is(err, client.ErrEndOfEpoch) {
			continue
		}
		if !errors.Is(err, client.ErrSampler) || !strings.Contains(err.Error(), "peer host1 (127.0.0.1:") {
			t.Fatalf("err = %v, want a sampler error naming peer host1", err)
		}
		t.Logf("after %v: %v", time.Since(killed), err)
		break
	}
	if d := time.Since(killed); d > timeout+2*time.Second {
		t.Errorf("error came %v after the kill, want within the %v mesh timeout (+2s)", d, timeout)
	}
	ring := l.Info().Ring
	l.Close()
	eventually(t, 5*time.Second, "ring of the failed loader removed", func() bool {
		_, err := os.Stat(ring)
		return errors.Is(err, os.ErrNotExist)
	})

	c.restart(1)
	o.Epochs, o.BatchSize, o.RingSize = 1, 64, ""
	want := unionReference(t, parts, o)
	l2, err := client.OpenLoader(ctx, c.sockets[0], o)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if st, err := l2.Stats(ctx); err == nil {
		c.note(st)
	}
	readAll(t, ctx, l2, want, "after restart")
}

// TestClusterRefusals: the mesh port of a node refuses a client with a
// certificate of another CA and one serving another partitioning (the
// error says checksum), and survives garbage datagrams.
func TestClusterRefusals(t *testing.T) {
	parts := clusterParts(t, 2)
	c := startCluster(t, parts, 2, "5s")
	m, err := partition.OpenDir(parts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	other := t.TempDir()
	if err := mesh.WriteCluster(other, mesh.ClusterSpec{Cluster: clusterName, Nodes: []string{"intruder"}}); err != nil {
		t.Fatal(err)
	}
	err = meshClient(t, other, "intruder", m.Checksum, 0, c.addrs[0]).WaitReady(ctx)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("certificate of another CA: %v, want a certificate refusal", err)
	}
	err = meshClient(t, c.certs, "intruder", "0123456789abcdef", 0, c.addrs[0]).WaitReady(ctx)
	if !errors.Is(err, mesh.ErrRefused) || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("another partitioning: %v, want ErrRefused naming the checksum", err)
	}
	// A node of the cluster's CA claiming host1's part (its config a copy
	// of host1's under another name) was accepted, and served diverging
	// rows of part 1 to whoever asked it.
	for own, want := range map[int]string{1: "serves part 1, which is node host1's", 7: "serves part 7, which no [[mesh.peers]] entry"} {
		_, err = meshClientAs(t, c.certs, "intruder", m.Checksum, own, 0, c.addrs[0]).Stats(ctx, 0)
		if !errors.Is(err, mesh.ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("a node claiming part %d: %v, want ErrRefused saying %q", own, err, want)
		}
	}

	conn, err := net.Dial("udp", c.addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1500)
	for i := range 2000 {
		n := 1 + rng.IntN(len(buf))
		for j := range n {
			buf[j] = byte(rng.Uint32())
		}
		if i%2 == 0 {
			buf[0] |= 0xc0 // a QUIC long header: parsed further
		}
		conn.Write(buf[:n])
	}
	conn.Close()
	good := meshClient(t, c.certs, "intruder", m.Checksum, 0, c.addrs[0])
	st, err := good.Stats(ctx, 0)
	if err != nil || st.Node != "host0" || st.Part != 0 {
		t.Fatalf("after garbage: stats %+v, %v; want host0 part 0 answering", st, err)
	}
	select {
	case <-c.nodes[0].done:
		t.Fatalf("node 0 exited after garbage: %v", c.nodes[0].err)
	default:
	}
	if !c.nodes[0].logHas(`refused peer`, `intruder`) {
		t.Errorf("node 0 did not log the refused peer:\n%s", c.nodes[0].log)
	}
}
