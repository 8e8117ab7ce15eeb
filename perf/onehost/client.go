package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"graphnode/node/client"
	"graphnode/sample"
)

// clientOpts are the loader settings both clients use.
type clientOpts struct {
	workers     int
	concurrency int
	batches     int // 0: every batch of the loader's epochs
	epochs      int
	ringSize    string // "": the node's default
	prefill     bool   // time only batches already on the ring
}

// clientStats is one client run.
type clientStats struct {
	batches int     // timed batches
	edges   int64   // sampled edges in the timed batches
	wall    float64 // seconds of the timed window
	cpu     float64 // CPU seconds of every process involved, open to close
	client  float64 // CPU seconds of the client in the timed window
	total   int     // batches read, timed or not
}

func clientCmd(args []string, goClient bool) error {
	fs, graph := newFlags("client")
	nodeBin := fs.String("node", "", "the node binary (required)")
	parts := fs.String("parts", "", "partition directory (required)")
	python := fs.String("python", "", "Python benchmark script to run against the same node (bench_python.py)")
	pyExe := fs.String("python-exe", "/usr/bin/python3", "Python interpreter")
	workers := fs.String("workers", "1,2", "sampler processes per loader")
	conc := fs.Int("concurrency", 4, "batches in flight per sampler")
	batches := fs.Int("batches", 0, "batches per measurement (0: all of -epochs)")
	epochs := fs.Int("epochs", 1, "epochs of each loader")
	ringSize := fs.String("ring-size", "", "ring_size of the loader (default: the node's 1GB)")
	prefillRing := fs.String("prefill-ring-size", "4GB", "ring_size of the prefilled measurement")
	repeat := fs.Int("repeat", 3, "runs of each client, alternated; the best is reported")
	modes := fs.String("modes", "e2e,prefill", "e2e (samplers run while the client reads) and/or prefill (client alone)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodeBin == "" || *parts == "" || (!goClient && *python == "") {
		return errors.New("need -node and -parts (and -python for the python subcommand)")
	}
	ws, err := intList(*workers)
	if err != nil {
		return err
	}
	n, err := startNode(*nodeBin, *parts)
	if err != nil {
		return err
	}
	defer n.kill()
	for _, mode := range strings.Split(*modes, ",") {
		for _, w := range ws {
			o := clientOpts{workers: w, concurrency: *conc, batches: *batches, epochs: *epochs, ringSize: *ringSize}
			switch mode {
			case "e2e":
			case "prefill":
				o.prefill, o.ringSize = true, *prefillRing
			default:
				return fmt.Errorf("-modes: unknown mode %q", mode)
			}
			var runGo, runPy func() (clientStats, error)
			if goClient {
				runGo = func() (clientStats, error) { return goLoader(n.socket, o) }
			}
			if *python != "" {
				runPy = func() (clientStats, error) { return pyLoader(*pyExe, *python, n.socket, o) }
			}
			if err := compare(n, *graph, mode, w, *repeat, runGo, runPy); err != nil {
				return err
			}
		}
	}
	return n.stop()
}

func (s clientStats) rate() float64 { return float64(s.batches) / s.wall }

// compare runs the Go and the Python client (either may be nil) repeat
// times each, alternated so that both see the same background load, and
// reports the best run of each (the least disturbed by other work on the
// host) and their ratio.
func compare(n *nodeProc, graph, mode string, w, repeat int, runGo, runPy func() (clientStats, error)) error {
	var best [2]clientStats
	for range max(repeat, 1) {
		for i, run := range []func() (clientStats, error){runGo, runPy} {
			if run == nil {
				continue
			}
			st, err := n.measure(run)
			if err != nil {
				return fmt.Errorf("%s client, %s, workers=%d: %w", [2]string{"go", "python"}[i], mode, w, err)
			}
			fmt.Printf("  %s client %s workers=%d: %d batches timed (%d read) in %.2fs: %.1f batches/s, %.0f edges/batch; CPU-s %.2f all, %.2f client\n",
				[2]string{"Go", "Python"}[i], mode, w, st.batches, st.total, st.wall, st.rate(),
				float64(st.edges)/float64(max(st.batches, 1)), st.cpu, st.client)
			if st.rate() > best[i].rate() || best[i].wall == 0 {
				best[i] = st
			}
		}
	}
	var cpuRate [2]float64
	for i, st := range best {
		if st.wall == 0 {
			continue
		}
		who := [2]string{"Go", "Python"}[i]
		target := ""
		if i == 1 {
			target = "≥0.9 × Go"
		}
		cpuRate[i] = perCPU(mode, st)
		emit(result{graph: graph, what: who + " client " + mode + " batches/s", workers: w, value: st.rate(),
			perCPU: cpuRate[i], unit: "batches/s", target: target})
		emit(result{graph: graph, what: who + " client " + mode + " edges/s", workers: w,
			value: float64(st.edges) / st.wall, unit: "edges/s"})
	}
	if best[0].wall > 0 && best[1].wall > 0 {
		r := result{graph: graph, what: "Python/Go " + mode, workers: w, value: best[1].rate() / best[0].rate(),
			unit: "ratio", target: "≥0.9"}
		if cpuRate[0] > 0 {
			r.perCPU = cpuRate[1] / cpuRate[0]
		}
		emit(r)
	}
	return nil
}

