package control

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"graphnode/kv"
)

// MaxFrame bounds one message body. An open_loader request with explicit
// seed_ids is the largest message: a few million ids fit.
const MaxFrame = 64 << 20

// ErrProtocol: the peer sent bytes that are not a valid message.
var ErrProtocol = errors.New("protocol error")

// WriteFrame writes v as one message: a uint32 little-endian length, then
// that many bytes of JSON.
func WriteFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("control: encode: %w", err)
	}
	return writeBody(w, body)
}

// WriteRaw writes body (a kv wire message) as one frame.
func WriteRaw(w io.Writer, body []byte) error { return writeBody(w, body) }

// CheckSize refuses a message body of n bytes that no frame can carry;
// the writers check it before writing anything.
func CheckSize(n int) error {
	if n > MaxFrame {
		return fmt.Errorf("control: message of %d bytes exceeds %d: %w", n, MaxFrame, ErrProtocol)
	}
	return nil
}

func writeBody(w io.Writer, body []byte) error {
	if err := CheckSize(len(body)); err != nil {
		return err
	}
	buf := make([]byte, 4+len(body))
	binary.LittleEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("control: write: %w", err)
	}
	return nil
}

// ReadFrame reads one message body. It returns io.EOF, unwrapped, when the
// peer closed the connection between messages.
func ReadFrame(r io.Reader) ([]byte, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("control: read length: %w", err)
	}
	n := binary.LittleEndian.Uint32(lenBuf[:])
	if n > MaxFrame {
		return nil, fmt.Errorf("control: message of %d bytes exceeds %d: %w", n, MaxFrame, ErrProtocol)
	}
	body, err := readBody(r, int(n))
	if err != nil {
		return nil, fmt.Errorf("control: read %d-byte message: %w", n, err)
	}
	return body, nil
}

// frameChunk is the most ReadFrame allocates ahead of the bytes that
// arrived: a length prefix alone must not pin MaxFrame bytes (a node
// reads one frame per connection at a time, from any number of them).
const frameChunk = 1 << 20

// readBody reads exactly n bytes, its buffer growing (doubling, at most
// to n) as they arrive.
func readBody(r io.Reader, n int) ([]byte, error) {
	body := make([]byte, min(n, frameChunk))
	got := 0
	for {
		k, err := io.ReadFull(r, body[got:])
		got += k
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the length came: the frame had begun
		}
		if err != nil {
			return nil, err
		}
		if got == n {
			return body, nil
		}
		body = slices.Grow(body, min(n-got, got))[:got+min(n-got, got)]
	}
}

// ReadResponse reads one response message. A response that carries an
// error is returned as a *Error.
func ReadResponse(r io.Reader) (*Response, error) {
	body, err := ReadFrame(r)
	if err != nil {
		return nil, err
	}
	return DecodeResponse(body)
}

// DecodeResponse decodes the body of one response message. A response
// that carries an error is returned as a *Error.
func DecodeResponse(body []byte) (*Response, error) {
	var resp Response
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("control: decode response: %v: %w", err, ErrProtocol)
	}
	if resp.Error != "" {
		return &resp, &Error{Msg: resp.Error, Key: resp.Key, KVCode: resp.KVCode}
	}
	return &resp, nil
}

// Error is an error response from the node: Msg says what is wrong and Key,
// when set, names the request field that holds the problem. KVCode, when
// set, is the parameter server's code of the error, and Unwrap its
// sentinel: errors.Is(err, kv.ErrSpec) for a kv_create whose table
// differs from the existing one.
type Error struct {
	Msg    string
	Key    string
	KVCode uint16
}

// Unwrap is the kv sentinel of KVCode, or nil.
func (e *Error) Unwrap() error { return kv.Sentinel(e.KVCode) }

func (e *Error) Error() string {
	if e.Key != "" {
		return "control: " + e.Key + ": " + e.Msg
	}
	return "control: " + e.Msg
}
