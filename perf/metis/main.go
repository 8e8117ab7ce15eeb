// Command metis compares multilevel.Partition with METIS's gpmetis on the
// same graphs: edge cut, communication volume, balance, wall time and
// peak memory. Both partitioners run as child processes under
// /usr/bin/time -v and read the same METIS graph file, so time and RSS
// are measured the same way; ours is perf/metis/child, built at start
// (see its doc). See README.md.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"graphnode/partition/multilevel"
)

func main() {
	work := flag.String("work", filepath.Join(os.TempDir(), "metis-compare"), "directory for graph and partition files")
	data := flag.String("data", "../shared/data", "dataset directory (cora/, blogcatalog/): ../shared/data beside the repository")
	graphs := flag.String("graphs", "cora,blogcatalog,rmat1m", "graphs: cora, blogcatalog, rmat1m, rmat2m")
	partsFlag := flag.String("parts", "2,4,8", "part counts")
	gpmetis := flag.String("gpmetis", "gpmetis", "gpmetis binary")
	seed := flag.Uint64("seed", 1, "seed of our partitioner")
	childBin := flag.String("child", "", "our partitioner's program (perf/metis/child); empty: built into -work with go build")
	gogc := flag.Int("gogc", 100, "GC percent of the measured child (GOGC; 100 is Go's default)")
	runs := flag.Int("runs", 1, "runs of each program per row, alternating; the table gives the median time and memory")
	balance := flag.String("balance", "nodes", "balance constraints of both partitioners: nodes, edges (degree), train (every 10th vertex), comma-separated")
	flag.Parse()
	if *runs < 1 {
		fmt.Fprintf(os.Stderr, "metis: -runs %d: want at least 1\n", *runs)
		os.Exit(2)
	}
	if err := run(*work, *data, strings.Split(*graphs, ","), *partsFlag, *gpmetis, *childBin, *seed, *gogc, *runs, strings.Split(*balance, ",")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// measured is one partitioner's result on one graph and part count.
type measured struct {
	q      multilevel.Quality
	wall   float64 // seconds, whole process, timed by this process around the child
	part   float64 // seconds, partitioning only (as the program reports it)
	cpu    float64 // seconds, user + system
	rssMiB float64
}

func run(work, data string, graphs []string, partsFlag, gpmetis, child string, seed uint64, gogc, runs int, balance []string) error {
	var ks []int
	for _, s := range strings.Split(partsFlag, ",") {
		k, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("metis: -parts %q: %w", partsFlag, err)
		}
		ks = append(ks, k)
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	if child == "" {
		child = filepath.Join(work, "metis-child")
		if err := buildChild(child); err != nil {
			return err
		}
	}
	tr := newTimeReport()
	var table []string
	table = append(table,
		"| graph | n | m | k | cut % ours | cut % gpmetis | cut ratio | comm vol ours | comm vol gpmetis | vol ratio | balance ours | balance gpmetis | wall s ours | wall s gpmetis | time ratio | part s ours | part s gpmetis | cpu s ours | cpu s gpmetis | RSS MiB ours | RSS MiB gpmetis | RSS ratio |",
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, name := range graphs {
		g, err := loadGraph(context.Background(), name, data)
		if err != nil {
			return err
		}
		file := filepath.Join(work, name+".metis")
		if !slices.Equal(balance, []string{"nodes"}) {
			if err := setBalance(g, balance); err != nil {
				return err
			}
			file = filepath.Join(work, name+"."+strings.Join(balance, "-")+".metis")
		}
		if err := writeMETIS(file, g); err != nil {
			return err
		}
		n, m := g.NumVertices(), g.NumEdges()
		fmt.Fprintf(os.Stderr, "%s: %d vertices, %d edges, %s\n", name, n, m, file)
		for _, k := range ks {
			oursOut := file + ".ours." + strconv.Itoa(k)
			var theirsRuns, oursRuns []measured
			for range runs {
				theirs, err := tr.measure(g, k, file+".part."+strconv.Itoa(k), "", gpmetis, file, strconv.Itoa(k))
				if err != nil {
					return err
				}
				ours, err := tr.measure(g, k, oursOut, "GOGC="+strconv.Itoa(gogc), child, file, strconv.Itoa(k), oursOut, strconv.FormatUint(seed, 10))
				if err != nil {
					return err
				}
				theirsRuns, oursRuns = append(theirsRuns, theirs), append(oursRuns, ours)
			}
			theirs, err := medianRun(theirsRuns)
			if err != nil {
				return fmt.Errorf("metis: %s into %d parts, gpmetis: %w", name, k, err)
			}
			ours, err := medianRun(oursRuns)
			if err != nil {
				return fmt.Errorf("metis: %s into %d parts, ours: %w", name, k, err)
			}
			pct := func(x measured) float64 { return 100 * float64(x.q.EdgeCut) / float64(m) }
			row := fmt.Sprintf("| %s | %d | %d | %d | %.2f | %.2f | %.3f | %d | %d | %.3f | %s | %s | %.3f | %.3f | %.2f | %.3f | %.3f | %.3f | %.3f | %.0f | %.0f | %.2f |",
				name, n, m, k, pct(ours), pct(theirs), ratio(ours.q.EdgeCut, theirs.q.EdgeCut),
				ours.q.CommVolume, theirs.q.CommVolume, ratio(ours.q.CommVolume, theirs.q.CommVolume),
				balanceText(ours.q.Balance), balanceText(theirs.q.Balance),
				ours.wall, theirs.wall, ours.wall/theirs.wall, ours.part, theirs.part, ours.cpu, theirs.cpu,
				ours.rssMiB, theirs.rssMiB, ours.rssMiB/theirs.rssMiB)
			fmt.Fprintln(os.Stderr, row)
			table = append(table, row)
		}
	}
	fmt.Println(strings.Join(table, "\n"))
	return nil
}

// setBalance gives g the vertex weights of the balance constraints kinds
// (multilevel.Weights over g's own rows, so "edges" weighs a
// vertex by its degree), with every 10th vertex a training seed.
func setBalance(g *multilevel.Graph, kinds []string) error {
	n := g.NumVertices()
	indptr := make([]uint64, n+1)
	for v := range n {
		indptr[v+1] = uint64(g.Xadj[v+1])
	}
	var train []uint32
	for v := 0; v < n; v += 10 {
		train = append(train, uint32(v))
	}
	vwgt, nc, err := multilevel.Weights(kinds, indptr, train)
	if err != nil {
		return fmt.Errorf("metis: -balance: %w", err)
	}
	g.Vwgt, g.Ncon = vwgt, nc
	return nil
}

// balanceText is the balance of every constraint, separated by slashes.
func balanceText(b []float64) string {
	parts := make([]string, len(b))
	for i, x := range b {
		parts[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return strings.Join(parts, "/")
}

// medianRun is the result of several runs of one program on one row:
// their partition (every run must give the same cut: both programs are
// deterministic for a seed) and the median of each time and of the peak
// RSS, each taken on its own. On a machine whose speed drifts, one run of
// a 100 ms partitioning is off by up to a fifth.
func medianRun(runs []measured) (measured, error) {
	res := runs[0]
	for _, x := range runs[1:] {
		if x.q.EdgeCut != res.q.EdgeCut {
			return measured{}, fmt.Errorf("runs cut %d and %d edges: not deterministic", res.q.EdgeCut, x.q.EdgeCut)
		}
	}
	med := func(f func(measured) float64) float64 {
		xs := make([]float64, len(runs))
		for i, x := range runs {
			xs[i] = f(x)
		}
		slices.Sort(xs)
		if n := len(xs); n%2 == 0 {
			return (xs[n/2-1] + xs[n/2]) / 2
		}
		return xs[len(xs)/2]
	}
	res.wall = med(func(x measured) float64 { return x.wall })
	res.part = med(func(x measured) float64 { return x.part })
	res.cpu = med(func(x measured) float64 { return x.cpu })
	res.rssMiB = med(func(x measured) float64 { return x.rssMiB })
	return res, nil
}

// ratio is ours a over gpmetis's b: below 1 ours is better. Where
// gpmetis cut nothing and ours did, ours is worse without bound: +Inf
// (the table prints "+Inf"), not 0, which read as the best possible.
func ratio(a, b int64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}

// timeReport reads what /usr/bin/time -v and the partitioners print.
// Only the parent builds one, once: as package variables the
// expressions were compiled at start-up by the measured child too, this
// same program, which has no use for them.
type timeReport struct{ rss, part, user, sys *regexp.Regexp }

func newTimeReport() *timeReport {
	return &timeReport{
		rss:  regexp.MustCompile(`Maximum resident set size \(kbytes\): (\d+)`),
		part: regexp.MustCompile(`Partitioning:\s+([0-9.]+) sec`),
		user: regexp.MustCompile(`User time \(seconds\): ([0-9.]+)`),
		sys:  regexp.MustCompile(`System time \(seconds\): ([0-9.]+)`),
	}
}

// buildChild builds perf/metis/child, our partitioner's program, into
// path (stripped, as a release build would be; its symbol table is not
// mapped, so this changes its size on disk, not what it holds in memory).
func buildChild(path string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s", "-o", path, "graphnode/perf/metis/child")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("metis: go build perf/metis/child: %w\n%s", err, out)
	}
	return nil
}

// measure runs argv under /usr/bin/time -v, with env added to the
// environment, then reads and measures the partition file it wrote.
func (tr *timeReport) measure(g *multilevel.Graph, k int, partFile, env string, argv ...string) (measured, error) {
	cmd := exec.Command("/usr/bin/time", append([]string{"-v"}, argv...)...)
	if env != "" {
		cmd.Env = append(os.Environ(), env)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// /usr/bin/time prints wall time in hundredths of a second, too
	// coarse for the small graphs: the wall time is taken here, and so
	// includes starting /usr/bin/time (about a millisecond, the same
	// for both programs).
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return measured{}, fmt.Errorf("metis: %s: %w\n%s", strings.Join(argv, " "), err, out.String())
	}
	res := measured{wall: time.Since(start).Seconds()}
	text := out.String()
	if mm := tr.rss.FindStringSubmatch(text); mm != nil {
		kb, _ := strconv.ParseFloat(mm[1], 64)
		res.rssMiB = kb / 1024
	}
	for _, re := range []*regexp.Regexp{tr.user, tr.sys} {
		if mm := re.FindStringSubmatch(text); mm != nil {
			x, _ := strconv.ParseFloat(mm[1], 64)
			res.cpu += x
		}
	}
	if mm := tr.part.FindStringSubmatch(text); mm != nil {
		res.part, _ = strconv.ParseFloat(mm[1], 64)
	}
	parts, err := readParts(partFile, g.NumVertices())
	if err != nil {
		return measured{}, err
	}
	res.q, err = multilevel.Measure(g, parts, k)
	return res, err
}
