package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"graphnode/csr"
	"graphnode/mesh"
	"graphnode/sample"
)

// splitMaxMessage is the mesh's MaxMessage of the tests of requests
// larger than one message: 1 KiB, so a small graph's batches pass it
// (rows of 64 bytes: 15 to a pull; 127 labels to a request; 42 nodes
// at fanout 5 to a narrow sample answer).
const splitMaxMessage = 1 << 10

// TestDistributedSplitsLargeRequests: with a mesh limit far below a
// batch's remote requests, a sampler of part p splits each peer's pull,
// labels and neighbour requests into messages that fit (by the fanout's
// bound, or, at fanout -1, in halves when the peer refuses an answer too
// large) and its records are byte-identical to those of one process
// sampling the union: the limit used to fail such a batch outright
// ("pull of 280 rows of 1048576 bytes: over the answer limit of
// 268435456 bytes"), though the union samples it. Link batches with
// their seed edges excluded too.
func TestDistributedSplitsLargeRequests(t *testing.T) {
	c := startMeshClusterDim(t, 2, 0, csr.TypeF32, splitMaxMessage, 16)
	ctx := context.Background()
	u, err := sample.NewUnion(c.book, []sample.Partition{c.parts_[0], c.parts_[1]})
	if err != nil {
		t.Fatal(err)
	}
	usrc := sample.NewLocalSource(u)
	all := make([]uint64, c.book.NumNodes())
	for i := range all {
		all[i] = uint64(i)
	}
	for _, fanouts := range [][]int{{5, 3}, {-1, 2}} {
		for p := range 2 {
			t.Run(fmt.Sprintf("fanouts=%v/part=%d", fanouts, p), func(t *testing.T) {
				ref, err := sample.New(sample.Config{Fanouts: fanouts, Local: u, Schema: u.Schema(), Features: usrc, Labels: usrc})
				if err != nil {
					t.Fatal(err)
				}
				cli := c.client(t, p)
				src, err := newClusterSource(c.parts_[p], c.book, cli)
				if err != nil {
					t.Fatal(err)
				}
				s, err := sample.New(sample.Config{Fanouts: fanouts, Local: c.parts_[p], Remote: newMeshRemote(cli, c.book), Book: c.book,
					Schema: c.parts_[p].Schema(), Features: src, Labels: src})
				if err != nil {
					t.Fatal(err)
				}
				plan, err := sample.NewPlan(all, sample.PlanOptions{BatchSize: 400, Shuffle: true, Seed: 3 + uint64(p), WorldSize: 1})
				if err != nil {
					t.Fatal(err)
				}
				ep := plan.Epoch(0, nil)
				const batches = 3
				for b := range batches {
					if err := sameAsUnion(ctx, t, ref, s, src, ep.Key(b), ep.Batch(b)); err != nil {
						t.Fatalf("batch %d: %v", b, err)
					}
				}
				// Unsplit, a batch is 4 requests (two hops, x, y): each
				// was split in several here.
				if m := cli.Metrics(); len(m) != 1 || m[0].Requests < 8*batches {
					t.Errorf("client metrics %+v: want more than %d requests", m, 8*batches)
				}
			})
		}
	}
	t.Run("link", func(t *testing.T) {
		// Seed edges between nodes of part 1, sampled by part 0: hop 0
		// asks part 1 for every seed, with its exclusions.
		lo, hi := c.book.Range(1)
		var src, dst []uint64
		for v := lo; v < hi && len(src) < 300; v++ {
			for _, w := range c.parts_[1].Neighbors(uint32(v - lo)) {
				if w >= lo && w < hi && w != v {
					src, dst = append(src, v), append(dst, w)
					break
				}
			}
		}
		cli := c.client(t, 0)
		for _, fo := range []int{4, -1} {
			s, err := sample.New(sample.Config{Fanouts: []int{fo, 2}, Local: c.parts_[0], Remote: newMeshRemote(cli, c.book), Book: c.book})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := sample.New(sample.Config{Fanouts: []int{fo, 2}, Local: u})
			if err != nil {
				t.Fatal(err)
			}
			o := sample.LinkOptions{NegRatio: 1, NumNodes: c.book.NumNodes(), Exclude: true}
			for k := range 3 {
				key := sample.BatchKey{Seed: 21, Epoch: 1, Batch: uint64(k)}
				b, err := s.SampleLink(ctx, key, src, dst, o)
				if err != nil {
					t.Fatalf("fanout %d batch %d: %v", fo, k, err)
				}
				got := batchText(b)
				want, err := ref.SampleLink(ctx, key, src, dst, o)
				if err != nil {
					t.Fatal(err)
				}
				if w := batchText(want); !bytes.Equal(got, w) {
					t.Fatalf("fanout %d batch %d differs from the union's:\n got  %s\n want %s", fo, k, got, w)
				}
			}
		}
	})
}

