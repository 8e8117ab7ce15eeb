package client

import (
	"strings"
	"testing"

	"graphnode/kv"
	"graphnode/node/control"
)

// TestMaxRowDim: a row of MaxRowDim values, its id with it, fits a
// control frame as a push and as a pull's answer; a value more does not
// fit one of them.
func TestMaxRowDim(t *testing.T) {
	for _, table := range []string{"kge.entity", strings.Repeat("t", kv.MaxNameLen)} {
		dim := MaxRowDim(table)
		sizes := func(dim int) (push, pull int) {
			row := make([]float32, dim)
			push = len(kv.AppendPushRequest(nil, &kv.PushRequest{Table: table, Dim: uint32(dim), IDs: []uint64{7}, Grads: row}))
			pull = len(kv.AppendPullResponse(nil, &kv.PullResponse{Version: 1, Dim: uint32(dim), Rows: row}))
			return push, pull
		}
		if push, pull := sizes(dim); push > control.MaxFrame || pull > control.MaxFrame {
			t.Errorf("%s: a row of MaxRowDim %d: push of %d bytes, pull answer of %d; the frame holds %d", table, dim, push, pull, control.MaxFrame)
		}
		if push, pull := sizes(dim + 1); push <= control.MaxFrame && pull <= control.MaxFrame {
			t.Errorf("%s: a row of %d values, one over MaxRowDim, fits (push %d bytes, pull answer %d): MaxRowDim is not the widest", table, dim+1, push, pull)
		}
	}
}
