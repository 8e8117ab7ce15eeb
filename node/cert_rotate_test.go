package node_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"graphnode/mesh"
	"graphnode/node/client"
)

// TestSamplersKeepNodeIdentity: the certificate files of a running
// cluster replaced by another CA's (node cert init --force into its
// certs directory, as a rolling CA rotation copies them onto a host
// before its restart), a loader that pulls rows from the other part
// still reads the union's batches: its samplers dial as the identity
// their node loaded at its start, as the node and its peers do. Each
// sampler read the files at its start, and every peer refused it (an
// unknown authority) while the nodes reported themselves ready.
func TestSamplersKeepNodeIdentity(t *testing.T) {
	parts := clusterParts(t, 2)
	c := startCluster(t, parts, 2, "10s")
	oldCA, err := os.ReadFile(filepath.Join(c.certs, mesh.CAcertFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := mesh.WriteCluster(c.certs, mesh.ClusterSpec{Cluster: clusterName, Nodes: []string{hostName(0), hostName(1)}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if newCA, err := os.ReadFile(filepath.Join(c.certs, mesh.CAcertFile)); err != nil || bytes.Equal(newCA, oldCA) {
		t.Fatalf("ca.crt not replaced by another CA's (%v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := baseOptions()
	o.Epochs, o.Workers, o.Concurrency, o.WorldSize, o.Rank = 1, 2, 2, 2, 0
	want := unionReference(t, parts, o)
	l, err := client.OpenLoader(ctx, c.sockets[0], o)
	if err != nil {
		t.Fatalf("open a loader on host0 after the files changed: %v", err)
	}
	defer l.Close()
	if st, err := l.Stats(ctx); err == nil {
		c.note(st)
	}
	if err := compare(ctx, l, want, "host0 rank 0 of 2"); err != nil {
		t.Fatal(err)
	}
	// The batches needed host1's rows: pulled over the mesh, by the
	// samplers, with no error.
	st, err := client.Stats(ctx, c.sockets[0])
	if err != nil {
		t.Fatal(err)
	}
	if !st.Ready || st.CacheMisses == 0 || st.Mesh == nil || len(st.Mesh.Peers) != 1 {
		t.Fatalf("host0 stats: ready %v, cache misses %d, mesh %+v: want rows pulled from host1", st.Ready, st.CacheMisses, st.Mesh)
	}
	if ps := st.Mesh.Peers[0]; ps.Out.Requests == 0 || ps.Out.Errors != 0 {
		t.Errorf("host0 to %s: %+v, want requests and no errors", ps.Name, ps.Out)
	}
}
