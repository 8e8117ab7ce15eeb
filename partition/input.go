package partition

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// ErrFormat is wrapped by every error that reports input which does not
// follow its format (a LineError, a bad directory layout, counts that do
// not agree).
var ErrFormat = errors.New("bad input")

// LineError is a bad line of an input file: File:Line: Msg.
type LineError struct {
	File string // path as given to the reader
	Line int64  // 1-based line number in the (decompressed) file
	Msg  string // what is wrong, e.g. "want 2 fields, got 3"
}

func (e *LineError) Error() string {
	return fmt.Sprintf("partition: %s:%d: %s", e.File, e.Line, e.Msg)
}

// Unwrap makes errors.Is(err, ErrFormat) true.
func (e *LineError) Unwrap() error { return ErrFormat }

// formatErrorf is a format error that is not about one line.
func formatErrorf(format string, args ...any) error {
	return fmt.Errorf("partition: "+format+": %w", append(args, ErrFormat)...)
}

// Tunables of the input layer.
const (
	scanBufSize    = 1 << 20 // initial line-scanner buffer; grows for longer lines
	cancelInterval = 1 << 16 // lines between ctx and progress checks
)

// inFile is an opened input file: gzip is detected by its magic bytes
// (1f 8b), not by the name, so "edges.csv" may be compressed and
// "edges.csv.gz" may not.
type inFile struct {
	path string
	f    *os.File
	size int64         // bytes on disk
	disk *countReader  // bytes consumed from disk, for progress
	gz   *gzip.Reader  // nil when the file is not compressed
	r    io.Reader     // the decompressed bytes
	br   *bufio.Reader // sits under gz, or is r
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// openInput opens path for reading, decompressing it when it is gzip.
func openInput(path string) (*inFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("partition: %w", err)
	}
	in, err := wrapInput(f, path, st.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	in.f = f
	return in, nil
}

// maxGzipRatio bounds how many bytes deflate expands one byte into: its
// longest match, 258 bytes, costs at least 2 bits (RFC 1951).
const maxGzipRatio = 1032

// maxRows is the most lines of at least minLine bytes each (the newline
// included; the last line may lack it) that in can hold once
// decompressed. Readers allocate for a count that another file states
// only when in can hold it, so that a wrong count costs an error after
// reading, not an allocation of its size.
func (in *inFile) maxRows(minLine int64) int64 {
	b := in.size
	if in.gz != nil {
		b = min(b, math.MaxInt64/maxGzipRatio) * maxGzipRatio
	}
	return (b + 1) / max(minLine, 1)
}

// wrapInput reads r, named path (size bytes, 0 when unknown), and
// decompresses it when it starts with the gzip magic. A UTF-8 byte order
// mark at the start of the text is dropped: left in, it would be part of
// the first id (an edge list's node 1 read as "\ufeff1", another node).
func wrapInput(r io.Reader, path string, size int64) (*inFile, error) {
	in := &inFile{path: path, size: size, disk: &countReader{r: r}}
	in.br = bufio.NewReaderSize(in.disk, inBufSize(size, 256<<10))
	in.r = in.br
	if magic, _ := in.br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(in.br)
		if err != nil {
			return nil, fmt.Errorf("partition: %s: gzip: %v: %w", path, err, ErrFormat)
		}
		in.gz, in.r = gz, &bomSkipper{r: gz}
	} else if kind := otherCompression(in.br); kind != "" {
		// Read as text, it gave lines of garbage: string ids, numbers
		// that do not parse, far from the cause.
		return nil, fmt.Errorf("partition: %s: compressed with %s: decompress it first (gzip is read directly): %w", path, kind, ErrFormat)
	} else if head, _ := in.br.Peek(len(utf8BOM)); string(head) == utf8BOM {
		in.br.Discard(len(utf8BOM))
	}
	return in, nil
}

// otherCompression names the compression other than gzip that the
// stream br starts with, by its magic, or "". bzip2's "BZh" is followed
// by the block size and the magic of a first block or of the end, so
// that a text starting "BZh" is still text.
func otherCompression(br *bufio.Reader) string {
	head, _ := br.Peek(10)
	switch {
	case len(head) >= 10 && string(head[:3]) == "BZh" && head[3] >= '1' && head[3] <= '9' &&
		(string(head[4:]) == "\x31\x41\x59\x26\x53\x59" || string(head[4:]) == "\x17\x72\x45\x38\x50\x90"):
		return "bzip2"
	case len(head) >= 6 && string(head[:6]) == "\xfd7zXZ\x00":
		return "xz"
	case len(head) >= 4 && string(head[:4]) == "\x28\xb5\x2f\xfd":
		return "zstd"
	}
	return ""
}

// utf8BOM is the UTF-8 encoding of U+FEFF, the byte order mark.
const utf8BOM = "\xef\xbb\xbf"

// bomSkipper reads r without the byte order mark its stream may start
// with (a decompressed stream, which cannot be peeked at).
type bomSkipper struct {
	r       io.Reader
	started bool
	head    []byte // bytes read to look for the mark that were not one
	buf     [len(utf8BOM)]byte
}

func (b *bomSkipper) Read(p []byte) (int, error) {
	if !b.started {
		b.started = true
		n, err := io.ReadFull(b.r, b.buf[:])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return 0, err
		}
		if string(b.buf[:n]) != utf8BOM {
			b.head = b.buf[:n]
		}
	}
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	return b.r.Read(p)
}

