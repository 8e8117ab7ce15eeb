package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"graphnode/node/control"
)

// TestKVCommand: node kv list lists the node's tables and where their
// rows come from; node kv save checkpoints them into its checkpoint_dir;
// node kv drop removes a table (then a job may declare it anew) and
// refuses one the node does not hold; all need --socket.
func TestKVCommand(t *testing.T) {
	bin := nodeBinary(t)
	_, _, sock, ckpt, _ := startKVNode(t, bin)
	code, stdout, stderr := runNode(t, "kv", "list", "--socket", sock, "--json")
	var st control.KVStats
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil || st.CheckpointDir != ckpt || len(st.Tables) != 1 ||
		st.Tables[0] != (control.KVTableStats{Name: "emb", Rows: 20, Dim: 4, Mode: "async", Optimizer: "sgd lr 0.1", ShardHi: 20}) {
		t.Errorf("node kv list --json: exit %d (%v), %+v, stderr %q", code, err, st, stderr)
	}
	list := func(state string) string {
		return "tables of the node at " + sock + " (part 0; [kv] checkpoint_dir " + ckpt + "): 1\n" +
			"table  rows  dim  mode   optimizer   shard rows  updates  shard's rows are\n" +
			"emb    20    4    async  sgd lr 0.1  [0, 20)     0        " + state + "\n"
	}
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"kv", "list", "--socket", sock}, 0, list("initial"), ""},
		{[]string{"kv", "save", "--socket", sock}, 0, `saved 1 tables ["emb"] into each node's [kv] checkpoint_dir (` + ckpt + " on the node at " + sock + ")\n", ""},
		{[]string{"kv", "list", "--socket", sock}, 0, list("as saved to " + filepath.Join(ckpt, "emb.part0.kvt")), ""},
		{[]string{"kv", "drop", "--socket", sock, "emb", "nope"}, 1, "dropped table \"emb\" on this node\n", `table "nope": no node holds such a table`},
		{[]string{"kv", "list", "--socket", sock}, 0, "tables of the node at " + sock + " (part 0; [kv] checkpoint_dir " + ckpt + "): 0\n", ""},
		{[]string{"kv", "list", "--socket", sock, "--json"}, 0, "{\n  \"checkpoint_dir\": " + strconv.Quote(ckpt) + ",\n  \"tables\": []\n}\n", ""},
		{[]string{"kv", "list", "--socket", sock, "emb"}, 2, "", `node kv list: unexpected argument "emb"`},
		{[]string{"kv", "drop", "--socket", sock, "emb"}, 1, "", `table "emb": no node holds such a table`},
		{[]string{"kv", "drop", "emb"}, 2, "", "node kv drop: --socket is required"},
		{[]string{"kv", "drop", "--socket", sock}, 2, "", "node kv drop: name the tables to drop"},
		{[]string{"kv", "save", "--socket", sock, "now"}, 2, "", `node kv save: unexpected argument "now"`},
		{[]string{"kv", "frob"}, 2, "", "usage: node kv list|drop|save"},
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
		{[]string{"kv", "frob"}, "node kv: unknown subcommand \"frob\" (want list, drop or save)\n"},
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

// TestKVRowsState: node kv list says where a shard's rows come from.
func TestKVRowsState(t *testing.T) {
	for _, tc := range []struct {
		t    control.KVTableStats
		want string
	}{
		{control.KVTableStats{}, "initial"},
		{control.KVTableStats{Changed: true}, "updated, never saved"},
		{control.KVTableStats{Checkpoint: "/k/emb.part0.kvt"}, "as saved to /k/emb.part0.kvt"},
		{control.KVTableStats{Checkpoint: "/k/emb.part0.kvt", Changed: true}, "updated since saved to /k/emb.part0.kvt"},
		{control.KVTableStats{Checkpoint: "/k/emb.part0.kvt", Loaded: true}, "as loaded from /k/emb.part0.kvt"},
		{control.KVTableStats{Checkpoint: "/k/emb.part0.kvt", Loaded: true, Changed: true}, "updated since loaded from /k/emb.part0.kvt"},
	} {
		if got := rowsState(tc.t); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.t, got, tc.want)
		}
	}
}
