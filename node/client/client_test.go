package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"graphnode/node/control"
	"graphnode/sample"
	"graphnode/shm"
)

// fakeNode answers open_loader with a ring the test produces into itself,
// and stats with an empty node; hungUp is closed when the client hangs up.
type fakeNode struct {
	socket string
	ring   *shm.Ring
	prods  []*shm.Producer
	hungUp chan struct{}
}

func newFakeNode(t *testing.T, workers, perEpoch, epochs int) *fakeNode {
	t.Helper()
	dir := t.TempDir()
	ring, err := shm.Create(filepath.Join(dir, "test.ring"), shm.Options{SubRings: workers, Capacity: int64(workers) * 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNode{socket: filepath.Join(dir, "node.sock"), ring: ring, hungUp: make(chan struct{})}
	for w := range workers {
		p, err := ring.Producer(w)
		if err != nil {
			t.Fatal(err)
		}
		f.prods = append(f.prods, p)
	}
	t.Cleanup(func() {
		for _, p := range f.prods {
			p.Close()
		}
		ring.Remove()
	})
	ln, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	info := control.LoaderInfo{LoaderID: 1, Ring: ring.Path(), SubRings: workers, BatchesPerEpoch: int64(perEpoch), Epochs: epochs}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		defer close(f.hungUp)
		for {
			body, err := control.ReadFrame(c)
			if err != nil {
				return
			}
			req, err := control.DecodeRequest(body)
			resp := &control.Response{Stats: &control.Stats{Node: "fake"}}
			switch {
			case err != nil:
				resp = &control.Response{Error: err.Error()}
			case req.Op == control.OpOpenLoader:
				resp = &control.Response{Loader: &info}
			}
			control.WriteFrame(c, resp)
		}
	}()
	return f
}

// batch writes a one-seed batch record whose only node is 1000·epoch + index.
func (f *fakeNode) batch(t *testing.T, w, epoch, index int) {
	t.Helper()
	b := &sample.Batch{Epoch: uint64(epoch), Index: uint64(index), BatchSize: 1,
		NID: []uint64{uint64(1000*epoch + index)}, Row: []int64{}, Col: []int64{},
		NumSampledNodes: []int64{1, 0}, NumSampledEdges: []int64{0}}
	size, err := sample.EncodedSize(b)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := f.prods[w].Reserve(context.Background(), size)
	if err != nil {
		t.Fatal(err)
	}
	n, err := sample.Encode(buf, b)
	if err != nil {
		t.Fatal(err)
	}
	f.prods[w].Commit(n)
}

func (f *fakeNode) control(t *testing.T, w int, k sample.Kind, epoch int, msg string) {
	t.Helper()
	buf, err := f.prods[w].Reserve(context.Background(), sample.ControlSize(msg))
	if err != nil {
		t.Fatal(err)
	}
	n, err := sample.EncodeControl(buf, k, uint64(epoch), 0, msg)
	if err != nil {
		t.Fatal(err)
	}
	f.prods[w].Commit(n)
}

func open(t *testing.T, f *fakeNode) *Loader {
	t.Helper()
	o := DefaultOptions()
	o.Split, o.Fanouts = "train", []int{2}
	l, err := OpenLoader(context.Background(), f.socket, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestNextOrder: batch i comes from sub-ring i mod W, epochs end with
// ErrEndOfEpoch, the stream with io.EOF.
func TestNextOrder(t *testing.T) {
	const W, perEpoch, epochs = 2, 3, 2
	f := newFakeNode(t, W, perEpoch, epochs)
	// Produce sub-ring 1 first: order on the ring, not timing, decides.
	for _, w := range []int{1, 0} {
		for e := range epochs {
			for b := w; b < perEpoch; b += W {
				f.batch(t, w, e, b)
			}
			f.control(t, w, sample.KindEndOfEpoch, e, "")
		}
		f.control(t, w, sample.KindEndOfStream, epochs, "")
	}
	l := open(t, f)
	ctx := context.Background()
	var got []int
	for e := range epochs {
		for b, err := range l.All(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			if b.Epoch != e || b.NID[0] != uint64(1000*e+b.Index) {
				t.Fatalf("epoch %d: batch %+v", e, b.Header)
			}
			got = append(got, b.Index)
		}
	}
	if want := []int{0, 1, 2, 0, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("indexes %v, want %v", got, want)
	}
	if _, err := l.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v, want io.EOF", err)
	}
	if _, err := l.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("after end: %v, want io.EOF again", err)
	}
	l.Close()
	select {
	case <-f.hungUp:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not close the control connection")
	}
}

func TestNextErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		produce func(t *testing.T, f *fakeNode)
		want    error
		text    string
	}{
		{"error record", func(t *testing.T, f *fakeNode) {
			f.batch(t, 0, 0, 0)
			f.control(t, 1, sample.KindError, 0, "sample: boom")
		}, ErrSampler, "loader 1 worker 1: sample: boom"},
		{"early end of stream", func(t *testing.T, f *fakeNode) {
			f.batch(t, 0, 0, 0)
			f.control(t, 1, sample.KindEndOfStream, 0, "")
		}, ErrStopped, "worker 1 ended the stream in epoch 0 at batch 1"},
		{"closed without end of stream", func(t *testing.T, f *fakeNode) {
			f.batch(t, 0, 0, 0)
			f.prods[1].Close()
		}, ErrStopped, "worker 1 closed its sub-ring"},
		{"out of order", func(t *testing.T, f *fakeNode) {
			f.batch(t, 0, 0, 0)
			f.batch(t, 1, 0, 3)
		}, ErrStream, "want batch (epoch 0, index 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNode(t, 2, 4, 1)
			tc.produce(t, f)
			l := open(t, f)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if b, err := l.Next(ctx); err != nil || b.Index != 0 {
				t.Fatalf("first batch: %v", err)
			}
			_, err := l.Next(ctx)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.want, tc.text)
			}
			if _, again := l.Next(ctx); again != err {
				t.Fatalf("error not sticky: %v then %v", err, again)
			}
		})
	}
}

