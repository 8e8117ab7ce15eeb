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

// TestTrainSettingsParamsTable: with --save, the ranks compare
// --params-table: rank 0 alone stores the parameters, in its own
// --params-table, and a rank given another one said that rank 0 had
// saved them in that one. Without --save it is not used, and not
// compared.
func TestTrainSettingsParamsTable(t *testing.T) {
	differ := func(a, b *trainFlags) []string {
		cfg, fan := train.DefaultConfig(), []int{10, 5}
		sa, sb := trainSettings(cfg, a, fan, fan), trainSettings(cfg, b, fan, fan)
		if len(sa) != len(sb) {
			t.Fatalf("%d settings and %d", len(sa), len(sb))
		}
		var names []string
		for i := range sa {
			if sa[i] != sb[i] {
				names = append(names, sa[i].Name)
			}
		}
		return names
	}
	for _, save := range []bool{true, false} {
		got := differ(&trainFlags{save: save, paramsTable: "graphsage.params"}, &trainFlags{save: save, paramsTable: "other.params"})
		want := []string{"--params-table"}
		if !save {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("--save %v, --params-table graphsage.params and other.params: settings %v differ, want %v", save, got, want)
		}
	}
	// --save on one rank alone is named alone.
	if got := differ(&trainFlags{save: true, paramsTable: defaultParamsTable}, &trainFlags{paramsTable: defaultParamsTable}); !slices.Equal(got, []string{"--save"}) {
		t.Errorf("--save on one rank: settings %v differ, want [--save]", got)
	}
}
