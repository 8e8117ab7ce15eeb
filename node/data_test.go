package node_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"graphnode/csr"
	"graphnode/node"
	"graphnode/node/client"
	"graphnode/node/control"
	"graphnode/partition"
)

// partRows reads every part file of parts: the feature row and labels of
// each global id.
func partRows(t *testing.T, parts string) (rows [][]byte, labels [][]int32) {
	t.Helper()
	m, err := partition.OpenDir(parts)
	if err != nil {
		t.Fatal(err)
	}
	for p := range m.Parts {
		g, err := csr.Open(node.PartPath(parts, p), csr.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		k := len(g.Labels()) / g.NumNodes()
		for v := range g.NumNodes() {
			rows = append(rows, bytes.Clone(g.FeatRow(uint32(v))))
			labels = append(labels, slices.Clone(g.Labels()[v*k:(v+1)*k]))
		}
		g.Close()
	}
	return rows, labels
}

// checkData reads the features and labels of ids through socket and
// compares them with the part files' rows.
func checkData(t *testing.T, ctx context.Context, socket string, ids []uint64, rows [][]byte, labels [][]int32) {
	checkDataOf(t, ctx, socket, control.DTypeF32, ids, rows, labels)
}

// checkDataOf is checkData for features of dtype.
func checkDataOf(t *testing.T, ctx context.Context, socket string, dtype byte, ids []uint64, rows [][]byte, labels [][]int32) {
	t.Helper()
	d, err := client.DialData(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f, err := d.Features(ctx, ids)
	if err != nil {
		t.Fatalf("%s: features: %v", socket, err)
	}
	rb := len(rows[0])
	if f.DType != dtype || int(f.Dim)*control.ValueBytes(dtype) != rb || int(f.N) != len(ids) {
		t.Fatalf("%s: features of dtype %d, dim %d, %d rows; want dtype %d rows of %d bytes, %d rows", socket, f.DType, f.Dim, f.N, dtype, rb, len(ids))
	}
	for i, id := range ids {
		if !bytes.Equal(f.Rows[i*rb:(i+1)*rb], rows[id]) {
			t.Fatalf("%s: features of node %d (ids[%d]) differ from its part file's row", socket, id, i)
		}
	}
	dim, got, err := d.Labels(ctx, ids)
	if err != nil {
		t.Fatalf("%s: labels: %v", socket, err)
	}
	for i, id := range ids {
		if !slices.Equal(got[i*dim:(i+1)*dim], labels[id]) {
			t.Fatalf("%s: labels of node %d: %v, want %v", socket, id, got[i*dim:(i+1)*dim], labels[id])
		}
	}
}

// TestNodeData: a trainer reads the features and labels of nodes of any
// part, by global id, through its node: owned rows, rows of the node's
// cache section and rows of its peer, in the order asked (duplicates
// included), equal to the part files'; through a client node (every row
// from a peer) the same; a node of a set of one part from its file.
// Ids past the graph and requests too large for one answer get errors
// naming them, and the connection stays usable.
func TestNodeData(t *testing.T) {
	parts := clusterPartsCached(t, 2, 0.2)
	rows, labels := partRows(t, parts)
	c := startCluster(t, parts, 2, "10s")
	_, clientSocket := c.startClient("10s")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := partition.OpenDir(parts)
	if err != nil {
		t.Fatal(err)
	}
	n := m.Nodes
	split := m.Part[1].Start
	g0, err := csr.Open(node.PartPath(parts, 0), csr.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cached := slices.Clone(g0.CacheIDs())
	g0.Close()
	if len(cached) < 2 {
		t.Fatalf("part 0 caches %d nodes, want some", len(cached))
	}
	ids := []uint64{0, n - 1, split, split - 1, 5, 5, cached[0], cached[len(cached)-1], n / 2}
	for _, s := range []string{c.sockets[0], c.sockets[1], clientSocket} {
		checkData(t, ctx, s, ids, rows, labels)
	}

	d, err := client.DialData(ctx, c.sockets[0])
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Features(ctx, []uint64{1, n}); !errors.Is(err, client.ErrData) || !strings.Contains(err.Error(), "ids[1] = "+strconv.FormatUint(n, 10)+" is not a node of the partition set") {
		t.Fatalf("id past the graph: %v", err)
	}
	// More rows than one answer holds: the client asks in several
	// requests, each answered whole by the node.
	many := make([]uint64, control.MaxFrame/len(rows[0])+1)
	many[len(many)-1] = n - 1
	f, err := d.Features(ctx, many)
	if err != nil || int(f.N) != len(many) {
		t.Fatalf("more ids than one answer holds: %d rows, %v; want %d", f.N, err, len(many))
	}
	rb := len(rows[0])
	for _, i := range []int{0, len(many) / 2, len(many) - 1} {
		if !bytes.Equal(f.Rows[i*rb:(i+1)*rb], rows[many[i]]) {
			t.Fatalf("more ids than one answer holds: row %d (node %d) differs from its part file's row", i, many[i])
		}
	}
	if f, err := d.Features(ctx, nil); err != nil || f.N != 0 {
		t.Fatalf("no ids: %+v, %v", f, err)
	}
	checkData(t, ctx, c.sockets[0], []uint64{3}, rows, labels) // still usable

	bin, one := setup(t)
	cfg, socket, rings := newConfig(t, one, "")
	startDaemon(t, bin, cfg, socket, rings)
	rows1, labels1 := partRows(t, one)
	checkData(t, ctx, socket, []uint64{0, uint64(len(rows1) - 1), 7, 7}, rows1, labels1)
}

// TestNodeDataF16: a partition set of float16 features is read as it is
// stored, through a node (owned and peer rows) and through a client node.
func TestNodeDataF16(t *testing.T) {
	parts := clusterPartsOf(t, 2, 0, csr.TypeF16)
	rows, labels := partRows(t, parts)
	if len(rows[0]) != 32 {
		t.Fatalf("rows of %d bytes, want 16 float16 values", len(rows[0]))
	}
	c := startCluster(t, parts, 2, "10s")
	_, clientSocket := c.startClient("10s")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := []uint64{0, uint64(len(rows) - 1), uint64(len(rows) / 2), 3, 3}
	for _, s := range []string{c.sockets[0], clientSocket} {
		checkDataOf(t, ctx, s, control.DTypeF16, ids, rows, labels)
	}
}
