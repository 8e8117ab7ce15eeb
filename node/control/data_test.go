package control

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestDataFrames(t *testing.T) {
	req := &DataRequest{Kind: KindLabelRequest, IDs: []uint64{7, 1 << 40, 7}}
	body := AppendDataRequest(nil, req)
	if !IsData(body) || IsKV(body) {
		t.Fatalf("a node-data body is taken for kv (IsData %v, IsKV %v)", IsData(body), IsKV(body))
	}
	var back DataRequest
	if err := DecodeDataRequest(body, &back); err != nil || back.Kind != req.Kind || !slices.Equal(back.IDs, req.IDs) {
		t.Fatalf("request round trip: %+v, %v", back, err)
	}
	rows := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	fb := append(AppendFeatResponseHead(nil, DTypeF16, 2, 2), rows...)
	var f FeatResponse
	if err := DecodeFeatResponse(fb, &f); err != nil || f.DType != DTypeF16 || f.Dim != 2 || f.N != 2 || !bytes.Equal(f.Rows, rows) {
		t.Fatalf("features round trip: %+v, %v", f, err)
	}
	lr := &LabelResponse{Dim: 2, Labels: []int32{3, -1, 0, 9}}
	var l LabelResponse
	if err := DecodeLabelResponse(AppendLabelResponse(nil, lr), &l); err != nil || l.Dim != 2 || !slices.Equal(l.Labels, lr.Labels) {
		t.Fatalf("labels round trip: %+v, %v", l, err)
	}
	if text, err := DecodeDataError(AppendDataError(nil, "no features")); err != nil || text != "no features" {
		t.Fatalf("error round trip: %q, %v", text, err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"version", DecodeDataRequest([]byte{KindFeatRequest, 9, 0, 0, 0, 0}, &back), "version: 9"},
		{"kind", DecodeDataRequest(AppendDataError(nil, "x"), &back), "kind: 0x24"},
		{"count past the end", DecodeDataRequest([]byte{KindFeatRequest, 1, 2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, &back), "count 2 of 8-byte elements exceeds the 8 bytes left"},
		{"trailing", DecodeDataRequest(append(body, 0), &back), "1 trailing bytes"},
		{"short rows", DecodeFeatResponse(fb[:len(fb)-1], &f), "7 bytes for 2 rows of 2 values of 2 bytes"},
		{"dtype", DecodeFeatResponse(AppendFeatResponseHead(nil, 3, 1, 0), &f), "unknown dtype 3"},
		{"label dim 0", DecodeLabelResponse(AppendLabelResponse(nil, &LabelResponse{}), &l), "dim: 0"},
	} {
		if !errors.Is(tc.err, ErrProtocol) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want a protocol error containing %q", tc.name, tc.err, tc.want)
		}
	}
}

// FuzzDecodeData: every node-data decoder takes any bytes without
// panicking, and what decodes encodes to the same bytes.
func FuzzDecodeData(f *testing.F) {
	f.Add(AppendDataRequest(nil, &DataRequest{Kind: KindFeatRequest, IDs: []uint64{1, 2}}))
	f.Add(append(AppendFeatResponseHead(nil, DTypeF32, 1, 1), 0, 0, 128, 63))
	f.Add(AppendLabelResponse(nil, &LabelResponse{Dim: 1, Labels: []int32{-1}}))
	f.Add(AppendDataError(nil, "id 9 is not a node"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var again []byte
		var r DataRequest
		var fr FeatResponse
		var lr LabelResponse
		if DecodeDataRequest(b, &r) == nil {
			again = AppendDataRequest(nil, &r)
		} else if DecodeFeatResponse(b, &fr) == nil {
			again = append(AppendFeatResponseHead(nil, fr.DType, fr.Dim, fr.N), fr.Rows...)
		} else if DecodeLabelResponse(b, &lr) == nil {
			again = AppendLabelResponse(nil, &lr)
		} else if text, err := DecodeDataError(b); err == nil {
			again = AppendDataError(nil, text)
		} else {
			return
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in % x\nout % x", b, again)
		}
	})
}
