// Command child is the program perf/metis measures against gpmetis: it
// reads a METIS graph file, partitions it with multilevel.Partition and
// writes the partition as gpmetis does (one part per line), nothing
// else, so that its wall time and peak RSS are those of the partitioner
// and of a Go program that reads and writes the same files, as gpmetis's
// are those of METIS and of a C program. It links the standard library
// and graphnode/partition/multilevel only (no fmt, no flag): the other
// packages of graphnode would cost it ~0.75 MiB of resident binary and
// ~0.6 ms of start-up on Cora-sized runs.
//
//	child GRAPH.metis K OUT [SEED]
//
// It prints, like gpmetis, the time it read and the time it partitioned
// ("Partitioning: 0.012 sec"), and the edge cut. The collector runs at
// Go's default GC percent unless the environment's GOGC says otherwise.
// With CHILD_STATUS=1 in its environment it also prints, as it exits,
// /proc/self/status, whose VmHWM (the peak), RssAnon (heap and stacks)
// and RssFile (the binary) split what /usr/bin/time's peak does not.
package main

import (
	"context"
	"os"
	"strconv"
	"time"

	"graphnode/partition/multilevel"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		os.Stderr.WriteString("child: " + err.Error() + "\n")
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 3 || len(args) > 4 {
		os.Stderr.WriteString("usage: child GRAPH.metis K OUT [SEED]\n")
		os.Exit(2)
	}
	k, err := strconv.Atoi(args[1])
	if err != nil || k < 1 {
		return errorString("K " + strconv.Quote(args[1]) + ": want a positive integer")
	}
	seed := uint64(1)
	if len(args) == 4 {
		if seed, err = strconv.ParseUint(args[3], 10, 64); err != nil {
			return errorString("SEED " + strconv.Quote(args[3]) + ": want a non-negative integer")
		}
	}
	t0 := time.Now()
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	g, err := multilevel.ReadMETIS(context.Background(), f, args[0])
	f.Close()
	if err != nil {
		return err
	}
	t1 := time.Now()
	parts, err := multilevel.Partition(context.Background(), g, multilevel.Options{Parts: k, Seed: seed})
	if err != nil {
		return err
	}
	t2 := time.Now()
	out := make([]byte, 0, 3*len(parts))
	for _, p := range parts {
		out = strconv.AppendUint(out, uint64(p), 10)
		out = append(out, '\n')
	}
	if err := os.WriteFile(args[2], out, 0o644); err != nil {
		return err
	}
	report := "read " + seconds(t1.Sub(t0)) + " sec\nPartitioning: " + seconds(t2.Sub(t1)) + " sec\n"
	if q, err := multilevel.Measure(g, parts, k); err == nil {
		report += "edge cut " + strconv.FormatInt(q.EdgeCut, 10) + " of " + strconv.FormatInt(g.NumEdges(), 10) + " edges\n"
	}
	if os.Getenv("CHILD_STATUS") == "1" {
		report += memoryStatus()
	}
	os.Stdout.WriteString(report)
	return nil
}

// memoryStatus is /proc/self/status (grep VmHWM, the peak, RssAnon and
// RssFile), or a line saying why it could not be read.
func memoryStatus() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "status: " + err.Error() + "\n"
	}
	return string(b)
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

type errorString string

func (e errorString) Error() string { return string(e) }
