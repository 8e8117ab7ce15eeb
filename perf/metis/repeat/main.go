// Command repeat partitions one METIS graph file several times in one
// process and prints, for every call of multilevel.Partition, its wall
// time, the page faults it took and the bytes it allocated. The first
// call runs on memory the process has never touched, as perf/metis's
// child does; later calls run on memory the collector has already
// freed, once the heap has grown enough for it to run. Comparing them
// separates what fresh pages cost a small partitioning from the work
// itself (perf/metis/README.md, "Cora").
//
//	go build -o /tmp/repeat ./perf/metis/repeat
//	/tmp/repeat /tmp/metis-compare/cora.metis 2 12
//	GOMAXPROCS=1 /tmp/repeat /tmp/metis-compare/cora.metis 2 12
//
// Arguments: GRAPH.metis K CALLS [SEED]. Workers are GOMAXPROCS.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"graphnode/partition/multilevel"
)

func main() {
	if len(os.Args) < 4 || len(os.Args) > 5 {
		fmt.Fprintln(os.Stderr, "usage: repeat GRAPH.metis K CALLS [SEED]")
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Args[1], os.Args[2], os.Args[3], os.Args[4:]); err != nil {
		fmt.Fprintln(os.Stderr, "repeat:", err)
		os.Exit(1)
	}
}

// run partitions the graph at path into kArg parts callsArg times
// (seed rest[0], default 1) and writes a line per call to w.
func run(w io.Writer, path, kArg, callsArg string, rest []string) error {
	k, err := strconv.Atoi(kArg)
	if err != nil || k < 1 {
		return fmt.Errorf("parts (K) %q: want a positive integer", kArg)
	}
	calls, err := strconv.Atoi(callsArg)
	if err != nil || calls < 1 {
		return fmt.Errorf("calls %q: want a positive integer", callsArg)
	}
	seed := uint64(1)
	if len(rest) == 1 {
		if seed, err = strconv.ParseUint(rest[0], 10, 64); err != nil {
			return fmt.Errorf("seed %q: want a non-negative integer", rest[0])
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	g, err := multilevel.ReadMETIS(context.Background(), f, path)
	f.Close()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %d vertices, %d edges, %d parts, seed %d, %d workers\n", path, g.NumVertices(), g.NumEdges(), k, seed, runtime.GOMAXPROCS(0))
	var ms runtime.MemStats
	for i := range calls {
		runtime.ReadMemStats(&ms)
		alloc0, gc0 := ms.TotalAlloc, ms.NumGC
		faults0 := minorFaults()
		t0 := time.Now()
		parts, err := multilevel.Partition(context.Background(), g, multilevel.Options{Parts: k, Seed: seed})
		wall := time.Since(t0)
		faults := minorFaults() - faults0
		if err != nil {
			return err
		}
		runtime.ReadMemStats(&ms)
		q, err := multilevel.Measure(g, parts, k)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "call %2d: %7.3f ms  %4d page faults  %5d KB allocated  %d collections  cut %d\n",
			i+1, float64(wall.Microseconds())/1000, faults, (ms.TotalAlloc-alloc0)/1000, ms.NumGC-gc0, q.EdgeCut)
	}
	return nil
}

// minorFaults is the process's minor page faults so far.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
}
