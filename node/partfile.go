package node

import (
	"context"
	"errors"
	"fmt"

	"graphnode/csr"
	"graphnode/mesh"
)

// The partition file is mapped, and cp, scp or truncate on it while the
// node runs change the mapped inode under the views (csr/changed.go):
// a read of a page past the new end raised SIGBUS, which killed the node
// with a "fatal error: fault", its socket and rings left behind, and
// samplers the same way. Every read of the mapping goes through
// csr.Graph.Read, once per request or batch: here for the node (data
// answers, mesh requests, loader planning), in sampler.go and pipeline.go
// for samplers.
//
// After the first change the node keeps running and answers every request
// that would read the partition with the error, which names the file and
// says what to do; requests that do not (stats, kv, closing loaders)
// still work. Stopping instead would end every trainer's kv tables and
// loaders with an EOF where they can read why, and a node restarted by
// systemd would serve the new file against peers that may still serve the
// old partitioning. The mapping is not read again: csr.Graph.Read makes
// the change stick, since the node's checks, its partition book and what
// it told loaders describe the file it opened.

// partChanged is a csr.ErrChanged of the partition file with what to do.
type partChanged struct{ err error }

func (e *partChanged) Error() string {
	return fmt.Sprintf("node: partition file changed under the running node (%v); partition files are replaced with the node stopped, "+
		"or by writing a new file and renaming it over the old (restart the node to serve the new one)", e.err)
}

func (e *partChanged) Unwrap() error { return e.err }

// changedPart adds what to do to a csr.ErrChanged; other errors, and
// one that says it already, are returned as they are.
func changedPart(err error) error {
	var pc *partChanged
	if !errors.Is(err, csr.ErrChanged) || errors.As(err, &pc) {
		return err
	}
	return &partChanged{err: err}
}

// readPart runs f, which reads the mapped partition, through
// csr.Graph.Read (f directly on a client node, which has no partition),
// and reports a change of the file (partErr).
func (n *Node) readPart(f func() error) error {
	if n.graph == nil {
		return f()
	}
	return n.partErr(n.graph.Read(f))
}

// partErr adds what to do to an error that is a change of the partition
// file, and logs the change, once per node: every later request gets the
// same error.
func (n *Node) partErr(err error) error {
	err = changedPart(err)
	var pc *partChanged
	if errors.As(err, &pc) && n.handler != nil {
		n.handler.changed.Do(func() {
			n.log.Error("partition file changed under the running node: requests that read it fail until the node is restarted",
				"path", n.part, "err", pc.err)
		})
	}
	return err
}

// The mesh server calls these, not the handler's own: each request reads
// the mapping through readPart (readAnswer).

// readAnswer is answer(ctx, req), read through n.readPart.
func readAnswer[Q, R any](n *Node, ctx context.Context, req Q, answer func(context.Context, Q) (R, error)) (resp R, err error) {
	err = n.readPart(func() (err error) {
		resp, err = answer(ctx, req)
		return err
	})
	return resp, err
}

func (h meshHandler) SampleNeighbors(ctx context.Context, req *mesh.SampleRequest) (*mesh.SampleResponse, error) {
	return readAnswer(h.node, ctx, req, h.handler.SampleNeighbors)
}

func (h meshHandler) PullFeatures(ctx context.Context, req *mesh.PullRequest) (*mesh.PullResponse, error) {
	return readAnswer(h.node, ctx, req, h.handler.PullFeatures)
}

func (h meshHandler) Labels(ctx context.Context, req *mesh.LabelRequest) (*mesh.LabelResponse, error) {
	return readAnswer(h.node, ctx, req, h.handler.Labels)
}

func (h meshHandler) SplitIDs(ctx context.Context, req *mesh.SplitRequest) (*mesh.SplitResponse, error) {
	return readAnswer(h.node, ctx, req, h.handler.SplitIDs)
}
