package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestFanoutOverInt32: a fanout past 2^31-1, which the loaders refuse
// (the mesh carries a fanout as an int32), is a bad flag of every
// command that takes fanouts, refused before any work. node train met it
// once connected (the dial error came first), node demo once it had
// generated, partitioned and started its cluster, in a trainer's
// open_loader.
func TestFanoutOverInt32(t *testing.T) {
	in := writeEdgeList(t, 12)
	const over = `hop 1 is 99999999999, over 2147483647: -1 takes every neighbour`
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"partition", []string{"partition", "--input", in, "--parts", "2", "--fanouts", "99999999999,3", "-o", filepath.Join(t.TempDir(), "parts")},
			`node partition: --fanouts "99999999999,3": ` + over},
		{"inspect", []string{"inspect", filepath.Join(t.TempDir(), "missing"), "--fanouts", "99999999999"},
			`node inspect: --fanouts "99999999999": ` + over},
		{"train", []string{"train", "--socket", "/nonexist", "--fanouts", "99999999999,3"},
			`node train: --fanouts "99999999999,3": ` + over},
		{"train/eval", []string{"train", "--socket", "/nonexist", "--fanouts", "5,3", "--eval-fanouts", "5,2147483648"},
			`node train: --eval-fanouts "5,2147483648": hop 2 is 2147483648, over 2147483647: -1 takes every neighbour`},
		// Past int64 too: it was "not an integer".
		{"train/past-int64", []string{"train", "--socket", "/nonexist", "--fanouts", "5,99999999999999999999"},
			`node train: --fanouts "5,99999999999999999999": hop 2 is 99999999999999999999, over 2147483647: -1 takes every neighbour`},
		// Negative past int64: it named int64's bound, not what was typed.
		{"partition/negative-past-int64", []string{"partition", "--input", in, "--parts", "2", "--fanouts", "-99999999999999999999", "-o", filepath.Join(t.TempDir(), "parts")},
			`node partition: --fanouts "-99999999999999999999": hop 1 is -99999999999999999999: want -1 (all) or a count ≥ 0`},
		{"demo", []string{"demo", "--fanouts", "99999999999,5", "--nodes", "2000", "--epochs", "1", "--workdir", filepath.Join(t.TempDir(), "w")},
			`node demo: --fanouts "99999999999,5": ` + over},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runNode(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Fatalf("code %d, stderr:\n%s\nwant code 2 and %q", code, stderr, tt.want)
			}
			for _, work := range []string{"dial", "generated", "read ", "wrote"} {
				if strings.Contains(stdout+stderr, work) {
					t.Errorf("work began (%q):\nstdout:\n%s\nstderr:\n%s", work, stdout, stderr)
				}
			}
		})
	}
	// 2^31-1 itself is a count the loaders take.
	if _, err := parseLoaderFanouts("--fanouts", "2147483647,-1"); err != nil {
		t.Errorf("2147483647,-1: %v", err)
	}
}
