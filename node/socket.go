package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SocketLost reports whether the control socket's path no longer holds
// the socket this node bound (removed, or another file put there) while
// the node runs: no trainer can connect, though the node serves the
// connections it has. False before the socket is bound, and again once
// checkSocket has bound it anew.
func (n *Node) SocketLost() bool {
	if !n.bound.Load() {
		return false
	}
	n.sock.Lock()
	defer n.sock.Unlock()
	st, err := os.Lstat(n.cfg.Control.Socket)
	return errors.Is(err, fs.ErrNotExist) || err == nil && !os.SameFile(st, n.sock.file)
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
// the node bound last (listen, or a rebind), and binds none again. Once
// removed while the node runs (by hand, or a cleaner of /tmp or /run),
// the path is no longer the node's until it binds it anew: another node
// may have bound its own socket there since, or the operator put a file
// there, and removing it would cut that node off from its trainers or
// lose the file. It reports whether it removed the socket.
func (n *Node) removeSocket() (bool, error) {
	// A second signal's Abandon may run beside Run's end: the one that
	// comes second must find the socket removed by the first, not log
	// that it was removed while the node ran.
	n.sock.Lock()
	defer n.sock.Unlock()
	n.sock.stopped = true
	path := n.cfg.Control.Socket
	if n.sock.removed {
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
	if n.sock.file == nil || !os.SameFile(st, n.sock.file) {
		n.log.Warn("the control socket was removed while the node ran and the path holds another file now (another node's socket?): left as it is",
			"socket", path, "file", fileKind(st.Mode()))
		return false, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("node: remove control socket: %w", err)
	}
	n.sock.removed = true
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
	n.sock.Lock()
	n.sock.ln, n.sock.file = ln, st
	n.sock.Unlock()
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
	case fs.ModeSocket:
		return "a socket"
	case fs.ModeNamedPipe:
		return "a named pipe"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "a device"
	}
	return "file mode " + m.Type().String()
}

// socketCheck is how often a running node looks at its control socket's
// path (checkSocket): the longest a removed socket leaves trainers out,
// whose clients do not retry a connect. An lstat(2) a second is no work
// to speak of; the watchdog's period (15 s under the unit, and no check
// at all without systemd) would leave them out for that long.
const socketCheck = time.Second

// keepSocket runs checkSocket every sockCheck until ctx ends.
func (n *Node) keepSocket(ctx context.Context) {
	period := n.sockCheck
	if period <= 0 {
		period = socketCheck
	}
	every(ctx, period, n.checkSocket)
}

// checkSocket binds the control socket again when its path holds nothing:
// its file was removed (by hand, or a cleaner of /tmp or /run), which cut
// every new trainer off until a restart, and the restart's drain ended the
// running trainers' jobs. A path that holds another file (another node's
// socket, an operator's file or directory) is not this node's and is left
// as it is. That, and a bind that fails, is logged with why, when it is
// new and then once a minute while it lasts; the next check tries again.
func (n *Node) checkSocket() {
	n.sock.Lock()
	defer n.sock.Unlock()
	if n.sock.stopped {
		return
	}
	st, err := os.Lstat(n.cfg.Control.Socket)
	switch {
	case err == nil && os.SameFile(st, n.sock.file):
		n.sock.lost = ""
	case err == nil:
		file := fileKind(st.Mode())
		if st.Mode().Type() == fs.ModeSocket {
			file += " (another node's?)"
		}
		n.lostLocked("the control socket was removed, or another file put in its place, while the node ran: no trainer can connect, nor node kv save; "+
			"the path holds a file that is not this node's to replace, so the socket is not bound again: move the file away and the node binds its socket within a second, "+
			"or restart the node (systemctl restart drains it and writes its kv exit save); the node serves the connections it has",
			"file", file)
	case !errors.Is(err, fs.ErrNotExist):
		n.lostLocked("the control socket's path cannot be looked at while the node runs: trainers may not connect, and the socket is not bound again",
			"err", err)
	default:
		if err := n.rebindLocked(); err != nil {
			n.lostLocked("the control socket was removed while the node ran and binding it again failed: no trainer can connect, nor node kv save; the node tries again every second",
				"err", err)
		}
	}
}

// lostLocked logs msg with attrs (and the socket's path) when they differ
// from what was logged last or that was a minute ago. n.sock must be held.
func (n *Node) lostLocked(msg string, attrs ...any) {
	lost := fmt.Sprint(append([]any{msg}, attrs...)...)
	if lost == n.sock.lost && time.Since(n.sock.told) < time.Minute {
		return
	}
	n.sock.lost, n.sock.told = lost, time.Now()
	n.log.Error(msg, append([]any{"socket", n.cfg.Control.Socket}, attrs...)...)
}

// rebindLocked binds the control socket at its path, which held nothing,
// as listen did (bindSocket: the same mode, and the group the first
// socket had, which the rings have too, whatever its directory gives a
// new file now), and makes it the one Run accepts on and the one the node
// removes at its stop. The listener of the removed socket is closed; the
// connections it accepted go on until their trainers close them.
// n.sock must be held.
func (n *Node) rebindLocked() error {
	path := n.cfg.Control.Socket
	mode, _ := n.cfg.SocketMode()
	gid := n.gid
	if n.ringAccess.group {
		gid = n.ringAccess.gid
	}
	ln, st, err := bindSocket(path, mode, gid)
	if err != nil {
		// Under the unit, only a restart helps: its sandbox
		// (ProtectSystem=strict) leaves writable the RuntimeDirectory=
		// systemd made at the start, and a directory made again by hand
		// in its place is read-only to the node.
		const unit = "under systemd, restart the node (RuntimeDirectory= makes it at the start; one made again by hand is read-only to the unit's sandbox, ProtectSystem=strict)"
		dir := filepath.Dir(path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && !exists(dir):
			// systemd makes it as the unit starts (RuntimeDirectory=),
			// with the owner and mode the unit gives it, and removes it
			// at the stop; without systemd it is the operator's. The
			// node, which may not even write /run, does not guess them.
			return fmt.Errorf("its directory %s is gone, which the node does not make: %s; without systemd, make it again (with the owner and mode trainers need), or restart the node", dir, unit)
		case errors.Is(err, syscall.EROFS):
			return fmt.Errorf("%w: its directory %s is read-only to the node: %s; without systemd, make it writable, or restart the node", err, dir, unit)
		}
		return err
	}
	old := n.sock.ln
	n.sock.ln, n.sock.file, n.sock.lost = ln, st, ""
	old.Close() // Run's Accept on it returns, and it accepts on ln
	n.log.Warn("the control socket was removed while the node ran: re-created it; trainers can connect again", "socket", path)
	return nil
}

// listener is the listener Run accepts on now; nil once it accepts no more.
func (n *Node) listener() *net.UnixListener {
	n.sock.Lock()
	defer n.sock.Unlock()
	if n.sock.stopped {
		return nil
	}
	return n.sock.ln
}

// stopAccepting closes the listener Run accepts on, and no socket is bound
// again. The connections it accepted stay open.
func (n *Node) stopAccepting() {
	n.sock.Lock()
	defer n.sock.Unlock()
	n.sock.stopped = true
	if n.sock.ln != nil {
		n.sock.ln.Close()
	}
}
