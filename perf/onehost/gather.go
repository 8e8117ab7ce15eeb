package main

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"
	"time"

	"graphnode/sample"
)

// gatherIDs is the number of ids per Gather call: the size of a
// products-scale batch's n_id.
const gatherIDs = 100_000

func gatherCmd(args []string) error {
	fs, graph := newFlags("gather")
	part := fs.String("part", "", "part.csr whose features are gathered (required)")
	seconds := fs.Float64("seconds", 5, "duration of each measurement")
	workers := fs.String("workers", "1,2", "goroutines")
	bufMiB := fs.Int("copy-mib", 1024, "size of each buffer of the copy and random-read measurements, MiB")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ws, err := intList(*workers)
	if err != nil {
		return err
	}
	d := time.Duration(*seconds * float64(time.Second))
	g, p, _, err := openPart(*part)
	if err != nil {
		return err
	}
	defer g.Close()
	row := p.Schema().RowBytes()
	if row == 0 {
		return fmt.Errorf("%s has no features", *part)
	}
	feat := p.FeatBlock()
	for i := 0; i < len(feat); i += 4096 { // warm the mapping, as a running node's is
		_ = feat[i]
	}
	fmt.Printf("gather %s: %d rows of %d B (%.2f GB), %d ids per call, load %s\n",
		*part, g.NumNodes(), row, float64(len(feat))/1e9, gatherIDs, loadAvg())
	src := sample.NewLocalSource(p)
	start, n := p.Start(), p.End()-p.Start()
	for _, w := range ws {
		rows, wall, cpu, err := parallel(w, d, func(i int) (func() (int, error), error) {
			r := rand.New(rand.NewPCG(uint64(i), 42))
			sets := make([][]uint64, 4)
			for k := range sets {
				sets[k] = make([]uint64, gatherIDs)
				for j := range sets[k] {
					sets[k][j] = start + r.Uint64N(n)
				}
			}
			dst := make([]byte, gatherIDs*row)
			k := 0
			return func() (int, error) {
				k++
				return gatherIDs, src.Gather(context.Background(), sets[k%len(sets)], dst)
			}, nil
		})
		if err != nil {
			return err
		}
		emit(result{graph: *graph, what: "gather rows/s", workers: w, value: rows / wall, perCPU: rows / cpu,
			unit: fmt.Sprintf("rows/s (%d B)", row), target: "≥4M per CPU-s", ref: dglRef(*graph, "gather rows/s", w)})
		emit(result{graph: *graph, what: "gather GB/s", workers: w, value: rows * float64(row) / wall,
			perCPU: rows * float64(row) / cpu, unit: "B/s"})
	}
	return machineCmd(*graph, ws, d, *bufMiB<<20)
}

// machineCmd measures what the gather is up against: a large memmove
// (copy bandwidth) and independent random 8-byte reads over a table far
// larger than the caches.
func machineCmd(graph string, ws []int, d time.Duration, size int) error {
	a, b := make([]uint64, size/8), make([]uint64, size/8)
	for i := range a { // fault in both, and give a non-zero content
		a[i] = uint64(i)
	}
	copy(b, a)
	for _, w := range ws {
		chunk := len(a) / w
		bytes, wall, cpu, err := parallel(w, d, func(i int) (func() (int, error), error) {
			s, t := a[i*chunk:(i+1)*chunk], b[i*chunk:(i+1)*chunk]
			return func() (int, error) { return 8 * copy(t, s), nil }, nil
		})
		if err != nil {
			return err
		}
		emit(result{graph: graph, what: "memmove GB/s", workers: w, value: bytes / wall, perCPU: bytes / cpu,
			unit: "B/s", ref: fmt.Sprintf("%d MiB buffers", size>>20)})
	}
	table, tn := a, uint64(len(a))
	// Independent reads (the next address does not wait for the last
	// load: what a gather of known ids does) and dependent ones (each
	// address needs the value just read: a pointer chase, latency bound).
	for _, dep := range []bool{false, true} {
		what, ref := "random 8 B reads/s", "~20M per core (issue)"
		if dep {
			what, ref = "dependent 8 B reads/s", "memory latency bound"
		}
		for _, w := range ws {
			var sink [64]uint64
			reads, wall, cpu, err := parallel(w, d, func(i int) (func() (int, error), error) {
				x := uint64(i)*0x9E3779B97F4A7C15 + 1
				return func() (int, error) {
					const n = 1 << 16
					var s uint64
					// Two loops, not one with a branch: the compiler would
					// turn the branch into a conditional move, which makes
					// every address depend on the last load.
					if dep {
						for range n {
							x ^= x << 13
							x ^= x >> 7
							x ^= x << 17
							hi, _ := bits.Mul64(x^s, tn) // uniform in [0, len(table))
							s += table[hi]
						}
					} else {
						for range n {
							x ^= x << 13
							x ^= x >> 7
							x ^= x << 17
							hi, _ := bits.Mul64(x, tn)
							s += table[hi]
						}
					}
					sink[i*8] += s
					return n, nil
				}, nil
			})
			if err != nil {
				return err
			}
			emit(result{graph: graph, what: what, workers: w, value: reads / wall, perCPU: reads / cpu,
				unit: "reads/s", ref: ref})
		}
	}
	return nil
}

// parallel runs w goroutines for d, each calling the step that mk(i)
// built until the deadline, and returns the units the steps reported,
// the wall time and this process's CPU time over the run.
func parallel(w int, d time.Duration, mk func(i int) (func() (int, error), error)) (units, wall, cpu float64, err error) {
	steps := make([]func() (int, error), w)
	for i := range steps {
		if steps[i], err = mk(i); err != nil {
			return 0, 0, 0, err
		}
		if _, err = steps[i](); err != nil { // untimed first step: warm dst
			return 0, 0, 0, err
		}
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
	cpu0, t0 := cpuSelf(), time.Now()
	deadline := t0.Add(d)
	for _, step := range steps {
		wg.Go(func() {
			n := 0
			var serr error
			for time.Now().Before(deadline) {
				k, e := step()
				if e != nil {
					serr = e
					break
				}
				n += k
			}
			mu.Lock()
			total += n
			if err == nil {
				err = serr
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	wall = time.Since(t0).Seconds()
	cpu = (cpuSelf() - cpu0).Seconds()
	return float64(total), wall, cpu, err
}
