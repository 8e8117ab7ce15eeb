package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"graphnode/mesh"
	"graphnode/node/control"
	"graphnode/sample"
	"graphnode/shm"
)

// Server-client mode, the training side (node.role = "client"): the node
// has no part and runs no samplers. A trainer's open_loader is sent as it
// is to the sampling node of one part (relayServer), which opens the
// loader there (remote_loader.go) and streams each of its sub-rings over
// the mesh; this node creates a ring of the same shape and copies each
// stream into its sub-ring, so the trainer reads it exactly as it would
// read a local loader's ring, batch for batch the same records.

// relay is the streaming half of a loader on a client node.
type relay struct {
	server  int // the part whose node samples the loader
	remote  *mesh.RemoteLoader
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	batches atomic.Uint64
}

// stop ends the streams, waits for their goroutines and closes the
// loader's connection (the sampling node closes its loader).
func (r *relay) stop() {
	r.cancel()
	r.wg.Wait()
	r.remote.Close()
}

// relayReopenGrace is how long after closing a loader sampled by a
// part's node a refusal of that node at samplers.max_loaders is asked
// again: the sampling node learns of the close when the loader's
// connection ends, and a trainer's next open_loader, sent at once, could
// reach it first (the sampling node waits for closes it has seen,
// awaitSlot, not for one still on the way).
const relayReopenGrace = 2 * time.Second

// openRemoteAgain opens the remote loader on server's node, asking again
// every relayReopenRetry while it refuses at samplers.max_loaders within
// relayReopenGrace of this node's closing a loader there.
func (n *Node) openRemoteAgain(ctx context.Context, server int, body []byte) (*mesh.RemoteLoader, error) {
	for {
		remote, err := n.mesh.cli.OpenLoader(ctx, server, body)
		var re *mesh.RemoteError
		if err == nil || !errors.As(err, &re) || !strings.Contains(re.Message, maxLoadersRefusal) {
			return remote, err
		}
		n.mu.Lock()
		closed, ok := n.mu.relayClosed[server]
		n.mu.Unlock()
		if !ok || time.Since(closed) > relayReopenGrace {
			return remote, err
		}
		select {
		case <-ctx.Done():
			return remote, err
		case <-time.After(relayReopenRetry):
		}
	}
}

// relayReopenRetry is the pause between openRemoteAgain's asks.
const relayReopenRetry = 20 * time.Millisecond

// relayServer is the part whose node samples rank's loader: seeds are
// split over the ranks in part order, so rank r of W holds mostly the
// seeds of part r·P/W, whose node samples them without asking a peer.
func relayServer(o control.LoaderOptions, parts int) int {
	w := max(o.WorldSize, 1)
	return min(o.Rank*parts/w, parts-1)
}

// openRelayed opens the loader of request body (a trainer's open_loader)
// on the sampling node of relayServer, creates the local ring and starts
// copying every sub-ring into it. Errors are *control.Error.
func (n *Node) openRelayed(ctx context.Context, o control.LoaderOptions, body []byte) (*loader, error) {
	l, err := n.reserveLoader()
	if err != nil {
		return nil, err
	}
	err = n.startRelay(ctx, l, o, body)
	n.doneStarting(l, err)
	if err != nil {
		return nil, err
	}
	n.opened.Add(1)
	n.log.Info("loader opened", "loader", l.id, "ring", l.info.Ring, "server_part", l.relay.server,
		"server_loader", l.relay.remote.ID, "sub_rings", l.info.SubRings,
		"batches_per_epoch", l.info.BatchesPerEpoch, "epochs", l.info.Epochs, "rank", o.Rank, "world_size", o.WorldSize)
	return l, nil
}

func (n *Node) startRelay(ctx context.Context, l *loader, o control.LoaderOptions, body []byte) error {
	server := relayServer(o, n.book.Parts())
	who := fmt.Sprintf("the sampling node of part %d", server)
	// The sampling node may take up to mesh.LoaderOpenTimeout to answer
	// (its split waits on a peer of its own): drain, which waits for
	// this loader, must not wait that long.
	octx, cancelOpen := context.WithCancel(ctx)
	go func() {
		select {
		case <-n.stopping:
			cancelOpen()
		case <-octx.Done():
		}
	}()
	remote, err := n.openRemoteAgain(octx, server, body)
	cancelOpen()
	if err != nil {
		select {
		case <-n.stopping:
			return errStopping()
		default:
		}
		var re *mesh.RemoteError
		if errors.As(err, &re) {
			if key, why, ok := refusedField(re.Message); ok {
				// The key a trainer of the sampling node would get.
				return &control.Error{Key: key, Msg: fmt.Sprintf("%s refused the loader: %s", who, why)}
			}
			return &control.Error{Msg: fmt.Sprintf("%s refused the loader: %s", who, re.Message)}
		}
		return &control.Error{Msg: fmt.Sprintf("%s: %v", who, err)}
	}
	abandon := remote.Close // the sampling node closes its loader with the connection
	var info control.LoaderInfo
	if err := json.Unmarshal(remote.Info, &info); err != nil || info.SubRings < 1 || info.SubRings > MaxWorkers || info.RingSize <= 0 || info.SubRingSize <= 0 {
		abandon()
		return &control.Error{Msg: fmt.Sprintf("%s described its loader as %.200q (%v)", who, remote.Info, err)}
	}
	path := filepath.Join(n.cfg.Rings.Dir, shm.Name(RingPrefix, l.id))
	ring, err := shm.Create(path, n.ringOptions(info.SubRings, info.RingSize))
	var refused *control.Error
	switch {
	case err != nil:
		refused = n.ringError(err)
	case ring.Capacity() < info.SubRingSize:
		ring.Remove()
		err = fmt.Errorf("sub-rings of %s here, %s there", shm.FormatSize(ring.Capacity()), shm.FormatSize(info.SubRingSize))
		refused = &control.Error{Key: "ring_size", Msg: err.Error()}
	}
	if refused != nil {
		abandon()
		n.log.Error("create ring", "loader", l.id, "ring", path, "err", err)
		return refused
	}
	info.LoaderID, info.Ring = l.id, path
	info.SubRingSize = ring.Capacity()
	rctx, cancel := context.WithCancel(context.Background())
	r := &relay{server: server, remote: remote, cancel: cancel}
	prods := make([]*shm.Producer, info.SubRings)
	for w := range prods {
		if prods[w], err = ring.Producer(w); err != nil {
			for _, p := range prods[:w] {
				p.Close()
			}
			cancel()
			ring.Remove()
			abandon()
			return &control.Error{Msg: err.Error()}
		}
	}
	n.mu.Lock()
	stopping := n.mu.draining // drain waits for this loader: see startLoader
	if !stopping {
		l.info, l.ring, l.relay = info, ring, r
	}
	n.mu.Unlock()
	if stopping {
		for _, p := range prods {
			p.Close()
		}
		cancel()
		ring.Remove()
		abandon()
		return errStopping()
	}
	for w, prod := range prods {
		r.wg.Go(func() { n.relaySub(rctx, l, r, w, prod, ring.MaxRecord(), who) })
	}
	return nil
}

