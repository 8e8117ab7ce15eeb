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

// CrashingSamplerEnv, set, makes the test binary (TestMain) a sampler
// that reads its spec, sends its crash report to its node as `node
// sampler` does, and panics in a goroutine of its own: CrashingSampler.
const CrashingSamplerEnv = "GRAPHNODE_TEST_CRASHING_SAMPLER"

func CrashingSampler() {
	var spec SamplerSpec // only its crash_fd: no part, no ring
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		os.Exit(3)
	}
	if err := SetSamplerCrashOutput(spec.CrashFD); err != nil {
		os.Exit(4)
	}
	fmt.Println("progress 1 0 10")
	go func() {
		var counts []int
		i := 5
		counts[i]++ // index out of range: a runtime panic, as a bug would
	}()
	select {}
}

// TestSamplerCrashReport: a sampler that panics, in any goroutine, is
// logged by its node in the node's format with the panic as its error
// and the runtime's report, stacks and all, as one field, and its stats
// say it failed. The record said "exit status 2", and the panic reached
// a JSON journal only as lines of plain text on stderr.
func TestSamplerCrashReport(t *testing.T) {
	t.Setenv(CrashingSamplerEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var logb bytes.Buffer
	n := &Node{cfg: DefaultConfig(), log: slog.New(slog.NewJSONHandler(&logb, nil)), gid: -1, Executable: exe, SamplerStderr: io.Discard}
	spec, err := json.Marshal(SamplerSpec{CrashFD: SamplerCrashFD})
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.startProc(&loader{id: 1}, 0, spec)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if st := p.stats(); st.State != stateFailed || st.Status != "exit status 2" {
		t.Errorf("sampler stats %+v, want failed, exit status 2", st)
	}
	var rec struct{ Level, Msg, Status, Err, Crash string }
	if err := json.Unmarshal(logb.Bytes(), &rec); err != nil || strings.Count(logb.String(), "\n") != 1 {
		t.Fatalf("log %q: want one JSON record (%v)", logb.String(), err)
	}
	const cause = "panic: runtime error: index out of range [5] with length 0"
	if rec.Level != "ERROR" || rec.Msg != "sampler failed" || rec.Err != cause ||
		!strings.HasPrefix(rec.Crash, cause) || !strings.Contains(rec.Crash, "goroutine ") || !strings.Contains(rec.Crash, "CrashingSampler") {
		t.Errorf("record %+v\nwant level ERROR, msg \"sampler failed\", err %q, and the crash report with its stack", rec, cause)
	}
}

// TestCrashCause: the line of a crash report that says what happened.
func TestCrashCause(t *testing.T) {
	for _, tc := range []struct{ report, want string }{
		{"panic: boom\n\ngoroutine 1 [running]:\nmain.main()\n", "panic: boom"},
		{"SIGSEGV: segmentation violation\nfatal error: unexpected signal\n\ngoroutine 1", "fatal error: unexpected signal"},
		{"fatal error: all goroutines are asleep - deadlock!\n", "fatal error: all goroutines are asleep - deadlock!"},
		{"\nsomething else\nmore\n", "something else"},
	} {
		if got := crashCause(tc.report); got != tc.want {
			t.Errorf("crashCause(%q) = %q, want %q", tc.report, got, tc.want)
		}
	}
}
