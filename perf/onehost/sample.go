package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"graphnode/csr"
	"graphnode/sample"
)

// The loader every measurement uses: the GraphSAGE setting.
const (
	benchBatch = 1024
	benchSeed  = 1
)

// benchFanouts are fanouts [15, 10, 5], a fresh slice per caller.
func benchFanouts() []int { return []int{15, 10, 5} }

// DGL 1.1.3 on this machine, on the 1 M node / 10 M edge R-MAT graph
// (the reference numbers).
const dglGraph = "rmat-1M"

func dglRef(graph, what string, workers int) string {
	if graph != dglGraph {
		return ""
	}
	switch {
	case what == "sampled edges/s" && workers == 1:
		return "DGL 12.1M (1 thread)"
	case what == "sampled edges/s" && workers == 2:
		return "DGL 18.7M (2 threads)"
	case what == "gather rows/s" && workers == 1:
		return "DGL 2.9M (1 thread)"
	}
	return ""
}

// openPart maps a partition, adapts it for the sampler and reads the
// train split's global ids, as a sampler process does.
func openPart(path string) (*csr.Graph, *sample.CSR, []uint64, error) {
	g, err := csr.Open(path, csr.OpenOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := sample.FromCSR(g)
	if err != nil {
		g.Close()
		return nil, nil, nil, err
	}
	mask, err := g.Mask("train")
	if err != nil {
		g.Close()
		return nil, nil, nil, err
	}
	start := g.Meta().Start
	seeds := make([]uint64, 0, mask.GetCardinality())
	for it := mask.Iterator(); it.HasNext(); {
		seeds = append(seeds, start+uint64(it.Next()))
	}
	if len(seeds) == 0 {
		g.Close()
		return nil, nil, nil, fmt.Errorf("%s: no train nodes", path)
	}
	return g, p, seeds, nil
}

// fault touches one word per page of b, so that the timed loops do not
// pay for the mapping's first faults (a running node's mapping is warm).
func fault(b []uint64) uint64 {
	var s uint64
	for i := 0; i < len(b); i += 512 {
		s += b[i]
	}
	return s
}

func sampleCmd(args []string) error {
	fs, graph := newFlags("sample")
	part := fs.String("part", "", "part.csr to sample (required)")
	seconds := fs.Float64("seconds", 10, "duration of each measurement")
	workers := fs.String("workers", "1,2", "goroutines, each with its own Sampler")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ws, err := intList(*workers)
	if err != nil {
		return err
	}
	g, p, seeds, err := openPart(*part)
	if err != nil {
		return err
	}
	defer g.Close()
	_ = fault(g.Indptr()) + fault(g.Indices())
	plan, err := sample.NewPlan(seeds, sample.PlanOptions{BatchSize: benchBatch, Shuffle: true, Seed: benchSeed})
	if err != nil {
		return err
	}
	fmt.Printf("sample %s: %d nodes, %d edges, %d train seeds, %d batches/epoch, load %s\n",
		*part, g.NumNodes(), g.NumEdges(), len(seeds), plan.NumBatches(), loadAvg())
	// Several epochs' orders, computed before timing (as a sampler process
	// does once per epoch).
	const epochs = 8
	eps := make([]sample.Epoch, epochs)
	for e := range eps {
		eps[e] = plan.Epoch(uint64(e), nil)
	}
	for _, w := range ws {
		st, err := runSamplers(p, eps, w, time.Duration(*seconds*float64(time.Second)))
		if err != nil {
			return err
		}
		fmt.Printf("  workers=%d: %d batches in %.2fs wall, %.2fs CPU: %.0f edges/batch, %.0f nodes/batch\n",
			w, st.batches, st.wall.Seconds(), st.cpu.Seconds(), float64(st.edges)/float64(st.batches),
			float64(st.nodes)/float64(st.batches))
		emit(result{graph: *graph, what: "sampled edges/s", workers: w,
			value: float64(st.edges) / st.wall.Seconds(), perCPU: float64(st.edges) / st.cpu.Seconds(),
			unit: "edges/s", target: "≥20M per CPU-s", ref: dglRef(*graph, "sampled edges/s", w)})
		emit(result{graph: *graph, what: "sampled batches/s", workers: w,
			value: float64(st.batches) / st.wall.Seconds(), perCPU: float64(st.batches) / st.cpu.Seconds(),
			unit: "batches/s"})
	}
	return nil
}

type sampleStats struct {
	batches, edges, nodes int
	wall, cpu             time.Duration
}

// runSamplers runs w goroutines, each with its own Sampler, for d: worker
// i takes batches i, i+w, … of each epoch in turn, as a node's samplers
// split a loader. Each Sampler first makes a few untimed batches to grow
// its buffers to their steady size.
func runSamplers(p *sample.CSR, eps []sample.Epoch, w int, d time.Duration) (sampleStats, error) {
	ctx := context.Background()
	samplers := make([]*sample.Sampler, w)
	for i := range samplers {
		s, err := sample.New(sample.Config{Fanouts: benchFanouts(), Local: p})
		if err != nil {
			return sampleStats{}, err
		}
		ep := eps[len(eps)-1]
		for b := range min(4, ep.NumBatches()) {
			if _, err := s.Sample(ctx, ep.Key(b), ep.Batch(b)); err != nil {
				return sampleStats{}, err
			}
		}
		samplers[i] = s
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total sampleStats
		first error
	)
	cpu0, t0 := cpuSelf(), time.Now()
	deadline := t0.Add(d)
	for i, s := range samplers {
		wg.Go(func() {
			var st sampleStats
			var err error
		loop:
			for e := 0; ; e = (e + 1) % len(eps) {
				ep := eps[e]
				if time.Now().After(deadline) {
					break
				}
				for b := i; b < ep.NumBatches(); b += w {
					bt, serr := s.Sample(ctx, ep.Key(b), ep.Batch(b))
					if serr != nil {
						err = serr
						break loop
					}
					st.batches++
					st.edges += bt.NumEdges()
					st.nodes += bt.NumNodes()
					if time.Now().After(deadline) {
						break loop
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			total.batches += st.batches
			total.edges += st.edges
			total.nodes += st.nodes
			if first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	total.wall, total.cpu = time.Since(t0), cpuSelf()-cpu0
	return total, first
}
