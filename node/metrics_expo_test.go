package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"graphnode/node/client"
)

// exposition is a scrape parsed by parseExposition: every series (name
// and labels in order of appearance) with its value, and every family's
// type.
type exposition struct {
	values map[string]float64 // series -> value
	types  map[string]string  // family -> type
}

var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseExposition reads text strictly by the Prometheus text format
// 0.0.4 and what a scraper may assume of it: each family has one HELP
// and one TYPE, both before its samples, which are contiguous; names and
// label names are valid; label values use only the escapes \\, \" and
// \n; no series repeats; counters end in _total; each histogram series
// has cumulative buckets ending in le="+Inf" equal to its _count, and a
// _sum. It returns every problem found.
func parseExposition(text string) (*exposition, []error) {
	e := &exposition{values: map[string]float64{}, types: map[string]string{}}
	var errs []error
	bad := func(n int, format string, a ...any) {
		errs = append(errs, fmt.Errorf("line %d: "+format, append([]any{n}, a...)...))
	}
	help := map[string]bool{}
	done := map[string]bool{} // families whose samples ended
	current := ""
	type hist struct {
		buckets  []float64 // le bounds in order
		counts   []float64
		count    float64
		sum      bool
		hasCount bool
	}
	hists := map[string]*hist{}
	var histOrder []string
	if !strings.HasSuffix(text, "\n") {
		errs = append(errs, fmt.Errorf("the exposition does not end in a newline"))
	}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		n := i + 1
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			kw, rest, _ := strings.Cut(rest, " ")
			name, arg, _ := strings.Cut(rest, " ")
			switch kw {
			case "HELP":
				if !metricNameRE.MatchString(name) {
					bad(n, "HELP of invalid name %q", name)
				}
				if help[name] {
					bad(n, "second HELP for %s", name)
				}
				if _, ok := e.types[name]; ok || done[name] {
					bad(n, "HELP for %s after its TYPE or samples", name)
				}
				for j := 0; j < len(arg); j++ {
					if arg[j] == '\\' {
						if j+1 >= len(arg) || (arg[j+1] != '\\' && arg[j+1] != 'n') {
							bad(n, "HELP of %s: invalid escape", name)
						}
						j++
					}
				}
				help[name] = true
			case "TYPE":
				if !metricNameRE.MatchString(name) {
					bad(n, "TYPE of invalid name %q", name)
				}
				if _, ok := e.types[name]; ok {
					bad(n, "second TYPE for %s", name)
				}
				if done[name] || current == name {
					bad(n, "TYPE for %s after its samples", name)
				}
				if !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, arg) {
					bad(n, "TYPE %q of %s", arg, name)
				}
				if arg == "counter" && !strings.HasSuffix(name, "_total") {
					bad(n, "counter %s does not end in _total", name)
				}
				if !help[name] {
					bad(n, "TYPE of %s without a HELP before it", name)
				}
				e.types[name] = arg
				if current != "" {
					done[current] = true
				}
				current = name
			}
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		series, value, labels, err := parseSample(line)
		if err != nil {
			bad(n, "%v", err)
			continue
		}
		name := series
		if j := strings.IndexByte(series, '{'); j >= 0 {
			name = series[:j]
		}
		family := name
		if _, ok := e.types[name]; !ok {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if f, ok := strings.CutSuffix(name, suf); ok && e.types[f] == "histogram" {
					family = f
				}
			}
		}
		if _, ok := e.types[family]; !ok {
			bad(n, "sample %s without a TYPE before it", series)
		} else if family != current {
			bad(n, "sample %s of family %s after another family's TYPE (%s)", series, family, current)
		}
		if _, dup := e.values[series]; dup {
			bad(n, "series %s repeats", series)
		}
		e.values[series] = value
		if e.types[family] != "histogram" {
			continue
		}
		var key []string
		le := ""
		for j := 0; j+1 < len(labels); j += 2 {
			if labels[j] == "le" {
				le = labels[j+1]
				continue
			}
			key = append(key, labels[j]+"="+strconv.Quote(labels[j+1]))
		}
		k := family + "{" + strings.Join(key, ",") + "}"
		h := hists[k]
		if h == nil {
			h = &hist{}
			hists[k] = h
			histOrder = append(histOrder, k)
		}
		switch name {
		case family + "_bucket":
			b, err := strconv.ParseFloat(le, 64)
			if le == "" || err != nil {
				bad(n, "bucket %s: le %q", series, le)
				continue
			}
			if len(h.buckets) > 0 && b <= h.buckets[len(h.buckets)-1] {
				bad(n, "bucket %s: le not increasing", series)
			}
			if len(h.counts) > 0 && value < h.counts[len(h.counts)-1] {
				bad(n, "bucket %s: %g below the bucket before (%g): not cumulative", series, value, h.counts[len(h.counts)-1])
			}
			h.buckets, h.counts = append(h.buckets, b), append(h.counts, value)
		case family + "_sum":
			h.sum = true
		case family + "_count":
			h.count, h.hasCount = value, true
		}
	}
	for _, k := range histOrder {
		h := hists[k]
		switch {
		case len(h.buckets) == 0 || !math.IsInf(h.buckets[len(h.buckets)-1], 1):
			errs = append(errs, fmt.Errorf("histogram %s: no le=\"+Inf\" bucket", k))
		case !h.hasCount || h.counts[len(h.counts)-1] != h.count:
			errs = append(errs, fmt.Errorf("histogram %s: +Inf bucket %g, _count %g", k, h.counts[len(h.counts)-1], h.count))
		}
		if !h.sum {
			errs = append(errs, fmt.Errorf("histogram %s: no _sum", k))
		}
	}
	return e, errs
}

