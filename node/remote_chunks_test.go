package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"graphnode/csr"
	"graphnode/mesh"
)

// inFlight counts the calls in progress, and the most at once, per part.
type inFlight struct {
	mu        sync.Mutex
	now, most map[int]int
}

func newInFlight() *inFlight { return &inFlight{now: map[int]int{}, most: map[int]int{}} }

func (f *inFlight) enter(part int) {
	f.mu.Lock()
	f.now[part]++
	f.most[part] = max(f.most[part], f.now[part])
	f.mu.Unlock()
}

func (f *inFlight) leave(part int) {
	f.mu.Lock()
	f.now[part]--
	f.mu.Unlock()
}

// TestFetchChunksInFlight: fetch asks every peer in parallel, a peer's
// ids in one request when they fit (all of them when per is 0), and a
// split peer's chunks chunksInFlight at a time, each chunk its own ids
// in order. A server bounds each answer by a deadline from the request's
// arrival, and answers in flight on one connection share its bandwidth:
// every chunk sent at once (as fetch did) cut them all past about 32 s ×
// the link's throughput, and the batch failed "peer unavailable".
func TestFetchChunksInFlight(t *testing.T) {
	const per = 3
	sizes := []int{0, 10, 2, 7} // ids of peers 0..3: none, 4 chunks, 1, 3
	r := newRoutes(len(sizes)).get()
	for p, n := range sizes {
		for i := range n {
			r.ids[p] = append(r.ids[p], uint64(100*p+i))
			r.pos[p] = append(r.pos[p], 10*p+i)
		}
	}
	// Every call waits until the first wave has started (each peer's
	// first chunksInFlight chunks, here 2+1+2): peers and lanes run at
	// once, or the wait times out.
	first := 0
	for _, n := range sizes {
		if n > 0 {
			first += min(chunks(n, per), chunksInFlight)
		}
	}
	var started atomic.Int32
	release := make(chan struct{})
	f := newInFlight()
	var mu sync.Mutex
	got := map[[2]int][]uint64{}
	err := fetch(r, per, func(part, c int, ids []uint64, pos []int) error {
		f.enter(part)
		defer f.leave(part)
		if int(started.Add(1)) == first {
			close(release)
		}
		select {
		case <-release:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("part %d chunk %d: the first wave of %d calls did not start together", part, c, first)
		}
		time.Sleep(time.Millisecond)
		for k, i := range pos {
			if i != 10*part+int(ids[k]%100) {
				return fmt.Errorf("part %d chunk %d: position %d for id %d", part, c, i, ids[k])
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if _, dup := got[[2]int{part, c}]; dup {
			return fmt.Errorf("part %d chunk %d asked twice", part, c)
		}
		got[[2]int{part, c}] = slices.Clone(ids)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, n := range sizes {
		if n == 0 {
			continue
		}
		for c := range chunks(n, per) {
			lo, hi := c*per, min((c+1)*per, n)
			if want := r.ids[p][lo:hi]; !slices.Equal(got[[2]int{p, c}], want) {
				t.Errorf("part %d chunk %d: ids %v, want %v", p, c, got[[2]int{p, c}], want)
			}
		}
		if want := min(chunks(n, per), chunksInFlight); f.most[p] != want {
			t.Errorf("part %d (%d chunks): %d in flight at most, want %d", p, chunks(n, per), f.most[p], want)
		}
	}
	if len(got) != 4+1+3 {
		t.Errorf("%d requests, want 8", len(got))
	}

	// per 0 (nothing to ask per id): one request of every id.
	clear(got)
	err = fetch(r, 0, func(part, c int, ids []uint64, _ []int) error {
		mu.Lock()
		defer mu.Unlock()
		got[[2]int{part, c}] = slices.Clone(ids)
		return nil
	})
	if err != nil || len(got) != 3 {
		t.Fatalf("per 0: %d requests (%v), want 3", len(got), err)
	}
	for p, n := range sizes {
		if ids, ok := got[[2]int{p, 0}]; n > 0 && (!ok || !slices.Equal(ids, r.ids[p])) {
			t.Errorf("per 0: part %d asked %v, want all its ids %v", p, ids, r.ids[p])
		}
	}

	// A failed chunk stops its peer's later chunks, not the other peers';
	// the error is the first in peer order.
	boom := errors.New("boom")
	clear(got)
	err = fetch(r, per, func(part, c int, ids []uint64, _ []int) error {
		mu.Lock()
		got[[2]int{part, c}] = ids
		mu.Unlock()
		if part == 3 || (part == 1 && c == 1) {
			return fmt.Errorf("part %d chunk %d: %w", part, c, boom)
		}
		return nil
	})
	if !errors.Is(err, boom) || err.Error() != "part 1 chunk 1: boom" {
		t.Errorf("fetch with failing chunks: %v, want part 1 chunk 1's error", err)
	}
	if _, ok := got[[2]int{1, 3}]; ok {
		t.Error("part 1's chunk 3 was asked after chunk 1 of its lane failed")
	}
	if _, ok := got[[2]int{2, 0}]; !ok {
		t.Error("part 2 was not asked after part 1 failed")
	}
}

// pullCounter is a handler that counts the pulls it serves at once, each
// held a millisecond so that pulls sent together overlap.
type pullCounter struct {
	*handler
	f *inFlight
}

func (h pullCounter) PullFeatures(ctx context.Context, req *mesh.PullRequest) (*mesh.PullResponse, error) {
	h.f.enter(0)
	defer h.f.leave(0)
	time.Sleep(time.Millisecond)
	return h.handler.PullFeatures(ctx, req)
}

// TestGatherChunksInFlightOverTheMesh: a gather split in many pulls (750
// rows from part 1, 15 to a 1 KiB message) has at most chunksInFlight of
// them on the peer at once, and gets every row right.
func TestGatherChunksInFlightOverTheMesh(t *testing.T) {
	f := newInFlight()
	c := startMeshClusterWrapped(t, 2, 0, csr.TypeF32, splitMaxMessage, 16, func(p int, h *handler) mesh.Handler {
		if p == 1 {
			return pullCounter{h, f}
		}
		return h
	})
	cli := c.client(t, 0)
	src, err := newClusterSource(c.parts_[0], c.book, cli)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, c.book.NumNodes())
	for i := range ids {
		ids[i] = uint64(len(ids) - 1 - i) // remote rows land out of order
	}
	dst := make([]byte, len(ids)*src.rowBytes)
	ctx := context.Background()
	if err := src.Gather(ctx, ids, dst); err != nil {
		t.Fatal(err)
	}
	lo, hi := c.book.Range(1)
	rb := src.rowBytes
	for i, id := range ids {
		o := c.book.Owner(id)
		part := c.parts_[o]
		start, _ := c.book.Range(o)
		l := id - start
		if want := part.FeatBlock()[int(l)*rb : int(l+1)*rb]; !slices.Equal(dst[i*rb:(i+1)*rb], want) {
			t.Fatalf("row %d (node %d) differs from its part's", i, id)
		}
	}
	pulls := chunks(int(hi-lo), src.perPull)
	if pulls < 10 {
		t.Fatalf("%d pulls: the test wants a gather split in many", pulls)
	}
	if m := cli.Metrics(); len(m) != 1 || m[0].Requests != uint64(pulls) {
		t.Errorf("client metrics %+v: want %d pulls", m, pulls)
	}
	// The server's handler goroutine may still be leaving when the
	// client has its answer: read under the counter's lock.
	f.mu.Lock()
	most := f.most[0]
	f.mu.Unlock()
	if most > chunksInFlight {
		t.Errorf("%d of the gather's %d pulls on the peer at once, want at most %d", most, pulls, chunksInFlight)
	}
}
