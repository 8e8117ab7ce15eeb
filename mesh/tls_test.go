package mesh

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Every node certificate carries 127.0.0.1 and ::1 as IP SANs, so TLS's
// own name check passes any node's certificate for a node named
// "127.0.0.1"; the client must still refuse all but that node's.
func TestClientVerifiesNodeName(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "127.0.0.1", "host0", "host2")
	ip := startServer(t, dir, "127.0.0.1", 1, "127.0.0.1:0", nil)
	other := startServer(t, dir, "host2", 1, "127.0.0.1:0", nil)
	id := loadID(t, dir, "host0")

	// A node named by an IP address is still reached under that name.
	c := newTestClient(t, id, map[int]Peer{1: ip.peer()}, nil)
	if err := checkSample(c, 1, &SampleRequest{Fanout: 2, IDs: ids(4, 0)}); err != nil {
		t.Fatalf("node named 127.0.0.1: %v", err)
	}

	// host2's certificate, where node 127.0.0.1 is expected.
	c = newTestClient(t, id, map[int]Peer{1: {Name: "127.0.0.1", Addr: other.peer().Addr}}, nil)
	err := c.WaitReady(context.Background())
	t.Log(err)
	if want := `certificate of node "host2", want "127.0.0.1"`; !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant ErrRefused containing %q", err, want)
	}
	if n := other.handler.calls.Load(); n != 0 {
		t.Fatalf("handler of the wrong node called %d times", n)
	}
}
