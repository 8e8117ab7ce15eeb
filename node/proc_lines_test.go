package node

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"weak"
)

// TestReadLines: every line reaches apply, a line over the limit is
// skipped and counted, and the lines after it still count.
func TestReadLines(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // longer than the reader's 64 KiB buffer
	in := "progress 1 0 10\n" + "mesh " + long + "\n" + "progress 2 0 20\n\n" + "last"
	for _, tc := range []struct {
		max     int
		want    []string
		skipped int
	}{
		{max: 1 << 20, want: []string{"progress 1 0 10", "mesh " + long, "progress 2 0 20", "", "last"}},
		{max: 1 << 10, want: []string{"progress 1 0 10", "progress 2 0 20", "", "last"}, skipped: 1},
		{max: len("mesh ") + len(long), want: []string{"progress 1 0 10", "mesh " + long, "progress 2 0 20", "", "last"}},
		{max: len("mesh ") + len(long) - 1, want: []string{"progress 1 0 10", "progress 2 0 20", "", "last"}, skipped: 1},
	} {
		var got []string
		skipped, err := readLines(strings.NewReader(in), tc.max, func(l string) { got = append(got, l) })
		if err != nil || skipped != tc.skipped || !slices.Equal(got, tc.want) {
			t.Errorf("max %d: skipped %d, err %v, %d lines %.40q; want skipped %d, %d lines", tc.max, skipped, err, len(got), got, tc.skipped, len(tc.want))
		}
	}
}

// TestReadLinesNeverBlocksTheWriter: a writer of many over-long lines
// through a pipe finishes, as a sampler must.
func TestReadLinesNeverBlocksTheWriter(t *testing.T) {
	r, w := io.Pipe()
	go func() {
		line := []byte(strings.Repeat("y", 100<<10) + "\n")
		for i := 0; i < 50; i++ {
			w.Write(line)
		}
		w.Write([]byte("progress 9 1 90\n"))
		w.Close()
	}()
	var got []string
	skipped, err := readLines(r, 1<<10, func(l string) { got = append(got, l) })
	if err != nil || skipped != 50 || !slices.Equal(got, []string{"progress 9 1 90"}) {
		t.Errorf("skipped %d, err %v, lines %q", skipped, err, got)
	}
}

// TestStartProcKeepsNoSpec: a sampler gets its whole spec on stdin, and
// the node keeps no copy once it is read. Given as the command's Stdin
// reader, every spec (up to 64 MiB: a cluster's split is in each) stayed
// in the node's memory for as long as its sampler ran.
func TestStartProcKeepsNoSpec(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "node")
	got := filepath.Join(dir, "spec-bytes")
	script := "#!/bin/sh\nwc -c > " + got + ".tmp && mv " + got + ".tmp " + got + "\nexec sleep 60\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	n := &Node{cfg: DefaultConfig(), log: slog.New(slog.DiscardHandler), gid: -1, Executable: exe, SamplerStderr: io.Discard}
	spec := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
	size := len(spec)
	held := weak.Make(&spec[0])
	p, err := n.startProc(&loader{id: 1}, 0, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop(0)
	spec = nil
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(got)
		if err == nil {
			if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n != size {
				t.Fatalf("the sampler read %s bytes of its spec, want %d", b, size)
			}
			runtime.GC()
			if held.Value() == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: the sampler's spec is still in the node's memory (read by the sampler: %v)", err == nil)
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(p)
}
