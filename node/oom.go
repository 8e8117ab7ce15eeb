package node

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// SamplerOOMScoreAdj is how far above its node's oom_score_adj a sampler
// sets its own as it starts (RaiseOOMScoreAdj in `node sampler`). The
// kernel's OOM killer adds adj/1000 of the memory it can hand out to a
// process's score, so under memory pressure it picks a sampler before
// its node unless the node holds half that memory more. A sampler killed
// fails its loader alone (its trainer reads a dead sampler, stats say
// "failed"); the node killed ends every loader of every trainer of the
// host, and its kv shards with it.
//
// Relative, not absolute: an OOMScoreAdjust= of the unit (or a
// container's setting) moves the node and its samplers together, and a
// sampler stays the likelier of the two.
const SamplerOOMScoreAdj = 500

// maxOOMScoreAdj is the largest oom_score_adj the kernel takes
// (OOM_SCORE_ADJ_MAX).
const maxOOMScoreAdj = 1000

// selfOOMScoreAdj is this process's OOM score adjustment (Linux, proc(5)).
const selfOOMScoreAdj = "/proc/self/oom_score_adj"

// RaiseOOMScoreAdj adds by to this process's oom_score_adj, up to 1000,
// and returns the value now set. A process may always raise its own
// (lowering it needs CAP_SYS_RESOURCE), with or without systemd.
func RaiseOOMScoreAdj(by int) (int, error) { return raiseOOMScoreAdj(selfOOMScoreAdj, by) }

// raiseOOMScoreAdj is RaiseOOMScoreAdj of the file path (tests give
// their own).
func raiseOOMScoreAdj(path string, by int) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("node: oom_score_adj: %w", err)
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("node: oom_score_adj: %s holds %q, not a number", path, strings.TrimSpace(string(b)))
	}
	adj := min(cur+by, maxOOMScoreAdj)
	if adj == cur {
		return cur, nil
	}
	// As `echo 500 > /proc/self/oom_score_adj` does: procfs ignores the
	// truncation.
	if err := os.WriteFile(path, []byte(strconv.Itoa(adj)), 0); err != nil {
		return cur, fmt.Errorf("node: oom_score_adj: write %d: %w", adj, err)
	}
	return adj, nil
}
