package mesh

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/quic-go/quic-go"
)

// The hello is the first exchange on every connection, on its first
// stream: the client sends Hello, the server answers HelloAck with its
// own values, and each side checks the other's against its own
// configuration (diffHello).

// hello reads the client's Hello, answers with this node's values, and
// reports whether they match, and whether the client connected to fetch
// files only (its hello carries no partition-set checksum: a node that
// has no graph.toml yet); on a mismatch it closes the connection with the
// reason, after giving the client time to read the answer.
func (s *Server) hello(conn *quic.Conn, peer string) (fetchOnly, ok bool) {
	ctx, cancel := context.WithTimeout(conn.Context(), HelloTimeout)
	defer cancel()
	st, err := conn.AcceptStream(ctx)
	if err != nil {
		conn.CloseWithError(appNoHello, "mesh: no hello within "+HelloTimeout.String())
		return false, false
	}
	st.SetDeadline(time.Now().Add(HelloTimeout))
	h, p, err := readMessage(st, maxHelloSize)
	var hello Hello
	if err == nil && h.Type != TypeHello {
		err = fmt.Errorf("mesh: first message is %s, want Hello: %w", h.Type, ErrMalformed)
	}
	if err == nil {
		err = DecodeHello(p, &hello)
	}
	if err != nil {
		conn.CloseWithError(appNoHello, err.Error())
		return false, false
	}
	fetchOnly = hello.Checksum == ""
	problem := ""
	if d := diffHello(&hello, s.own(), peer, -1, fetchOnly); d != "" {
		problem = fmt.Sprintf("mesh: node %s refused peer %s: %s", s.cfg.Identity.Node, peer, d)
	} else if d := s.ownerProblem(&hello, peer); d != "" {
		// Nothing in the HelloAck would tell the peer: refused at once,
		// its hello fails with the reason (helloErr).
		problem = fmt.Sprintf("mesh: node %s refused peer %s: %s", s.cfg.Identity.Node, peer, d)
		s.logRefusal(peer, conn.RemoteAddr().String(), problem)
		conn.CloseWithError(appRefused, problem)
		return false, false
	}
	ack, start := beginMessage(nil, TypeHelloAck)
	ack = AppendHello(ack, s.own())
	ack, _ = endMessage(ack, start, 0)
	_, err = st.Write(ack)
	st.Close()
	st.CancelRead(0)
	if err != nil {
		conn.CloseWithError(appNoHello, err.Error())
		return false, false
	}
	if problem == "" {
		return fetchOnly, true
	}
	s.logRefusal(peer, conn.RemoteAddr().String(), problem)
	t := time.NewTimer(refuseLinger)
	select {
	case <-conn.Context().Done():
	case <-t.C:
	}
	t.Stop()
	conn.CloseWithError(appRefused, problem)
	return false, false
}

// noPart is the part in the hello of a node that serves none (a client
// node: ClientConfig.Part -1).
const noPart = math.MaxUint32

// ownerProblem says why hello's part is not peer's to serve (see
// ServerConfig.Owners); "" when it is.
func (s *Server) ownerProblem(hello *Hello, peer string) string {
	if s.cfg.Owners == nil || hello.Part == noPart {
		return ""
	}
	owner, ok := s.cfg.Owners[int(hello.Part)]
	switch {
	case !ok:
		return fmt.Sprintf("serves part %d, which no [[mesh.peers]] entry of this node names", hello.Part)
	case owner != peer:
		return fmt.Sprintf("serves part %d, which is node %s's ([[mesh.peers]]): two nodes would serve diverging rows of it", hello.Part, owner)
	}
	return ""
}

// logRefusal logs a refused peer, but a refusal for the reason last
// logged for that peer only once refuseLogEvery has passed, with how
// many times it was refused since: a node refused retries its handshake
// every few seconds, for as long as it runs.
func (s *Server) logRefusal(peer, addr, problem string) {
	now := time.Now()
	s.mu.Lock()
	last, seen := s.mu.refused[peer]
	same := seen && last.problem == problem
	if same && now.Sub(last.at) < refuseLogEvery {
		last.repeats++
		s.mu.refused[peer] = last
		s.mu.Unlock()
		return
	}
	if s.mu.refused == nil {
		s.mu.refused = map[string]loggedRefusal{}
	}
	s.mu.refused[peer] = loggedRefusal{problem: problem, at: now}
	s.mu.Unlock()
	attrs := []any{"peer", peer, "addr", addr, "err", problem}
	if same {
		attrs = append(attrs, "repeats", last.repeats)
	}
	s.cfg.Logger.Warn("mesh: refused peer", attrs...)
}

