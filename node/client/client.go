package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net"
	"os"
	"syscall"
	"time"

	"graphnode/node/control"
	"graphnode/sample"
	"graphnode/shm"
)

// Options are the open_loader fields (docs/control.md). Start from
// DefaultOptions: it sets the defaults the node would apply. The zero
// Options is not those defaults: its Features and Labels are false, so
// its batches carry no x and no y, while a BatchSize, Epochs or
// WorldSize of 0 is left out of the request and gets the node's default
// (512, 1, 1), never a refusal; Workers, Concurrency and RingSize of 0
// or "" are the node's [samplers] and [rings] settings.
type Options = control.LoaderOptions

// DefaultOptions are the options of an open_loader request that sets
// nothing but what the caller changes.
func DefaultOptions() Options { return control.DefaultLoaderOptions() }

var (
	// ErrEndOfEpoch is returned by Next once after the last batch of each
	// epoch; the following Next returns the next epoch's first batch, or
	// io.EOF after the last epoch.
	ErrEndOfEpoch = errors.New("client: end of epoch")
	// ErrSampler: a sampler failed (error record) or died.
	ErrSampler = errors.New("sampler failed")
	// ErrStopped: the node ended the stream early (it is shutting down).
	ErrStopped = errors.New("loader stopped by the node")
	// ErrStream: the records on the ring are not in the order promised.
	ErrStream = errors.New("unexpected record")
)

// Batch is one mini-batch: a decoded view of ring memory, valid until the
// next call of Next (or Close). Record is the raw record. The Loader's
// own calls report a ring file that another process truncated under the
// mapping as shm.ErrCorrupt; code reading a view after that faults
// (SIGBUS) unless run under the ring's guard (shm.Consumer.Guard).
type Batch struct {
	sample.View
	Record []byte
	Epoch  int
	Index  int // batch index within the epoch
}

// Loader reads one loader's batches from its ring, in order: batch i of
// an epoch from sub-ring i mod W. It is not safe for concurrent use.
type Loader struct {
	conn net.Conn
	info control.LoaderInfo
	ring *shm.Ring
	cons *shm.Consumer

	epoch, index int
	held         int   // sub-ring whose record is handed out, or -1
	err          error // sticky: after an error every Next returns it
	statsErr     error // sticky: a Stats call broke the connection's stream
	closed       bool
}

// OpenLoader asks the node listening on socket for a loader and maps its
// ring. The loader lives as long as this connection: Close (or the
// process's exit) makes the node stop its samplers and remove the ring.
func OpenLoader(ctx context.Context, socket string, opts Options) (*Loader, error) {
	conn, err := dialNode(ctx, socket)
	if err != nil {
		return nil, err
	}
	resp, _, err := roundTrip(ctx, conn, &control.Request{Op: control.OpOpenLoader, LoaderOptions: opts})
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.Loader == nil {
		conn.Close()
		return nil, fmt.Errorf("client: open_loader response without a loader: %w", control.ErrProtocol)
	}
	l := &Loader{conn: conn, info: *resp.Loader, held: -1}
	if l.ring, err = shm.Open(l.info.Ring); err == nil {
		if l.cons, err = l.ring.Consumer(); err != nil {
			l.ring.Close()
		}
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("client: loader %d: %w", l.info.LoaderID, err)
	}
	if l.ring.SubRings() != l.info.SubRings {
		l.Close()
		return nil, fmt.Errorf("client: ring %s has %d sub-rings, node said %d: %w", l.info.Ring, l.ring.SubRings(), l.info.SubRings, ErrStream)
	}
	return l, nil
}

// roundTrip sends one request and reads its response, within ctx (see
// exchange). broken reports an error that left the connection at an
// unknown point of the stream; a response the node answered with an error
// (*control.Error) or that does not decode leaves it in step.
func roundTrip(ctx context.Context, conn net.Conn, req *control.Request) (resp *control.Response, broken bool, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, false, fmt.Errorf("client: %s: encode: %w", req.Op, err)
	}
	if body, broken, err = exchange(ctx, conn, body); err != nil {
		return nil, broken, fmt.Errorf("client: %s: %w", req.Op, err)
	}
	if resp, err = control.DecodeResponse(body); err != nil {
		return resp, false, fmt.Errorf("client: %s: %w", req.Op, err)
	}
	return resp, false, nil
}

// exchange writes body as one frame on conn and reads the answer's frame,
// within ctx: its deadline bounds the wait, and its cancellation ends it.
// broken reports an error after which the stream is at an unknown point:
// the request may be half written, or its answer may still come and
// would be read as the answer of the next request. A connection that
// broke must not carry another request.
func exchange(ctx context.Context, conn net.Conn, body []byte) (resp []byte, broken bool, err error) {
	if err := control.CheckSize(len(body)); err != nil {
		return nil, false, err // nothing written: the stream is in step
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		conn.SetDeadline(time.Unix(1, 0))
		close(fired)
	})
	if err = control.WriteRaw(conn, body); err == nil {
		resp, err = control.ReadFrame(conn)
	}
	if !stop() {
		<-fired // the past deadline it set must not outlive this call
	}
	conn.SetDeadline(time.Time{})
	if err != nil {
		return nil, true, ctxErr(ctx, err)
	}
	return resp, false, nil
}

// ctxErr is ctx's error when ctx ended the exchange that failed with
// err: its cancellation, or its deadline, which the connection's own
// deadline may report (os.ErrDeadlineExceeded) before ctx does.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if dl, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return err
}

// Info is what the node said about the loader.
func (l *Loader) Info() control.LoaderInfo { return l.info }

