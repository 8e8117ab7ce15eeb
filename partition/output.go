package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The output directory of Write: what may be written where, and how the
// finished partitioning is put in place.

// OutputCheck is what CheckOutput found at an output directory, for
// Write (WriteOptions.Checked): the run begins at the check.
type OutputCheck struct {
	dir   string
	force bool
	// replacing: force, and dir held something, which the user asked to
	// replace. Without it, what dir holds by the end appeared during the
	// run, and is kept.
	replacing bool
}

// CheckOutput reports whether Write may write dir with force: dir does
// not exist, is empty, or force is set and it is a directory, and where
// Write makes its temporary directory can be written. Callers run it
// before the work that precedes Write and give Write what it returns:
// what dir holds by then that the check did not see appeared during the
// run, and is kept, not refused up front (which threw the work away).
func CheckOutput(dir string, force bool) (*OutputCheck, error) {
	replacing, err := checkOutput(dir, force)
	if err != nil {
		return nil, err
	}
	// Write makes its temporary directory in dir's target when that is
	// an empty directory (see makeTemp), else beside it.
	target := resolved(dir)
	where := filepath.Dir(filepath.Clean(target))
	if ents, err := os.ReadDir(target); err == nil && len(ents) == 0 {
		where = target
	}
	if err := probeWritable(dir, where); err != nil {
		return nil, err
	}
	return &OutputCheck{dir: dir, force: force, replacing: replacing}, nil
}

// heldError is checkOutput's refusal of what dir holds: a file, entries
// without force, entries in a mount point with force. When CheckOutput
// passed dir as the run began, they appeared during it.
type heldError struct{ msg string }

func (e *heldError) Error() string { return e.msg }

// checkOutput refuses an existing non-empty dir unless force; replacing
// says that force will replace what dir holds. A refusal of what dir
// holds is a *heldError.
func checkOutput(dir string, force bool) (replacing bool, err error) {
	st, err := os.Stat(dir)
	if os.IsNotExist(err) {
		// Write would make the partitioning beside the link and fail to
		// rename it over the link, once the work was done.
		return false, danglingLink(dir)
	}
	if err != nil {
		return false, fmt.Errorf("partition: output: %w", err)
	}
	if !st.IsDir() {
		return false, &heldError{fmt.Sprintf("partition: output %s exists and is not a directory", dir)}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("partition: output: %w", err)
	}
	if len(ents) > 0 && !force {
		// Named, since ls hides some: the temporary directory that a
		// killed run (out of memory, say) left in an empty output.
		return false, &heldError{fmt.Sprintf("partition: output %s exists and is not empty (--force replaces it): it holds %s%s", dir, entryNames(ents, 3), tempNote(ents, ".tmp-"))}
	}
	if len(ents) > 0 && isMountPoint(dir) {
		return false, &heldError{fmt.Sprintf("partition: output %s is a mount point, which --force cannot move aside to replace it whole: empty it (the partitioning is then written into it) or write into a directory inside it", dir)}
	}
	return len(ents) > 0, nil
}

// isTemp reports whether e is a directory that a writer makes in or
// beside the output and removes once done, named prefix: its temporary
// output (.tmp-), or the previous output it moved aside (.old-).
func isTemp(e os.DirEntry, prefix string) bool {
	return e.IsDir() && strings.HasPrefix(e.Name(), prefix)
}

// tempNote says, of entries among which some are writers' temporary
// directories (named prefix), what they are; "" when none is.
func tempNote(ents []os.DirEntry, prefix string) string {
	if !slices.ContainsFunc(ents, func(e os.DirEntry) bool { return isTemp(e, prefix) }) {
		return ""
	}
	return " (" + prefix + "* is the temporary output of a run that did not finish, killed before it put its output in place, or of one writing now: remove it once none runs)"
}

// Leftover is a directory beside the output that another writer of it
// left there, found by Leftovers.
type Leftover struct {
	Path string
	// Old says it holds the partitioning that the output held before a
	// run with Force replaced it (.NAME.old-*), moved aside to be
	// removed: that run was killed or failed before the removal was
	// done, or is removing it now (see replaceDir). Otherwise it is the
	// temporary output (.NAME.tmp-*) of a run killed before it put its
	// output in place, or of one writing now.
	Old bool
}

