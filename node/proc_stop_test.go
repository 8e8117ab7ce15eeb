package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSamplerFailureWhileStopping: a sampler stopped by the node
// (close_loader, drain) that fails as it stops (its end-of-stream record
// not written, say) reports why on stdout only, and the node logs it, a
// warning: the sampler stopped, as asked, but not cleanly. It reached no
// log once samplers stopped printing their errors on stderr.
func TestSamplerFailureWhileStopping(t *testing.T) {
	cause := errors.New("sampler: could not write end-of-stream: the disk is full")
	var line bytes.Buffer
	ReportSamplerError(&line, cause)
	dir := t.TempDir()
	exe := filepath.Join(dir, "node")
	script := "#!/bin/sh\ncat >/dev/null\ntrap 'printf \"%s\" '\"'\"'" + strings.TrimSuffix(line.String(), "\n") + "'\"'\"'; echo; exit 1' TERM\nwhile :; do sleep 0.05; done\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var logb bytes.Buffer
	n := &Node{cfg: DefaultConfig(), log: slog.New(slog.NewJSONHandler(&logb, nil)), gid: -1, Executable: exe, SamplerStderr: io.Discard}
	p, err := n.startProc(&loader{id: 1}, 0, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	p.stop(5 * time.Second)
	<-p.done
	p.mu.Lock()
	failure := p.mu.failure
	p.mu.Unlock()
	if failure != cause.Error() {
		t.Errorf("reported failure %q, want %q", failure, cause)
	}
	var rec map[string]any
	if err := json.Unmarshal(logb.Bytes(), &rec); err != nil {
		t.Fatalf("node log %q: want one JSON record: %v", logb.String(), err)
	}
	if rec["level"] != "WARN" || rec["msg"] != "sampler failed while stopping" || rec["err"] != cause.Error() || rec["status"] != "exit status 1" {
		t.Errorf("node log %q, want a WARN \"sampler failed while stopping\" with status exit status 1 and err %q", logb.String(), cause)
	}
	if st := p.stats(); st.State != "killed" {
		t.Errorf("state %q, want killed", st.State)
	}
}
