package node_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"graphnode/node"
	"graphnode/node/client"
)

// TestSamplersRaiseOOMScoreAdj: every sampler a node starts has an
// oom_score_adj SamplerOOMScoreAdj above its node's, so that the OOM
// killer takes a sampler (one loader fails) before the node (every
// loader of the host ends, and under systemd the unit with it).
func TestSamplersRaiseOOMScoreAdj(t *testing.T) {
	bin, parts := setup(t)
	// The node's own as systemd's OOMScoreAdjust= would set it: samplers
	// are raised from there, up to the kernel's 1000.
	for _, nodeAdj := range []int{-1, 200, 800} { // -1: the test's own
		name := fmt.Sprintf("node=%d", nodeAdj)
		if nodeAdj < 0 {
			name = "node=inherited"
		}
		t.Run(name, func(t *testing.T) {
			cfg, socket, rings := newConfig(t, parts, "")
			cmd := exec.Command(bin, "run", "-c", cfg)
			if nodeAdj >= 0 {
				cmd = exec.Command("sh", "-c", fmt.Sprintf(`echo %d > /proc/self/oom_score_adj && exec "$0" run -c "$1"`, nodeAdj), bin, cfg)
			}
			d := startDaemonCmd(t, cmd, cfg, socket, rings)
			got := readOOMScoreAdj(t, d.cmd.Process.Pid)
			if nodeAdj >= 0 && got != nodeAdj {
				t.Fatalf("node's oom_score_adj %d, want %d", got, nodeAdj)
			}
			nodeAdj = got
			want := min(nodeAdj+node.SamplerOOMScoreAdj, 1000)
			if want == nodeAdj {
				t.Skipf("the node's oom_score_adj is %d already: a sampler cannot be above it", nodeAdj)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			o := baseOptions()
			o.Workers, o.Epochs = 3, 1000 // samplers that outlive the reads below
			// Batch i comes from sub-ring i mod workers: one batch of
			// each sampler read, each has raised its score (before
			// reading its spec).
			openReading(t, ctx, socket, o, o.Workers)
			st, err := client.Stats(ctx, socket)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Loaders) != 1 || len(st.Loaders[0].Samplers) != o.Workers {
				t.Fatalf("stats: %+v, want one loader of %d samplers", st.Loaders, o.Workers)
			}
			for _, s := range st.Loaders[0].Samplers {
				if s.State != "running" {
					t.Fatalf("sampler %d: state %q, want running", s.Worker, s.State)
				}
				if got := readOOMScoreAdj(t, s.PID); got != want {
					t.Errorf("sampler %d (pid %d): oom_score_adj %d, want %d (node's %d + %d, at most 1000)", s.Worker, s.PID, got, want, nodeAdj, node.SamplerOOMScoreAdj)
				}
			}
			if got := readOOMScoreAdj(t, d.cmd.Process.Pid); got != nodeAdj {
				t.Errorf("node's oom_score_adj %d after starting samplers, want %d as before", got, nodeAdj)
			}
		})
	}
}

func readOOMScoreAdj(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
