package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"graphnode/mesh"
	"graphnode/node/control"
	"graphnode/shm"
)

// Server-client mode, the sampling side: a client node (relay.go) asks
// this node over the mesh to open a loader for one of its trainers. The
// loader is an ordinary one (ring, samplers) whose consumer is this node:
// each sub-ring is streamed to the client on its own mesh stream, record
// by record, and the client writes them into a ring of its own.

// remoteAttachTimeout is how long a remote loader waits for its first
// stream before it is closed (the client went away between opening and
// streaming).
const remoteAttachTimeout = 30 * time.Second

// remoteLoader is a loader opened by a peer. It closes when the peer's
// connection does, when every sub-ring's stream has ended, or when no
// stream came within remoteAttachTimeout.
type remoteLoader struct {
	l      *loader
	peer   string
	conn   context.Context // the peer's connection: the loader closes with it
	cons   *shm.Consumer
	ctx    context.Context // ends when the loader closes: streams stop
	cancel context.CancelFunc
	active sync.WaitGroup // streams in progress
	why    string         // why it closed; set before ctx ends
	// under Node.mu:
	claimed []bool // sub-rings a stream has asked for
	left    int    // sub-rings whose stream has not ended
	closing bool
	ended   error // the first stream that ended before its end of stream
}

// meshHandler serves remote loaders with the node's loaders.
func (h meshHandler) OpenLoader(ctx, conn context.Context, peer string, options []byte) (uint64, []byte, error) {
	return h.node.openRemote(ctx, conn, peer, options)
}

// StreamLoader implements mesh.LoaderHandler.
func (h meshHandler) StreamLoader(ctx context.Context, peer string, id uint64, sub int, send mesh.RecordSender) error {
	return h.node.streamRemote(ctx, peer, id, sub, send)
}

// openRemote opens a loader for peer from an open_loader request (the
// trainer's, as the client node received it), attaches this node as its
// consumer and returns its id and LoaderInfo as JSON.
func (n *Node) openRemote(ctx, conn context.Context, peer string, options []byte) (uint64, []byte, error) {
	req, err := control.DecodeRequest(options)
	if err != nil {
		return 0, nil, refusal(err)
	}
	if req.Op != control.OpOpenLoader {
		return 0, nil, fmt.Errorf("node: remote loader: op %q, want %q", req.Op, control.OpOpenLoader)
	}
	n.awaitSlot(ctx) // a client node's trainer that reopens: as serveConn's
	l, err := n.openLoader(ctx, req.LoaderOptions)
	if err != nil {
		return 0, nil, refusal(err)
	}
	cons, err := l.ring.Consumer()
	if err != nil {
		n.closeLoader(l, "remote loader: attach")
		return 0, nil, fmt.Errorf("node: remote loader: %w", err)
	}
	info, err := json.Marshal(l.info)
	if err != nil {
		cons.Close()
		n.closeLoader(l, "remote loader: describe")
		return 0, nil, err
	}
	rl := &remoteLoader{l: l, peer: peer, conn: conn, cons: cons, claimed: make([]bool, l.info.SubRings), left: l.info.SubRings}
	rl.ctx, rl.cancel = context.WithCancel(context.Background())
	n.mu.Lock()
	l.remote = rl
	n.mu.Unlock()
	context.AfterFunc(conn, func() { n.releaseLoader(l, "peer's connection closed") })
	timer := time.AfterFunc(remoteAttachTimeout, func() {
		n.mu.Lock()
		idle := !slices.Contains(rl.claimed, true)
		n.mu.Unlock()
		if idle {
			n.closeLoader(l, fmt.Sprintf("no stream from %s within %v", peer, remoteAttachTimeout))
		}
	})
	context.AfterFunc(rl.ctx, func() { timer.Stop() })
	n.log.Info("remote loader opened", "loader", l.id, "peer", peer)
	return l.id, info, nil
}

// refusal words a remote open_loader's error for the client node:
// "<key>: <why>" when it names a field, which the client node hands its
// trainer as the response's key (refusedField).
func refusal(err error) error {
	if r := errorResponse(err); r.Key != "" {
		return fmt.Errorf("%s: %s", r.Key, r.Error)
	}
	return err
}

