package mesh

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
)

// FileHandler is an optional extension of Handler: a Handler that
// implements it serves the files of its partition directory to peers
// that fetch theirs (FileRequest); one that does not answers
// CodeUnsupported. Its contract is Handler's.
type FileHandler interface {
	// ReadFile reads the file at path (slash-separated, relative to the
	// partition directory) from offset on into dst, and returns the
	// file's size and the bytes read: len(dst), or fewer only where the
	// file ends. A file it does not hold, or will not serve, is an error
	// wrapping ErrNotFound (the caller asks another peer).
	ReadFile(ctx context.Context, path string, offset int64, dst []byte) (size int64, n int, err error)
}

// MaxFileChunk bounds the bytes of one FileResponse, whatever the
// request asks for.
const MaxFileChunk = 16 << 20

// fileHead is the size of a FileResponse payload before its data.
const fileHead = 8 + 8 + 4

// dispatchFile serves a FileRequest; ok is false for any other type.
// The data is read straight into the answer's buffer.
func (s *Server) dispatchFile(ctx context.Context, t Type, p []byte) (msg []byte, ok bool) {
	if t != TypeFileRequest {
		return nil, false
	}
	h, served := s.cfg.Handler.(FileHandler)
	if !served {
		return nil, false
	}
	var req FileRequest
	if err := DecodeFileRequest(p, &req); err != nil {
		return errorMessage(CodeMalformed, err.Error()), true
	}
	if req.Offset > 1<<62 {
		return errorMessage(CodeMalformed, fmt.Sprintf("mesh: %s: offset %d is past any file", t, req.Offset)), true
	}
	want := min(int(req.Length), MaxFileChunk, s.cfg.MaxMessage-fileHead)
	b, start := beginMessage(s.getBuf(), TypeFileResponse)
	head := len(b)
	b = appendFileResponseHead(b, 0, req.Offset, 0)
	b = slices.Grow(b, want)
	size, n, err := h.ReadFile(ctx, req.Path, int64(req.Offset), b[len(b):len(b)+want])
	switch {
	case err != nil:
		return handlerError(t, err), true
	case size < 0 || n < 0 || n > want || uint64(size) < req.Offset || uint64(n) > uint64(size)-req.Offset:
		return errorMessage(CodeInternal, fmt.Sprintf("mesh: %s handler: %d bytes at offset %d of a file of %d", t, n, req.Offset, size)), true
	case n < want && req.Offset+uint64(n) < uint64(size):
		return errorMessage(CodeInternal, fmt.Sprintf("mesh: %s handler: %d bytes at offset %d of a file of %d, before its end", t, n, req.Offset, size)), true
	}
	binary.LittleEndian.PutUint64(b[head:], uint64(size))
	binary.LittleEndian.PutUint32(b[head+16:], uint32(n))
	return s.finish(b[:len(b)+n], start, 0), true
}

// ReadFile asks the peer serving part for req.Length bytes of the file
// req.Path from req.Offset on, decoding the answer into resp: resp.Data
// is valid until the next ReadFile into resp, which reuses its memory.
// A peer that does not hold the file fails with an error matching
// ErrNotFound.
func (c *Client) ReadFile(ctx context.Context, part int, req *FileRequest, resp *FileResponse) error {
	b, start := beginMessage(nil, TypeFileRequest)
	b = AppendFileRequest(b, req)
	p, err := c.callWith(ctx, part, "file", b, start, TypeFileResponse, c.cfg.Timeout, c.cfg.Retries, resp.payload, false)
	if err != nil {
		return err
	}
	resp.payload = p.payload
	if err := DecodeFileResponse(p.payload, resp); err != nil {
		return c.fail(p.peer, "file", err)
	}
	switch {
	case resp.Offset != req.Offset:
		return c.fail(p.peer, "file", fmt.Errorf("%s: answer at offset %d for offset %d: %w", req.Path, resp.Offset, req.Offset, ErrMalformed))
	case uint64(len(resp.Data)) > uint64(req.Length):
		return c.fail(p.peer, "file", fmt.Errorf("%s: %d bytes for %d asked: %w", req.Path, len(resp.Data), req.Length, ErrMalformed))
	case len(resp.Data) == 0 && resp.Offset < resp.Size:
		return c.fail(p.peer, "file", fmt.Errorf("%s: no bytes at offset %d of %d: %w", req.Path, resp.Offset, resp.Size, ErrMalformed))
	}
	return nil
}