// parseSample reads one sample line: the series (name and labels, as
// written), its value and its labels as name, value pairs (unescaped).
func parseSample(line string) (series string, v float64, labels []string, err error) {
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return "", 0, nil, fmt.Errorf("sample %q without a value", line)
	}
	name := line[:i]
	if !metricNameRE.MatchString(name) {
		return "", 0, nil, fmt.Errorf("invalid metric name %q", name)
	}
	rest := line[i:]
	seen := map[string]bool{}
	if rest[0] == '{' {
		j := 1
		for {
			if j < len(rest) && rest[j] == '}' {
				j++
				break
			}
			k := strings.IndexByte(rest[j:], '=')
			if k < 0 {
				return "", 0, nil, fmt.Errorf("%s: label without '='", name)
			}
			ln := rest[j : j+k]
			if !labelNameRE.MatchString(ln) || strings.HasPrefix(ln, "__") {
				return "", 0, nil, fmt.Errorf("%s: invalid label name %q", name, ln)
			}
			if seen[ln] {
				return "", 0, nil, fmt.Errorf("%s: label %s twice", name, ln)
			}
			seen[ln] = true
			j += k + 1
			if j >= len(rest) || rest[j] != '"' {
				return "", 0, nil, fmt.Errorf("%s: label %s: value not quoted", name, ln)
			}
			j++
			var val strings.Builder
			for {
				if j >= len(rest) {
					return "", 0, nil, fmt.Errorf("%s: label %s: unterminated value", name, ln)
				}
				c := rest[j]
				if c == '"' {
					j++
					break
				}
				if c == '\n' {
					return "", 0, nil, fmt.Errorf("%s: label %s: raw newline", name, ln)
				}
				if c == '\\' {
					if j+1 >= len(rest) {
						return "", 0, nil, fmt.Errorf("%s: label %s: dangling backslash", name, ln)
					}
					switch rest[j+1] {
					case '\\':
						val.WriteByte('\\')
					case '"':
						val.WriteByte('"')
					case 'n':
						val.WriteByte('\n')
					default:
						return "", 0, nil, fmt.Errorf("%s: label %s: invalid escape \\%c", name, ln, rest[j+1])
					}
					j += 2
					continue
				}
				val.WriteByte(c)
				j++
			}
			labels = append(labels, ln, val.String())
			if j < len(rest) && rest[j] == ',' {
				j++
			}
		}
		series = name + rest[:j]
		rest = rest[j:]
	} else {
		series = name
	}
	f := strings.Fields(rest)
	if len(rest) == 0 || rest[0] != ' ' || len(f) < 1 || len(f) > 2 {
		return "", 0, nil, fmt.Errorf("%s: want one space, a value and an optional timestamp, got %q", series, rest)
	}
	v, err = strconv.ParseFloat(f[0], 64)
	if err != nil {
		return "", 0, nil, fmt.Errorf("%s: value %q", series, f[0])
	}
	return series, v, labels, nil
}