// perCPU is batches per CPU-second: end to end, batches over the CPU time
// of the client, the node and its samplers; prefilled, timed batches over
// the client's CPU time alone.
func perCPU(mode string, st clientStats) float64 {
	switch {
	case mode == "prefill" && st.client > 0:
		return float64(st.batches) / st.client
	case mode != "prefill" && st.cpu > 0:
		return float64(st.total) / st.cpu
	}
	return 0
}

// goLoader reads a loader through node/client and touches every section
// of every batch, as a training loop would.
func goLoader(socket string, o clientOpts) (clientStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts := client.DefaultOptions()
	opts.Split, opts.Fanouts, opts.BatchSize = "train", benchFanouts(), benchBatch
	opts.Shuffle, opts.Seed, opts.Epochs = true, benchSeed, max(o.epochs, 1)
	opts.Workers, opts.Concurrency, opts.RingSize = o.workers, o.concurrency, o.ringSize
	opts.Features, opts.Labels = true, true
	cpu0 := cpuSelf()
	l, err := client.OpenLoader(ctx, socket, opts)
	if err != nil {
		return clientStats{}, err
	}
	defer l.Close()
	want := l.BatchesPerEpoch() * opts.Epochs
	if o.batches > 0 {
		want = min(want, o.batches)
	}
	if o.prefill {
		if want, err = prefill(ctx, want, func() (uint64, error) {
			st, err := l.Stats(ctx)
			if err != nil {
				return 0, err
			}
			for _, ls := range st.Loaders {
				if ls.LoaderID == l.Info().LoaderID {
					return ls.Batches, nil
				}
			}
			return 0, nil
		}); err != nil {
			return clientStats{}, err
		}
	}
	var st clientStats
	var sink float64
	// Prefilled, every batch is timed; else the clock starts at the first
	// batch, so that the samplers' start-up is not timed.
	timed, t0, c0 := o.prefill, time.Now(), cpuSelf()
	for st.total < want {
		b, err := l.Next(ctx)
		if errors.Is(err, client.ErrEndOfEpoch) {
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, err
		}
		sink += touch(&b.View)
		st.total++
		if !timed {
			timed, t0, c0 = true, time.Now(), cpuSelf()
			continue
		}
		st.batches++
		st.edges += int64(b.Header.NumEdges)
	}
	st.wall, st.client = time.Since(t0).Seconds(), (cpuSelf() - c0).Seconds()
	if err := l.Close(); err != nil {
		return st, err
	}
	st.cpu = (cpuSelf() - cpu0).Seconds()
	if sink == 0.5 { // keep the sums alive
		fmt.Println(sink)
	}
	return st, nil
}

// prefill waits until the loader has written want batches, or its count
// stops growing (the ring is full), and returns how many batches are
// ready. "Stops growing" is no new batch for four times the mean time per
// batch so far (at least 2 s): on a loaded host a sampler may need more
// than a second per batch, and a fixed wait would stop too early.
func prefill(ctx context.Context, want int, written func() (uint64, error)) (int, error) {
	var last uint64
	t0 := time.Now()
	since := t0
	for {
		n, err := written()
		if err != nil {
			return 0, err
		}
		if int(n) >= want {
			return want, nil
		}
		now := time.Now()
		if n != last {
			last, since = n, now
		} else if n > 0 && now.Sub(since) > max(2*time.Second, 4*now.Sub(t0)/time.Duration(n)) {
			return int(n), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// touch reads every section of a batch: the sum of n_id, edge_index and
// y, and of x as numbers.
func touch(v *sample.View) float64 {
	var s int64
	for _, id := range v.NID {
		s += int64(id)
	}
	for _, e := range v.EdgeIndex {
		s += e
	}
	for _, y := range v.Y {
		s += y
	}
	f := float64(s)
	switch {
	case len(v.X) == 0:
	case v.Header.XType == sample.F32:
		// Sound: X views the mapped ring, where the section starts at a
		// multiple of 64 bytes and holds N×D float32 values (Decode checked
		// its length); the view is read only, and before Next is called again.
		x := unsafe.Slice((*float32)(unsafe.Pointer(&v.X[0])), len(v.X)/4)
		f += float64(sum32(x))
	default:
		var t uint64
		for _, h := range v.XF16() {
			t += uint64(h)
		}
		f += float64(t)
	}
	return f
}

// sum32 adds with eight independent accumulators (in registers), so
// that the loop runs at memory speed rather than at one add's latency.
func sum32(x []float32) float32 {
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		a0 += v[0]
		a1 += v[1]
		a2 += v[2]
		a3 += v[3]
		a4 += v[4]
		a5 += v[5]
		a6 += v[6]
		a7 += v[7]
	}
	for ; i < len(x); i++ {
		a0 += x[i]
	}
	return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
}

// ringFiles lists the ring files left in dir.
func ringFiles(dir string) ([]string, error) {
	return filepath.Glob(filepath.Join(dir, "*.ring"))
}
