package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"graphnode/node/control"
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
		{[]string{"kv", "save", "--socket", sock}, 0, `saved 1 tables ["emb"] into each node's [kv] checkpoint_dir (` + ckpt + " on the node at " + sock + ")\n", ""},
		{[]string{"kv", "drop", "--socket", sock, "emb", "nope"}, 1, "dropped table \"emb\" on this node\n", `table "nope": no node holds such a table`},
		{[]string{"kv", "drop", "--socket", sock, "emb"}, 1, "", `table "emb": no node holds such a table`},
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

// TestKVDropMessage: node kv drop says which nodes held the table, the
// node asked among them or not (a table of a peer's [[kv.tables]] only),
// and is an error only where no node is known to have held it.
func TestKVDropMessage(t *testing.T) {
	for _, tc := range []struct {
		info     control.DropInfo
		msg, err string
	}{
		{control.DropInfo{Name: "t", Dropped: true}, `dropped table "t" on this node`, ""},
		{control.DropInfo{Name: "t", DroppedParts: []int{1}}, `dropped table "t" on part 1 (this node held none)`, ""},
		{control.DropInfo{Name: "t", Dropped: true, DroppedParts: []int{1, 2}}, `dropped table "t" on this node and parts 1, 2`, ""},
		{control.DropInfo{Name: "t", DroppedParts: []int{2}, UnknownParts: []int{1}},
			`dropped table "t" on part 2 (this node held none) (part 1, of an older build, did not say whether it held it)`, ""},
		{control.DropInfo{Name: "t"}, "", `table "t": no node holds such a table`},
		{control.DropInfo{Name: "t", UnknownParts: []int{1, 3}}, "", `table "t": no node holds such a table (parts 1, 3, of an older build, did not say whether it held it)`},
	} {
		msg, err := dropMessage(&tc.info)
		if msg != tc.msg || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("%+v: %q, %v; want %q, %q", tc.info, msg, err, tc.msg, tc.err)
		}
	}
}

// TestSavedWhere: node kv save and node train --save say where the
// checkpoint went: each node's checkpoint_dir, the asked node's named as
// its (kv_save answers that one alone: "DIR on every node" claimed it for
// nodes whose directories differ); through a client node, whose kv_save
// answers no directory, it is the sampling nodes' checkpoint_dir, not "".
func TestSavedWhere(t *testing.T) {
	for dir, want := range map[string]string{
		"/var/lib/graphnode/kv": "each node's [kv] checkpoint_dir (/var/lib/graphnode/kv on the node at n.sock)",
		"":                      "each sampling node's [kv] checkpoint_dir",
	} {
		if got := savedWhere(dir, "n.sock"); got != want {
			t.Errorf("savedWhere(%q) = %q, want %q", dir, got, want)
		}
	}
}

// TestKVUsageBeforeDial: node kv and node cert name an unknown
// subcommand, and node kv refuses its bad arguments with exit 2 before
// it dials (the socket here does not exist): a missing table name or an
// extra argument was found only once the node answered, and a dead
// socket reported the dial, exit 1, instead.
func TestKVUsageBeforeDial(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"kv", "frob"}, "node kv: unknown subcommand \"frob\" (want drop or save)\n"},
		{[]string{"cert", "frob"}, "node cert: unknown subcommand \"frob\" (want init or add)\n"},
		{[]string{"kv", "drop", "--socket", sock}, "node kv drop: name the tables to drop\n"},
		{[]string{"kv", "save", "--socket", sock, "now"}, "node kv save: unexpected argument \"now\"\n"},
		{[]string{"kv", "drop", "--socket", sock, "emb", "a/b"}, "node kv drop: table \"a/b\": must be 1-64 bytes of [A-Za-z0-9_.-], not starting with '.'\n"},
	} {
		code, _, stderr := runNode(t, tc.args...)
		if code != 2 || !strings.HasPrefix(stderr, tc.want) || strings.Contains(stderr, "dial") {
			t.Errorf("node %v: exit %d, stderr %q; want 2 and %q first, before any dial", tc.args, code, stderr, tc.want)
		}
	}
}
