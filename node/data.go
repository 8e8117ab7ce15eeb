package node

import (
	"context"
	"errors"
	"fmt"

	"graphnode/mesh"
	"graphnode/node/control"
	"graphnode/sample"
)

// Node data: a trainer reads the features and labels of any node of the
// partition set by global id (control.KindFeatRequest, KindLabelRequest;
// docs/control.md "Node data"), as DGL's DistGraph.ndata and GLT's
// DistFeature give them. The node answers from its partition, its cache
// section and, for the rest, one pull per peer, as its samplers gather a
// batch's rows.

// dataSource gathers rows and labels by global id.
type dataSource interface {
	Gather(ctx context.Context, ids []uint64, dst []byte) error
	GatherLabels(ctx context.Context, ids []uint64, dst []int64) error
}

// dataSchema is what the partition set holds per node.
type dataSchema struct {
	dim      int  // features per node; 0: none
	dtype    byte // control.DTypeF32 or DTypeF16
	labelDim int  // labels per node; 0: none
}

func (s dataSchema) rowBytes() int { return s.dim * control.ValueBytes(s.dtype) }

// source is the node's dataSource, made at the first request (the mesh
// client exists once Run has started): the partition alone in a set of
// one part, the partition, its cache and its peers in a cluster, the
// peers alone on a client node.
func (n *Node) source() (dataSource, dataSchema, error) {
	n.data.once.Do(func() {
		m := n.manifest
		s := dataSchema{dim: m.FeatDim, dtype: control.DTypeF32, labelDim: m.LabelDim}
		dt := mesh.DTypeFloat32
		if m.FeatDtype == "f16" {
			s.dtype, dt = control.DTypeF16, mesh.DTypeFloat16
		}
		n.data.schema = s
		switch {
		case n.mesh.cli == nil && n.handler != nil:
			n.data.src = n.handler.src
		case n.mesh.cli == nil:
			n.data.err = errors.New("node: node data: no partition and no mesh to ask")
		case n.handler == nil:
			n.data.src = newRemoteSource(n.book, n.mesh.cli, s.rowBytes(), dt, s.labelDim)
		default:
			n.data.src, n.data.err = newClusterSource(n.handler.part, n.book, n.mesh.cli)
		}
	})
	return n.data.src, n.data.schema, n.data.err
}

// serveData answers one node-data frame with the frame to send back.
// The answer reads the mapped partition (its rows and labels, and the
// cache ids when the source is made) through readPart.
func (n *Node) serveData(ctx context.Context, body []byte) []byte {
	out, err := readAnswer(n, ctx, body, n.answerData)
	if err != nil {
		return control.AppendDataError(nil, err.Error())
	}
	return out
}

func (n *Node) answerData(ctx context.Context, body []byte) ([]byte, error) {
	var req control.DataRequest
	if err := control.DecodeDataRequest(body, &req); err != nil {
		return nil, err
	}
	src, s, err := n.source()
	if err != nil {
		return nil, err
	}
	nodes := n.book.NumNodes()
	for i, id := range req.IDs {
		if id >= nodes {
			return nil, fmt.Errorf("node: node data: ids[%d] = %d is not a node of the partition set (%d nodes)", i, id, nodes)
		}
	}
	k := len(req.IDs)
	if req.Kind == control.KindLabelRequest {
		if s.labelDim == 0 {
			return nil, errors.New("node: node data: the partition set has no labels")
		}
		if most := (control.MaxFrame - 10) / (4 * s.labelDim); k > most {
			return nil, fmt.Errorf("node: node data: %d ids: the labels of at most %d fit one answer", k, most)
		}
		wide := make([]int64, k*s.labelDim)
		if err := src.GatherLabels(ctx, req.IDs, wide); err != nil {
			return nil, err
		}
		labels := make([]int32, len(wide))
		for i, y := range wide {
			labels[i] = int32(y)
		}
		return control.AppendLabelResponse(nil, &control.LabelResponse{Dim: uint32(s.labelDim), Labels: labels}), nil
	}
	if s.dim == 0 {
		return nil, errors.New("node: node data: the partition set has no features")
	}
	rb := s.rowBytes()
	if most := (control.MaxFrame - control.FeatResponseHead) / rb; k > most {
		return nil, fmt.Errorf("node: node data: %d ids: the features of at most %d (%d bytes each) fit one answer", k, most, rb)
	}
	out := control.AppendFeatResponseHead(make([]byte, 0, control.FeatResponseHead+k*rb), s.dtype, uint32(s.dim), uint32(k))
	out = out[:control.FeatResponseHead+k*rb]
	if err := src.Gather(ctx, req.IDs, out[control.FeatResponseHead:]); err != nil {
		return nil, err
	}
	return out, nil
}

var _ dataSource = (*sample.LocalSource)(nil)
