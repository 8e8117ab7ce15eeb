package csr

import (
	"io/fs"
	"syscall"
)

// stampOf is what Check compares of fi (the open file's fstat): a write
// or a truncation moves the mtime, and the ctime even when the copy
// puts the mtime back afterwards (cp -p, scp -p).
func stampOf(fi fs.FileInfo) stamp {
	st := fi.Sys().(*syscall.Stat_t)
	return stamp{size: fi.Size(), mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// inodeOf is the device and inode of fi, for Identity.
func inodeOf(fi fs.FileInfo) (dev, ino uint64) {
	st := fi.Sys().(*syscall.Stat_t)
	return uint64(st.Dev), st.Ino
}
