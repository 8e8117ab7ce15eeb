package client

import (
	"graphnode/kv"
	"graphnode/node/control"
)

// MaxSyncLen is the longest vector a Sync over table all-reduces: a
// trainer's push of a step carries every row of the table (SyncDim
// values each) in one control frame, and a node refuses at kv_create a
// sync table whose push would not fit one. node train checks its model
// against it before it allocates the model: a width off by digits
// crashed the trainer once its loaders had started.
func MaxSyncLen(table string) int {
	head := len(kv.AppendPushSyncRequest(nil, &kv.PushSyncRequest{Table: table}))
	return (control.MaxFrame - head) / (4 * SyncDim) * SyncDim
}

// MaxRowDim is the widest row of table a pull or a push carries: one
// row and its id must fit a control frame (node kge's entity rows, which
// it pulls and pushes a row whole at a time).
func MaxRowDim(table string) int {
	pull := (control.MaxFrame - pullResponseHead) / 4
	push := (control.MaxFrame - pushRequestHead - len(table) - 8) / 4
	return min(pull, push)
}
