package mesh

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

const testCluster = "test"

// writeTestCluster writes a CA and certificates for nodes into a new
// temporary directory.
func writeTestCluster(t testing.TB, cluster string, nodes ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	if err := WriteCluster(dir, ClusterSpec{Cluster: cluster, Nodes: nodes}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func loadID(t testing.TB, dir, node string) *Identity {
	t.Helper()
	id, err := LoadIdentity(dir, node)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// testHandler answers deterministically: node id has id%5 neighbours
// id*10+k, and its feature row is rowSize bytes of byte(id+j).
type testHandler struct {
	rowSize int
	calls   atomic.Int64
	// hook, when set, runs first in every call; a non-nil error is returned.
	hook atomic.Pointer[func(ctx context.Context) error]
}

func (h *testHandler) setHook(f func(ctx context.Context) error) {
	if f == nil {
		h.hook.Store(nil)
		return
	}
	h.hook.Store(&f)
}

func (h *testHandler) SampleNeighbors(ctx context.Context, req *SampleRequest) (*SampleResponse, error) {
	h.calls.Add(1)
	if f := h.hook.Load(); f != nil {
		if err := (*f)(ctx); err != nil {
			return nil, err
		}
	}
	return expectSample(req), nil
}

// expectSample answers id with min(id%5, fanout) neighbours id*10+k+salt
// (salt: the key's first 8 bytes), less those the request excludes for
// id.
func expectSample(req *SampleRequest) *SampleResponse {
	r := &SampleResponse{Counts: make([]uint32, len(req.IDs))}
	salt := binary.LittleEndian.Uint64(req.Key[:])
	j, o := 0, 0
	for i, id := range req.IDs {
		var ex []uint64
		if j < len(req.ExcludeAt) && int(req.ExcludeAt[j]) == i {
			ex = req.ExcludeIDs[o : o+int(req.ExcludeCounts[j])]
			j, o = j+1, o+len(ex)
		}
		n := id % 5
		if req.Fanout >= 0 {
			n = min(n, uint64(req.Fanout))
		}
		for k := range n {
			if u := id*10 + k + salt; !slices.Contains(ex, u) {
				r.Neighbors = append(r.Neighbors, u)
				r.Counts[i]++
			}
		}
	}
	return r
}

func (h *testHandler) PullFeatures(ctx context.Context, req *PullRequest) (*PullResponse, error) {
	h.calls.Add(1)
	if f := h.hook.Load(); f != nil {
		if err := (*f)(ctx); err != nil {
			return nil, err
		}
	}
	return expectPull(req, h.rowSize), nil
}

func expectPull(req *PullRequest, rowSize int) *PullResponse {
	r := &PullResponse{DType: DTypeFloat32, RowSize: uint32(rowSize), Rows: make([]byte, len(req.IDs)*rowSize)}
	for i, id := range req.IDs {
		for j := range rowSize {
			r.Rows[i*rowSize+j] = byte(id + uint64(j))
		}
	}
	return r
}

// testNode is one node of an in-process cluster on 127.0.0.1.
type testNode struct {
	dir     string
	name    string
	part    int
	id      *Identity
	handler *testHandler
	srv     *Server
}

func startServer(t testing.TB, dir, name string, part int, addr string, tweak func(*ServerConfig)) *testNode {
	t.Helper()
	n := &testNode{dir: dir, name: name, part: part, id: loadID(t, dir, name), handler: &testHandler{rowSize: 16}}
	cfg := ServerConfig{Identity: n.id, Cluster: n.id.Cluster, Checksum: "sum-1", Part: part, Handler: n.handler}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := Listen(context.Background(), addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.srv = srv
	t.Cleanup(func() { srv.Close() })
	return n
}

func (n *testNode) peer() Peer { return Peer{Name: n.name, Addr: n.srv.Addr().String()} }

func newTestClient(t testing.TB, id *Identity, peers map[int]Peer, tweak func(*ClientConfig)) *Client {
	t.Helper()
	cfg := ClientConfig{
		Identity: id, Cluster: id.Cluster, Checksum: "sum-1", Part: 0, Peers: peers,
		LocalAddr: "127.0.0.1:0", Timeout: 5 * time.Second, Backoff: 20 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// freeUDPAddr returns a 127.0.0.1 UDP address nobody listens on.
func freeUDPAddr(t testing.TB) string { return freeUDPAddrs(t, 1)[0] }

// freeUDPAddrs returns n distinct such addresses: each socket is held
// until all are chosen, since a port released may be handed out again.
func freeUDPAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs, err := LoopbackAddrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

func ids(n int, base uint64) []uint64 {
	v := make([]uint64, n)
	for i := range v {
		v[i] = base + uint64(i)
	}
	return v
}

// checkSample fails t unless a Sample call returns expectSample's answer.
func checkSample(c *Client, part int, req *SampleRequest) error {
	var resp SampleResponse
	if err := c.Sample(context.Background(), part, req, &resp); err != nil {
		return err
	}
	want := expectSample(req)
	if fmt.Sprint(resp.Counts) != fmt.Sprint(want.Counts) || fmt.Sprint(resp.Neighbors) != fmt.Sprint(want.Neighbors) {
		return errors.New("sample: wrong answer")
	}
	return nil
}
