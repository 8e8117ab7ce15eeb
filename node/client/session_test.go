package client

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"graphnode/node/control"
)

// slowNode answers every frame on one connection with answer(body),
// holding the first answer back for delay; conns counts its connections.
func slowNode(t *testing.T, delay time.Duration, answer func(body []byte) []byte) (socket string, conns chan struct{}) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "n.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- struct{}{}
			go func() {
				defer c.Close()
				for i := 0; ; i++ {
					body, err := control.ReadFrame(c)
					if err != nil {
						return
					}
					if i == 0 {
						time.Sleep(delay)
					}
					if control.WriteRaw(c, answer(body)) != nil {
						return
					}
				}
			}()
		}
	}()
	return socket, conns
}

// featAnswer answers a feature request with dim 1 f32 rows holding the ids.
func featAnswer(body []byte) []byte {
	var r control.DataRequest
	if control.DecodeDataRequest(body, &r) != nil {
		return control.AppendDataError(nil, "bad request")
	}
	out := control.AppendFeatResponseHead(nil, control.DTypeF32, 1, uint32(len(r.IDs)))
	for _, id := range r.IDs {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(id)))
	}
	return out
}

// TestInterruptedCallClosesSession: a call whose ctx ends before the
// answer leaves that answer on its way; the next call must not read it
// as its own (Features([42]) answering id 7's row). The session closes
// its connection instead, and every later call says why, whether the
// first ended by its deadline or by cancellation.
func TestInterruptedCallClosesSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want string
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, "context deadline exceeded"},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket, _ := slowNode(t, 300*time.Millisecond, featAnswer)
			d, err := DialData(context.Background(), socket)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ctx, cancel := tc.ctx()
			_, err = d.Features(ctx, []uint64{7})
			cancel()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("interrupted call: %v, want %q", err, tc.want)
			}
			time.Sleep(400 * time.Millisecond) // the late answer arrives
			r, err := d.Features(context.Background(), []uint64{42})
			if err == nil {
				t.Fatalf("the call after an interrupted one answered rows %v, want an error", r.Rows)
			}
			if want := "connection closed after an interrupted call (" + tc.want + ")"; !strings.Contains(err.Error(), want) {
				t.Fatalf("the call after an interrupted one: %v, want %q", err, want)
			}
			if err := d.Close(); err != nil {
				t.Fatalf("Close after the session closed itself: %v", err)
			}
		})
	}
}

// TestNodeErrorKeepsSession: an answer the node gave, even an error,
// leaves the stream in step: the session keeps its connection.
func TestNodeErrorKeepsSession(t *testing.T) {
	first := true
	socket, conns := slowNode(t, 0, func(body []byte) []byte {
		if first {
			first = false
			return control.AppendDataError(nil, "node 9 is not in the graph")
		}
		return featAnswer(body)
	})
	d, err := DialData(context.Background(), socket)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Features(context.Background(), []uint64{9}); !errors.Is(err, ErrData) {
		t.Fatalf("first call: %v, want ErrData", err)
	}
	r, err := d.Features(context.Background(), []uint64{42})
	if err != nil {
		t.Fatalf("call after a node error: %v", err)
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(r.Rows)); got != 42 {
		t.Fatalf("Features([42]) = row %v", got)
	}
	if len(conns) != 1 {
		t.Fatalf("%d connections, want 1", len(conns))
	}
}

// TestKVInterruptedRequestClosesSession: the same for the JSON requests
// of KV (kv_save here).
func TestKVInterruptedRequestClosesSession(t *testing.T) {
	socket, _ := slowNode(t, 300*time.Millisecond, func([]byte) []byte {
		b, _ := json.Marshal(&control.Response{KVSave: &control.SaveInfo{Dir: "/ckpt"}})
		return b
	})
	k, err := DialKV(context.Background(), socket)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := k.Save(ctx); err == nil || !strings.Contains(err.Error(), "context deadline exceeded") {
		t.Fatalf("interrupted kv_save: %v", err)
	}
	time.Sleep(400 * time.Millisecond)
	if _, err := k.Save(context.Background()); err == nil || !strings.Contains(err.Error(), "kv_save: connection closed after an interrupted call") {
		t.Fatalf("kv_save after an interrupted one: %v", err)
	}
}

// TestCloseEndsCallInProgress: Close from another goroutine must end a
// call that waits for an answer (a synchronous push waiting on the other
// trainers) instead of waiting for the call's lock.
func TestCloseEndsCallInProgress(t *testing.T) {
	socket, _ := slowNode(t, time.Hour, featAnswer)
	d, err := DialData(context.Background(), socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := d.Features(context.Background(), []uint64{1})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for the call in progress")
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the call in progress returned no error after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call in progress did not end after Close")
	}
	if _, err := d.Features(context.Background(), []uint64{1}); err == nil || !strings.Contains(err.Error(), "node data: connection closed") {
		t.Fatalf("call after Close: %v, want connection closed", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestDialNoNode: a socket that is not there, or that no process
// listens on, says that no node listens there, for every way in.
func TestDialNoNode(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // the file stays, with no listener: a node killed
	ctx := context.Background()
	for _, socket := range []string{filepath.Join(dir, "none.sock"), stale} {
		_, errLoader := OpenLoader(ctx, socket, Options{Split: "train"})
		_, errStats := Stats(ctx, socket)
		_, errKV := DialKV(ctx, socket)
		_, errData := DialData(ctx, socket)
		for _, err := range []error{errLoader, errStats, errKV, errData} {
			if err == nil || !strings.Contains(err.Error(), socket) || !strings.Contains(err.Error(), "no node listens there: start node run") {
				t.Errorf("%s: %v, want the dial's error saying no node listens there", socket, err)
			}
		}
	}
}

// TestDialNotSocket: a regular file or a directory at the socket path is
// named as what it is, not taken for a socket no node listens on (the
// dial's "connection refused" told the user to start node run, which
// refuses to start there: it never removes anything but a socket).
func TestDialNotSocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "node.sock")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for socket, what := range map[string]string{file: "a regular file", dir: "a directory"} {
		_, errLoader := OpenLoader(ctx, socket, Options{Split: "train"})
		_, errStats := Stats(ctx, socket)
		_, errKV := DialKV(ctx, socket)
		_, errData := DialData(ctx, socket)
		for _, err := range []error{errLoader, errStats, errKV, errData} {
			if err == nil || !strings.Contains(err.Error(), socket+" is "+what+", not a socket") || strings.Contains(err.Error(), "start node run") {
				t.Errorf("%s: %v, want it named %s, not a socket", socket, err, what)
			}
		}
	}
}
