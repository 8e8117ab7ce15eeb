package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A demo killed outright (SIGKILL, the kernel's OOM killer) removes
// nothing: its nodes die with it (Pdeathsig) before they drain, and its
// ring directory in /dev/shm (gigabytes of rings) and its temporary work
// directory stay, since no node or later demo looked in those private
// directories. So each of the demo's temporary directories holds a lock
// file the demo keeps an flock on while it runs: the kernel drops the
// lock when the process dies however it dies, and a later demo removes
// the directories whose lock it can take (sweepDemoDirs).

// demoDirPrefix starts the names of the demo's temporary directories, in
// /dev/shm (rings and sockets) and in $TMPDIR (the work directory).
const demoDirPrefix = "graphnode-demo-"

// demoLockName is the lock file in each of them. The nodes write only
// their rings (graphnode-*.ring) and sockets into their ring directory,
// so stop tells the lock by its name from what a node left there.
const demoLockName = ".demo.lock"

// makeDemoDir makes a new directory demoDirPrefix* in parent and takes
// its lock, held until the returned file is closed or the process ends.
// The file must stay referenced: a collected *os.File is closed, and its
// lock dropped.
func makeDemoDir(parent string) (dir string, lock *os.File, err error) {
	if dir, err = os.MkdirTemp(parent, demoDirPrefix); err != nil {
		return "", nil, err
	}
	// The lock file takes its name only once it is locked: until then a
	// sweeper finds no lock file and leaves the directory alone (see
	// sweepDemoDirs). Made under its name and then locked, it could be
	// taken, and the live demo's directory removed, in between. The
	// flock belongs to the open file, which the rename keeps.
	tmp := filepath.Join(dir, demoLockName+".new")
	lock, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		if err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			err = os.Rename(tmp, filepath.Join(dir, demoLockName))
		}
		if err != nil {
			lock.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return dir, lock, nil
}

// sweepDemoDirs removes the directories demoDirPrefix* in parent that a
// demo made and that no live process holds the lock of: left by a demo
// killed outright. A directory without a lock file is left alone: it is
// a demo's that has not taken its lock yet, or another program's; so is
// one of another user, and anything but a directory. It returns the
// directories removed.
func sweepDemoDirs(parent string) ([]string, error) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), demoDirPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		gone, err := sweepDemoDir(dir)
		if gone {
			removed = append(removed, dir)
		}
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// sweepDemoDir removes dir if its lock file is this user's and no process
// holds its lock; it reports whether it removed it.
func sweepDemoDir(dir string) (bool, error) {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false, nil // gone meanwhile, or a link
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return false, nil
	}
	lock, err := os.OpenFile(filepath.Join(dir, demoLockName), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, nil // no lock file: not ours to judge
	}
	defer lock.Close()
	switch err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, nil // a live demo's
	case err != nil:
		return false, fmt.Errorf("lock %s: %w", dir, err)
	}
	// The lock is held while the directory goes: a second sweeper finds
	// it taken and leaves the directory to this one.
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove %s, left by a demo that was killed: %w", dir, err)
	}
	return true, nil
}

// errOutputClosed is the cause of a demo stopped by a failed write to its
// stdout or stderr.
var errOutputClosed = errors.New("output closed")

// demoOutput is the demo's stdout or stderr: a write that fails (the
// reader of a pipe went away) stops the demo, which then cleans up.
type demoOutput struct {
	w    io.Writer
	stop context.CancelCauseFunc
}

func (o *demoOutput) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		o.stop(fmt.Errorf("%w (%w)", errOutputClosed, err))
	}
	return n, err
}

// Unwrap is the stream written to (isTerminal looks at it).
func (o *demoOutput) Unwrap() io.Writer { return o.w }

// sweepKilledDemos removes, with sweepDemoDirs, what demos killed outright
// left in /dev/shm and $TMPDIR, saying so on w.
func sweepKilledDemos(w io.Writer) {
	for _, parent := range []string{demoRingDir, os.TempDir()} {
		removed, err := sweepDemoDirs(parent)
		for _, dir := range removed {
			fmt.Fprintf(w, "node demo: removed %s, left by a demo that was killed\n", dir)
		}
		if err != nil {
			fmt.Fprintf(w, "node demo: %v\n", err)
		}
	}
}

// runUntilOutputCloses is f.run, stopped as Ctrl-C stops it when a write
// to its stdout or stderr fails (node demo | head -5): the nodes drain
// and remove their rings, and the work directory goes. Go ends a program
// by SIGPIPE at a failed write to fd 1 or 2 unless SIGPIPE is handled,
// and so it did the demo, its nodes with it (Pdeathsig), leaving
// gigabytes of rings in /dev/shm. Handled, the write fails with EPIPE
// instead (demoOutput). It stays handled until the process exits: the
// error printed on the way out may meet a closed stderr too.
func (f *demoFlags) runUntilOutputCloses(ctx context.Context, a *app) error {
	surviveClosedOutput()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	da := &app{stdout: &demoOutput{w: a.stdout, stop: stop}, stderr: &demoOutput{w: a.stderr, stop: stop}, log: a.log, memory: a.memory}
	err := f.run(ctx, da)
	cleaned := "stopped the nodes and removed the demo's directories"
	if f.keep {
		cleaned = "stopped the nodes and removed their rings; the work directory is kept (--keep)"
	}
	if cause := context.Cause(ctx); errors.Is(cause, errOutputClosed) {
		return fmt.Errorf("%w: %s", cause, cleaned)
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// A signal (Ctrl-C) ended ctx: the bare "context canceled" said
		// neither what stopped the demo nor that it cleaned up. What
		// failed in the cleanup is joined to err, and said after it.
		if err.Error() == context.Canceled.Error() {
			return fmt.Errorf("interrupted by %s: %s", stopSignal(ctx), cleaned)
		}
		return fmt.Errorf("interrupted by %s: %w", stopSignal(ctx), err)
	}
	return err
}
