package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SocketLost reports whether the control socket's path no longer holds
// the socket this node bound (removed, or another file put there) while
// the node runs: no trainer can connect, though the node serves the
// connections it has. False before the socket is bound.
func (n *Node) SocketLost() bool {
	if !n.bound.Load() {
		return false
	}
	st, err := os.Lstat(n.cfg.Control.Socket)
	return errors.Is(err, fs.ErrNotExist) || err == nil && !os.SameFile(st, n.sock)
}

// Alive reports whether the node answers stats in-process within ctx: its
// lock is free. The watchdog asks it when the socket is lost and it
// cannot ask through the socket.
func (n *Node) Alive(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		n.stats()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("node: stats in-process: %w", context.Cause(ctx))
	}
}

// removeSocket removes the control socket file if it is still the one
// listen bound. Once removed while the node runs (by hand, or a cleaner
// of /tmp or /run), the path is no longer the node's: another node may
// have bound its own socket there since, or the operator put a file
// there, and removing it would cut that node off from its trainers or
// lose the file. It reports whether it removed the socket.
func (n *Node) removeSocket() (bool, error) {
	// A second signal's Abandon may run beside Run's end: the one that
	// comes second must find the socket removed by the first, not log
	// that it was removed while the node ran.
	n.sockMu.Lock()
	defer n.sockMu.Unlock()
	path := n.cfg.Control.Socket
	if n.sockRemoved {
		return false, nil
	}
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		n.log.Warn("the control socket was removed while the node ran: trainers could not connect since", "socket", path)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node: remove control socket: %w", err)
	}
	if n.sock == nil || !os.SameFile(st, n.sock) {
		n.log.Warn("the control socket was removed while the node ran and the path holds another file now (another node's socket?): left as it is",
			"socket", path, "file", fileKind(st.Mode()))
		return false, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("node: remove control socket: %w", err)
	}
	n.sockRemoved = true
	return true, nil
}

// acceptRetries reports whether an accept error passes by itself: the
// process or the system out of descriptors or memory, or a connection
// that went away before it was accepted.
func acceptRetries(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// listen binds the control socket. A socket file nobody answers on is a
// leftover of a crashed node and is replaced; one that answers is refused.
func (n *Node) listen() (*net.UnixListener, error) {
	path := n.cfg.Control.Socket
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			// Not a socket a crashed node left: the path names the
			// operator's file or directory, which must not be removed.
			return nil, fmt.Errorf("node: control.socket: %s exists and is not a socket (%s): choose another path: %w", path, fileKind(st.Mode()), ErrConfig)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("node: control.socket: another node is serving socket %s: %w", path, ErrServing)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("node: control.socket: remove stale socket: %w", err)
		}
		n.log.Info("removed stale socket", "socket", path)
	}
	mode, _ := n.cfg.SocketMode()
	ln, st, err := bindSocket(path, mode, n.gid)
	if err != nil {
		return nil, fmt.Errorf("node: control.socket: %w", err)
	}
	if n.ringAccess, err = ringAccessOf(path, n.cfg.RingMode()); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("node: control.socket: %w", err)
	}
	n.sock = st
	return ln, nil
}

// bindSocket binds a Unix socket at path, gives it mode and, for gid >= 0,
// group gid, and returns its listener and its file as bound. The file is
// made with no access for group and others, then widened: nobody can
// connect before the mode and group are those asked. bind(2) makes the
// file with the mode of the socket, less the umask: the socket is given
// 0600 before it is bound. The umask itself, set around the bind before,
// is the whole process's: a file that another goroutine made meanwhile (a
// kv marker) and a sampler started meanwhile took it too, which a bind
// while the node serves (rebind) must not risk.
func bindSocket(path string, mode os.FileMode, gid int) (*net.UnixListener, os.FileInfo, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = unix.Fchmod(int(fd), 0o600) }); cerr != nil {
			return cerr
		}
		return err
	}}
	l, err := lc.Listen(context.Background(), "unix", path)
	if err != nil {
		return nil, nil, err
	}
	ln := l.(*net.UnixListener)
	ln.SetUnlinkOnClose(false)
	err = os.Chmod(path, mode)
	if err == nil && gid >= 0 {
		err = os.Chown(path, -1, gid)
	}
	var st os.FileInfo
	if err == nil {
		st, err = os.Lstat(path)
	}
	if err != nil {
		ln.Close()
		os.Remove(path)
		return nil, nil, err
	}
	return ln, st, nil
}

// fileKind names the type of a file mode for an error message.
func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "a regular file"
	case fs.ModeDir:
		return "a directory"
	case fs.ModeSymlink:
		return "a symbolic link"
	case fs.ModeNamedPipe:
		return "a named pipe"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "a device"
	}
	return "file mode " + m.Type().String()
}
