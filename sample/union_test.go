package sample

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"graphnode/partition"
)

// fakeRemote serves the other partitions in process, exactly as a peer's
// mesh server would: by calling SampleNeighbors on its own partition.
type fakeRemote struct {
	parts []Partition
	calls atomic.Int64
	// corrupt, when set, damages answers.
	corrupt func(resp *NeighborResponse)
}

func (f *fakeRemote) SampleNeighbors(ctx context.Context, part int, req *NeighborRequest, resp *NeighborResponse) error {
	f.calls.Add(1)
	resp.Reset()
	if err := SampleNeighbors(f.parts[part], req, resp); err != nil {
		return err
	}
	if f.corrupt != nil {
		f.corrupt(resp)
	}
	return nil
}

var splitCases = []struct {
	bounds   []uint64
	fanouts  []int
	weighted bool
}{
	{[]uint64{0, 150, 400}, []int{10, 5}, false},
	{[]uint64{0, 90, 91, 400}, []int{15, 10, 5}, false},
	{[]uint64{0, 200, 300, 400}, []int{4, -1}, true},
}

// The batches of a Union over 2 and 3 partitions, and of a partition that
// asks the others through a Remote, are byte-identical to those of the
// whole graph in one partition: the distributed invariant of DESIGN.md §5.
func TestUnionAndRemoteMatchWhole(t *testing.T) {
	for _, tc := range splitCases {
		t.Run(fmt.Sprintf("bounds=%v/fanout=%v/weighted=%v", tc.bounds, tc.fanouts, tc.weighted), func(t *testing.T) {
			g := randGraph(11, 400, 6000, tc.weighted, Schema{FeatDim: 3, XType: F16, LabelDim: 2})
			whole := g.whole(t)
			u, parts := g.split(t, tc.bounds)
			ref := newSampler(t, whole, whole, tc.fanouts, tc.weighted)
			un := newSampler(t, u, u, tc.fanouts, tc.weighted)
			var dist []*Sampler
			remote := &fakeRemote{parts: parts}
			for p := range parts {
				ls := NewLocalSource(u) // features are not what is under test
				s, err := New(Config{
					Fanouts: tc.fanouts, Weighted: tc.weighted, Local: parts[p], Remote: remote, Book: u.Book(),
					Schema: g.schema, Features: ls, Labels: ls,
				})
				if err != nil {
					t.Fatal(err)
				}
				dist = append(dist, s)
			}
			for bi := range 10 {
				key := BatchKey{Seed: 3, Epoch: 2, Rank: 1, Batch: uint64(bi)}
				seeds := []uint64{uint64(bi * 37 % 400), uint64(399 - bi), uint64(150 + bi)}
				want := record(t, ref, key, seeds)
				if got := record(t, un, key, seeds); !bytes.Equal(got, want) {
					t.Fatalf("batch %d: union record differs from the whole graph's", bi)
				}
				for p, s := range dist {
					if got := record(t, s, key, seeds); !bytes.Equal(got, want) {
						t.Fatalf("batch %d: record of partition %d with remote peers differs from the whole graph's", bi, p)
					}
				}
			}
			if remote.calls.Load() == 0 {
				t.Fatal("no remote request was made")
			}
		})
	}
}

func TestRemoteBadResponse(t *testing.T) {
	g := randGraph(2, 100, 1000, false, Schema{})
	_, parts := g.split(t, []uint64{0, 50, 100})
	book, _ := partition.NewBook([]uint64{0, 50, 100})
	for name, corrupt := range map[string]func(*NeighborResponse){
		"missing count": func(r *NeighborResponse) { r.Counts = r.Counts[:len(r.Counts)-1] },
		"extra id":      func(r *NeighborResponse) { r.Neighbors = append(r.Neighbors, 1) },
		"over fanout":   func(r *NeighborResponse) { r.Counts[0] = 99; r.Neighbors = append(r.Neighbors, make([]uint64, 99)...) },
		// With one hop, an id outside the graph went into n_id.
		"outside the graph": func(r *NeighborResponse) {
			for i := range r.Neighbors {
				r.Neighbors[i] = 100
			}
		},
	} {
		for _, fanouts := range [][]int{{3, 3}, {3}} {
			remote := &fakeRemote{parts: parts, corrupt: corrupt}
			s, err := New(Config{Fanouts: fanouts, Local: parts[0], Remote: remote, Book: book})
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Sample(context.Background(), BatchKey{}, []uint64{60, 70})
			if !errors.Is(err, ErrBadResponse) || !strings.Contains(err.Error(), "part 1") {
				t.Errorf("%s, fanouts %v: err = %v, want ErrBadResponse naming part 1", name, fanouts, err)
				if err == nil {
					t.Errorf("n_id %v", b.NID)
				}
			}
		}
	}
}

