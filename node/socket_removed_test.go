package node_test

import (
	"net"
	"os"
	"testing"
)

// TestStopLeavesAnotherSocket: a node whose control socket was replaced
// while it ran leaves what the path holds, at its checks and at its stop,
// and says so. It removed whatever was there: the socket of a second node
// started on the path since, which kept running cut off from its
// trainers, or an operator's file. The file is made beside the path and
// renamed onto it: a path that held nothing for a moment, the node may
// have bound its socket again.
func TestStopLeavesAnotherSocket(t *testing.T) {
	bin, parts := setup(t)
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"another socket", func(t *testing.T, path string) {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			t.Cleanup(func() { ln.Close() })
		}},
		{"regular file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("an operator's file\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, socket, rings := newConfig(t, parts, "")
			d := startDaemon(t, bin, cfg, socket, rings)
			beside := socket + ".new"
			tc.make(t, beside)
			if err := os.Rename(beside, socket); err != nil {
				t.Fatal(err)
			}
			before, err := os.Lstat(socket)
			if err != nil {
				t.Fatal(err)
			}
			d.cmd.Process.Signal(os.Interrupt)
			<-d.done
			after, err := os.Lstat(socket)
			if err != nil || !os.SameFile(before, after) {
				t.Fatalf("%s at control.socket removed or replaced by the node's stop: %v\n%s", tc.name, err, d.log)
			}
			if !d.logHas(`"socket":"`+socket+`"`, "the control socket was removed while the node ran") {
				t.Errorf("stop did not say that the socket was removed:\n%s", d.log)
			}
			os.Remove(socket) // the daemon's cleanup checks that none is left
		})
	}
}
