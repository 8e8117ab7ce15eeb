package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The output directory of WriteOGB: what may be written there, and how
// the finished raw/ and split/ are put in place.

// ogbTmpPrefix names WriteOGB's temporary directories inside the output.
const ogbTmpPrefix = ".ogb.tmp-"

// OGBOutputCheck is what CheckOGBOutput found at an output directory,
// for WriteOGB (OGBWriteOptions.Checked): the run begins at the check.
type OGBOutputCheck struct {
	dir   string
	force bool
	plan  ogbPlan
}

// ogbPlan is what a run of WriteOGB does to its output, from what the
// output held as the run began. What it holds by the end that the plan
// does not name appeared during the run, and is kept.
type ogbPlan struct {
	// replace names "raw" and "split" where force is set and dir held
	// them, which the user asked to replace.
	replace map[string]bool
	// stale lists the temporary directories that a killed WriteOGB left
	// in dir, which force removes; one made since is another run's.
	stale []string
}

// replacing says that the run replaces a raw/ or split/.
func (p ogbPlan) replacing() bool { return len(p.replace) > 0 }

// appeared lists what dir holds that the plan does not let the run put
// raw/ and split/ beside (force) or replace: without force anything,
// with force a raw/ or split/ it did not hold as the run began; never
// the temporary directories of runs writing in it.
func (p ogbPlan) appeared(dir string, force bool) []os.DirEntry {
	ents := outputEntries(dir, ogbTmpPrefix)
	if !force {
		return ents
	}
	return slices.DeleteFunc(ents, func(e os.DirEntry) bool {
		return e.Name() != "raw" && e.Name() != "split" || p.replace[e.Name()]
	})
}

// removeStale removes the temporary directories of killed runs that the
// plan names.
func (p ogbPlan) removeStale(dir string) error {
	for _, name := range p.stale {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("partition: write ogb: %w", err)
		}
	}
	return nil
}

// ogbReplaces is what a rerun with --force replaces, as outputChanged
// advises it.
const ogbReplaces = "its raw/ and split/, leaving the rest"

// ogbSwap moves tmp's raw/ and split/ into dir: the ones named in
// replace replace dir's, which go into tmp (which the caller removes);
// the others go onto no name that exists in dir. Renames within one
// directory need no space, so once the files are written this does not
// fail for a full disk; should a rename fail all the same, the renames
// already done are undone, so that dir holds the old raw/ and split/,
// not the new raw/ beside the old split/.
func ogbSwap(dir, tmp string, replace map[string]bool) (err error) {
	type move struct{ from, to string }
	var done []move
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
		place := renameNoReplace
		if replace[sub] {
			if err := mv(cur, filepath.Join(tmp, "old-"+sub), ogbRename); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("partition: write ogb: move the old %s aside: %w", sub, err)
			}
			place = ogbRename
		}
		if err := mv(next, cur, place); err != nil {
			return fmt.Errorf("partition: write ogb: move %s into place: %w", sub, err)
		}
	}
	return SyncDir(dir)
}

// ogbMakeTemp makes the temporary directory WriteOGB writes into: in
// dir, made as by mkdir -p, so that moving raw/ and split/ into place
// needs no space; beside it when dir is not a directory, which only a
// file (or link) that appeared in its place during the run can be, as
// ogbCheckDir refused one at its start (inside false).
func ogbMakeTemp(dir string) (tmp string, inside bool, err error) {
	_, lerr := os.Lstat(dir)
	if st, err := os.Stat(dir); lerr == nil && (err != nil || !st.IsDir()) {
		parent, base := filepath.Split(filepath.Clean(dir))
		if parent == "" {
			parent = "."
		}
		if tmp, err = mkdirTemp(parent, "."+base+ogbTmpPrefix); err != nil {
			return "", false, fmt.Errorf("partition: write ogb: %w", err)
		}
		return tmp, false, nil
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", false, fmt.Errorf("partition: write ogb: %w", err)
	}
	if tmp, err = mkdirTemp(dir, ogbTmpPrefix); err != nil {
		return "", false, fmt.Errorf("partition: write ogb: %w", err)
	}
	return tmp, true, nil
}

// ogbRename is os.Rename; tests make it fail.
var ogbRename = os.Rename

// CheckOGBOutput reports whether WriteOGB may write dir with force (dir
// is absent or empty, or force is set, and it can be written), changing
// nothing. Callers run it before generating the graph and give WriteOGB
// what it returns: what dir holds by then that the check did not see
// appeared during the run, and is kept, not refused up front (which
// threw the graph away).
func CheckOGBOutput(dir string, force bool) (*OGBOutputCheck, error) {
	plan, err := ogbCheckDir(dir, force)
	if err != nil {
		return nil, err
	}
	// WriteOGB makes dir, as by mkdir -p, and its temporary directory in it.
	if err := probeWritable(dir, dir); err != nil {
		return nil, err
	}
	return &OGBOutputCheck{dir: dir, force: force, plan: plan}, nil
}

// ogbCheckDir refuses a dir that WriteOGB may not write with force, and
// plans the run from what it holds.
func ogbCheckDir(dir string, force bool) (ogbPlan, error) {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return ogbPlan{}, danglingLink(dir) // MkdirAll failed on it: "file exists"
	case err != nil:
		return ogbPlan{}, fmt.Errorf("partition: write ogb: %w", err)
	case len(ents) > 0 && !force:
		return ogbPlan{}, fmt.Errorf("partition: write ogb %s: holds %d entries (overwrite with force): %w", dir, len(ents), ErrOutputNotEmpty)
	}
	var plan ogbPlan
	for _, e := range ents {
		switch name := e.Name(); {
		case strings.HasPrefix(name, ogbTmpPrefix) && e.IsDir():
			plan.stale = append(plan.stale, name)
		case name == "raw" || name == "split":
			if plan.replace == nil {
				plan.replace = map[string]bool{}
			}
			plan.replace[name] = true
		}
	}
	return plan, nil
}
