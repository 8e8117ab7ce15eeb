package mesh

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// kvHandler adds KVHandler to testHandler: it echoes the request with its
// first byte incremented, or blocks until its context ends when the
// request's first byte is 'B' and reports why it ended.
type kvHandler struct {
	testHandler
	ended chan error
}

func (h *kvHandler) KV(ctx context.Context, req []byte) ([]byte, error) {
	if req[0] == 'B' {
		<-ctx.Done()
		h.ended <- ctx.Err()
		return nil, ctx.Err()
	}
	out := slices.Clone(req)
	out[0]++
	return out, nil
}

func TestKV(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1", "host2")
	h := &kvHandler{testHandler: testHandler{rowSize: 16}, ended: make(chan error, 1)}
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) { c.Handler = h; c.KVTimeout = 20 * time.Second })
	plain := startServer(t, dir, "host2", 2, "127.0.0.1:0", nil) // no KVHandler
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer(), 2: plain.peer()}, nil)
	ctx := context.Background()

	for _, tc := range []struct {
		name string
		call func(context.Context, int, []byte) ([]byte, error)
	}{{"pull", c.KVPull}, {"push", c.KVPush}} {
		got, err := tc.call(ctx, 1, []byte{1, 1, 7, 8, 9})
		if err != nil || !slices.Equal(got, []byte{2, 1, 7, 8, 9}) {
			t.Fatalf("%s: % x, %v; want 02 01 07 08 09", tc.name, got, err)
		}
		if _, err := tc.call(ctx, 2, []byte{1, 1}); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "not served") {
			t.Fatalf("%s to a node without kv: %v, want unsupported", tc.name, err)
		}
		if _, err := tc.call(ctx, 1, []byte{1}); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "at least 2") {
			t.Fatalf("%s of one byte: %v, want malformed", tc.name, err)
		}
	}

	// A caller that gives up ends the handler's wait at once, well before
	// the server's KVTimeout.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	if _, err := c.KVPush(cctx, 1, []byte{'B', 1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked push: %v, want deadline exceeded", err)
	}
	select {
	case err := <-h.ended:
		if err == nil {
			t.Fatal("handler context ended without an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler still waiting 5 s after the caller gave up")
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

// TestKVPushNotRetried: a push to a peer that does not answer is tried
// once, while a pull is retried like any idempotent call.
func TestKVPushNotRetried(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	down := Peer{Name: "host1", Addr: freeUDPAddr(t)}
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: down}, func(c *ClientConfig) {
		c.Retries, c.KVTimeout = 2, 20*time.Second
	})
	ctx := context.Background()
	_, err := c.KVPush(ctx, 1, []byte{3, 1})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "after 1 attempt ") {
		t.Fatalf("push to a peer that is down: %v, want unavailable after 1 attempt", err)
	}
	_, err = c.KVPull(ctx, 1, []byte{1, 1})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("pull from a peer that is down: %v, want unavailable after 3 attempts", err)
	}
}

// TestKVPushAfterRestart: the first push after a peer crashed and came
// back goes through. It went on the old connection, got the new process's
// stateless reset, and failed unretried ("peer unavailable after 1
// attempt in 1ms: received a stateless reset"): no live process had
// handled it, so it is sent again, once, on a new connection.
func TestKVPushAfterRestart(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1")
	kvServer := func(addr string) *testNode {
		h := &kvHandler{testHandler: testHandler{rowSize: 16}, ended: make(chan error, 1)}
		return startServer(t, dir, "host1", 1, addr, func(c *ServerConfig) { c.Handler = h })
	}
	srv := kvServer("127.0.0.1:0")
	addr := srv.srv.Addr().String()
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer()}, func(c *ClientConfig) { c.KVTimeout = 20 * time.Second })
	ctx := context.Background()
	if _, err := c.KVPush(ctx, 1, []byte{1, 1}); err != nil {
		t.Fatal(err)
	}
	// A crash: no CONNECTION_CLOSE reaches the client.
	srv.srv.tr.Close()
	srv.srv.udp.Close()
	srv.srv.Close()
	kvServer(addr)
	got, err := c.KVPush(ctx, 1, []byte{4, 1, 9})
	if err != nil || !slices.Equal(got, []byte{5, 1, 9}) {
		t.Fatalf("first push after the restart: % x, %v; want 05 01 09", got, err)
	}
}