// maxHelloSize bounds the hello payload: three uint16-prefixed strings.
const maxHelloSize = 8 + 3*(2+65535)

func (s *Server) own() *Hello {
	return &Hello{
		Version:  ProtocolVersion,
		Part:     uint32(s.cfg.Part),
		Cluster:  s.cfg.Cluster,
		Node:     s.cfg.Identity.Node,
		Checksum: s.cfg.Checksum,
	}
}

// diffHello names the first field of got (the peer's) that differs from
// want (this node's), "" when none does; wantNode and wantPart (-1: any)
// are what the peer must be. With anySum the checksums are not compared:
// one side fetches files and has no partition set yet.
func diffHello(got, want *Hello, wantNode string, wantPart int, anySum bool) string {
	switch {
	case got.Version != want.Version:
		return fmt.Sprintf("protocol version %d: want %d", got.Version, want.Version)
	case got.Cluster != want.Cluster:
		return fmt.Sprintf("cluster %q: want %q", got.Cluster, want.Cluster)
	case !anySum && got.Checksum != want.Checksum:
		return fmt.Sprintf("partition-set checksum %s: want %s", got.Checksum, want.Checksum)
	case got.Node != wantNode:
		return fmt.Sprintf("hello names node %q, certificate %q", got.Node, wantNode)
	case wantPart >= 0 && int64(got.Part) != int64(wantPart):
		return fmt.Sprintf("serves part %d: want part %d", got.Part, wantPart)
	}
	return ""
}

// hello sends this node's Hello on the connection's first stream and
// checks the server's HelloAck against the configuration.
func (c *Client) hello(ctx context.Context, conn *quic.Conn, p *peerConn) error {
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return c.helloErr(err)
	}
	if dl, ok := ctx.Deadline(); ok {
		st.SetDeadline(dl)
	}
	own := Hello{
		Version:  ProtocolVersion,
		Part:     uint32(c.cfg.Part),
		Cluster:  c.cfg.Cluster,
		Node:     c.cfg.Identity.Node,
		Checksum: c.cfg.Checksum,
	}
	b, start := beginMessage(nil, TypeHello)
	b = AppendHello(b, &own)
	b, _ = endMessage(b, start, 0)
	if _, err := st.Write(b); err != nil {
		return c.helloErr(err)
	}
	st.Close()
	h, payload, err := readMessage(st, maxHelloSize)
	st.CancelRead(0)
	if err != nil {
		return c.helloErr(err)
	}
	if h.Type != TypeHelloAck {
		return fmt.Errorf("hello: answer is %s, want HelloAck: %w", h.Type, ErrMalformed)
	}
	var got Hello
	if err := DecodeHello(payload, &got); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if d := diffHello(&got, &own, p.name, p.part, own.Checksum == ""); d != "" {
		return fmt.Errorf("hello: %s: %w", d, ErrRefused)
	}
	return nil
}

// helloErr explains a failure during the hello: the server refusing it
// (closing with appRefused and the reason) or the TLS handshake failing
// late (in TLS 1.3 the server checks the client's certificate after the
// client considers the handshake done).
func (c *Client) helloErr(err error) error {
	var ae *quic.ApplicationError
	if errors.As(err, &ae) && ae.Remote {
		switch ae.ErrorCode {
		case appRefused:
			return fmt.Errorf("hello: %s: %w", ae.ErrorMessage, ErrRefused)
		case appNoHello:
			return fmt.Errorf("hello: peer rejected it: %s: %w", ae.ErrorMessage, ErrRefused)
		}
	}
	if e, ok := explainHandshake(err, c.cfg.Identity, "", c.cfg.alpn); ok {
		return e
	}
	return fmt.Errorf("hello: %w", err)
}
