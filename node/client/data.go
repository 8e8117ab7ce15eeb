package client

import (
	"context"
	"errors"
	"fmt"

	"graphnode/node/control"
)

// ErrData: the node refused a node-data request (an id that is not a
// node, a set without features or labels, a peer that could not be
// reached); the error's text is the node's.
var ErrData = errors.New("node data request failed")

// Data reads the features and labels of any node of the partition set,
// by global id, through the trainer's own node (docs/control.md, "Node
// data"): DGL's DistGraph.ndata, GLT's DistFeature. The node answers from
// its partition, its cache section and its peers. Requests on one Data
// are sent one at a time; open several for concurrent calls.
type Data struct {
	session
	// rowBytes is the bytes per id of the answers to each kind of request
	// (features: dim values; labels: dim int32), which sizes the
	// requests: learnt once per connection, as the node's partition set
	// does not change. Guarded by session.mu.
	rowBytes map[byte]int
}

// dataRequestHead is the size of a node-data request besides its ids:
// kind, version, n u32.
const dataRequestHead = 6

// answerHead is the size of the answer to a request of kind besides its
// rows.
func answerHead(kind byte) int {
	if kind == control.KindFeatRequest {
		return control.FeatResponseHead
	}
	return 12 // LabelResponse: kind, version, 0 u16, dim u32, n u32
}

// DialData connects to the node listening on socket.
func DialData(ctx context.Context, socket string) (*Data, error) {
	s, err := dial(ctx, socket)
	if err != nil {
		return nil, err
	}
	return &Data{session: s, rowBytes: map[byte]int{}}, nil
}

// call sends a request of kind for ids and returns the answer's body.
func (d *Data) call(ctx context.Context, kind byte, ids []uint64) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, fmt.Errorf("client: node data: %w", err)
	}
	d.buf = control.AppendDataRequest(d.buf[:0], &control.DataRequest{Kind: kind, IDs: ids})
	resp, broken, err := exchange(ctx, d.conn, d.buf)
	if err != nil {
		d.failed(err, broken)
		return nil, fmt.Errorf("client: node data: %w", err)
	}
	if len(resp) > 0 && resp[0] == control.KindDataError {
		text, err := control.DecodeDataError(resp)
		if err != nil {
			return nil, fmt.Errorf("client: node data: answer: %w", err)
		}
		return nil, fmt.Errorf("client: %s: %w", text, ErrData)
	}
	return resp, nil
}

// per is how many ids of kind one request of a call of n ids carries:
// one answer must fit a 64 MiB frame (the node refuses more; the
// features of every node, for full-graph inference, take several), so
// the bytes per id are learnt once per connection from a request of
// node 0, not of the caller's first id, whose error would name the
// wrong index for the rest. A call of one id goes alone, unprobed.
func (d *Data) per(ctx context.Context, kind byte, n int) (int, error) {
	d.mu.Lock()
	rb, known := d.rowBytes[kind]
	d.mu.Unlock()
	if !known && n > 1 {
		var err error
		if kind == control.KindFeatRequest {
			var r *control.FeatResponse
			if r, err = d.features(ctx, []uint64{0}); err == nil {
				rb = featRowBytes(r)
			}
		} else {
			var dim int
			dim, _, err = d.labels(ctx, []uint64{0})
			rb = 4 * dim
		}
		if err != nil {
			return 0, err
		}
		d.learn(kind, rb)
		known = true
	}
	if !known {
		return n, nil
	}
	return max(1, min((d.frame-answerHead(kind))/max(rb, 1), (d.frame-dataRequestHead)/8)), nil
}

// learn records that the answers to kind carry rb bytes per id.
func (d *Data) learn(kind byte, rb int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rowBytes[kind] = rb
}

func featRowBytes(r *control.FeatResponse) int { return int(r.Dim) * control.ValueBytes(r.DType) }

// partErr names the ids of the request of several that failed with err:
// the node's indexes count from lo.
func partErr(err error, lo, hi, n, per int) error {
	return fmt.Errorf("%w (ids[%d:%d] of %d, asked in requests of %d)", err, lo, hi, n, per)
}

