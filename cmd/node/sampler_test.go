package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"graphnode/csr"
	"graphnode/node"
	"graphnode/node/client"
)

// TestSamplerReportsItsError: a sampler that fails, before or after it
// read its spec, writes no error on stderr (the node's log, JSON in a
// journal: only its own records, in the spec's format) and reports its error to the node as one "error" line on
// stdout, a JSON string, which the node logs with its exit status; it
// exits 1. It printed "node sampler: …" on stderr, a line of plain text
// among the node's JSON records, and the node's own record of the
// failure held "exit status 1" alone.
func TestSamplerReportsItsError(t *testing.T) {
	bin := nodeBinary(t)
	ring := filepath.Join(t.TempDir(), "gone.ring")
	o := client.DefaultOptions()
	o.Workers, o.Concurrency, o.Split, o.Fanouts = 1, 1, "train", []int{2}
	valid, err := (&node.SamplerSpec{Part: filepath.Join(t.TempDir(), "part.csr"), PartID: csr.Identity{Size: 4096}, Ring: ring,
		Workers: 1, Options: o, LogLevel: "debug", LogFormat: "json"}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, spec, want string
	}{
		{"not JSON", "x", "node: sampler spec: invalid character 'x'"},
		{"incomplete", "{}", "node: sampler spec: part: missing\n"},
		{"its ring gone", string(valid), ring},
	} {
		cmd := exec.Command(bin, "sampler")
		cmd.Stdin = strings.NewReader(tc.spec)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("%s: %v, want exit status 1", tc.name, err)
		}
		// Its own log records (a debug "sampler started" here) may be
		// there, in the spec's format; the error may not.
		for _, line := range strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n") {
			var rec map[string]any
			if line != "" && (json.Unmarshal([]byte(line), &rec) != nil || rec["level"] == "ERROR" || strings.Contains(line, tc.want)) {
				t.Errorf("%s: stderr %q, want no error there (JSON records of the sampler's own at most): the node logs the error", tc.name, stderr.String())
				break
			}
		}
		rest, ok := strings.CutPrefix(stdout.String(), "error ")
		var msg string
		if !ok || strings.Count(rest, "\n") != 1 || !strings.HasSuffix(rest, "\n") || json.Unmarshal([]byte(rest), &msg) != nil || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: stdout %q, want one line \"error <JSON string>\" naming %q", tc.name, stdout.String(), tc.want)
		}
	}
}
