package main

import (
	"slices"
	"testing"
)

// TestDifferNames: a setting this trainer derived from a flag is not
// named beside that flag when both differ (a --batch-size mismatch
// between KGE ranks named --steps-per-epoch too, which neither rank
// gave), and says where it came from when it differs alone; settings
// given as flags are named as they are.
func TestDifferNames(t *testing.T) {
	follows := map[string]string{"--steps-per-epoch": "--batch-size", "--layers": "--fanouts", "--eval-fanouts": "--fanouts"}
	for _, c := range []struct {
		differ  []string
		follows map[string]string
		want    []string
	}{
		{[]string{"--batch-size", "--steps-per-epoch"}, follows, []string{"--batch-size"}},
		{[]string{"--batch-size", "--steps-per-epoch"}, nil, []string{"--batch-size", "--steps-per-epoch"}},
		{[]string{"--fanouts", "--eval-fanouts", "--layers", "--seed"}, follows, []string{"--fanouts", "--seed"}},
		{[]string{"--steps-per-epoch", "entities (--parts)"}, follows, []string{"--steps-per-epoch (which this trainer derived from --batch-size)", "entities (--parts)"}},
		{[]string{"--epochs"}, follows, []string{"--epochs"}},
	} {
		if got := differNames(c.differ, c.follows); !slices.Equal(got, c.want) {
			t.Errorf("differNames(%q) = %q, want %q", c.differ, got, c.want)
		}
	}
}
