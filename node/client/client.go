package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"time"

	"graphnode/node/control"
	"graphnode/sample"
	"graphnode/shm"
)

// Options are the open_loader fields (docs/control.md). Start from
// DefaultOptions: it sets the defaults the node would apply.
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
// next call of Next (or Close). Record is the raw record.
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
	closed       bool
}

// OpenLoader asks the node listening on socket for a loader and maps its
// ring. The loader lives as long as this connection: Close (or the
// process's exit) makes the node stop its samplers and remove the ring.
func OpenLoader(ctx context.Context, socket string, opts Options) (*Loader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	resp, err := roundTrip(ctx, conn, &control.Request{Op: control.OpOpenLoader, LoaderOptions: opts})
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

// roundTrip sends one request and reads its response, within ctx.
func roundTrip(ctx context.Context, conn net.Conn, req *control.Request) (*control.Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
		defer conn.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := control.WriteFrame(conn, req); err != nil {
		return nil, fmt.Errorf("client: %s: %w", req.Op, err)
	}
	resp, err := control.ReadResponse(conn)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return resp, fmt.Errorf("client: %s: %w", req.Op, err)
	}
	return resp, nil
}

// Info is what the node said about the loader.
func (l *Loader) Info() control.LoaderInfo { return l.info }

// BatchesPerEpoch is the number of batches of each epoch for this rank.
func (l *Loader) BatchesPerEpoch() int { return int(l.info.BatchesPerEpoch) }

// Epoch is the epoch the next batch belongs to.
func (l *Loader) Epoch() int { return l.epoch }

// Stats asks the node for its stats over the loader's connection.
func (l *Loader) Stats(ctx context.Context) (*control.Stats, error) {
	resp, err := roundTrip(ctx, l.conn, &control.Request{Op: control.OpStats})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// Stats asks the node on socket for its stats.
func Stats(ctx context.Context, socket string) (*control.Stats, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	defer conn.Close()
	resp, err := roundTrip(ctx, conn, &control.Request{Op: control.OpStats})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
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
