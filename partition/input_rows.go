package partition

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strconv"
	"sync"
)

// rowBlockSize is the size of the blocks a rowReader cuts a file into.
const rowBlockSize = 4 << 20

// rowReader parses a file in which line k is row k (OGB's CSVs) on
// GOMAXPROCS goroutines: the caller's goroutine reads (and decompresses)
// blocks cut at line ends, counts their lines to know the first row of
// each, and workers parse blocks into the rows' slots. Output is the same
// whatever the timing: every row has its own slot, and of several bad
// rows the one with the smallest line number is reported.
type rowReader struct {
	ctx      context.Context
	in       *inFile
	progress Progress

	// limit is the number of rows the file must not exceed (-1: none);
	// limitWhat says what it counts and where it comes from, for the
	// error ("nodes", "edges (num-edge-list.csv)").
	limit     int
	limitWhat string
	// grow is called, with no block in flight, to make room for rows
	// rows, never more than limit; nil when the slots are always
	// preallocated to limit.
	grow func(rows int)
	// parse parses the lines of block, whose first line is row row0 and
	// line line0 of the file, using its worker's scratch w (one per
	// goroutine, from newWorker).
	parse     func(w any, block []byte, row0 int, line0 int64) error
	newWorker func() any
	// prefix holds bytes already read from in (a peeked first line).
	prefix []byte
}

type rowBlock struct {
	buf   []byte // the pooled buffer
	data  []byte // the lines, the last one without its '\n'
	row0  int
	line0 int64
}

// run reads the whole file and returns the number of rows and the
// workers' scratch values (for merging counters).
func (r *rowReader) run() (rows int, workers []any, err error) {
	nw := runtime.GOMAXPROCS(0)
	free := make(chan []byte, nw+2)
	for range nw + 2 {
		free <- make([]byte, rowBlockSize)
	}
	jobs := make(chan rowBlock)
	var (
		inflight sync.WaitGroup // blocks handed out and not parsed yet
		workerWG sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		errLine  int64 = -1
	)
	fail := func(line int64, err error) {
		mu.Lock()
		if errLine < 0 || line < errLine {
			firstErr, errLine = err, line
		}
		mu.Unlock()
	}
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return errLine >= 0 }
	workers = make([]any, nw)
	for i := range nw {
		workers[i] = r.newWorker()
		workerWG.Go(func() {
			for b := range jobs {
				if err := r.parse(workers[i], b.data, b.row0, b.line0); err != nil {
					line := b.line0
					if le, ok := err.(*LineError); ok {
						line = le.Line
					}
					fail(line, err)
				}
				free <- b.buf
				inflight.Done()
			}
		})
	}

	capRows := 0
	carry := r.prefix // the unfinished last line of the previous block
	eof := false
	line := int64(1)
	for !eof && !failed() {
		if err := r.ctx.Err(); err != nil {
			fail(0, err)
			break
		}
		buf := <-free
		if len(carry) >= len(buf) {
			// A line longer than this buffer: room for what was read of
			// it and a block more (the carry may have outgrown a buffer
			// grown before, and a copy into a short one cut the line).
			buf = make([]byte, len(carry)+rowBlockSize)
		}
		n := copy(buf, carry)
		m, atEOF, rerr := readSome(r.in.r, buf[n:], true)
		n += m
		eof = atEOF
		if rerr != nil {
			// Name the last whole line read: those of the blocks before
			// and those of this one up to the damage.
			whole := line - 1 + int64(bytes.Count(buf[:n], []byte{'\n'}))
			fail(line, (&lineScanner{in: r.in, line: whole}).readError(rerr))
			free <- buf
			break
		}
		data := buf[:n]
		cut := len(data)
		if !eof {
			cut = bytes.LastIndexByte(data, '\n') + 1
			if cut == 0 { // no line end in the whole block: read on
				carry = append(carry[:0], data...)
				free <- buf
				continue
			}
		}
		carry = append(carry[:0], data[cut:]...)
		data = data[:cut]
		if len(data) == 0 {
			free <- buf
			break
		}
		if eof && data[len(data)-1] == '\n' {
			data = data[:len(data)-1] // the final line end closes the last row
		}
		nl := bytes.Count(data, []byte{'\n'})
		if !eof {
			data = data[:len(data)-1] // drop the block's last '\n'
		} else {
			nl++ // the last line has no '\n'
		}
		if r.limit >= 0 && rows+nl > r.limit {
			inflight.Wait()
			// Parse what fits, then report the first line beyond the limit.
			fail(line+int64(r.limit-rows), &LineError{File: r.in.path, Line: line + int64(r.limit-rows),
				Msg: "more rows than the " + strconv.Itoa(r.limit) + " " + r.limitWhat})
			free <- buf
			break
		}
		if r.grow != nil && rows+nl > capRows {
			inflight.Wait()
			capRows = max(2*capRows, rows+nl, r.estimate(rows+nl))
			if r.limit >= 0 {
				// Never beyond the stated count: slots the caller
				// allocated for it up front then need no growing.
				capRows = min(capRows, r.limit)
			}
			r.grow(capRows)
		}
		inflight.Add(1)
		jobs <- rowBlock{buf: buf, data: data, row0: rows, line0: line}
		rows += nl
		line += int64(nl)
		r.progress.report(r.in.path, r.in.consumed(), r.in.size)
	}
	close(jobs)
	workerWG.Wait()
	if firstErr != nil {
		return 0, nil, firstErr
	}
	r.progress.report(r.in.path, r.in.size, r.in.size)
	return rows, workers, nil
}

// estimate is the number of rows of the whole file, from the bytes read
// so far, for a first growth that is usually the last.
func (r *rowReader) estimate(rowsSoFar int) int {
	done := r.in.consumed()
	if done <= 0 {
		return rowsSoFar
	}
	return int(float64(rowsSoFar)*float64(r.in.size)/float64(done)*1.02) + 1024
}

// eachLine calls fn on each line of a block (line numbers from line0),
// stripping a trailing '\r'.
func eachLine(block []byte, line0 int64, fn func(line []byte, no int64) error) error {
	for no := line0; ; no++ {
		i := bytes.IndexByte(block, '\n')
		l := block
		if i >= 0 {
			l = block[:i]
		}
		if n := len(l); n > 0 && l[n-1] == '\r' {
			l = l[:n-1]
		}
		if err := fn(l, no); err != nil {
			return err
		}
		if i < 0 {
			return nil
		}
		block = block[i+1:]
	}
}

// firstLine reads the first line of in and returns everything read so
// far (the line and what followed it in the same reads), which the
// rowReader then parses first.
func firstLine(in *inFile) ([]byte, error) {
	var buf []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := in.r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if bytes.IndexByte(buf, '\n') >= 0 || err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, (&lineScanner{in: in}).readError(err)
		}
	}
}

// columns is the number of comma-separated columns of the first line in
// prefix.
func columns(prefix []byte) int {
	if i := bytes.IndexByte(prefix, '\n'); i >= 0 {
		prefix = prefix[:i]
	}
	prefix = bytes.TrimSuffix(prefix, []byte{'\r'})
	if len(prefix) == 0 {
		return 0
	}
	return bytes.Count(prefix, []byte{','}) + 1
}
