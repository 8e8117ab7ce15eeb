package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"graphnode/node/control"
)

// dataNode answers node-data requests (float32 features: wantValue;
// labels: wantLabel) as the node does, refusing an answer past its frame
// and an id past its nodes.
type dataNode struct {
	mu       sync.Mutex
	frame    int // the most bytes of an answer
	featDim  int
	labelDim int
	nodes    uint64
	asked    [][]uint64
	socket   string
}

func newDataNode(t *testing.T, frame, featDim, labelDim int, nodes uint64) *dataNode {
	d := &dataNode{frame: frame, featDim: featDim, labelDim: labelDim, nodes: nodes}
	d.socket, _ = slowNode(t, 0, d.answer)
	return d
}

func (d *dataNode) answer(body []byte) []byte {
	var r control.DataRequest
	if err := control.DecodeDataRequest(body, &r); err != nil {
		return control.AppendDataError(nil, err.Error())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, slices.Clone(r.IDs))
	for i, id := range r.IDs {
		if id >= d.nodes {
			return control.AppendDataError(nil, fmt.Sprintf("node: node data: ids[%d] = %d is not a node of the partition set", i, id))
		}
	}
	if r.Kind == control.KindLabelRequest {
		if most := (d.frame - 12) / (4 * d.labelDim); len(r.IDs) > most {
			return control.AppendDataError(nil, fmt.Sprintf("node: node data: %d ids: the labels of at most %d fit one answer", len(r.IDs), most))
		}
		labels := make([]int32, 0, len(r.IDs)*d.labelDim)
		for _, id := range r.IDs {
			for c := range d.labelDim {
				labels = append(labels, wantLabel(id, c))
			}
		}
		return control.AppendLabelResponse(nil, &control.LabelResponse{Dim: uint32(d.labelDim), Labels: labels})
	}
	if most := (d.frame - control.FeatResponseHead) / (4 * d.featDim); len(r.IDs) > most {
		return control.AppendDataError(nil, fmt.Sprintf("node: node data: %d ids: the features of at most %d fit one answer", len(r.IDs), most))
	}
	return appendRows(control.AppendFeatResponseHead(nil, control.DTypeF32, uint32(d.featDim), uint32(len(r.IDs))), r.IDs, d.featDim)
}

func (d *dataNode) reset() [][]uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.asked
	d.asked = nil
	return a
}

// TestDataSplit: the features of more ids than one 64 MiB answer holds
// (every node, for full-graph inference) go in as many requests as the
// answers need, the bytes per id learnt from a request of node 0.
func TestDataSplit(t *testing.T) {
	const dim = 1 << 14 // 1023 rows an answer
	n := newDataNode(t, control.MaxFrame, dim, 1, 10000)
	d, err := DialData(context.Background(), n.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ids := make([]uint64, 1100)
	for i := range ids {
		ids[i] = uint64(9999 - i%1050)
	}
	f, err := d.Features(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	checkFeatures(t, f, ids, dim)
	if asked := n.reset(); len(asked) != 3 || !slices.Equal(asked[0], []uint64{0}) || !slices.Equal(asked[1], ids[:1023]) || !slices.Equal(asked[2], ids[1023:]) {
		t.Fatalf("%d requests, want the probe of node 0, then 1023 and 77 ids", len(asked))
	}
}

// TestDataSplitSmallFrame: the same, features and labels, with a frame
// of three feature rows; an error of a request of several names the ids
// it held.
func TestDataSplitSmallFrame(t *testing.T) {
	const dim, labelDim = 64, 1
	frame := control.FeatResponseHead + 4*dim*3
	ctx := context.Background()
	n := newDataNode(t, frame, dim, labelDim, 1000)
	d, err := DialData(ctx, n.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.frame = frame
	for _, tc := range []struct {
		ids  []uint64
		want [][]uint64
	}{
		{[]uint64{7}, [][]uint64{{7}}}, // one id: no probe
		{[]uint64{9, 1, 4, 4, 7, 0, 2, 8}, [][]uint64{{9, 1, 4}, {4, 7, 0}, {2, 8}}}, // the size known from 7's
		{[]uint64{6, 3}, [][]uint64{{6, 3}}},
		{nil, [][]uint64{{}}},
	} {
		f, err := d.Features(ctx, tc.ids)
		if err != nil {
			t.Fatal(err)
		}
		checkFeatures(t, f, tc.ids, dim)
		if asked := n.reset(); !slices.EqualFunc(asked, tc.want, slices.Equal) {
			t.Fatalf("features of %v: requests %v, want %v", tc.ids, asked, tc.want)
		}
	}
	// Labels: a request of 8 bytes an id is the larger here.
	ids := make([]uint64, 200)
	for i := range ids {
		ids[i] = uint64(3 * i)
	}
	got, labels, err := d.Labels(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if got != labelDim || len(labels) != len(ids)*labelDim {
		t.Fatalf("labels: dim %d, %d labels for %d ids", got, len(labels), len(ids))
	}
	for i, id := range ids {
		for c := range labelDim {
			if labels[i*labelDim+c] != wantLabel(id, c) {
				t.Fatalf("label of ids[%d] = %d, column %d: %d, want %d", i, id, c, labels[i*labelDim+c], wantLabel(id, c))
			}
		}
	}
	per := (frame - 6) / 8
	if asked := n.reset(); len(asked) != 4 || len(asked[0]) != 1 || !slices.Equal(asked[1], ids[:per]) || !slices.Equal(asked[3], ids[2*per:]) {
		t.Fatalf("%d label requests, want the probe, then %d, %d and %d ids", len(asked), per, per, len(ids)-2*per)
	}

	for _, tc := range []struct {
		ids  []uint64
		want string // the error's end
	}{
		// One request: the node's index is the caller's.
		{[]uint64{1, 2000}, "ids[1] = 2000 is not a node of the partition set: " + ErrData.Error()},
		{[]uint64{1, 2, 3, 4, 3000, 5, 6}, "ids[1] = 3000 is not a node of the partition set: " + ErrData.Error() + " (ids[3:6] of 7, asked in requests of 3)"},
	} {
		if _, err := d.Features(ctx, tc.ids); !errors.Is(err, ErrData) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Fatalf("features of %v: %v, want an error ending %q", tc.ids, err, tc.want)
		}
	}
}

// checkFeatures fails unless f holds the float32 rows of ids.
func checkFeatures(t *testing.T, f *control.FeatResponse, ids []uint64, dim int) {
	t.Helper()
	if f.DType != control.DTypeF32 || f.Dim != uint32(dim) || int(f.N) != len(ids) || len(f.Rows) != len(ids)*dim*4 {
		t.Fatalf("features: dtype %d, %d rows of %d in %d bytes; want %d rows of %d", f.DType, f.N, f.Dim, len(f.Rows), len(ids), dim)
	}
	for i, id := range ids {
		for _, c := range checkColumns(dim) {
			if got, want := f32At(f.Rows, i*dim+c), wantValue(id, c); got != want {
				t.Fatalf("features of ids[%d] = %d, column %d: %v, want %v", i, id, c, got, want)
			}
		}
	}
}

// wantLabel is label c of id that dataNode answers.
func wantLabel(id uint64, c int) int32 { return int32(10*id) + int32(c) }

func f32At(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}
