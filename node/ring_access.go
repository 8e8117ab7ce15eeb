package node

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"graphnode/shm"
)

// ringAccess is who may map this node's ring files: the group that may
// connect to the control socket, and no one else but the node's user.
// The zero value (before listen) is 0600 and the group a new file gets.
type ringAccess struct {
	mode  os.FileMode // 0: shm's default, 0600
	group bool        // give every ring gid
	gid   int
}

// ringAccessOf is the access of rings beside the control socket at path,
// once bound, chmodded and (with control.group) chowned: mode (RingMode:
// 0660 when the socket's mode lets its group connect, else 0600) and,
// with group access, the socket's group, whichever gave it
// (control.group, the node's, or its directory's when that is setgid and
// control.group is unset).
// Reading the socket's group instead of assuming the node's: with a
// setgid socket directory, rings of the node's group were open to that
// group, which could not connect, and closed to the socket's, which
// could. A socket whose group the node cannot give a file is a
// configuration error: every ring would fail.
func ringAccessOf(path string, mode os.FileMode) (ringAccess, error) {
	if mode&0o060 == 0 {
		// The group cannot connect (write): nor map a ring, whatever
		// group the ring has.
		return ringAccess{mode: 0o600}, nil
	}
	st, err := os.Lstat(path)
	if err != nil {
		return ringAccess{}, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return ringAccess{}, fmt.Errorf("%s: no owner in its file status", path)
	}
	gid := int(sys.Gid)
	if !mayGiveGroup(gid) {
		dir := filepath.Dir(path)
		return ringAccess{}, fmt.Errorf("%s has group %d, given by its directory %s (setgid), and this node (uid %d, gid %d) is not in it: "+
			"its rings could not have that group, so the group's trainers could connect and not map them; "+
			"add the node's user to group %d, or set [control] group to a group of the node's: %w",
			path, gid, dir, os.Geteuid(), os.Getegid(), gid, ErrConfig)
	}
	return ringAccess{mode: mode, group: true, gid: gid}, nil
}

// mayGiveGroup reports whether this process may give its files group gid
// (chown(2): its own group, one of its supplementary groups, or root).
func mayGiveGroup(gid int) bool {
	if os.Geteuid() == 0 || gid == os.Getegid() {
		return true
	}
	groups, err := os.Getgroups()
	return err != nil || slices.Contains(groups, gid) // unknown: Create says
}

// ringOptions are the options of a new ring file of this node: its
// access (listen) with the given sub-rings and record space.
func (n *Node) ringOptions(subRings int, capacity int64) shm.Options {
	return shm.Options{
		SubRings: subRings, Capacity: capacity,
		Mode: n.ringAccess.mode, Group: n.ringAccess.group, GID: n.ringAccess.gid,
		Prealloc: true,
	}
}
