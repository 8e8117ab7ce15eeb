package multilevel

import (
	"errors"
	"strconv"
)

// ErrBadGraph is wrapped by every error about a Graph or CSR handed to
// the partitioner that is malformed (sizes disagree, an index is out of
// range, a self loop).
var ErrBadGraph = errors.New("malformed graph")

// ErrFormat is wrapped by every error about a METIS file that does not
// follow the format.
var ErrFormat = errors.New("bad input")

// mlError is an error of this package, "multilevel: msg[: err]". The
// package builds its messages with strconv rather than fmt, whose
// formatting machinery would be most of what a small program that
// partitions a METIS file links besides the partitioner (perf/metis).
type mlError struct {
	msg string
	err error // wrapped; may be nil
}

func (e *mlError) Error() string {
	if e.err == nil {
		return "multilevel: " + e.msg
	}
	return "multilevel: " + e.msg + ": " + e.err.Error()
}

func (e *mlError) Unwrap() error { return e.err }

// errorOf is an mlError whose message is the concatenation of parts,
// wrapping err.
func errorOf(err error, parts ...string) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return &mlError{msg: string(b), err: err}
}

// itoa formats x in decimal for messages.
func itoa[T ~int | ~int32 | ~int64 | ~uint32](x T) string { return strconv.FormatInt(int64(x), 10) }
