package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSamplerFailureCause: the node's "sampler failed" record carries
// the error its sampler reported on its progress output
// (ReportSamplerError) beside the exit status, in the node's log format,
// and the sampler's stats say it failed. A sampler killed while it wrote
// that line, or dead without one, is logged with its exit status alone.
// The record said "exit status 1" twice; the cause went to stderr as a
// line of text.
func TestSamplerFailureCause(t *testing.T) {
	cause := errors.New(`sample: batch 16 hop 0: part 1: mesh: peer host1 (127.0.0.1:7202, part 1): sample: peer unavailable after 1 attempt in 10.001s: "quoted"`)
	var line bytes.Buffer
	if err := ReportSamplerError(&line, cause); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, script   string
		status, err    string
		format         string
		wantText, lost string // in the text format: a fragment of the record; a fragment no line may hold
	}{
		{name: "reported", script: "printf 'progress 3 0 30\\n%s'\nexit 1\n", status: "exit status 1", err: cause.Error(), format: "json"},
		{name: "reported, text", script: "printf 'progress 3 0 30\\n%s'\nexit 1\n", status: "exit status 1", err: cause.Error(), format: "text",
			wantText: `level=ERROR msg="sampler failed" loader=1 worker=0 pid=`},
		{name: "killed mid-line", script: "printf 'progress 3 0 30\\nerror \"sample: batch 16'\nkill -9 $$\n", status: "signal: killed", err: "signal: killed", format: "json"},
		{name: "silent", script: "exit 3\n", status: "exit status 3", err: "exit status 3", format: "json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			exe := filepath.Join(dir, "node")
			body := strings.ReplaceAll(tc.script, "%s", strings.ReplaceAll(line.String(), `\`, `\\`))
			if err := os.WriteFile(exe, []byte("#!/bin/sh\ncat >/dev/null\n"+body), 0o755); err != nil {
				t.Fatal(err)
			}
			var logb bytes.Buffer
			var h slog.Handler = slog.NewJSONHandler(&logb, nil)
			if tc.format == "text" {
				h = slog.NewTextHandler(&logb, nil)
			}
			n := &Node{cfg: DefaultConfig(), log: slog.New(h), gid: -1, Executable: exe, SamplerStderr: io.Discard}
			p, err := n.startProc(&loader{id: 1}, 0, []byte("{}"))
			if err != nil {
				t.Fatal(err)
			}
			<-p.done
			if st := p.stats(); st.State != stateFailed || st.Status != tc.status || st.Batches != 3 && tc.name != "silent" {
				t.Errorf("sampler stats %+v, want failed, %q", st, tc.status)
			}
			if got := n.failures.Load(); got != 1 {
				t.Errorf("%d sampler failures counted, want 1", got)
			}
			if tc.format == "text" {
				want := fmt.Sprintf(` status="exit status 1" err=%q`, cause.Error())
				if out := logb.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, tc.wantText) || !strings.Contains(out, want) {
					t.Errorf("text log:\n%s\nwant one line holding %s and %s", out, tc.wantText, want)
				}
				return
			}
			var rec struct{ Level, Msg, Status, Err string }
			if err := json.Unmarshal(logb.Bytes(), &rec); err != nil || strings.Count(logb.String(), "\n") != 1 {
				t.Fatalf("log %q: want one JSON record (%v)", logb.String(), err)
			}
			if rec.Level != "ERROR" || rec.Msg != "sampler failed" || rec.Status != tc.status || rec.Err != tc.err {
				t.Errorf("record %+v\nwant level ERROR, msg \"sampler failed\", status %q, err %q", rec, tc.status, tc.err)
			}
		})
	}
}
