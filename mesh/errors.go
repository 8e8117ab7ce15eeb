package mesh

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors; every error of the package wraps one of them (or a
// context error) with %w and names the peer, file or message concerned.
var (
	// ErrMalformed: bytes that do not decode as the message they claim
	// to be (a short buffer, a count larger than the bytes that follow,
	// a non-zero reserved field, trailing bytes).
	ErrMalformed = errors.New("malformed message")
	// ErrTooLarge: a message over the configured MaxMessage, refused
	// before its payload is read or sent.
	ErrTooLarge = errors.New("message too large")
	// ErrRefused: the peer is not one of this cluster or does not serve
	// the same partitioning: a certificate of another CA, another cluster
	// name, protocol version, partition-set checksum, node or part. Not
	// retried: it does not heal by waiting.
	ErrRefused = errors.New("refused")
	// ErrUnavailable: the peer could not be reached within the call's
	// timeout and retries.
	ErrUnavailable = errors.New("peer unavailable")
	// ErrRemote: the peer's handler failed; the message is the peer's.
	ErrRemote = errors.New("remote error")
	// ErrUnknownPart: a call named a part with no configured peer.
	ErrUnknownPart = errors.New("no peer for part")
	// ErrClosed: the Client or Server was closed.
	ErrClosed = errors.New("closed")
	// ErrCert: certificate material missing, unreadable or inconsistent.
	ErrCert = errors.New("bad certificate material")
	// ErrNotYetValid: a certificate whose validity has not begun, which
	// time alone mends (a host whose clock is behind, before NTP sets
	// it); every such problem also wraps ErrCert.
	ErrNotYetValid = errors.New("certificate not valid yet")
	// ErrNotFound: the peer does not hold the file asked for (a
	// FileHandler returns it, wrapped, and the caller asks another peer).
	ErrNotFound = errors.New("not found")
)

// PeerError is the error of a call to a peer: it names the peer by part,
// node name and address, and the operation.
type PeerError struct {
	Part int
	Name string
	Addr string
	Op   string // "connect", "sample", "pull", "stats", "split", "labels", "file", ...
	Err  error
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("mesh: peer %s (%s, part %d): %s: %v", e.Name, e.Addr, e.Part, e.Op, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

// RemoteError is an Error message received from a peer.
type RemoteError struct {
	Code    ErrorCode
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("%s: %s: %s", ErrRemote, e.Code, e.Message)
}

// Is makes a remote refusal or size error match the local sentinels, so a
// caller checks errors.Is(err, ErrTooLarge) whichever side refused.
func (e *RemoteError) Is(target error) bool {
	switch target {
	case ErrRemote:
		return true
	case ErrTooLarge:
		return e.Code == CodeTooLarge
	case ErrRefused:
		return e.Code == CodeRefused
	case ErrMalformed:
		return e.Code == CodeMalformed
	case ErrNotFound:
		return e.Code == CodeNotFound
	}
	return false
}

// unavailableError is what a call returns when its retries are spent.
type unavailableError struct {
	attempts int
	elapsed  time.Duration
	last     error
}

func (e *unavailableError) Error() string {
	s := "s"
	if e.attempts == 1 {
		s = ""
	}
	return fmt.Sprintf("%v after %d attempt%s in %v: %v", ErrUnavailable, e.attempts, s,
		e.elapsed.Round(time.Millisecond), e.last)
}

func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.last} }
