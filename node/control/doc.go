// Package control is the trainer ↔ node control protocol: the messages
// and their framing over the node's Unix socket (docs/control.md is the
// language-neutral description; a Python client is written from it).
//
// A message is a uint32 little-endian length followed by that many bytes
// of UTF-8 JSON. The trainer sends a Request, the node answers with one
// Response, in order, on the same connection. Loaders opened on a
// connection are closed by the node when the connection ends.
//
// DecodeRequest is the node's only parser of trainer bytes: it refuses
// unknown fields, fills defaults, and validates every field, returning a
// *Error whose Key names the field at fault. The types are plain data and
// safe to copy; nothing here does I/O but ReadFrame and WriteFrame.
package control
