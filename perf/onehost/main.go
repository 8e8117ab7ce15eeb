// Command onehost measures one host's data path on one partition: the
// sampler in-process, the feature gather beside the machine's copy
// bandwidth, the shared-memory ring across two processes, and batches
// end to end through `node run` as the Go and the Python clients see them.
// perf/onehost/run.sh builds the graphs and calls it; README.md explains
// the numbers.
//
//	onehost sample  -part parts/part-0/part.csr [-seconds 10] [-workers 1,2]
//	onehost gather  -part parts/part-0/part.csr [-seconds 5]
//	onehost ring    [-seconds 5]
//	onehost client  -node ./node -parts parts [-python perf/onehost/bench_python.py]
//	onehost python  -node ./node -parts parts -python perf/onehost/bench_python.py
//	onehost table   results.tsv
//
// Every measurement prints a line "RESULT<TAB>graph<TAB>measurement<TAB>
// workers<TAB>value<TAB>per CPU-second<TAB>unit<TAB>target<TAB>reference";
// `table` turns those lines into the final table. Rates per CPU-second
// divide by the user+system CPU time of every process doing the work
// (getrusage, /proc/<pid>/stat), so they stay meaningful on a loaded host
// where wall-clock rates do not.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	// ONEHOST_CPUPROFILE=file profiles the whole subcommand (go tool pprof).
	if path := os.Getenv("ONEHOST_CPUPROFILE"); path != "" && cmd != ringProducerCmd {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "onehost: %v\n", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "onehost: %v\n", err)
			os.Exit(1)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	if err := run(cmd, args); err != nil {
		fmt.Fprintf(os.Stderr, "onehost %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func run(cmd string, args []string) error {
	var err error
	switch cmd {
	case "sample":
		err = sampleCmd(args)
	case "gather":
		err = gatherCmd(args)
	case "ring":
		err = ringCmd(args)
	case ringProducerCmd:
		err = ringProducer(args)
	case "client":
		err = clientCmd(args, true)
	case "python":
		err = clientCmd(args, false)
	case "table":
		err = tableCmd(args)
	default:
		usage()
	}
	return err
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: onehost sample|gather|ring|client|python|table [flags] (see -h of each)")
	os.Exit(2)
}

// result is one row of the final table.
type result struct {
	graph, what string
	workers     int
	value       float64 // wall-clock rate
	perCPU      float64 // rate per CPU-second; 0 when not measured
	unit        string
	target      string
	ref         string
}

// emit prints r as a RESULT line (parsed by `table`).
func emit(r result) {
	w := "-"
	if r.workers > 0 {
		w = strconv.Itoa(r.workers)
	}
	cpu := "-"
	if r.perCPU > 0 {
		cpu = num(r.perCPU)
	}
	fmt.Printf("RESULT\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
		r.graph, r.what, w, num(r.value), cpu, r.unit, dash(r.target), dash(r.ref))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// num formats a rate with three significant digits and an SI suffix.
func num(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.3gG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}

// tableCmd prints the RESULT lines of the given files (or stdin) as one
// aligned table.
func tableCmd(args []string) error {
	tw := tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "graph\tmeasurement\tworkers\tvalue (wall)\tper CPU-s\tunit\ttarget\tDGL / reference")
	read := func(f *os.File) error {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "RESULT\t"); ok {
				fmt.Fprintln(tw, rest)
			}
		}
		return sc.Err()
	}
	if len(args) == 0 {
		if err := read(os.Stdin); err != nil {
			return err
		}
	}
	for _, p := range args {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = read(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Flush()
}

// cpuSelf is this process's user+system CPU time.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuProc is the CPU time of process pid and of its children it has
// waited for (utime+stime+cutime+cstime of /proc/pid/stat): for the node,
// its own work and that of every sampler it reaped.
func cpuProc(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields after it start
	// behind its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime (fields 14-17)
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: field %d: %w", pid, k+3, err)
		}
		ticks += v
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(ticks) * time.Second / clkTck, nil
}

// intList parses "1,2" into []int.
func intList(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// loadAvg is /proc/loadavg's first three fields, for the log beside each
// measurement.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// newFlags is a FlagSet with the flags every subcommand shares.
func newFlags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	graph := fs.String("graph", "", "graph name for the table")
	return fs, graph
}