// The same batches come out of 1, 2 and 4 Samplers working at once on
// interleaved batches (worker w makes batches w, w+W, …), and in reverse.
func TestDeterminismAcrossWorkers(t *testing.T) {
	g := randGraph(21, 500, 8000, false, Schema{FeatDim: 4, LabelDim: 1})
	whole := g.whole(t)
	ids := make([]uint64, 0, 300)
	for v := range uint64(300) {
		ids = append(ids, v*5/3)
	}
	plan, err := NewPlan(ids, PlanOptions{BatchSize: 16, Shuffle: true, Seed: 9, Rank: 1, WorldSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	const epoch = 4
	ep := plan.Epoch(epoch, nil)
	fanouts := []int{6, 4}
	want := make([][]byte, ep.NumBatches())
	s := newSampler(t, whole, whole, fanouts, false)
	for b := range want {
		want[b] = record(t, s, ep.Key(b), ep.Batch(b))
	}
	for b := len(want) - 1; b >= 0; b-- {
		if got := record(t, s, ep.Key(b), ep.Batch(b)); !bytes.Equal(got, want[b]) {
			t.Fatalf("batch %d differs when made in reverse order", b)
		}
	}
	for _, workers := range []int{1, 2, 4} {
		got := make([][]byte, len(want))
		var wg sync.WaitGroup
		for w := range workers {
			s := newSampler(t, whole, whole, fanouts, false)
			wg.Go(func() {
				ep := plan.Epoch(epoch, nil) // every worker computes the order itself
				for b := w; b < len(got); b += workers {
					rec, err := encodeBatch(s, ep.Key(b), ep.Batch(b))
					if err != nil {
						t.Error(err)
						return
					}
					got[b] = rec
				}
			})
		}
		wg.Wait()
		for b := range want {
			if !bytes.Equal(got[b], want[b]) {
				t.Fatalf("%d workers: batch %d differs", workers, b)
			}
		}
	}
}

func TestUnionErrors(t *testing.T) {
	g := randGraph(2, 100, 500, false, Schema{})
	book, _ := partition.NewBook([]uint64{0, 50, 100})
	a, b := g.part(t, 0, 50), g.part(t, 40, 100)
	if _, err := NewUnion(book, []Partition{a, b}); !errors.Is(err, ErrInvalid) {
		t.Errorf("misaligned part: err = %v", err)
	}
	if _, err := NewUnion(book, []Partition{a}); !errors.Is(err, ErrInvalid) {
		t.Errorf("missing part: err = %v", err)
	}
}

// A steady-state batch with peers allocates only the goroutine of each
// remote request: the owned part of every hop's frontier, the requests
// and the answers reuse their memory.
func TestSampleRemoteAllocs(t *testing.T) {
	g := randGraph(5, 4000, 60000, false, Schema{})
	_, parts := g.split(t, []uint64{0, 2000, 4000})
	book, _ := partition.NewBook([]uint64{0, 2000, 4000})
	remote := &fakeRemote{parts: parts}
	s, err := New(Config{Fanouts: []int{10, 10, 5}, Local: parts[0], Remote: remote, Book: book})
	if err != nil {
		t.Fatal(err)
	}
	seeds := make([]uint64, 256)
	for i := range seeds {
		seeds[i] = uint64(i * 15)
	}
	ctx := context.Background()
	run := func() {
		if _, err := s.Sample(ctx, BatchKey{Batch: 3}, seeds); err != nil {
			t.Fatal(err)
		}
	}
	run()
	calls := remote.calls.Load()
	allocs := testing.AllocsPerRun(10, run)
	perBatch := float64(remote.calls.Load()-calls) / 11
	if allocs > 2*perBatch {
		t.Errorf("%v allocations per batch with %v remote requests, want at most 2 per request", allocs, perBatch)
	}
}
