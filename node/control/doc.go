// Package control is the trainer ↔ node control protocol: the messages
// and their framing over the node's Unix socket (docs/control.md is the
// language-neutral description; a Python client is written from it).
//
// A message is a uint32 little-endian length followed by that many bytes
// (at most MaxFrame) of UTF-8 JSON, or of a binary kv message (IsKV) or
// node-data message (IsData), told apart by the body's first byte. The
// trainer sends a Request, the node answers with one Response (a binary
// message with its binary answer), in order, on the same connection.
// Loaders opened on a connection are closed by the node when the
// connection ends.
//
// DecodeRequest is the node's only parser of trainer JSON: it refuses
// unknown fields, fills defaults, and validates every field, returning a
// *Error whose Key names the field at fault. The types are plain data and
// safe to copy; nothing here does I/O but ReadFrame, ReadResponse,
// WriteFrame and WriteRaw.
package control