// Close closes the file. It is safe to call twice.
func (in *inFile) Close() error {
	if in.f == nil {
		return nil
	}
	err := in.f.Close()
	in.f = nil
	return err
}

// consumed is the number of on-disk bytes read so far (compressed bytes
// for gzip), the unit of progress reports.
func (in *inFile) consumed() int64 { return in.disk.n - int64(in.br.Buffered()) }

// lineScanner hands out the lines of an inFile without copying them: a
// line is valid until the next call of next. It strips "\n" and "\r\n",
// counts lines for error messages, and every cancelInterval lines checks
// ctx and reports progress.
type lineScanner struct {
	ctx      context.Context
	in       *inFile
	progress Progress
	stage    string

	buf        []byte
	start, end int // unread bytes are buf[start:end]
	eof        bool
	line       int64 // number of the line last returned
	err        error
	// rerr is a read error that fill met behind lines not yet returned:
	// it ends the scan once they are (readError names the last of them).
	rerr error
}

func newLineScanner(ctx context.Context, in *inFile, progress Progress, stage string) *lineScanner {
	size := int64(0)
	if in.gz == nil {
		size = in.size // a compressed file's size says nothing of its lines
	}
	return &lineScanner{ctx: ctx, in: in, progress: progress, stage: stage, buf: make([]byte, inBufSize(size, scanBufSize))}
}

// inBufSize is the size of a buffer of at most max bytes for a file of
// size bytes (0: unknown): a small file gets a buffer that holds all of
// it and one more byte, so that reading the 47 KB Cora graph does not
// allocate 1.25 MB.
func inBufSize(size int64, max int) int {
	if size <= 0 || size >= int64(max) {
		return max
	}
	return int(size) + 1
}

// next returns the next line, or false at the end of input or on an error
// (see Err).
func (s *lineScanner) next() ([]byte, bool) {
	for {
		if i := bytes.IndexByte(s.buf[s.start:s.end], '\n'); i >= 0 {
			line := s.buf[s.start : s.start+i]
			s.start += i + 1
			return s.finish(line)
		}
		if s.eof || s.err != nil || s.rerr != nil {
			if s.start < s.end && s.err == nil && s.rerr == nil {
				line := s.buf[s.start:s.end]
				s.start = s.end
				return s.finish(line)
			}
			if s.err == nil && s.rerr != nil {
				s.err = s.readError(s.rerr)
			}
			return nil, false
		}
		s.fill()
	}
}

func (s *lineScanner) finish(line []byte) ([]byte, bool) {
	s.line++
	if s.line%cancelInterval == 0 {
		if err := s.ctx.Err(); err != nil {
			s.err = err
			return nil, false
		}
		s.progress.report(s.stage, s.in.consumed(), s.in.size)
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, true
}

// fill moves the unread tail to the front, grows the buffer when one line
// fills it, and reads more.
func (s *lineScanner) fill() {
	if s.start > 0 {
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
	}
	if s.end == len(s.buf) {
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	n, eof, err := readSome(s.in.r, s.buf[s.end:], false)
	s.end += n
	s.eof = eof
	s.rerr = err
}

// readSome reads into buf, at least one byte unless at the end, or all of
// buf when full is set. eof reports a clean end of input; a truncated
// gzip stream is an error (io.ErrUnexpectedEOF), not an end.
func readSome(r io.Reader, buf []byte, full bool) (n int, eof bool, err error) {
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
		if !full && n > 0 {
			break
		}
	}
	return n, false, nil
}

func (s *lineScanner) readError(err error) error {
	if s.in.gz != nil {
		return fmt.Errorf("partition: %s: after line %d: gzip: %v: %w", s.in.path, s.line, err, ErrFormat)
	}
	return fmt.Errorf("partition: %s: %w", s.in.path, err)
}

// Err is the error that ended the scan, nil at a clean end of input.
func (s *lineScanner) Err() error { return s.err }

// nameFault says why a name (what: "node id", "relation") cannot be
// written to file, one name a line (nameBreak), or "" when it can. The
// readers refuse such a name at the line that gives it: the write
// failed for it at the very end, after all the partitioning, and
// without its line.
func nameFault[T ~string | ~[]byte](what, file string, name T) string {
	i := nameBreak(name)
	if i < 0 {
		return ""
	}
	return fmt.Sprintf("%s %q holds a line break (%q), which %s, one name a line, cannot hold", what, name, name[i:i+1], file)
}

// errorf is a LineError at the line last returned.
func (s *lineScanner) errorf(format string, args ...any) error {
	return &LineError{File: s.in.path, Line: s.line, Msg: fmt.Sprintf(format, args...)}
}

// done reports the final progress.
func (s *lineScanner) done() { s.progress.report(s.stage, s.in.size, s.in.size) }

// scanFile runs fn on every line of path. fn returns an error to stop.
func scanFile(ctx context.Context, path string, progress Progress, fn func(s *lineScanner, line []byte) error) error {
	in, err := openInput(path)
	if err != nil {
		return err
	}
	defer in.Close()
	s := newLineScanner(ctx, in, progress, path)
	for {
		line, ok := s.next()
		if !ok {
			break
		}
		if err := fn(s, line); err != nil {
			return err
		}
	}
	if s.Err() != nil {
		return s.Err()
	}
	s.done()
	return nil
}

// isComment reports whether a line holds no data: empty, blank, or a
// comment starting with '#' or '%'.
func isComment(line []byte) bool {
	for _, c := range line {
		switch c {
		case ' ', '\t':
			continue
		case '#', '%':
			return true
		default:
			return false
		}
	}
	return true
}
