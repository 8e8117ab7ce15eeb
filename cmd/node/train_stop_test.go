package main

import (
	"strings"
	"testing"
)

// TestTrainPatience: a run that --patience stops early says so in table
// mode, naming the epoch it stopped after and the best one; only --json
// said it ("stopped": true), and the table read as cut short. The
// learning rate is too small for the val accuracy (all neighbours: no
// sampling) to move, so the second evaluation is no better than the
// first.
func TestTrainPatience(t *testing.T) {
	bin := nodeBinary(t)
	parts := smallParts(t, 2000, 16, "10,5")
	cl := testCluster(t, bin, parts)
	res := runJob(t, bin, 1, func(int) []string {
		return []string{"train", "--socket", cl.sockets[0], "--fanouts", "10,5", "--eval-fanouts", "-1,-1", "--batch-size", "64",
			"--hidden", "8", "--epochs", "50", "--patience", "1", "--lr", "1e-12", "--workers", "1", "--threads", "1"}
	})[0]
	want := "stopped early after epoch 1 of --epochs 50: no better val accuracy than epoch 0's in the 1 evaluation since (--patience 1)\nbest epoch 0: val "
	if res.err != nil || !strings.Contains(res.out, want) {
		t.Errorf("node train --patience 1: %v, output:\n%s\nwant %q", res.err, res.out, want)
	}
}