// streamRemote sends the records of sub-ring sub of peer's loader id
// until the end of stream, releasing each once sent.
func (n *Node) streamRemote(ctx context.Context, peer string, id uint64, sub int, send mesh.RecordSender) (err error) {
	rl, err := n.claim(peer, id, sub)
	if err != nil {
		return err
	}
	defer func() { n.unclaim(rl, sub, err) }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(rl.ctx, cancel)
	defer stop()
	err = forward(ctx, rl.cons, sub, send)
	if err != nil && rl.ctx.Err() != nil {
		return fmt.Errorf("node: loader %d closed (%s)", id, rl.why)
	}
	return err
}

// forward sends the records of sub-ring sub until the producer closes
// after its end-of-stream record, releasing each once sent. send copies a
// record out of the ring piece by piece (mesh.RecordPiece) into a buffer
// of the stream's, here, under the ring's guard: the mesh reads what it
// sends on its connection's goroutine, where a ring file truncated
// meanwhile (by anyone in the rings group) was a SIGBUS that ended the
// node. So no copy of a whole record (hundreds of MB with wide features)
// is kept on the heap per sub-ring; the record stays in the ring, held,
// until it is sent.
func forward(ctx context.Context, cons *shm.Consumer, sub int, send mesh.RecordSender) error {
	for {
		rec, err := cons.Next(ctx, sub)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		err = send(ctx, len(rec), func(off int, dst []byte) error {
			return cons.Guard(func() error {
				copy(dst, rec[off:])
				return nil
			})
		})
		if rerr := cons.Release(sub); err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
	}
}

// claim checks that peer may stream sub-ring sub of loader id and marks
// it streamed (a sub-ring is streamed once).
func (n *Node) claim(peer string, id uint64, sub int) (*remoteLoader, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.mu.loaders[id]
	switch {
	case l == nil || l.remote == nil || l.remote.peer != peer:
		return nil, fmt.Errorf("node: no loader %d opened by %s", id, peer)
	case l.remote.closing:
		return nil, fmt.Errorf("node: loader %d is closing", id)
	case sub < 0 || sub >= len(l.remote.claimed):
		return nil, fmt.Errorf("node: loader %d has sub-rings 0..%d, not %d", id, len(l.remote.claimed)-1, sub)
	case l.remote.claimed[sub]:
		return nil, fmt.Errorf("node: loader %d sub-ring %d is streamed already", id, sub)
	}
	l.remote.claimed[sub] = true
	l.remote.active.Add(1)
	return l.remote, nil
}

// unclaim ends the stream of sub-ring sub, with err unless it sent the
// end of stream; the last one closes the loader, saying why: the client
// node that closed a stream early (its trainer gone, say) did not see
// every sub-ring streamed, which the log said of it.
func (n *Node) unclaim(rl *remoteLoader, sub int, err error) {
	n.mu.Lock()
	rl.left--
	last := rl.left == 0
	if err != nil && rl.ended == nil {
		rl.ended = fmt.Errorf("sub-ring %d: %w", sub, err)
	}
	ended := rl.ended
	n.mu.Unlock()
	rl.active.Done()
	if last {
		why := "every sub-ring streamed"
		if ended != nil {
			why = fmt.Sprintf("its streams ended before their end of stream (%v)", ended)
		}
		n.releaseLoader(rl.l, why)
	}
}

// releaseLoader closes l, counted as a slot being given back: the client
// node that closed it may send its trainer's next open_loader at once.
func (n *Node) releaseLoader(l *loader, why string) {
	n.beginRelease()
	defer n.endRelease()
	n.closeLoader(l, why)
}

// stop ends rl's streams, waits for them and detaches the consumer;
// closeLoader calls it, with rl.closing set, before it stops the
// samplers.
func (rl *remoteLoader) stop(why string) {
	rl.why = why
	rl.cancel()
	rl.active.Wait()
	rl.cons.Close()
}
