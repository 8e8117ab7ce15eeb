package main

import (
	"slices"
	"strconv"
	"testing"

	"graphnode/node/client"
	"graphnode/train"
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

// TestSettingsLeadWithTheLayout: both trainers compare the layout of
// their sync rounds first (train.SyncLayout), so that a trainer of a
// build that reads the rounds otherwise (the KGE metric sums, float32
// before layout 2) is refused before its first step; one of an earlier
// build, which lists no layout, differs in the first setting.
func TestSettingsLeadWithTheLayout(t *testing.T) {
	for name, set := range map[string][]client.Setting{
		"node train": trainSettings(train.DefaultConfig(), &trainFlags{}, []int{10, 5}, []int{10, 5}),
		"node kge":   kgeSettings(train.KGEConfig{}, &kgeFlags{}, &kgeInput{}),
	} {
		if len(set) < 2 || set[0].Name != layoutSetting || set[0].Value != strconv.Itoa(train.SyncLayout) {
			t.Errorf("%s: settings begin %+v, want %q = %d first", name, set[:min(len(set), 1)], layoutSetting, train.SyncLayout)
		}
		for _, s := range set[1:] {
			if s.Name == layoutSetting {
				t.Errorf("%s: the layout is listed twice", name)
			}
		}
	}
	if train.SyncLayout < 2 {
		t.Errorf("train.SyncLayout = %d: the metric digits of this build are layout 2", train.SyncLayout)
	}
}
