// Package localnode holds what the perf drivers that run `node run`
// processes on 127.0.0.1 share: the wait for a node to be ready (their
// mesh addresses come from mesh.LoopbackAddrs).
package localnode

import (
	"context"
	"fmt"
	"time"

	"graphnode/node/client"
)

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
