package mesh

import "encoding/binary"

// File messages: a node that starts without its partition's files
// (`[node] fetch`) reads them from a peer that holds them, in chunks, at
// the offsets it asks for, so that a transfer cut off by a peer that
// vanished goes on from where it stopped, from that peer or another.

// MaxFilePath bounds FileRequest.Path: paths are those of graph.toml's
// file list ("part-12/part.csr"), short.
const MaxFilePath = 4096

// FileRequest asks for up to Length bytes of the file at Path (slash-
// separated, relative to the peer's partition directory) from Offset on.
//
//	path str (1 to MaxFilePath bytes) | offset u64 | length u32 (> 0)
type FileRequest struct {
	Path   string
	Offset uint64
	Length uint32
}

// AppendFileRequest appends r's payload to b.
func AppendFileRequest(b []byte, r *FileRequest) []byte {
	b = appendStr(b, r.Path)
	b = binary.LittleEndian.AppendUint64(b, r.Offset)
	return binary.LittleEndian.AppendUint32(b, r.Length)
}

// DecodeFileRequest decodes a FileRequest payload into r.
func DecodeFileRequest(p []byte, r *FileRequest) error {
	d := decoder{msg: "FileRequest", b: p}
	r.Path = d.str("path")
	if d.err == nil && (len(r.Path) == 0 || len(r.Path) > MaxFilePath) {
		d.fail("path", "%d bytes, want 1 to %d", len(r.Path), MaxFilePath)
	}
	r.Offset = d.u64("offset")
	r.Length = d.u32("length")
	if d.err == nil && r.Length == 0 {
		d.fail("length", "0")
	}
	return d.end()
}

// FileResponse answers a FileRequest: the whole file's size and the bytes
// from Offset on, as many as were asked for or as the file has left
// (none when Offset is the size).
//
//	size u64 | offset u64 | data []u8   (offset + len(data) <= size)
type FileResponse struct {
	Size   uint64
	Offset uint64
	Data   []byte

	payload []byte // the answer's bytes, kept for the next ReadFile
}

// appendFileResponseHead appends the payload of a FileResponse up to its
// data, whose n bytes the caller appends.
func appendFileResponseHead(b []byte, size, offset uint64, n int) []byte {
	b = binary.LittleEndian.AppendUint64(b, size)
	b = binary.LittleEndian.AppendUint64(b, offset)
	return binary.LittleEndian.AppendUint32(b, uint32(n))
}

// AppendFileResponse appends r's payload to b.
func AppendFileResponse(b []byte, r *FileResponse) []byte {
	return append(appendFileResponseHead(b, r.Size, r.Offset, len(r.Data)), r.Data...)
}

// DecodeFileResponse decodes a FileResponse payload into r; r.Data
// aliases p.
func DecodeFileResponse(p []byte, r *FileResponse) error {
	d := decoder{msg: "FileResponse", b: p}
	r.Size = d.u64("size")
	r.Offset = d.u64("offset")
	n := d.count("data", 1)
	r.Data = d.take("data", uint64(n))
	if d.err == nil && (r.Offset > r.Size || uint64(n) > r.Size-r.Offset) {
		d.fail("data", "%d bytes at offset %d of a file of %d", n, r.Offset, r.Size)
	}
	return d.end()
}
