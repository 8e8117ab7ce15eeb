package mesh

import (
	"context"
	"fmt"
	"time"
)

// KVHandler is an optional extension of Handler: a Handler that
// implements it serves the kv types (10–13); one that does not answers
// them CodeUnsupported. KV gets one kv message and returns the kv
// message that answers it (a kv error is an answer, not an error: the
// returned error is for failures outside kv). Its context ends at
// ServerConfig.KVTimeout, when the peer's connection closes, or when the
// caller gives up on the stream, so a synchronous push whose trainer is
// gone stops waiting.
type KVHandler interface {
	KV(ctx context.Context, req []byte) ([]byte, error)
}

// kvType reports whether t is a kv request and the type of its answer.
func kvType(t Type) (Type, bool) {
	switch t {
	case TypeKVPullRequest:
		return TypeKVPullResponse, true
	case TypeKVPushRequest:
		return TypeKVPushResponse, true
	}
	return 0, false
}

// dispatchKV serves a kv request; ok is false when the Handler serves no
// kv.
func (s *Server) dispatchKV(ctx context.Context, t Type, p []byte) (msg []byte, ok bool) {
	answer, isKV := kvType(t)
	h, served := s.cfg.Handler.(KVHandler)
	if !isKV || !served {
		return nil, false
	}
	var req KVMessage
	if err := DecodeKVMessage(p, &req); err != nil {
		return errorMessage(CodeMalformed, err.Error()), true
	}
	resp, err := h.KV(ctx, req.Data)
	if err != nil {
		return handlerError(t, err), true
	}
	if len(resp) < MinKVMessage {
		return errorMessage(CodeInternal, fmt.Sprintf("mesh: %s handler: answer of %d bytes", t, len(resp))), true
	}
	b, start := beginMessage(nil, answer)
	b = AppendKVMessage(b, &KVMessage{Data: resp})
	return s.finish(b, start, 0), true
}

// requestTimeout bounds a request of type t on the server: kv requests
// may wait for a synchronous step, the others get RequestTimeout.
func (s *Server) requestTimeout(t Type) time.Duration {
	if _, ok := kvType(t); ok {
		return s.cfg.KVTimeout
	}
	if t == TypeLoaderOpenRequest {
		return LoaderOpenTimeout
	}
	return s.cfg.RequestTimeout
}

// KVPull sends a kv pull request (idempotent: retried after a transient
// failure like Pull) to the peer serving part and returns the kv answer,
// bounded by ClientConfig.KVTimeout.
func (c *Client) KVPull(ctx context.Context, part int, req []byte) ([]byte, error) {
	return c.kv(ctx, part, "kv pull", TypeKVPullRequest, TypeKVPullResponse, req, c.cfg.Retries)
}

// KVPush sends a kv push, synchronous push or leave to the peer serving
// part and returns the kv answer. It is not retried: a push that may
// have been applied must not be applied again. (A push that meets the
// peer's stateless reset is sent once more on a new connection, as every
// call is: no live process handled it.) Bounded by
// ClientConfig.KVTimeout, which must exceed the kv sync timeout.
func (c *Client) KVPush(ctx context.Context, part int, req []byte) ([]byte, error) {
	return c.KVSend(ctx, part, "kv push", req)
}

// KVSend is KVPush for any request that is not a pull (a synchronous
// push, a leave, the daemon's node-level requests), named op in its
// errors: each was said to be a "kv push".
func (c *Client) KVSend(ctx context.Context, part int, op string, req []byte) ([]byte, error) {
	return c.kv(ctx, part, op, TypeKVPushRequest, TypeKVPushResponse, req, 0)
}

func (c *Client) kv(ctx context.Context, part int, op string, t, want Type, req []byte, retries int) ([]byte, error) {
	b, start := beginMessage(make([]byte, 0, HeaderSize+len(req)), t)
	b = AppendKVMessage(b, &KVMessage{Data: req})
	p, err := c.callWith(ctx, part, op, b, start, want, c.cfg.KVTimeout, retries, nil, false)
	if err != nil {
		return nil, err
	}
	var m KVMessage
	if err := DecodeKVMessage(p.payload, &m); err != nil {
		return nil, c.fail(p.peer, op, err)
	}
	return m.Data, nil
}
