package train

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// allReduce calls AllReduce on every rank at once and returns each
// rank's error.
func allReduce(ctx context.Context, syncs []Sync, steps []int, vecs [][]float32) []error {
	errs := make([]error, len(syncs))
	var wg sync.WaitGroup
	for r := range syncs {
		wg.Go(func() { errs[r] = syncs[r].AllReduce(ctx, steps[r], vecs[r]) })
	}
	wg.Wait()
	return errs
}

func TestLocalSyncMean(t *testing.T) {
	syncs := NewLocalSync(3)
	ctx := context.Background()
	for step := range 20 {
		vecs := [][]float32{{1, 2, -3}, {4, 5, 6}, {7, 8, 0.5}}
		for r := range vecs {
			vecs[r][0] += float32(step)
		}
		errs := allReduce(ctx, syncs, []int{step, step, step}, vecs)
		for r, err := range errs {
			if err != nil {
				t.Fatalf("step %d rank %d: %v", step, r, err)
			}
		}
		want := []float32{4 + float32(step), 5, 3.5 / 3}
		for r, v := range vecs {
			if !slices.Equal(v, want) {
				t.Fatalf("step %d rank %d: %v, want %v", step, r, v, want)
			}
		}
	}
}

func TestLocalSyncOutOfStep(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []int
		lens  []int
	}{
		{"step", []int{0, 1}, []int{3, 3}},
		{"length", []int{0, 0}, []int{3, 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			syncs := NewLocalSync(2)
			vecs := [][]float32{make([]float32, c.lens[0]), make([]float32, c.lens[1])}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for r, err := range allReduce(ctx, syncs, c.steps, vecs) {
				if !errors.Is(err, ErrSync) {
					t.Errorf("rank %d: %v, want ErrSync", r, err)
				}
			}
			// The group stays broken.
			if err := syncs[0].AllReduce(ctx, 1, vecs[0]); !errors.Is(err, ErrSync) {
				t.Errorf("after the failure: %v, want ErrSync", err)
			}
		})
	}
}

// TestLocalSyncLeave: a rank whose context ends while it waits fails, and
// so does every later call of the others instead of waiting forever.
func TestLocalSyncLeave(t *testing.T) {
	syncs := NewLocalSync(2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- syncs[0].AllReduce(ctx, 0, []float32{1}) }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrSync) {
		t.Fatalf("waiting rank: %v, want context.Canceled and ErrSync", err)
	}
	if err := syncs[1].AllReduce(context.Background(), 0, []float32{2}); !errors.Is(err, ErrSync) {
		t.Fatalf("other rank: %v, want ErrSync", err)
	}
}

func TestNoSync(t *testing.T) {
	v := []float32{1, 2, 3}
	if err := (NoSync{}).AllReduce(context.Background(), 0, v); err != nil || !slices.Equal(v, []float32{1, 2, 3}) {
		t.Fatalf("NoSync: %v, %v", v, err)
	}
}
