package node

import (
	"io"
	"slices"
	"strings"
	"testing"
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