// refusedField finds the open_loader field a sampling node's refusal
// names: openRemote words a refusal that has a key "<key>: <why>", which
// the mesh carries after "<request type> handler: ".
func refusedField(msg string) (key, why string, ok bool) {
	_, rest, found := strings.Cut(msg, " handler: ")
	if !found {
		rest = msg
	}
	key, why, ok = strings.Cut(rest, ": ")
	return key, why, ok && control.LoaderField(key)
}

// relaySub copies sub-ring w of the remote loader into prod, record by
// record, until end of stream. A stream that fails (the sampling node
// went away, its sampler failed, a record does not decode) ends with an
// error record naming the sampling node, which the trainer raises, and
// counts as a sampler failure here, as a relayed error record does: to
// the trainer, and to an alert on graphnode_sampler_failures_total, it
// is one. (The mesh counts the broken stream as a failed request too.)
// Records are read up to maxRecord, the largest prod's sub-ring holds
// (the sampling node's is no larger): a batch passes the mesh's
// MaxMessage when its features are wide, and never this. Each is read
// straight into the room reserved for it in the ring, in pieces of
// mesh.RecordPiece copied under the ring's guard, and checked there
// before it is committed: no record is held on the heap.
func (n *Node) relaySub(ctx context.Context, l *loader, r *relay, w int, prod *shm.Producer, maxRecord int64, who string) {
	defer prod.Close()
	fail := func(err error) {
		prod.Abandon() // a record read in part: the error record takes its room
		if ctx.Err() != nil || errors.Is(err, shm.ErrConsumerGone) {
			// The loader is closing, or the trainer left: nobody reads.
			n.log.Debug("relay stopped", "loader", l.id, "sub_ring", w, "err", err)
			return
		}
		n.failures.Add(1)
		msg := fmt.Sprintf("%s, sub-ring %d: %v", who, w, err)
		n.log.Error("relayed loader failed", "loader", l.id, "sub_ring", w, "err", msg)
		if err := writeControl(ctx, prod, sample.KindError, msg); err != nil {
			n.log.Warn("could not write the error record on the ring", "loader", l.id, "sub_ring", w, "err", err)
		}
	}
	rs, err := r.remote.Stream(ctx, w, maxRecord)
	if err != nil {
		fail(err)
		return
	}
	defer rs.Close()
	var room []byte
	reserve := func(n int) (err error) {
		room, err = prod.Reserve(ctx, n)
		return err
	}
	write := func(off int, piece []byte) error {
		return prod.Guard(func() error {
			copy(room[off:], piece)
			return nil
		})
	}
	for {
		size, err := rs.NextInto(reserve, write)
		if errors.Is(err, io.EOF) {
			fail(errors.New("the stream ended before its end-of-stream record"))
			return
		}
		if err != nil {
			fail(err)
			return
		}
		var kind sample.Kind
		err = prod.Guard(func() error {
			v, err := sample.Decode(room[:size])
			kind = v.Header.Kind
			return err
		})
		if err != nil {
			fail(fmt.Errorf("record: %w", err))
			return
		}
		if err := prod.Commit(size); err != nil {
			fail(err)
			return
		}
		switch kind {
		case sample.KindBatch:
			r.batches.Add(1)
			n.batches.Add(1)
		case sample.KindEndOfStream:
			return
		case sample.KindError:
			n.failures.Add(1)
			return
		}
	}
}

// writeControl writes a control record (error, end of stream) of kind
// with msg as prod's next record.
func writeControl(ctx context.Context, prod *shm.Producer, kind sample.Kind, msg string) error {
	buf, err := prod.Reserve(ctx, sample.ControlSize(msg))
	if err != nil {
		return err
	}
	var k int
	err = prod.Guard(func() (err error) {
		k, err = sample.EncodeControl(buf, kind, 0, 0, msg)
		return err
	})
	if err != nil {
		prod.Abandon()
		return err
	}
	return prod.Commit(k)
}
