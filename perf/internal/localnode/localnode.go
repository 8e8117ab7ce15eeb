// Package localnode holds what the perf drivers that run `node run`
// processes on 127.0.0.1 share: free mesh addresses and the wait for a
// node to be ready.
package localnode

import (
	"context"
	"fmt"
	"net"
	"time"

	"graphnode/node/client"
)

// FreeUDPs returns n distinct 127.0.0.1 UDP addresses nobody listens on.
// Every socket is held until all are chosen: a port released at once may
// be handed out again, and two nodes would then get the same address.
func FreeUDPs(n int) ([]string, error) {
	conns := make([]*net.UDPConn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	addrs := make([]string, n)
	for i := range addrs {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		addrs[i] = c.LocalAddr().String()
	}
	return addrs, nil
}

// WaitReady polls the node at socket until its stats say it is ready
// (every peer answered the mesh handshake), or ctx ends.
func WaitReady(ctx context.Context, socket string) error {
	for {
		st, err := client.Stats(ctx, socket)
		if err == nil && st.Ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %v", socket, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