// counterSeries reports whether series belongs to a family that must
// never go down: a counter, or a histogram's buckets, _sum and _count.
func (e *exposition) counterSeries(series string) bool {
	name, _, _ := strings.Cut(series, "{")
	if e.types[name] == "counter" {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(name, suf); ok && e.types[f] == "histogram" {
			return true
		}
	}
	return false
}

// The endpoint of a node of a two-node cluster, scraped while loaders
// read batches (a sampler killed among them, loaders closed and opened
// again), is a valid exposition every time, its counters never go down,
// and once everything is quiet it says what the trainer read and what
// the control socket's stats say.
func TestMetricsExpositionUnderLoad(t *testing.T) {
	parts := clusterPartsCached(t, 2, 0.2)
	var listen [2]string
	for p := range listen {
		listen[p] = freeTCP(t)
	}
	c := startClusterWith(t, parts, 2, "3s", func(p int) string { return fmt.Sprintf("[metrics]\nlisten = %q\n", listen[p]) })
	last := [2]*exposition{}
	scrape := func(p int) *exposition {
		t.Helper()
		resp, err := http.Get("http://" + listen[p] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %v, status %d", err, resp.StatusCode)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
			t.Errorf("Content-Type %q", ct)
		}
		e, errs := parseExposition(string(body))
		for _, err := range errs {
			t.Errorf("node %d: %v", p, err)
		}
		if prev := last[p]; prev != nil {
			for s, v := range prev.values {
				if now, ok := e.values[s]; ok && prev.counterSeries(s) && now < v {
					t.Errorf("node %d: counter %s went down from %g to %g", p, s, v, now)
				}
			}
		}
		last[p] = e
		return e
	}
	scrape(0)
	scrape(1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := baseOptions()
	o.Epochs = 1
	o.Workers = 2
	var batches, edges int
	read := func() {
		l, err := client.OpenLoader(ctx, c.sockets[0], o)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for i := 0; ; i++ {
			b, err := l.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if errors.Is(err, client.ErrEndOfEpoch) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			batches++
			edges += len(b.Row())
			if i%3 == 0 {
				scrape(0)
				scrape(1)
			}
		}
	}
	// Once the samplers have exited and reported, the endpoint says what
	// the stats say, and both ends of the mesh count the same requests.
	// A sampler killed outright cannot report its last calls (up to
	// 100 ms of them): the ends are compared only before one is.
	check := func(killed bool) {
		t.Helper()
		eventually(t, 10*time.Second, "every batch read counted", func() bool {
			e := scrape(0)
			return e.values["graphnode_loaders_open"] == 0 && e.values["graphnode_sampled_edges_total"] >= float64(edges)
		})
		time.Sleep(300 * time.Millisecond)
		st, st1 := stats(t, ctx, c.sockets[0]), stats(t, ctx, c.sockets[1])
		e, e1 := scrape(0), scrape(1)
		t.Logf("read %d batches, %d edges; node 0 says %g batches, %g edges", batches, edges,
			e.values["graphnode_batches_total"], e.values["graphnode_sampled_edges_total"])
		for _, cmp := range []struct {
			series string
			stats  uint64
		}{
			{"graphnode_batches_total", st.Batches},
			{"graphnode_sampled_edges_total", st.SampledEdges},
			{"graphnode_sampler_failures_total", st.Failures},
			{"graphnode_loaders_opened_total", st.Opened},
			{"graphnode_cache_hits_total", st.CacheHits},
			{"graphnode_cache_misses_total", st.CacheMisses},
			{`graphnode_mesh_requests_total{peer="host1",part="1",dir="out"}`, peerTraffic(st, "host1", false).Requests},
			{`graphnode_mesh_requests_total{peer="host1",part="1",dir="in"}`, peerTraffic(st, "host1", true).Requests},
			{`graphnode_mesh_requests_total{peer="host0",part="0",dir="in"}`, peerTraffic(st1, "host0", true).Requests},
		} {
			ex := e
			if strings.Contains(cmp.series, `peer="host0"`) {
				ex = e1
			}
			if got := ex.values[cmp.series]; got != float64(cmp.stats) {
				t.Errorf("%s = %g, stats say %d", cmp.series, got, cmp.stats)
			}
		}
		if e.values["graphnode_cache_hits_total"] == 0 || e.values["graphnode_cache_misses_total"] == 0 {
			t.Errorf("cache hits %g, misses %g: want both counted", e.values["graphnode_cache_hits_total"], e.values["graphnode_cache_misses_total"])
		}
		out := e.values[`graphnode_mesh_requests_total{peer="host1",part="1",dir="out"}`]
		if got := e.values[`graphnode_mesh_request_duration_seconds_count{peer="host1",part="1",dir="out"}`]; got != out {
			t.Errorf("histogram _count %g, requests %g", got, out)
		}
		if in := e1.values[`graphnode_mesh_requests_total{peer="host0",part="0",dir="in"}`]; !killed && out != in {
			t.Errorf("node 0 counts %g requests to host1, host1 %g from host0", out, in)
		}
	}
	read()
	check(false)
	// A loader whose sampler is killed: one failure, counters kept.
	l, err := client.OpenLoader(ctx, c.sockets[0], baseOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Next(ctx); err != nil {
		t.Fatal(err)
	}
	st := stats(t, ctx, c.sockets[0])
	c.note(st)
	pids := samplerPIDs(st)
	if len(pids) == 0 {
		t.Fatal("no sampler listed")
	}
	syscall.Kill(pids[0], syscall.SIGKILL)
	eventually(t, 10*time.Second, "the failure counted", func() bool {
		return scrape(0).values["graphnode_sampler_failures_total"] == 1
	})
	l.Close()
	scrape(0)
	read()
	check(true)
}

// parseExposition refuses what a scraper would: each case breaks one
// rule.
func TestParseExpositionRefuses(t *testing.T) {
	const ok = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"q\\\"\\\\\\n\"} 1\n" +
		"# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.3\nh_count 2\n"
	if _, errs := parseExposition(ok); len(errs) > 0 {
		t.Fatalf("a valid exposition refused: %v", errs)
	}
	for _, c := range []struct{ name, text, want string }{
		{"no HELP", "# TYPE a gauge\na 1\n", "without a HELP"},
		{"TYPE twice", "# HELP a A.\n# TYPE a gauge\n# TYPE a gauge\na 1\n", "second TYPE"},
		{"sample first", "a 1\n# HELP a A.\n# TYPE a gauge\n", "without a TYPE"},
		{"counter name", "# HELP a A.\n# TYPE a counter\na 1\n", "does not end in _total"},
		{"escape", "# HELP a A.\n# TYPE a gauge\na{x=\"\\t\"} 1\n", "invalid escape"},
		{"label name", "# HELP a A.\n# TYPE a gauge\na{1x=\"\"} 1\n", "invalid label name"},
		{"duplicate", "# HELP a A.\n# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n", "repeats"},
		{"interleaved", "# HELP a A.\n# TYPE a gauge\n# HELP b B.\n# TYPE b gauge\nb 1\na 1\n", "after another family"},
		{"not cumulative", "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 0\nh_count 1\n", "not cumulative"},
		{"count", "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 0\nh_count 3\n", "_count 3"},
		{"no +Inf", "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 0\nh_count 2\n", "no le=\"+Inf\""},
		{"no sum", "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n", "no _sum"},
	} {
		_, errs := parseExposition(c.text)
		if !strings.Contains(fmt.Sprint(errs), c.want) {
			t.Errorf("%s: %v, want %q", c.name, errs, c.want)
		}
	}
}
