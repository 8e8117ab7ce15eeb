package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNoPositionalArgs: the commands that take only flags refuse an
// argument, with exit 2, before they read or connect to anything. They
// used to drop it without a word: "--eval false" trained with --eval
// true, "fetch -c node.toml all" fetched this host's files only.
func TestNoPositionalArgs(t *testing.T) {
	dir := t.TempDir()
	cfg, sock := filepath.Join(dir, "none.toml"), filepath.Join(dir, "none.sock")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--socket", sock, "--eval", "false"}, `node train: unexpected argument "false" (a boolean flag takes its value as --flag=false)`},
		{[]string{"kge", "--socket", sock, "--parts", dir, "--eval-filter", "false"}, `node kge: unexpected argument "false"`},
		{[]string{"demo", "--keep", "false", "--parts", "1"}, `node demo: unexpected argument "false"`},
		{[]string{"fetch", "-c", cfg, "all"}, `node fetch: unexpected argument "all"`},
		{[]string{"run", "-c", cfg, "extra"}, `node run: unexpected argument "extra"`},
		{[]string{"config", "check", "-c", cfg, "extra"}, `node config check: unexpected argument "extra"`},
		{[]string{"sampler", "extra"}, `node sampler: unexpected argument "extra"`},
	} {
		code, _, stderr := runNode(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, want 2 and %q; stderr:\n%s", tc.args, code, tc.want, stderr)
		}
	}
}
