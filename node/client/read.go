package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"graphnode/node/control"
	"graphnode/sample"
	"graphnode/shm"
)

// statusWait bounds the stats request that asks the node how a dead
// sampler exited.
const statusWait = 2 * time.Second

// read takes the next record of sub-ring w and decodes it. An error
// record, a dead sampler or an early end of stream become errors naming
// the worker.
func (l *Loader) read(ctx context.Context, w int) ([]byte, sample.View, error) {
	rec, err := l.cons.Next(ctx, w)
	switch {
	case errors.Is(err, shm.ErrProducerDead):
		return nil, sample.View{}, l.samplerError(w, err)
	case errors.Is(err, io.EOF):
		return nil, sample.View{}, fmt.Errorf("client: loader %d worker %d closed its sub-ring without end of stream: %w",
			l.info.LoaderID, w, ErrStopped)
	case err != nil:
		return nil, sample.View{}, fmt.Errorf("client: loader %d worker %d: %w", l.info.LoaderID, w, err)
	}
	l.held = w
	var v sample.View
	err = l.cons.Guard(func() (err error) {
		v, err = sample.Decode(rec)
		// An error record's message is formatted into the error below,
		// outside the guard: a copy of it.
		v.Message = bytes.Clone(v.Message)
		return err
	})
	if err != nil {
		return nil, sample.View{}, fmt.Errorf("client: loader %d worker %d: %w", l.info.LoaderID, w, err)
	}
	switch v.Header.Kind {
	case sample.KindError:
		return nil, v, fmt.Errorf("client: loader %d worker %d: %s: %w", l.info.LoaderID, w, v.Message, ErrSampler)
	case sample.KindEndOfStream:
		if l.epoch < l.info.Epochs {
			return nil, v, fmt.Errorf("client: loader %d worker %d ended the stream in epoch %d at batch %d: %w",
				l.info.LoaderID, w, l.epoch, l.index, ErrStopped)
		}
	}
	return rec, v, nil
}

// control reads the control record of kind k that sub-ring w must hold
// next, and releases it.
func (l *Loader) control(ctx context.Context, w int, k sample.Kind) (sample.View, error) {
	_, v, err := l.read(ctx, w)
	if err != nil {
		return v, err
	}
	if v.Header.Kind != k || (k == sample.KindEndOfEpoch && v.Header.Epoch != uint64(l.epoch)) {
		return v, l.unexpected(w, v, k.String())
	}
	return v, l.release()
}

// release hands the held record back to its sampler.
func (l *Loader) release() error {
	if l.held < 0 {
		return nil
	}
	w := l.held
	l.held = -1
	if err := l.cons.Release(w); err != nil {
		return fmt.Errorf("client: loader %d worker %d: %w", l.info.LoaderID, w, err)
	}
	return nil
}

func (l *Loader) unexpected(w int, v sample.View, want string) error {
	return fmt.Errorf("client: loader %d worker %d: got %v record (epoch %d, index %d), want %s (epoch %d, index %d): %w",
		l.info.LoaderID, w, v.Header.Kind, v.Header.Epoch, v.Header.Index, want, l.epoch, l.index, ErrStream)
}

// fail makes err sticky.
func (l *Loader) fail(err error) error {
	l.err = err
	return err
}

// samplerError describes the death of worker w's sampler, with its pid
// and exit status as the node saw them when it can tell.
func (l *Loader) samplerError(w int, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), statusWait)
	defer cancel()
	detail := "died"
	// The node reaps the process at about the time the ring notices it is
	// gone; ask until the node has recorded the exit.
	for ctx.Err() == nil {
		st, err := l.Stats(ctx)
		if err != nil {
			break
		}
		if s, ok := findSampler(st, l.info.LoaderID, w); ok {
			detail = fmt.Sprintf("(pid %d) died", s.PID)
			if s.Status != "" {
				detail = fmt.Sprintf("(pid %d) died: %s", s.PID, s.Status)
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("client: loader %d worker %d %s: %w: %w", l.info.LoaderID, w, detail, ErrSampler, cause)
}

// findSampler is worker w of loader id in st.
func findSampler(st *control.Stats, id uint64, w int) (control.SamplerStats, bool) {
	if st == nil {
		return control.SamplerStats{}, false
	}
	for _, l := range st.Loaders {
		if l.LoaderID != id {
			continue
		}
		for _, s := range l.Samplers {
			if s.Worker == w {
				return s, true
			}
		}
	}
	return control.SamplerStats{}, false
}
