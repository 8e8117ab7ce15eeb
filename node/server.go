package node

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"

	"graphnode/node/control"
)

// serveConn answers one trainer's requests until it hangs up or ctx is
// cancelled. Loaders opened on the connection belong to it: when the
// connection ends, for whatever reason, they are closed and their rings
// removed, so a trainer that crashes never leaves samplers behind.
func (n *Node) serveConn(ctx context.Context, c *net.UnixConn) {
	owned := map[uint64]*loader{}
	var mu sync.Mutex // guards owned against the ctx watcher below
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer func() {
		stop()
		c.Close()
		mu.Lock()
		ls := make([]*loader, 0, len(owned))
		for _, l := range owned {
			ls = append(ls, l)
		}
		mu.Unlock()
		for _, l := range ls {
			n.closeLoader(l, "trainer disconnected")
		}
	}()
	for {
		body, err := control.ReadFrame(c)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				n.log.Debug("control connection ended", "err", err)
			}
			return
		}
		resp := n.handle(ctx, body, func(l *loader) {
			mu.Lock()
			owned[l.id] = l
			mu.Unlock()
		}, func(id uint64) (*loader, bool) {
			mu.Lock()
			defer mu.Unlock()
			l, ok := owned[id]
			delete(owned, id)
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
func (n *Node) handle(ctx context.Context, body []byte, own func(*loader), release func(uint64) (*loader, bool)) *control.Response {
	req, err := control.DecodeRequest(body)
	if err != nil {
		return errorResponse(err)
	}
	switch req.Op {
	case control.OpOpenLoader:
		l, err := n.openLoader(ctx, req.LoaderOptions)
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
		n.closeLoader(l, "closed by trainer")
		return &control.Response{}
	default: // control.OpStats; DecodeRequest refuses other ops
		return &control.Response{Stats: n.stats()}
	}
}

func errorResponse(err error) *control.Response {
	var ce *control.Error
	if errors.As(err, &ce) {
		return &control.Response{Error: ce.Msg, Key: ce.Key}
	}
	return &control.Response{Error: err.Error()}
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