func TestOpenLoaderRefused(t *testing.T) {
	f := newFakeNode(t, 1, 1, 1)
	_, err := OpenLoader(context.Background(), f.socket, DefaultOptions()) // no split, no fanouts
	var ce *control.Error
	if !errors.As(err, &ce) || !strings.Contains(ce.Msg, "split") {
		t.Fatalf("err = %v, want the node's error about split", err)
	}
	if _, err := OpenLoader(context.Background(), filepath.Join(t.TempDir(), "none.sock"), DefaultOptions()); err == nil {
		t.Fatal("OpenLoader on a missing socket succeeded")
	}
}

// TestStatsAfterClose: Stats on a closed loader says so; it read
// "control: write: write unix ...: use of closed network connection".
func TestStatsAfterClose(t *testing.T) {
	f := newFakeNode(t, 1, 1, 1)
	l := open(t, f)
	if st, err := l.Stats(context.Background()); err != nil || st.Node != "fake" {
		t.Fatalf("stats of the open loader: %+v, %v", st, err)
	}
	l.Close()
	_, err := l.Stats(context.Background())
	if err == nil || !strings.Contains(err.Error(), "loader 1 is closed") || strings.Contains(err.Error(), "use of closed") {
		t.Fatalf("stats after Close: %v, want an error saying loader 1 is closed", err)
	}
}

// TestStatsWithoutStats: an answer to stats that holds no stats is a
// protocol error, as kv_create's without a table is; Stats returned nil
// and no error, and the caller's st.Loaders panicked.
func TestStatsWithoutStats(t *testing.T) {
	socket, _ := slowNode(t, 0, func([]byte) []byte { return []byte("{}") })
	st, err := Stats(context.Background(), socket)
	if !errors.Is(err, control.ErrProtocol) || st != nil {
		t.Fatalf("stats answered {}: %+v, %v; want control.ErrProtocol", st, err)
	}
}

// TestZeroOptions pins what Options' comment says of the zero Options:
// features and labels are sent as false, while batch_size, epochs and
// world_size of 0 are left out and get the node's defaults.
func TestZeroOptions(t *testing.T) {
	o := Options{Split: "train", Fanouts: []int{2}}
	body, err := json.Marshal(&control.Request{Op: control.OpOpenLoader, LoaderOptions: o})
	if err != nil {
		t.Fatal(err)
	}
	req, err := control.DecodeRequest(body)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	d := DefaultOptions()
	if got := req.LoaderOptions; got.Features || got.Labels || got.BatchSize != d.BatchSize || got.Epochs != d.Epochs || got.WorldSize != d.WorldSize {
		t.Fatalf("zero Options %s decode to %+v, want no features, no labels, batch_size %d, epochs %d, world_size %d",
			body, got, d.BatchSize, d.Epochs, d.WorldSize)
	}
}