// Leftovers are the directories of other writers of the output found
// beside it when the run began, which no later run removes (one may be
// running). One in the output (.tmp-*) is refused by CheckOutput with
// tempNote, or replaced with it by --force.
func (c *OutputCheck) Leftovers() []Leftover {
	// Write makes them beside where an output that is a link points.
	clean := filepath.Clean(resolved(c.dir))
	parent, base := filepath.Dir(clean), "."+filepath.Base(clean)
	ents, _ := os.ReadDir(parent)
	var out []Leftover
	for _, e := range ents {
		if old := isTemp(e, base+".old-"); old || isTemp(e, base+".tmp-") {
			out = append(out, Leftover{Path: filepath.Join(parent, e.Name()), Old: old})
		}
	}
	return out
}

// danglingLink refuses a dir that is a symbolic link to nothing, naming
// where it points: a writer that makes dir fails on it once the work
// is done ("file exists", "not a directory"). nil otherwise.
func danglingLink(dir string) error {
	if st, err := os.Lstat(dir); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	to, _ := os.Readlink(dir)
	return fmt.Errorf("partition: output %s is a link to %s, which does not exist: make that directory (mkdir -p) or give another output", dir, to)
}

// probeWritable makes and removes a directory in where or, when where
// does not exist yet, in its nearest existing ancestor (where mkdir -p
// starts), as the writer will. An output on a read-only file system or
// in a directory the user may not write to failed only once the input
// was read and partitioned, hours on the largest graphs. dir is the
// output the error names.
func probeWritable(dir, where string) error {
	at := filepath.Clean(where)
	for {
		_, err := os.Stat(at)
		if up := filepath.Dir(at); errors.Is(err, fs.ErrNotExist) && up != at {
			at = up
			continue
		}
		break
	}
	probe, err := mkdirTemp(at, ".graphnode-probe-")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("partition: output %s: cannot write in %s: %w", dir, at, err)
	}
	if err := os.Remove(probe); err != nil {
		return fmt.Errorf("partition: output %s: %w", dir, err)
	}
	return nil
}

// entryNames lists the first n names of ents, and how many more.
func entryNames(ents []os.DirEntry, n int) string {
	var names []string
	for _, e := range ents[:min(len(ents), n)] {
		names = append(names, e.Name())
	}
	s := strings.Join(names, ", ")
	if len(ents) > n {
		s += fmt.Sprintf(" and %d more", len(ents)-n)
	}
	return s
}

// resolved is dir, or where it points when it is a symbolic link (or a
// path through one): Write writes there, and makes its temporary
// directories in or beside that.
func resolved(dir string) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return real
	}
	return dir
}

// isMountPoint reports whether the directory dir resolves to is on
// another file system than its parent: a file system root, which cannot
// be renamed.
func isMountPoint(dir string) bool {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	a, err := os.Stat(real)
	if err != nil {
		return false
	}
	b, err := os.Stat(filepath.Dir(real))
	if err != nil {
		return false
	}
	sa, okA := a.Sys().(*syscall.Stat_t)
	sb, okB := b.Sys().(*syscall.Stat_t)
	return okA && okB && sa.Dev != sb.Dev
}

// makeTemp makes the temporary directory Write writes into. An output
// that exists (empty: checkOutput refused it otherwise, unless
// replacing) holds it, so that the files land on dir's own file system
// and dir itself stays: a disk mounted there for the partitions (which
// cannot be renamed over, and whose parent's disk would have taken the
// files), a directory made for the user in one the user may not write
// to, its mode and owner. Otherwise it is made beside dir, whose
// missing parents are made as by mkdir -p (as node gen makes its
// output): CheckOutput, which callers run before the hours of work
// before Write, passes them. into says which.
func makeTemp(dir string, replacing bool) (tmp string, into bool, err error) {
	if st, err := os.Stat(dir); err == nil && st.IsDir() && !replacing {
		tmp, err := mkdirTemp(dir, ".tmp-")
		if err != nil {
			return "", false, fmt.Errorf("partition: %w", err)
		}
		return tmp, true, nil
	}
	parent, base := filepath.Split(filepath.Clean(dir))
	if parent == "" {
		parent = "."
	}
	if err := os.MkdirAll(parent, 0o777); err != nil {
		return "", false, fmt.Errorf("partition: output %s: %w", dir, err)
	}
	if tmp, err = mkdirTemp(parent, "."+base+".tmp-"); err != nil {
		return "", false, fmt.Errorf("partition: %w", err)
	}
	return tmp, false, nil
}

