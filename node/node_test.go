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

// TestListenRingAccess: listen gives rings the group the socket has once
// bound, whichever gave it, and group access exactly when the socket's
// mode lets the group connect. With a setgid socket directory and no
// control.group, rings took the node's group, which could not connect
// (root only: only root can make a directory setgid to another group).
func TestListenRingAccess(t *testing.T) {
	const other = 65534
	root := os.Geteuid() == 0
	for _, tc := range []struct {
		name, mode, group string
		dirGID            int // setgid socket directory of this group; -1: none
		want              ringAccess
		root              bool
	}{
		{name: "0660", mode: "0660", dirGID: -1, want: ringAccess{mode: 0o660, group: true, gid: os.Getegid()}},
		{name: "0600", mode: "0600", dirGID: -1, want: ringAccess{mode: 0o600}},
		{name: "0640", mode: "0640", dirGID: -1, want: ringAccess{mode: 0o600}},
		{name: "setgid directory", mode: "0660", dirGID: other, want: ringAccess{mode: 0o660, group: true, gid: other}, root: true},
		{name: "setgid directory, 0600", mode: "0600", dirGID: other, want: ringAccess{mode: 0o600}, root: true},
		{name: "group 0 in a setgid directory", mode: "0660", group: "0", dirGID: other, want: ringAccess{mode: 0o660, group: true, gid: 0}, root: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && !root {
				t.Skip("needs root")
			}
			dir := t.TempDir()
			if tc.dirGID >= 0 {
				if err := os.Chown(dir, -1, tc.dirGID); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, 0o700|os.ModeSetgid); err != nil {
					t.Fatal(err)
				}
			}
			n := &Node{cfg: DefaultConfig(), log: slog.New(slog.DiscardHandler), gid: -1}
			n.cfg.Control.Socket = filepath.Join(dir, "node.sock")
			n.cfg.Control.Mode, n.cfg.Control.Group = tc.mode, tc.group
			gid, err := n.cfg.GroupID()
			if err != nil {
				t.Fatal(err)
			}
			n.gid = gid
			ln, err := n.listen()
			if err != nil {
				t.Fatal(err)
			}
			defer os.Remove(n.cfg.Control.Socket)
			defer ln.Close()
			if n.ringAccess != tc.want {
				t.Errorf("ring access %+v, want %+v", n.ringAccess, tc.want)
			}
			o := n.ringOptions(2, 1<<20)
			if o.Mode != tc.want.mode || o.Group != tc.want.group || o.GID != tc.want.gid || o.SubRings != 2 || o.Capacity != 1<<20 {
				t.Errorf("ring options %+v, want access %+v", o, tc.want)
			}
		})
	}
}
