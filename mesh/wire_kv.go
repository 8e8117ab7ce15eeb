package mesh

// Parameter-server messages: the mesh carries the bytes of a kv message
// (package kv's wire format, which starts with its own kind and version
// byte) without looking inside, so the mesh stays ignorant of tables.
// Pulls travel as KVPullRequest/KVPullResponse and may be retried (they
// are idempotent); pushes, synchronous pushes and leaves travel as
// KVPushRequest/KVPushResponse and are never retried, since applying a
// gradient twice is not the same as applying it once.
//
//	data  the rest of the payload: one kv message, at least MinKVMessage bytes

// MinKVMessage is the shortest kv message: its kind and version bytes.
const MinKVMessage = 2

// KVMessage is the payload of the four kv types: opaque kv bytes.
type KVMessage struct {
	Data []byte
}

// AppendKVMessage appends m's payload to b.
func AppendKVMessage(b []byte, m *KVMessage) []byte { return append(b, m.Data...) }

// DecodeKVMessage decodes a kv payload into m; m.Data aliases p.
func DecodeKVMessage(p []byte, m *KVMessage) error {
	d := decoder{msg: "KVMessage", b: p}
	if len(p) < MinKVMessage {
		d.fail("data", "%d bytes, want at least %d", len(p), MinKVMessage)
		m.Data = nil
		return d.end()
	}
	m.Data = d.take("data", uint64(len(p)))
	return d.end()
}
