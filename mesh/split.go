package mesh

import (
	"context"
	"fmt"
)

// SplitHandler and LabelHandler are optional extensions of Handler: a
// Handler that implements them serves SplitRequest and LabelRequest; one
// that does not answers them CodeUnsupported. Their contract is
// Handler's (concurrent calls, request valid during the call only).
type SplitHandler interface {
	// SplitIDs returns the split's ids owned by this node, ascending.
	SplitIDs(ctx context.Context, req *SplitRequest) (*SplitResponse, error)
}

// LabelHandler serves the labels of owned nodes.
type LabelHandler interface {
	// Labels returns Dim labels per id of req, in request order.
	Labels(ctx context.Context, req *LabelRequest) (*LabelResponse, error)
}

// dispatchSplit serves the split and label requests; ok is false for any
// other type.
func (s *Server) dispatchSplit(ctx context.Context, t Type, p []byte) (msg []byte, ok bool) {
	switch t {
	case TypeSplitRequest:
		h, served := s.cfg.Handler.(SplitHandler)
		if !served {
			return nil, false
		}
		var req SplitRequest
		if err := DecodeSplitRequest(p, &req); err != nil {
			return errorMessage(CodeMalformed, err.Error()), true
		}
		resp, err := h.SplitIDs(ctx, &req)
		if err != nil {
			return handlerError(t, err), true
		}
		if resp == nil || !ascending(resp.IDs) {
			return errorMessage(CodeInternal, fmt.Sprintf("mesh: %s handler: ids are not ascending", t)), true
		}
		b, start := beginMessage(nil, TypeSplitResponse)
		b = AppendSplitResponse(b, resp)
		return s.finish(b, start, 0), true
	case TypeLabelRequest:
		h, served := s.cfg.Handler.(LabelHandler)
		if !served {
			return nil, false
		}
		var req LabelRequest
		if err := DecodeLabelRequest(p, &req); err != nil {
			return errorMessage(CodeMalformed, err.Error()), true
		}
		resp, err := h.Labels(ctx, &req)
		if err != nil {
			return handlerError(t, err), true
		}
		if resp == nil || resp.Dim == 0 || len(resp.Labels) != len(req.IDs)*int(resp.Dim) {
			return errorMessage(CodeInternal, fmt.Sprintf("mesh: %s handler: response is not labels of %d ids", t, len(req.IDs))), true
		}
		b, start := beginMessage(nil, TypeLabelResponse)
		b = AppendLabelResponse(b, resp)
		return s.finish(b, start, 0), true
	}
	return nil, false
}

func ascending(ids []uint64) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return false
		}
	}
	return true
}

// Split asks the peer serving part for the ids of its nodes in a split
// (ascending), decoding into resp (whose slice is reused).
func (c *Client) Split(ctx context.Context, part int, req *SplitRequest, resp *SplitResponse) error {
	b, start := beginMessage(nil, TypeSplitRequest)
	b = AppendSplitRequest(b, req)
	p, err := c.call(ctx, part, "split", b, start, TypeSplitResponse)
	if err != nil {
		return err
	}
	if err := DecodeSplitResponse(p.payload, resp); err != nil {
		return c.fail(p.peer, "split", err)
	}
	return nil
}

// Labels asks the peer serving part for the labels of req.IDs, decoding
// into resp (whose slice is reused).
func (c *Client) Labels(ctx context.Context, part int, req *LabelRequest, resp *LabelResponse) error {
	b, start := beginMessage(nil, TypeLabelRequest)
	b = AppendLabelRequest(b, req)
	p, err := c.call(ctx, part, "labels", b, start, TypeLabelResponse)
	if err != nil {
		return err
	}
	if err := DecodeLabelResponse(p.payload, resp); err != nil {
		return c.fail(p.peer, "labels", err)
	}
	if resp.Count() != len(req.IDs) {
		return c.fail(p.peer, "labels", fmt.Errorf("labels of %d ids for %d ids: %w", resp.Count(), len(req.IDs), ErrMalformed))
	}
	return nil
}
