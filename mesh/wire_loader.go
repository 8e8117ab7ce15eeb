package mesh

import "encoding/binary"

// Remote-loader messages (server-client mode). The mesh carries the
// daemon's loader options and description, and the records of its rings,
// without looking inside them, like kv messages.
//
//	LoaderOpenRequest   options  the rest: the daemon's loader options, at least 1 byte
//	LoaderOpenResponse  id       u64: the loader, valid on this connection only
//	                    info     the rest: the daemon's loader description, at least 1 byte
//	LoaderStreamRequest id       u64: a loader opened on this connection
//	                    sub      u32: which of its sub-rings
//	LoaderRecord        record   the rest: one ring record, at least 1 byte; up to
//	                             MaxRecordMessage, not bounded by MaxMessage
//
// A LoaderStreamRequest is answered by LoaderRecord messages, one per
// record in the sub-ring's order, and the end of the stream after the
// last; an Error message instead of a record ends the stream with a
// failure.

// LoaderOpen is the payload of a LoaderOpenRequest.
type LoaderOpen struct {
	Options []byte
}

// AppendLoaderOpen appends m's payload to b.
func AppendLoaderOpen(b []byte, m *LoaderOpen) []byte { return append(b, m.Options...) }

// DecodeLoaderOpen decodes a LoaderOpenRequest payload into m; m.Options
// aliases p.
func DecodeLoaderOpen(p []byte, m *LoaderOpen) error {
	d := decoder{msg: "LoaderOpenRequest", b: p}
	m.Options = d.rest("options")
	return d.end()
}

// LoaderOpened is the payload of a LoaderOpenResponse.
type LoaderOpened struct {
	ID   uint64
	Info []byte
}

// AppendLoaderOpened appends m's payload to b.
func AppendLoaderOpened(b []byte, m *LoaderOpened) []byte {
	b = binary.LittleEndian.AppendUint64(b, m.ID)
	return append(b, m.Info...)
}

// DecodeLoaderOpened decodes a LoaderOpenResponse payload into m; m.Info
// aliases p.
func DecodeLoaderOpened(p []byte, m *LoaderOpened) error {
	d := decoder{msg: "LoaderOpenResponse", b: p}
	m.ID = d.u64("id")
	m.Info = d.rest("info")
	return d.end()
}

// LoaderStream is the payload of a LoaderStreamRequest.
type LoaderStream struct {
	ID  uint64
	Sub uint32
}

// AppendLoaderStream appends m's payload to b.
func AppendLoaderStream(b []byte, m *LoaderStream) []byte {
	b = binary.LittleEndian.AppendUint64(b, m.ID)
	return binary.LittleEndian.AppendUint32(b, m.Sub)
}

// DecodeLoaderStream decodes a LoaderStreamRequest payload into m.
func DecodeLoaderStream(p []byte, m *LoaderStream) error {
	d := decoder{msg: "LoaderStreamRequest", b: p}
	m.ID = d.u64("id")
	m.Sub = d.u32("sub")
	return d.end()
}

// rest takes every byte left, of which there must be at least one.
func (d *decoder) rest(field string) []byte {
	if d.err == nil && len(d.b) == 0 {
		d.fail(field, "empty")
		return nil
	}
	return d.take(field, uint64(len(d.b)))
}