// TestRowOverMessageLimit: a feature row that cannot fit one message
// alone fails the gather with an error naming the row's size and the
// limit, before anything is sent.
func TestRowOverMessageLimit(t *testing.T) {
	c := startMeshClusterDim(t, 2, 0, csr.TypeF32, splitMaxMessage, 300)
	cli := c.client(t, 0)
	src, err := newClusterSource(c.parts_[0], c.book, cli)
	if err != nil {
		t.Fatal(err)
	}
	lo, _ := c.book.Range(1)
	ids := []uint64{0, lo}
	err = src.Gather(context.Background(), ids, make([]byte, len(ids)*1200))
	if !errors.Is(err, mesh.ErrTooLarge) || !strings.Contains(err.Error(), "a row of 1200 bytes does not fit the message limit of 1024 bytes") {
		t.Errorf("gather of rows of 1200 bytes at a limit of 1 KiB: %v", err)
	}
	if m := cli.Metrics(); len(m) != 0 {
		t.Errorf("client metrics %+v: want no request", m)
	}
}

// refusalCounter is a handler that counts the sample requests it refuses
// as too large.
type refusalCounter struct {
	*handler
	refused *atomic.Int64
}

func (h refusalCounter) SampleNeighbors(ctx context.Context, req *mesh.SampleRequest) (*mesh.SampleResponse, error) {
	resp, err := h.handler.SampleNeighbors(ctx, req)
	if errors.Is(err, mesh.ErrTooLarge) {
		h.refused.Add(1)
	}
	return resp, err
}

// TestHalvingIsNoMeshError: a fanout -1 hop whose answers the peer
// refuses as too large is asked again in halves, and the batches sample
// without error; neither end counts the refusals as failed mesh requests
// (graphnode_mesh_errors_total counted 44 of 112 requests of three
// healthy batches).
func TestHalvingIsNoMeshError(t *testing.T) {
	var refused atomic.Int64
	c := startMeshClusterWrapped(t, 2, 0, csr.TypeF32, splitMaxMessage, 16, func(p int, h *handler) mesh.Handler {
		return refusalCounter{h, &refused}
	})
	ctx := context.Background()
	all := make([]uint64, c.book.NumNodes())
	for i := range all {
		all[i] = uint64(i)
	}
	cli := c.client(t, 0)
	s, err := sample.New(sample.Config{Fanouts: []int{-1, 2}, Local: c.parts_[0], Remote: newMeshRemote(cli, c.book), Book: c.book})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sample.NewPlan(all, sample.PlanOptions{BatchSize: 400, Shuffle: true, Seed: 3, WorldSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	ep := plan.Epoch(0, nil)
	for b := range 3 {
		if _, err := s.Sample(ctx, ep.Key(b), ep.Batch(b)); err != nil {
			t.Fatal(err)
		}
	}
	if refused.Load() == 0 {
		t.Fatal("no sample request was refused as too large: the test halves nothing")
	}
	out := cli.Metrics()
	if len(out) != 1 || out[0].Errors != 0 {
		t.Errorf("client metrics %+v: want no failed request", out)
	}
	// The server counts a request once its answer is written, which can
	// be after the client read it.
	var in []mesh.PeerStats
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if in = c.srvs[1].Metrics(); len(in) == 1 && in[0].Requests >= out[0].Requests {
			break
		}
	}
	if len(in) != 1 || in[0].Requests != out[0].Requests || in[0].Errors != 0 {
		t.Errorf("server metrics %+v: want the client's %d requests, none failed", in, out[0].Requests)
	}
	t.Logf("%d requests, %d refused as too large and halved", out[0].Requests, refused.Load())
}
