package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"graphnode/node/client"
)

// TestKVCommand: node kv save checkpoints the node's tables into its
// checkpoint_dir; node kv drop removes a table (then a job may declare
// it anew) and refuses one the node does not hold; both need --socket.
func TestKVCommand(t *testing.T) {
	bin := nodeBinary(t)
	dir := t.TempDir()
	parts := onePart(t, bin, dir)
	sock, ckpt := filepath.Join(dir, "node.sock"), filepath.Join(dir, "kv")
	if err := os.Mkdir(ckpt, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "node.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`version = 1
[node]
parts = %q
[control]
socket = %q
[kv]
checkpoint_dir = %q
[[kv.tables]]
name = "emb"
rows = "nodes"
dim = 4
optimizer = "sgd"
lr = 0.1
mode = "async"
`, parts, sock, ckpt)), 0o644); err != nil {
		t.Fatal(err)
	}
	var logb strings.Builder
	cmd := exec.Command(bin, "run", "-c", cfg)
	cmd.Stdout, cmd.Stderr = &logb, &logb
	exited := startChild(t, cmd)
	for {
		st, err := client.Stats(t.Context(), sock)
		if err == nil && st.Ready {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("node run exited at start: %v\n%s", err, &logb)
		case <-time.After(20 * time.Millisecond):
		}
	}
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"kv", "save", "--socket", sock}, 0, `saved 1 tables ["emb"] into ` + ckpt + " on every node\n", ""},
		{[]string{"kv", "drop", "--socket", sock, "emb", "nope"}, 1, "dropped table \"emb\"\n", `table "nope": this node holds no such table`},
		{[]string{"kv", "drop", "--socket", sock, "emb"}, 1, "", `table "emb": this node holds no such table`},
		{[]string{"kv", "drop", "emb"}, 2, "", "node kv drop: --socket is required"},
		{[]string{"kv", "drop", "--socket", sock}, 2, "", "node kv drop: name the tables to drop"},
		{[]string{"kv", "save", "--socket", sock, "now"}, 2, "", `node kv save: unexpected argument "now"`},
		{[]string{"kv", "frob"}, 2, "", "usage: node kv drop|save"},
	} {
		code, stdout, stderr := runNode(t, tc.args...)
		if code != tc.code || stdout != tc.stdout || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("node %v: exit %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(ckpt, "emb.part0.kvt")); err != nil {
		t.Errorf("node kv save wrote no checkpoint: %v", err)
	}
}
