package mesh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"github.com/quic-go/quic-go"
)

// peerConn is the client's connection to one peer, dialled on demand.
// At most one dial runs at a time; concurrent callers wait for it.
type peerConn struct {
	part       int
	name, addr string

	mu struct {
		sync.Mutex
		conn    *quic.Conn    // nil, or the last connection (maybe closed)
		dialing chan struct{} // non-nil while a dial runs; closed when it ends
		err     error         // the result of the last dial
	}
}

func (p *peerConn) err(op string, err error) error {
	return &PeerError{Part: p.part, Name: p.name, Addr: p.addr, Op: op, Err: err}
}

func (p *peerConn) close() {
	p.mu.Lock()
	conn := p.mu.conn
	p.mu.Unlock()
	if conn != nil {
		conn.CloseWithError(appClosing, "client closing")
	}
}

// connect returns a live connection to p, dialling (with hello) when
// there is none; the connection's context ends when it breaks, so a
// broken one is replaced at the next call. The dial is shared by every
// caller that needs the connection meanwhile, so it runs on its own
// (dialShared), bounded by DialTimeout and Close, not by the context of
// the caller that started it: a caller that gives up stops waiting, and
// the others still get the dial's result.
func (c *Client) connect(ctx context.Context, p *peerConn) (*quic.Conn, error) {
	for {
		select {
		case <-c.done:
			return nil, ErrClosed
		default:
		}
		p.mu.Lock()
		if conn := p.mu.conn; conn != nil && conn.Context().Err() == nil {
			p.mu.Unlock()
			return conn, nil
		}
		ch := p.mu.dialing
		if ch == nil {
			ch = make(chan struct{})
			p.mu.dialing = ch
			go c.dialShared(p, ch)
		}
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			// The cause, not ctx.Err(): a call's stall ends its context
			// with DeadlineExceeded, which is retried and reported as
			// ErrUnavailable, where Canceled would be final.
			return nil, fmt.Errorf("dial: %w", context.Cause(ctx))
		case <-c.done:
			return nil, ErrClosed
		}
		p.mu.Lock()
		conn, err := p.mu.conn, p.mu.err
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if conn != nil && conn.Context().Err() == nil {
			return conn, nil
		}
	}
}

// dialShared dials p for connect and publishes the result in p.mu, then
// closes ch. Its context is the client's: DialTimeout (in dial), or Close.
func (c *Client) dialShared(p *peerConn, ch chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	conn, err := c.dial(ctx, p)
	var orphan *quic.Conn
	p.mu.Lock()
	select {
	case <-c.done:
		// Close may have closed p's connection already: one made
		// meanwhile must not outlive the client.
		orphan, conn, err = conn, nil, ErrClosed
	default:
	}
	p.mu.dialing, p.mu.conn, p.mu.err = nil, conn, err
	p.mu.Unlock()
	close(ch)
	if orphan != nil {
		orphan.CloseWithError(appClosing, "client closing")
	}
}

// dial opens a connection to p and exchanges the hello, within
// DialTimeout.
func (c *Client) dial(ctx context.Context, p *peerConn) (*quic.Conn, error) {
	return c.dialWith(ctx, p, quicConfig())
}

// dialWith is dial with the QUIC configuration qc.
func (c *Client) dialWith(ctx context.Context, p *peerConn, qc *quic.Config) (*quic.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	ua, err := resolveUDP(ctx, p.addr)
	if err != nil {
		return nil, err
	}
	conn, err := c.tr.Dial(ctx, ua, clientTLS(c.cfg.Identity, p.name, c.cfg.alpn), qc)
	if err != nil {
		if e, ok := explainHandshake(err, c.cfg.Identity, p.name, c.cfg.alpn); ok {
			return nil, e
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("dial: no answer (peer down, or a firewall drops UDP?): %w", err)
		}
		return nil, fmt.Errorf("dial: %w", err)
	}
	if err := c.hello(ctx, conn, p); err != nil {
		conn.CloseWithError(appRefused, err.Error())
		return nil, err
	}
	return conn, nil
}

// resolveUDP resolves "host:port", honouring ctx for the name lookup.
func resolveUDP(ctx context.Context, addr string) (*net.UDPAddr, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", addr, err)
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("address %q: port: %w", addr, err)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(pn))), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", addr, err)
	}
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(ips[0].Unmap(), uint16(pn))), nil
}
