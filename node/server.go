package node

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"graphnode/kv"
	"graphnode/node/control"
)

// serveConn answers one trainer's requests until it hangs up or ctx is
// cancelled. Loaders opened on the connection belong to it: when the
// connection ends, for whatever reason, they are closed and their rings
// removed, so a trainer that crashes never leaves samplers behind. A
// reader goroutine notices the hang-up even while a request is in
// progress (a synchronous kv step waiting for the other trainers): the
// request's context ends and the trainer leaves its kv steps.
func (n *Node) serveConn(ctx context.Context, c *net.UnixConn) {
	owned := map[uint64]*loader{}
	var mu sync.Mutex // guards owned against the ctx watcher below
	connCtx, cancel := context.WithCancel(ctx)
	kc := &kvConn{ranks: map[syncRank]struct{}{}}
	// When ctx ends (once the drain is over), reads stop at once, but the
	// request in hand is still answered (an open_loader that drain
	// refused gets "node is stopping"), by answerDeadline; the deferred
	// Close follows.
	stop := context.AfterFunc(ctx, func() {
		c.SetReadDeadline(time.Now())
		c.SetWriteDeadline(n.answerDeadline())
	})
	frames := make(chan []byte)
	// released is set by the reader when the trainer hung up holding
	// loaders: their slots count as coming back from then on, not only
	// once the deferred close below begins (an open_loader on the
	// trainer's next connection may come first).
	released := false
	go func() {
		defer close(frames)
		defer cancel()
		for {
			body, err := control.ReadFrame(c)
			if err != nil {
				mu.Lock()
				if len(owned) > 0 {
					n.beginRelease()
					released = true
				}
				mu.Unlock()
				if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
					n.log.Debug("control connection ended", "err", err)
				}
				return
			}
			select {
			case frames <- body:
			case <-connCtx.Done():
				return
			}
		}
	}()
	defer func() {
		stop()
		cancel()
		c.Close()
		for range frames { // the reader ends once c is closed
		}
		n.kv.closeConn(kc)
		mu.Lock()
		ls := make([]*loader, 0, len(owned))
		for _, l := range owned {
			ls = append(ls, l)
		}
		mu.Unlock()
		if !released && len(ls) > 0 {
			n.beginRelease()
			released = true
		}
		// At once: each close takes its samplers' stop (up to
		// samplers.drain_timeout), and one after another a trainer that
		// held samplers.max_loaders loaders kept their rings, samplers
		// and slots for the sum.
		var wg sync.WaitGroup
		for _, l := range ls {
			wg.Go(func() { n.closeLoader(l, "trainer disconnected") })
		}
		wg.Wait()
		n.holding(c, false)
		if released {
			n.endRelease()
		}
	}()
	for body := range frames {
		if control.IsData(body) {
			if err := control.WriteRaw(c, n.serveData(connCtx, body)); err != nil {
				return
			}
			continue
		}
		if control.IsKV(body) {
			if err := control.WriteRaw(c, n.kv.serveTrainer(connCtx, body, kc)); err != nil {
				return
			}
			continue
		}
		resp := n.handle(connCtx, body, kc, func(l *loader) {
			mu.Lock()
			owned[l.id] = l
			n.holding(c, true)
			mu.Unlock()
		}, func(id uint64) (*loader, bool) {
			mu.Lock()
			defer mu.Unlock()
			l, ok := owned[id]
			delete(owned, id)
			if len(owned) == 0 {
				n.holding(c, false)
			}
			return l, ok
		})
		if err := control.WriteFrame(c, resp); err != nil {
			return
		}
	}
}

// handle answers one request. own records a new loader as the
// connection's; release takes one back for close_loader (a trainer may
// only close its own loaders).
func (n *Node) handle(ctx context.Context, body []byte, kc *kvConn, own func(*loader), release func(uint64) (*loader, bool)) *control.Response {
	req, err := control.DecodeRequest(body)
	if err != nil {
		return errorResponse(err)
	}
	switch req.Op {
	case control.OpOpenLoader:
		open := n.openLoader
		if n.cfg.Client() {
			open = func(ctx context.Context, o control.LoaderOptions) (*loader, error) {
				return n.openRelayed(ctx, o, body)
			}
		}
		n.awaitSlot(ctx)
		l, err := open(ctx, req.LoaderOptions)
		if err != nil {
			return errorResponse(err)
		}
		own(l)
		info := l.info
		return &control.Response{Loader: &info}
	case control.OpCloseLoader:
		l, ok := release(req.LoaderID)
		if !ok {
			return &control.Response{Error: "no such loader on this connection", Key: "loader_id"}
		}
		n.beginRelease()
		n.closeLoader(l, "closed by trainer")
		n.endRelease()
		return &control.Response{}
	case control.OpKVCreate:
		info, err := n.kv.create(ctx, req.Table, true, req.ReplaceResized)
		if err != nil {
			return errorResponse(err)
		}
		return &control.Response{KVTable: info}
	case control.OpKVSave:
		info, err := n.kv.save(ctx, true)
		if err != nil {
			return errorResponse(err)
		}
		return &control.Response{KVSave: info}
	case control.OpKVDrop:
		info, err := n.kv.drop(ctx, req.Name, true)
		if err != nil {
			return errorResponse(err)
		}
		return &control.Response{KVDrop: info}
	case control.OpKVDone:
		n.kv.doneConn(kc)
		return &control.Response{}
	default: // control.OpStats; DecodeRequest refuses other ops
		return &control.Response{Stats: n.stats()}
	}
}

func errorResponse(err error) *control.Response {
	code := kv.ErrorCode(err)
	var ce *control.Error
	if errors.As(err, &ce) {
		return &control.Response{Error: ce.Msg, Key: ce.Key, KVCode: max(code, ce.KVCode)}
	}
	return &control.Response{Error: err.Error(), KVCode: code}
}

func sortLoaders(ls []control.LoaderStats) {
	slices.SortFunc(ls, func(a, b control.LoaderStats) int {
		switch {
		case a.LoaderID < b.LoaderID:
			return -1
		case a.LoaderID > b.LoaderID:
			return 1
		}
		return 0
	})
}
