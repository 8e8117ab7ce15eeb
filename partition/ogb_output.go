package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The output directory of WriteOGB: what may be written there, and how
// the finished raw/ and split/ are put in place.

// ogbTmpPrefix names WriteOGB's temporary directories inside the output.
const ogbTmpPrefix = ".ogb.tmp-"

// ogbSwap moves tmp's raw/ and split/ into dir, with force the ones
// there before into tmp (which the caller removes); without force onto
// no name that exists in dir. Renames within one directory
// need no space, so once the files are written this does not fail for a
// full disk; should a rename fail all the same, the renames already done
// are undone, so that dir holds the old raw/ and split/, not the new raw/
// beside the old split/.
func ogbSwap(dir, tmp string, force bool) (err error) {
	type move struct{ from, to string }
	var done []move
	place := ogbRename
	if !force {
		place = renameNoReplace
	}
	mv := func(from, to string, rename func(string, string) error) error {
		if err := rename(from, to); err != nil {
			return err
		}
		done = append(done, move{from, to})
		return nil
	}
	defer func() {
		if err == nil {
			return
		}
		for i := len(done) - 1; i >= 0; i-- {
			if uerr := ogbRename(done[i].to, done[i].from); uerr != nil {
				err = fmt.Errorf("%w; undoing it failed too, %s is left at %s: %v", err, done[i].from, done[i].to, uerr)
				return
			}
		}
	}()
	for _, sub := range []string{"raw", "split"} {
		cur, next := filepath.Join(dir, sub), filepath.Join(tmp, sub)
		if force {
			if err := mv(cur, filepath.Join(tmp, "old-"+sub), ogbRename); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("partition: write ogb: move the old %s aside: %w", sub, err)
			}
		}
		if err := mv(next, cur, place); err != nil {
			return fmt.Errorf("partition: write ogb: move %s into place: %w", sub, err)
		}
	}
	return SyncDir(dir)
}

// ogbRename is os.Rename; tests make it fail.
var ogbRename = os.Rename

// ogbPrepareDir makes sure dir is absent or empty unless force; with
// force it removes the temporary directories of an earlier WriteOGB that
// was killed. replacing says that dir holds a raw/ or split/ to replace.
func ogbPrepareDir(dir string, force bool) (replacing bool, err error) {
	ents, err := ogbCheckDir(dir, force)
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		switch name := e.Name(); {
		case strings.HasPrefix(name, ogbTmpPrefix) && e.IsDir():
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return false, fmt.Errorf("partition: write ogb: %w", err)
			}
		case name == "raw" || name == "split":
			replacing = true
		}
	}
	return replacing, nil
}

// CheckOGBOutput reports whether WriteOGB may write dir with force (dir
// is absent or empty, or force is set, and it can be written), changing
// nothing. WriteOGB checks again; callers use it to fail before
// generating a graph.
func CheckOGBOutput(dir string, force bool) error {
	if _, err := ogbCheckDir(dir, force); err != nil {
		return err
	}
	// WriteOGB makes dir, as by mkdir -p, and its temporary directory in it.
	return probeWritable(dir, dir)
}

// ogbCheckDir is CheckOGBOutput; it returns dir's entries.
func ogbCheckDir(dir string, force bool) ([]os.DirEntry, error) {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, danglingLink(dir) // MkdirAll failed on it: "file exists"
	case err != nil:
		return nil, fmt.Errorf("partition: write ogb: %w", err)
	case len(ents) > 0 && !force:
		return nil, fmt.Errorf("partition: write ogb %s: holds %d entries (overwrite with force): %w", dir, len(ents), ErrOutputNotEmpty)
	}
	return ents, nil
}
