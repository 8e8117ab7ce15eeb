package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Replacing the output that Write with Force writes over: the finished
// partitioning, in a temporary directory beside the output, takes the
// output's name, and the previous one is removed.

// replaceRename, replaceExchange and replaceRemove are renameNoReplace,
// exchange and os.RemoveAll; tests make them fail.
var (
	replaceRename   = renameNoReplace
	replaceExchange = exchange
	replaceRemove   = os.RemoveAll
)

// replaceDir puts tmp, a complete partitioning made beside dir, at dir
// in place of what dir holds, and removes that. Where the file system
// exchanges two names in one rename (RENAME_EXCHANGE: ext4, xfs, btrfs,
// tmpfs) dir holds the whole previous partitioning or the whole new one
// at every moment, a crash included: a node starting, or node fetch
// serving, finds one of the two. Elsewhere (NFS, say) the previous one
// is moved aside and tmp renamed to dir, which is absent in between;
// should that second rename fail, the previous one is moved back. An
// empty dir is replaced the same way: the exchange keeps its name
// present, and one path has fewer cases than a remove and a rename.
//
// The previous partitioning is removed from .NAME.old-N beside dir,
// named so that what a run killed or failing during the removal leaves
// is told from a run's temporary output (.NAME.tmp-N) by the next run
// (Leftovers). Every error says where the previous partitioning and the
// new one are; tmp, when it still holds the new one, is the caller's to
// keep.
func replaceDir(tmp, dir string) error {
	parent, old := filepath.Dir(tmp), oldPath(tmp, dir)
	if st, err := os.Lstat(dir); err == nil && !st.IsDir() {
		// A file or a link put in dir's place during the run is the
		// user's, not the partitioning that --force replaces: the
		// exchange swaps it out as readily as a directory, and the
		// removal took it. It is kept, as placeNew keeps it. (Put
		// there between this look and the exchange, it is not.)
		return outputChanged(tmp, dir, true, nil, nil, "")
	}
	err := replaceExchange(tmp, dir)
	switch {
	case err == nil:
		// tmp holds the previous partitioning now, under a name that
		// says it is unfinished work.
		if replaceRename(tmp, old) != nil {
			old = tmp
		}
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, fs.ErrNotExist):
		// No exchange here, or dir went during the run.
		if old, err = moveAside(tmp, dir, old); err != nil {
			return err
		}
	default:
		return fmt.Errorf("partition: output %s: swap in the new partitioning: %w; %s is as it was, and the finished output is left whole in %s", dir, err, dir, tmp)
	}
	if err := SyncDir(parent); err != nil {
		// The renames may not last: the previous partitioning stays.
		if old == "" {
			return err
		}
		return fmt.Errorf("%w (%s holds the new partitioning, %s the previous one)", err, dir, old)
	}
	if old == "" {
		return nil
	}
	if err := replaceRemove(old); err != nil {
		return fmt.Errorf("partition: output %s holds the new partitioning, but the previous one, moved aside to %s, was not removed: %w: remove it", dir, old, err)
	}
	return nil
}

// moveAside is replaceDir where the file system has no exchange: dir is
// renamed to old and tmp to dir, and should that fail, old back to dir.
// It returns old, or "" where dir held nothing to move aside.
func moveAside(tmp, dir, old string) (string, error) {
	if err := replaceRename(dir, old); errors.Is(err, fs.ErrNotExist) {
		old = ""
	} else if err != nil {
		return "", fmt.Errorf("partition: output %s: move the previous partitioning aside: %w; %s is as it was, and the finished output is left whole in %s", dir, err, dir, tmp)
	}
	err := replaceRename(tmp, dir)
	switch {
	case err == nil:
		return old, nil
	case old == "":
		return "", fmt.Errorf("partition: output %s: rename the new partitioning into place: %w; the finished output is left whole in %s", dir, err, tmp)
	}
	if uerr := replaceRename(old, dir); uerr != nil {
		return "", fmt.Errorf("partition: output %s: rename the new partitioning into place: %w; moving the previous partitioning back failed too (%v): it is in %s, and the finished output in %s: move one of them to %s", dir, err, uerr, old, tmp, dir)
	}
	return "", fmt.Errorf("partition: output %s: rename the new partitioning into place: %w; the previous partitioning is back in %s, and the finished output is left whole in %s", dir, err, dir, tmp)
}

// oldPath names the directory beside dir that holds the previous
// partitioning while it is removed: .NAME.old-N, N that of tmp
// (.NAME.tmp-N), which is this run's alone.
func oldPath(tmp, dir string) string {
	base := filepath.Base(dir)
	n := strings.TrimPrefix(filepath.Base(tmp), "."+base+".tmp-")
	return filepath.Join(filepath.Dir(tmp), "."+base+".old-"+n)
}

// exchange swaps the names from and to, both of which must exist, in one
// rename (renameat2 RENAME_EXCHANGE). It fails with EINVAL or ENOSYS
// where the file system or the kernel cannot.
func exchange(from, to string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_EXCHANGE); err != nil {
		return &os.LinkError{Op: "exchange", Old: from, New: to, Err: err}
	}
	return nil
}
