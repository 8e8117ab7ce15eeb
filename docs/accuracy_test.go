package docs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const (
	// accuracySlack is how far a test accuracy may lie from the one the
	// tutorial quotes: floating-point sums differ in their last bits
	// between CPUs (fused multiply-adds, vector widths, torch's thread
	// count), and over tens of epochs that moves the epoch that
	// validates best. The note for editors atop tutorial.md says 0.05.
	accuracySlack = 0.05
	// minAccuracy: GraphSAGE reaches about 0.8 on Cora's public split;
	// under 0.7 the training is broken, whatever the tutorial quotes.
	minAccuracy = 0.70
)

// trainers are the commands whose output rests on floating-point
// rounding: in a block that runs one, each number of a sample line
// stands for any number, and its last line's test accuracy must lie
// within accuracySlack of the one the tutorial quotes.
var trainers = []string{"bin/node train ", "python/examples/"}

// testAccuracy finds the test accuracy in a result line: "… test 0.7800"
// (node train) or `"test": 0.814` (train_sage.py's JSON).
var testAccuracy = regexp.MustCompile(`"?\btest"?:? (\d+\.\d+)`)

// accuracyHolds says whether the test accuracy on the last line of out,
// a training block's output, lies within accuracySlack of the one its
// last sample line quotes, and is at least minAccuracy; it returns the
// accuracy.
func accuracyHolds(sample, out []string) (got float64, err error) {
	var quote, last string
	if len(sample) > 0 {
		quote = sample[len(sample)-1]
	}
	if len(out) > 0 {
		last = strings.TrimSpace(out[len(out)-1])
	}
	q := testAccuracy.FindStringSubmatch(quote)
	if q == nil {
		return 0, fmt.Errorf("the last sample line of a block that trains, %q, quotes no test accuracy", quote)
	}
	m := testAccuracy.FindStringSubmatch(last)
	if m == nil {
		return 0, fmt.Errorf("no test accuracy in the last line of the output, %q", last)
	}
	quoted, _ := strconv.ParseFloat(q[1], 64)
	got, _ = strconv.ParseFloat(m[1], 64)
	if got < quoted-accuracySlack || got > quoted+accuracySlack || got < minAccuracy {
		return got, fmt.Errorf("test accuracy %s, but the tutorial quotes %s (within %.2f, and at least %.2f, expected)", m[1], q[1], accuracySlack, minAccuracy)
	}
	return got, nil
}

// TestTestAccuracy: the accuracy is found in both result lines the
// tutorial quotes, and not in a key that starts with "test".
func TestTestAccuracy(t *testing.T) {
	for line, want := range map[string]string{
		"best epoch 6: val 0.7900 test 0.7800":                    "0.7800",
		`{"best_val": 0.816, "test": 0.814, "epoch": 95, …}`:      "0.814",
		`{"best_val": 0.816, "test_seeds": 1000, "epoch": 95, …}`: "",
	} {
		got := ""
		if m := testAccuracy.FindStringSubmatch(line); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("%s: %q, want %q", line, got, want)
		}
	}
}

// TestAccuracyHolds: a training block's result line against the one the
// tutorial quotes.
func TestAccuracyHolds(t *testing.T) {
	quote := []string{"graphsage: …", "…", "best epoch 6: val 0.7900 test 0.7800"}
	for _, tc := range []struct {
		sample []string
		last   string
		err    string // "" when it holds
	}{
		{quote, "best epoch 6: val 0.7900 test 0.7800", ""},
		{quote, "best epoch 31: val 0.7960 test 0.8210", ""},
		{quote, "best epoch 2: val 0.7000 test 0.7200", "test accuracy 0.7200, but the tutorial quotes 0.7800"},
		{quote, "best epoch 40: val 0.8500 test 0.8400", "test accuracy 0.8400, but the tutorial quotes 0.7800"},
		{[]string{`{"best_val": 0.72, "test": 0.71, …}`}, `{"best_val": 0.7, "test": 0.69, "epoch": 3}`, "at least 0.70"},
		{[]string{`{"best_val": 0.816, "test": 0.814, "epoch": 95, …}`}, `{"best_val": 0.81, "test": 0.8, "epoch": 90}`, ""},
		{[]string{"best epoch 6: val 0.7900 test 0.7800", "…"}, "best epoch 6: val 0.7900 test 0.7800", `the last sample line of a block that trains, "…", quotes no test accuracy`},
		{quote, "trained", `no test accuracy in the last line of the output, "trained"`},
	} {
		_, err := accuracyHolds(tc.sample, []string{"epoch 0", tc.last})
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q against %q: %v, want %q", tc.last, tc.sample[len(tc.sample)-1], err, tc.err)
		}
	}
}
