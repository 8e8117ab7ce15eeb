package mesh

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// splitHandler adds SplitHandler and LabelHandler to testHandler.
type splitHandler struct {
	testHandler
	splits map[string][]uint64
	bad    bool // answer out-of-order ids / a label short
}

func (h *splitHandler) SplitIDs(_ context.Context, req *SplitRequest) (*SplitResponse, error) {
	ids, ok := h.splits[req.Split]
	if !ok {
		return nil, fmt.Errorf("no split %q", req.Split)
	}
	if h.bad {
		ids = []uint64{5, 3}
	}
	return &SplitResponse{IDs: ids}, nil
}

func (h *splitHandler) Labels(_ context.Context, req *LabelRequest) (*LabelResponse, error) {
	r := &LabelResponse{Dim: 2}
	for _, id := range req.IDs {
		r.Labels = append(r.Labels, int32(id%7), -1)
	}
	if h.bad {
		r.Labels = r.Labels[:len(r.Labels)-2]
	}
	return r, nil
}

func TestSplitAndLabels(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1", "host2")
	h := &splitHandler{testHandler: testHandler{rowSize: 16}, splits: map[string][]uint64{"train": {10, 11, 40}, "val": {}}}
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) { c.Handler = h })
	bad := &splitHandler{testHandler: testHandler{rowSize: 16}, splits: map[string][]uint64{"train": {1}}, bad: true}
	srvBad := startServer(t, dir, "host2", 2, "127.0.0.1:0", func(c *ServerConfig) { c.Handler = bad })
	plain := startServer(t, dir, "host0", 3, "127.0.0.1:0", nil) // no SplitHandler
	c := newTestClient(t, loadID(t, dir, "host0"), map[int]Peer{1: srv.peer(), 2: srvBad.peer(), 3: plain.peer()}, nil)
	ctx := context.Background()

	var sr SplitResponse
	for _, tc := range []struct {
		split string
		want  []uint64
	}{{"train", []uint64{10, 11, 40}}, {"val", []uint64{}}} {
		if err := c.Split(ctx, 1, &SplitRequest{Split: tc.split}, &sr); err != nil || !slices.Equal(sr.IDs, tc.want) {
			t.Fatalf("split %s: %v %v, want %v", tc.split, sr.IDs, err, tc.want)
		}
	}
	var lr LabelResponse
	if err := c.Labels(ctx, 1, &LabelRequest{IDs: []uint64{8, 20}}, &lr); err != nil || lr.Dim != 2 || !slices.Equal(lr.Labels, []int32{1, -1, 6, -1}) {
		t.Fatalf("labels: %+v %v", lr, err)
	}

	for _, tc := range []struct {
		name string
		call func() error
		want error
		text string
	}{
		{"unknown split", func() error { return c.Split(ctx, 1, &SplitRequest{Split: "dev"}, &sr) }, ErrRemote, `no split "dev"`},
		{"split name too long", func() error { return c.Split(ctx, 1, &SplitRequest{Split: strings.Repeat("x", 65)}, &sr) }, ErrMalformed, "limit 64"},
		{"ids out of order", func() error { return c.Split(ctx, 2, &SplitRequest{Split: "train"}, &sr) }, ErrRemote, "not ascending"},
		{"labels short", func() error { return c.Labels(ctx, 2, &LabelRequest{IDs: []uint64{1, 2}}, &lr) }, ErrRemote, "not labels of 2 ids"},
		{"not served", func() error { return c.Split(ctx, 3, &SplitRequest{Split: "train"}, &sr) }, ErrRemote, "unsupported"},
	} {
		err := tc.call()
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: err = %v, want %v containing %q", tc.name, err, tc.want, tc.text)
		}
	}
}

func TestDecodeSplitRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decode func() error
		text   string
	}{
		{"descending ids", func() error {
			return DecodeSplitResponse(AppendSplitResponse(nil, &SplitResponse{IDs: []uint64{2, 2}}), &SplitResponse{})
		}, "not ascending at 1"},
		{"label dim 0", func() error {
			return DecodeLabelResponse(AppendLabelResponse(nil, &LabelResponse{Labels: []int32{1}}), &LabelResponse{})
		}, "dim: 0"},
		{"labels not a multiple of dim", func() error {
			return DecodeLabelResponse(AppendLabelResponse(nil, &LabelResponse{Dim: 2, Labels: []int32{1, 2, 3}}), &LabelResponse{})
		}, "3 labels are not a multiple of dim 2"},
		{"trailing byte", func() error {
			return DecodeLabelRequest(append(AppendLabelRequest(nil, &LabelRequest{IDs: []uint64{1}}), 0), &LabelRequest{})
		}, "1 trailing bytes"},
	} {
		err := tc.decode()
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v, want ErrMalformed containing %q", tc.name, err, tc.text)
		}
	}
}