// placeNew puts the complete partitioning in tmp at dir, replacing
// nothing: dir was absent or empty when the run began, and whatever
// appeared in it since (the user's files, another run's partitioning)
// is neither replaced nor removed. tmp, beside dir, is renamed onto
// dir, which rename(2) does only while dir is absent or an empty
// directory; tmp inside dir (into) has its entries moved up, none onto
// a name that exists. When dir was written to, the error names what it
// holds and where the finished partitioning is: it took hours on the
// largest graphs, so it is kept, and the caller does not remove tmp.
// force says the run had --force, which found nothing to replace.
func placeNew(tmp, dir string, into, force bool) error {
	if into {
		if others := outputEntries(dir, ".tmp-"); len(others) > 0 {
			return outputChanged(tmp, dir, force, others, nil, "")
		}
		if err := moveIntoNoReplace(tmp, dir); err != nil {
			return outputChanged(tmp, dir, force, outputEntries(dir, ".tmp-"), err, "")
		}
		if err := SyncDir(dir); err != nil {
			return err
		}
		if err := os.Remove(tmp); err != nil {
			return fmt.Errorf("partition: %w", err)
		}
		return nil
	}
	if err := os.Rename(tmp, dir); err != nil {
		return outputChanged(tmp, dir, force, outputEntries(dir, "."+filepath.Base(dir)+".tmp-"), err, "")
	}
	return SyncDir(filepath.Dir(dir))
}

// outputEntries lists dir's entries but the temporary directories of
// writers running in it, named tmpPrefix (this one's among them: their
// work is not yet the user's).
func outputEntries(dir, tmpPrefix string) []os.DirEntry {
	ents, _ := os.ReadDir(dir)
	return slices.DeleteFunc(ents, func(e os.DirEntry) bool { return isTemp(e, tmpPrefix) })
}

// outputChanged is the error of placeNew when something appeared in dir
// during the run (others: what it holds now), or putting tmp there
// failed (err); tmp is kept. force says the run had --force, replaces
// what a rerun with it replaces ("" for all dir holds).
func outputChanged(tmp, dir string, force bool, others []os.DirEntry, err error, replaces string) error {
	if replaces == "" {
		replaces = "what " + dir + " holds"
	}
	hint := "move it where it belongs, or rerun with --force to replace " + replaces
	if force {
		hint = "move it where it belongs"
	}
	kept := fmt.Sprintf("the finished output is left whole in %s (%s)", tmp, hint)
	st, serr := os.Lstat(dir)
	file := serr == nil && !st.IsDir()
	if len(others) == 0 && !file && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) && !errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("partition: output %s: %w; %s", dir, err, kept)
	}
	what := "something appeared in it"
	switch {
	case file:
		what = "a file appeared in its place"
	case len(others) > 0:
		what = entryNames(others, 3) + " appeared in it"
	}
	held := "and without --force nothing there is replaced or removed"
	if force {
		held = "and --force replaces only what the output held when the run began"
	}
	return fmt.Errorf("partition: output %s: %s during the run, %s; %s: %w", dir, what, held, kept, ErrOutputNotEmpty)
}

// manifestLast lists tmp's entries in the order they are moved up,
// graph.toml last.
func manifestLast(tmp string) ([]os.DirEntry, error) {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	slices.SortStableFunc(ents, func(a, b os.DirEntry) int {
		return boolCmp(a.Name() == ManifestFile, b.Name() == ManifestFile)
	})
	return ents, nil
}

// moveIntoNoReplace moves the entries of tmp, a complete partitioning
// made in dir, up into dir, graph.toml last (until it is there, dir is
// no partitioning that OpenDir takes), and replaces none of dir's: an
// entry whose name exists there fails the move, and the entries moved
// before it are moved back into tmp, which it leaves.
func moveIntoNoReplace(tmp, dir string) error {
	ents, err := manifestLast(tmp)
	if err != nil {
		return err
	}
	for i, e := range ents {
		if err := renameNoReplace(filepath.Join(tmp, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			for _, moved := range slices.Backward(ents[:i]) {
				if uerr := os.Rename(filepath.Join(dir, moved.Name()), filepath.Join(tmp, moved.Name())); uerr != nil {
					return fmt.Errorf("partition: move output into place: %w; moving %s back failed too: %v", err, moved.Name(), uerr)
				}
			}
			return fmt.Errorf("partition: move output into place: %w", err)
		}
	}
	return nil
}

// renameNoReplace is os.Rename but fails with EEXIST where to exists,
// whatever it is: rename(2) replaces a file, a link or an empty
// directory. A file system without RENAME_NOREPLACE gets a look before
// the rename, which leaves a window.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if _, lerr := os.Lstat(to); lerr == nil {
			err = unix.EEXIST
		} else {
			return os.Rename(from, to)
		}
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// boolCmp orders false before true.
func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