// BatchesPerEpoch is the number of batches of each epoch for this rank.
func (l *Loader) BatchesPerEpoch() int { return int(l.info.BatchesPerEpoch) }

// Epoch is the epoch the next batch belongs to.
func (l *Loader) Epoch() int { return l.epoch }

// Stats asks the node for its stats over the loader's connection. After
// a call that was interrupted in transit (its ctx ended before the
// answer), the answer may still come: every later Stats returns that
// call's error instead of reading it. The loader's batches are not
// affected: they come through the ring. After Close it fails, saying so.
func (l *Loader) Stats(ctx context.Context) (*control.Stats, error) {
	if l.closed {
		return nil, fmt.Errorf("client: stats: loader %d is closed", l.info.LoaderID)
	}
	if l.statsErr != nil {
		return nil, fmt.Errorf("client: stats: the loader's connection broke in an earlier call: %w", l.statsErr)
	}
	resp, broken, err := roundTrip(ctx, l.conn, &control.Request{Op: control.OpStats})
	if err != nil {
		if broken {
			l.statsErr = err
		}
		return nil, err
	}
	return statsOf(resp)
}

// statsOf is the stats a response to stats holds.
func statsOf(resp *control.Response) (*control.Stats, error) {
	if resp.Stats == nil {
		return nil, fmt.Errorf("client: stats response without stats: %w", control.ErrProtocol)
	}
	return resp.Stats, nil
}

// Stats asks the node on socket for its stats.
func Stats(ctx context.Context, socket string) (*control.Stats, error) {
	conn, err := dialNode(ctx, socket)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	resp, _, err := roundTrip(ctx, conn, &control.Request{Op: control.OpStats})
	if err != nil {
		return nil, err
	}
	return statsOf(resp)
}

// Next returns the next batch. Its views point into the ring and are
// valid until the next call. After an epoch's last batch it returns
// ErrEndOfEpoch once; after the last epoch, io.EOF. A failed or dead
// sampler is an error wrapping ErrSampler that names the worker.
func (l *Loader) Next(ctx context.Context) (Batch, error) {
	if l.err != nil {
		return Batch{}, l.err
	}
	if err := l.release(); err != nil {
		return Batch{}, l.fail(err)
	}
	W, perEpoch := l.info.SubRings, int(l.info.BatchesPerEpoch)
	if l.epoch >= l.info.Epochs {
		for w := range W {
			if _, err := l.control(ctx, w, sample.KindEndOfStream); err != nil {
				return Batch{}, l.fail(err)
			}
		}
		l.err = io.EOF
		return Batch{}, io.EOF
	}
	if l.index == perEpoch {
		for w := range W {
			if _, err := l.control(ctx, w, sample.KindEndOfEpoch); err != nil {
				return Batch{}, l.fail(err)
			}
		}
		l.epoch, l.index = l.epoch+1, 0
		return Batch{}, ErrEndOfEpoch
	}
	w := l.index % W
	rec, v, err := l.read(ctx, w)
	if err != nil {
		return Batch{}, l.fail(err)
	}
	if v.Header.Kind != sample.KindBatch || v.Header.Epoch != uint64(l.epoch) || v.Header.Index != uint64(l.index) {
		return Batch{}, l.fail(l.unexpected(w, v, "batch"))
	}
	b := Batch{View: v, Record: rec, Epoch: l.epoch, Index: l.index}
	l.index++
	return b, nil
}

// All iterates over the rest of the current epoch's batches; it stops at
// the epoch's end (call it again for the next epoch) and yields a non-nil
// error once, last, when reading fails. After the last epoch it yields
// nothing. Each Batch is valid until the loop's next iteration.
func (l *Loader) All(ctx context.Context) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		for {
			b, err := l.Next(ctx)
			switch {
			case errors.Is(err, ErrEndOfEpoch), errors.Is(err, io.EOF):
				return
			case err != nil:
				yield(Batch{}, err)
				return
			}
			if !yield(b, nil) {
				return
			}
		}
	}
}

// Close ends the loader: the node stops its samplers and removes the ring.
// Views of batches are invalid afterwards. Close is idempotent.
func (l *Loader) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	if l.err == nil {
		l.err = fmt.Errorf("client: loader %d is closed", l.info.LoaderID)
	}
	err := l.cons.Close()
	err = errors.Join(err, l.ring.Close(), l.conn.Close())
	return err
}

// dialNode connects to the control socket of the node at socket. A
// socket that is not there, or that no process listens on (left by a
// node killed before it could remove it), says that no node listens:
// "dial unix …: connect: no such file or directory" left a new user to
// guess that node run was not started. Anything else at the path (a
// file, a directory) also refuses the dial, and is named as what it is:
// node run refuses to start there too, as it never removes it.
func dialNode(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if errors.Is(err, syscall.ECONNREFUSED) {
		if what := notSocket(socket); what != "" {
			return nil, fmt.Errorf("client: %w (%s is %s, not a socket: give the control.socket of the node's node.toml)", err, socket, what)
		}
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("client: %w (no node listens there: start node run, or give the control.socket of its node.toml)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return conn, nil
}

// notSocket says what is at path when it is there and not a socket ("a
// regular file", "a directory", "a special file"), "" otherwise.
func notSocket(path string) string {
	fi, err := os.Stat(path) // a link to a socket is dialled as one
	if err != nil {
		return ""
	}
	switch m := fi.Mode(); {
	case m&fs.ModeSocket != 0:
		return ""
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	default:
		return "a special file"
	}
}
