package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"graphnode/node/client"
)

// TestSamplerFailureLogged: with [log] format = "json", a sampler that
// fails (its peer stopped answering mid-epoch) puts one JSON record in
// its node's log, the node's "sampler failed", whose err is the
// sampler's own error, naming the peer, beside its exit status; every
// line of the log is a JSON record. The sampler printed its error on
// stderr, the node's log, as a line of plain text, and the node's record
// said "exit status 1" twice.
func TestSamplerFailureLogged(t *testing.T) {
	parts := clusterParts(t, 2)
	c := startCluster(t, parts, 2, "3s")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := baseOptions()
	o.Workers, o.Epochs, o.BatchSize, o.RingSize = 1, 1000, 16, "2MiB"
	l := openReading(t, ctx, c.sockets[0], o, 5)
	if st, err := client.Stats(ctx, c.sockets[0]); err == nil {
		c.note(st)
	}
	// host1 stops answering: the sampler's calls to it run out of the
	// mesh timeout (3 s), and it fails.
	stopped := c.nodes[1].cmd.Process
	if err := stopped.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopped.Signal(syscall.SIGCONT) }) // before the daemons stop
	for {
		_, err := l.Next(ctx)
		if err == nil || errors.Is(err, client.ErrEndOfEpoch) {
			continue
		}
		if !errors.Is(err, client.ErrSampler) || !strings.Contains(err.Error(), "host1") {
			t.Fatalf("the trainer: %v, want a sampler error naming host1", err)
		}
		t.Logf("the trainer: %v", err)
		break
	}
	host0 := c.nodes[0]
	eventually(t, 10*time.Second, "host0 logs the sampler's failure", func() bool { return host0.logHas(`"msg":"sampler failed"`) })
	var failed []map[string]any
	for line := range strings.Lines(host0.log.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("host0's log holds a line that is no JSON record: %q", line)
			continue
		}
		if rec["msg"] == "sampler failed" {
			failed = append(failed, rec)
		}
	}
	if len(failed) != 1 {
		t.Fatalf("%d \"sampler failed\" records, want 1: %v", len(failed), failed)
	}
	rec := failed[0]
	if err, _ := rec["err"].(string); rec["status"] != "exit status 1" || rec["level"] != "ERROR" || rec["worker"] != 0.0 ||
		!strings.Contains(err, "host1") || !strings.Contains(err, "peer unavailable") {
		t.Errorf("host0's record of the failure: %v\nwant level ERROR, status \"exit status 1\", worker 0 and err the sampler's, naming host1 unavailable", rec)
	}
	l.Close()
}
