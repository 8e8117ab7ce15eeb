package node

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRaiseOOMScoreAdj: the adjustment is raised by the amount asked,
// capped at the kernel's 1000, and a file that holds no number is an
// error naming it.
func TestRaiseOOMScoreAdj(t *testing.T) {
	for _, tc := range []struct {
		cur  string
		by   int
		want int
	}{
		{"0\n", 500, 500},
		{"-300\n", 500, 200},
		{"700\n", 500, 1000},
		{"1000\n", 500, 1000},
	} {
		path := filepath.Join(t.TempDir(), "oom_score_adj")
		if err := os.WriteFile(path, []byte(tc.cur), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := raiseOOMScoreAdj(path, tc.by)
		b, _ := os.ReadFile(path)
		if err != nil || got != tc.want || strings.TrimSpace(string(b)) != strconv.Itoa(tc.want) {
			t.Errorf("from %q by %d: %d, %v, file %q; want %d", strings.TrimSpace(tc.cur), tc.by, got, err, b, tc.want)
		}
	}
	path := filepath.Join(t.TempDir(), "oom_score_adj")
	os.WriteFile(path, []byte("lots\n"), 0o644)
	if _, err := raiseOOMScoreAdj(path, 1); err == nil || err.Error() != `node: oom_score_adj: `+path+` holds "lots", not a number` {
		t.Errorf("a file of no number: %v", err)
	}
}
