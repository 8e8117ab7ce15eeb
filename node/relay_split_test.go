package node

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"graphnode/csr"
	"graphnode/mesh"
	"graphnode/node/control"
	"graphnode/sample"
	"graphnode/shm"
)

// ringServer serves one remote loader: the sub-rings of cons, sent as a
// sampling node's streamRemote sends them (forward).
type ringServer struct {
	*handler
	cons *shm.Consumer
}

func (h ringServer) OpenLoader(_, _ context.Context, _ string, _ []byte) (uint64, []byte, error) {
	return 1, []byte("{}"), nil
}

func (h ringServer) StreamLoader(ctx context.Context, _ string, _ uint64, sub int, send mesh.RecordSender) error {
	return forward(ctx, h.cons, sub, send)
}

// TestRelayRecordsOverMaxMessage is server-client mode with batches far
// larger than the mesh's message limit (64 KiB here, 256 MiB in a node;
// rows of 512 bytes make records of several hundred KB): part 0's
// samplers split their pulls from part 1 to fit it, their records cross
// the mesh whole from the sampling node to a client node's relay, which
// reads each with its ring's largest record as the limit, and the
// trainer reads records byte-identical to one process sampling the
// union. Each record used to be refused on both ends ("record of
// 415246400 bytes: want 1 to 268435456 (the mesh's MaxMessage)").
func TestRelayRecordsOverMaxMessage(t *testing.T) {
	const maxMsg = 64 << 10
	c := startMeshClusterDim(t, 2, 0, csr.TypeF32, maxMsg, 128)
	o := control.LoaderOptions{Split: "train", Fanouts: []int{5, 3}, BatchSize: 97, Shuffle: true, Epochs: 1, Seed: 9,
		WorldSize: 1, Concurrency: 2, Features: true, Labels: true}
	const W = 2
	ringA := filepath.Join(t.TempDir(), "sampling")
	specs := make([]*SamplerSpec, W)
	for w := range W {
		specs[w] = c.spec(t, 0, w, W, ringA, o)
	}
	want := c.union(t, o, specs[0].Seeds)[0]
	most := 0
	for _, rec := range want {
		most = max(most, len(rec))
	}
	if most < 4*maxMsg {
		t.Fatalf("largest record %d bytes: not above the mesh's limit of %d", most, maxMsg)
	}
	sub := 4 * (most + shm.RecordHeaderSize)
	sub = (sub + shm.PageSize - 1) / shm.PageSize * shm.PageSize
	// The sampling node's ring and loader server.
	sampling, err := shm.Create(ringA, shm.Options{SubRings: W, Capacity: int64(W * sub)})
	if err != nil {
		t.Fatal(err)
	}
	defer sampling.Remove()
	consA, err := sampling.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	defer consA.Close()
	id0, err := mesh.LoadIdentity(c.certs, "host0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mesh.Listen(context.Background(), "127.0.0.1:0", mesh.ServerConfig{
		Identity: id0, Cluster: "test", Checksum: c.m.Checksum, Part: 0, Handler: ringServer{c.handlers[0], consA}, MaxMessage: maxMsg,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, W)
	for w := range W {
		go func() { done <- RunSampler(ctx, specs[w], slog.New(slog.DiscardHandler), io.Discard) }()
	}
	// The client node: its mesh client, its ring of the same shape, and
	// a relay per sub-ring.
	id1, err := mesh.LoadIdentity(c.certs, "host1")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := mesh.NewClient(mesh.ClientConfig{Identity: id1, Cluster: "test", Checksum: c.m.Checksum, Part: 1,
		Peers: map[int]mesh.Peer{0: {Name: "host0", Addr: srv.Addr().String()}}, Timeout: 5 * time.Second, MaxMessage: maxMsg})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	remote, err := cli.OpenLoader(ctx, 0, []byte("open"))
	if err != nil {
		t.Fatal(err)
	}
	training, err := shm.Create(filepath.Join(t.TempDir(), "training"), shm.Options{SubRings: W, Capacity: int64(W * sub)})
	if err != nil {
		t.Fatal(err)
	}
	defer training.Remove()
	consB, err := training.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	defer consB.Close()
	n := &Node{log: slog.New(slog.DiscardHandler)}
	l, r := &loader{id: 1}, &relay{remote: remote, cancel: cancel}
	for w := range W {
		prod, err := training.Producer(w)
		if err != nil {
			t.Fatal(err)
		}
		r.wg.Go(func() { n.relaySub(ctx, l, r, w, prod, training.MaxRecord(), "the sampling node of part 0") })
	}
	defer r.stop()
	// The trainer.
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	next := func(w int) (sample.View, []byte) {
		t.Helper()
		rec, err := consB.Next(rctx, w)
		if err != nil {
			t.Fatalf("sub-ring %d: %v", w, err)
		}
		v, err := sample.Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if v.Header.Kind == sample.KindError {
			t.Fatalf("sub-ring %d: error record: %s", w, v.Message)
		}
		return v, rec
	}
	for b, wrec := range want {
		w := b % W
		v, rec := next(w)
		if v.Header.Kind != sample.KindBatch || !bytes.Equal(rec, wrec) {
			t.Fatalf("batch %d (%d bytes): record of kind %v, %d bytes, differs from the union's", b, len(wrec), v.Header.Kind, len(rec))
		}
		consB.Release(w)
	}
	for _, k := range []sample.Kind{sample.KindEndOfEpoch, sample.KindEndOfStream} {
		for w := range W {
			if v, _ := next(w); v.Header.Kind != k {
				t.Fatalf("sub-ring %d: kind %v, want %v", w, v.Header.Kind, k)
			}
			consB.Release(w)
		}
	}
	for range W {
		if err := <-done; err != nil {
			t.Errorf("RunSampler: %v", err)
		}
	}
	if got := r.batches.Load(); got != uint64(len(want)) {
		t.Errorf("relay counted %d batches, want %d", got, len(want))
	}
	if m := cli.Metrics(); len(m) != 1 || m[0].Errors != 0 {
		t.Errorf("client metrics %+v: want no error", m)
	}
}
