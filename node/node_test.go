package node

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListenReplacesOnlyASocket: listen replaces a socket file nobody
// answers on (a crashed node's), and refuses any other file at
// control.socket, which stays as it was: it removed a regular file (a
// node.toml given as the socket by mistake) or an empty directory and
// bound the socket in its place.
func TestListenReplacesOnlyASocket(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		want string // in the error; "": listen succeeds
	}{
		{"stale socket", func(t *testing.T, path string) {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close()
		}, ""},
		{"regular file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("version = 1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "exists and is not a socket (a regular file)"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "exists and is not a socket (a directory)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "node.sock")
			tc.make(t, path)
			before, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			n := &Node{cfg: DefaultConfig(), log: slog.New(slog.DiscardHandler), gid: -1}
			n.cfg.Control.Socket = path
			ln, err := n.listen()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				ln.Close()
				os.Remove(path)
				return
			}
			if err == nil {
				ln.Close()
				t.Fatalf("listen on %s: no error, want %q", tc.name, tc.want)
			}
			if !strings.Contains(err.Error(), "control.socket: "+path+" "+tc.want) || !errors.Is(err, ErrConfig) {
				t.Fatalf("listen: %v, want %q wrapping ErrConfig", err, tc.want)
			}
			after, err := os.Lstat(path)
			if err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
				t.Fatalf("%s at control.socket changed: %v", tc.name, err)
			}
		})
	}
}
