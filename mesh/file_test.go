package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// fileHandler adds FileHandler to testHandler: it serves files from a map.
type fileHandler struct {
	testHandler
	files map[string][]byte
	bad   bool // claim more bytes than asked for
	reads atomic.Int64
}

func (h *fileHandler) ReadFile(_ context.Context, path string, off int64, dst []byte) (int64, int, error) {
	h.reads.Add(1)
	data, ok := h.files[path]
	if !ok {
		return 0, 0, fmt.Errorf("%s: no such file here: %w", path, ErrNotFound)
	}
	if off > int64(len(data)) {
		return 0, 0, fmt.Errorf("%s: offset %d past its %d bytes", path, off, len(data))
	}
	n := copy(dst, data[off:])
	if h.bad {
		n = len(dst) + 1
	}
	return int64(len(data)), n, nil
}

// readAll reads path from part in chunks of chunk bytes.
func readAll(c *Client, part int, path string, chunk uint32) ([]byte, error) {
	var out []byte
	var resp FileResponse
	for {
		req := FileRequest{Path: path, Offset: uint64(len(out)), Length: chunk}
		if err := c.ReadFile(context.Background(), part, &req, &resp); err != nil {
			return out, err
		}
		out = append(out, resp.Data...)
		if uint64(len(out)) == resp.Size {
			return out, nil
		}
	}
}

func TestReadFile(t *testing.T) {
	dir := writeTestCluster(t, testCluster, "host0", "host1", "host2")
	big := make([]byte, 3<<20+17)
	for i := range big {
		big[i] = byte(i * 7 / 3)
	}
	h := &fileHandler{testHandler: testHandler{rowSize: 16}, files: map[string][]byte{"graph.toml": []byte("version = 1\n"), "part-0/part.csr": big, "empty": {}}}
	srv := startServer(t, dir, "host1", 1, "127.0.0.1:0", func(c *ServerConfig) { c.Handler = h })
	bad := startServer(t, dir, "host2", 2, "127.0.0.1:0", func(c *ServerConfig) {
		c.Handler = &fileHandler{testHandler: testHandler{rowSize: 16}, files: h.files, bad: true}
	})
	plain := startServer(t, dir, "host0", 3, "127.0.0.1:0", nil) // no FileHandler
	peers := map[int]Peer{1: srv.peer(), 2: bad.peer(), 3: plain.peer()}
	c := newTestClient(t, loadID(t, dir, "host0"), peers, nil)

	for _, chunk := range []uint32{1 << 20, 1000, 64 << 20} {
		got, err := readAll(c, 1, "part-0/part.csr", chunk)
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("chunks of %d: %d bytes, %v; want the file's %d", chunk, len(got), err, len(big))
		}
	}
	var resp FileResponse
	if err := c.ReadFile(context.Background(), 1, &FileRequest{Path: "empty", Length: 10}, &resp); err != nil || resp.Size != 0 || len(resp.Data) != 0 {
		t.Fatalf("empty file: %+v %v", resp, err)
	}
	// The answer is bounded by MaxFileChunk whatever is asked for.
	if err := c.ReadFile(context.Background(), 1, &FileRequest{Path: "part-0/part.csr", Length: 1<<32 - 1}, &resp); err != nil || len(resp.Data) != MaxFileChunk && len(resp.Data) != len(big) {
		t.Fatalf("large ask: %d bytes, %v", len(resp.Data), err)
	}

	// A node without graph.toml connects without a checksum: it may read
	// files from a peer of any partitioning, and nothing else.
	fetcher := newTestClient(t, loadID(t, dir, "host0"), peers, func(c *ClientConfig) { c.Checksum = "" })
	if got, err := readAll(fetcher, 1, "graph.toml", 4); err != nil || string(got) != "version = 1\n" {
		t.Fatalf("fetch-only client: %q %v", got, err)
	}
	if err := checkSample(fetcher, 1, &SampleRequest{Fanout: 2, IDs: []uint64{3}}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "fetch files only") {
		t.Fatalf("sample on a fetch-only connection: %v, want refused", err)
	}

	for _, tc := range []struct {
		name string
		part int
		req  FileRequest
		want error
		text string
	}{
		{"not held", 1, FileRequest{Path: "part-9/part.csr", Length: 10}, ErrNotFound, "no such file here"},
		{"past the end", 1, FileRequest{Path: "graph.toml", Offset: 100, Length: 10}, ErrRemote, "offset 100 past its 12 bytes"},
		{"no length", 1, FileRequest{Path: "graph.toml"}, ErrMalformed, "length: 0"},
		{"no path", 1, FileRequest{Length: 1}, ErrMalformed, "path: 0 bytes"},
		{"bad handler", 2, FileRequest{Path: "graph.toml", Length: 4}, ErrRemote, "5 bytes at offset 0 of a file of 12"},
		{"not served", 3, FileRequest{Path: "graph.toml", Length: 4}, ErrRemote, "unsupported"},
	} {
		err := c.ReadFile(context.Background(), tc.part, &tc.req, &resp)
		var pe *PeerError
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) || !errors.As(err, &pe) || pe.Op != "file" {
			t.Errorf("%s: err = %v, want %v containing %q from a peer", tc.name, err, tc.want, tc.text)
		}
	}
	// Not found is final: the client asks once, not retries times.
	before := h.reads.Load()
	_ = c.ReadFile(context.Background(), 1, &FileRequest{Path: "nope", Length: 1}, &resp)
	if n := h.reads.Load() - before; n != 1 {
		t.Fatalf("a file not found was asked for %d times, want once", n)
	}
}

func TestDecodeFileRejects(t *testing.T) {
	var r FileResponse
	err := DecodeFileResponse(AppendFileResponse(nil, &FileResponse{Size: 4, Offset: 3, Data: []byte{1, 2}}), &r)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "2 bytes at offset 3 of a file of 4") {
		t.Fatalf("data past the size: %v", err)
	}
	err = DecodeFileRequest(AppendFileRequest(nil, &FileRequest{Path: strings.Repeat("x", MaxFilePath+1), Length: 1}), &FileRequest{})
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "want 1 to 4096") {
		t.Fatalf("long path: %v", err)
	}
}
