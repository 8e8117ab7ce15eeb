package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKVCommand: node kv save checkpoints the node's tables into its
// checkpoint_dir; node kv drop removes a table (then a job may declare
// it anew) and refuses one the node does not hold; both need --socket.
func TestKVCommand(t *testing.T) {
	bin := nodeBinary(t)
	_, _, sock, ckpt, _ := startKVNode(t, bin)
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
