package client

import (
	"context"
	"errors"
	"fmt"

	"graphnode/node/control"
)

// ErrData: the node refused a node-data request (an id that is not a
// node, a set without features or labels, too many ids for one answer,
// a peer that could not be reached); the error's text is the node's.
var ErrData = errors.New("node data request failed")

// Data reads the features and labels of any node of the partition set,
// by global id, through the trainer's own node (docs/control.md, "Node
// data"): DGL's DistGraph.ndata, GLT's DistFeature. The node answers from
// its partition, its cache section and its peers. Requests on one Data
// are sent one at a time; open several for concurrent calls.
type Data struct{ session }

// DialData connects to the node listening on socket.
func DialData(ctx context.Context, socket string) (*Data, error) {
	s, err := dial(ctx, socket)
	if err != nil {
		return nil, err
	}
	return &Data{s}, nil
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

// Features returns the feature rows of ids, in their order: N = len(ids)
// rows of Dim values of DType (control.DTypeF32 or DTypeF16), as the
// partition stores them.
func (d *Data) Features(ctx context.Context, ids []uint64) (*control.FeatResponse, error) {
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
// missing).
func (d *Data) Labels(ctx context.Context, ids []uint64) (dim int, labels []int32, err error) {
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