// Features returns the feature rows of ids, in their order: N = len(ids)
// rows of Dim values of DType (control.DTypeF32 or DTypeF16), as the
// partition stores them. Ids whose rows pass one answer go in several
// requests (see per); an error of one of them names the ids it held.
func (d *Data) Features(ctx context.Context, ids []uint64) (*control.FeatResponse, error) {
	per, err := d.per(ctx, control.KindFeatRequest, len(ids))
	if err != nil {
		return nil, err
	}
	if len(ids) <= per {
		r, err := d.features(ctx, ids)
		if err == nil && len(ids) > 0 {
			d.learn(control.KindFeatRequest, featRowBytes(r))
		}
		return r, err
	}
	var out *control.FeatResponse
	for lo := 0; lo < len(ids); lo += per {
		hi := min(len(ids), lo+per)
		r, err := d.features(ctx, ids[lo:hi])
		if err == nil && out != nil && (r.DType != out.DType || r.Dim != out.Dim) {
			err = fmt.Errorf("client: node data: features of dtype %d and dim %d, then %d and %d: %w", out.DType, out.Dim, r.DType, r.Dim, control.ErrProtocol)
		}
		if err != nil {
			return nil, partErr(err, lo, hi, len(ids), per)
		}
		if out == nil {
			out = &control.FeatResponse{DType: r.DType, Dim: r.Dim, Rows: make([]byte, 0, len(ids)*featRowBytes(r))}
		}
		out.Rows = append(out.Rows, r.Rows...)
		out.N += r.N
	}
	return out, nil
}

// features asks for the feature rows of ids in one request.
func (d *Data) features(ctx context.Context, ids []uint64) (*control.FeatResponse, error) {
	resp, err := d.call(ctx, control.KindFeatRequest, ids)
	if err != nil {
		return nil, err
	}
	var r control.FeatResponse
	if err := control.DecodeFeatResponse(resp, &r); err != nil {
		return nil, fmt.Errorf("client: node data: answer: %w", err)
	}
	if int(r.N) != len(ids) {
		return nil, fmt.Errorf("client: node data: %d rows for %d ids: %w", r.N, len(ids), control.ErrProtocol)
	}
	return &r, nil
}

// Labels returns the labels of ids, in their order: dim per id (-1 =
// missing). Ids whose labels pass one answer go in several requests, as
// for Features.
func (d *Data) Labels(ctx context.Context, ids []uint64) (dim int, labels []int32, err error) {
	per, err := d.per(ctx, control.KindLabelRequest, len(ids))
	if err != nil {
		return 0, nil, err
	}
	if len(ids) <= per {
		dim, labels, err := d.labels(ctx, ids)
		if err == nil && len(ids) > 0 {
			d.learn(control.KindLabelRequest, 4*dim)
		}
		return dim, labels, err
	}
	for lo := 0; lo < len(ids); lo += per {
		hi := min(len(ids), lo+per)
		got, part, err := d.labels(ctx, ids[lo:hi])
		if err == nil && lo > 0 && got != dim {
			err = fmt.Errorf("client: node data: labels of dim %d, then %d: %w", dim, got, control.ErrProtocol)
		}
		if err != nil {
			return 0, nil, partErr(err, lo, hi, len(ids), per)
		}
		if lo == 0 {
			dim, labels = got, make([]int32, 0, len(ids)*got)
		}
		labels = append(labels, part...)
	}
	return dim, labels, nil
}

// labels asks for the labels of ids in one request.
func (d *Data) labels(ctx context.Context, ids []uint64) (int, []int32, error) {
	resp, err := d.call(ctx, control.KindLabelRequest, ids)
	if err != nil {
		return 0, nil, err
	}
	var r control.LabelResponse
	if err := control.DecodeLabelResponse(resp, &r); err != nil {
		return 0, nil, fmt.Errorf("client: node data: answer: %w", err)
	}
	if len(r.Labels) != len(ids)*int(r.Dim) {
		return 0, nil, fmt.Errorf("client: node data: %d labels of dim %d for %d ids: %w", len(r.Labels), r.Dim, len(ids), control.ErrProtocol)
	}
	return int(r.Dim), r.Labels, nil
}
