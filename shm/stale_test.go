package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestName(t *testing.T) {
	for _, tc := range []struct {
		base   string
		prefix string
		want   creator
		ok     bool
	}{
		{creator{ns: 4026531836, pid: 1234}.name("graphnode", 7), "graphnode", creator{4026531836, 1234}, true},
		{"graphnode-4026531836-1-7.ring", "graphnode", creator{4026531836, 1}, true},
		{"graphnode-0-1234-7.ring", "graphnode", creator{0, 1234}, true}, // a creator without /proc
		{"graphnode-1234-7.ring", "graphnode", creator{0, 1234}, true},   // the older form
		{"graphnode-4026531836-1234-7.ring", "other", creator{}, false},
		{"graphnode-x-1234-7.ring", "graphnode", creator{}, false},
		{"graphnode-4026531836-x-7.ring", "graphnode", creator{}, false},
		{"graphnode-4026531836-0-7.ring", "graphnode", creator{}, false},
		{"graphnode-4026531836-1234-x.ring", "graphnode", creator{}, false},
		{"graphnode-1234.ring", "graphnode", creator{}, false},
		{"graphnode-4026531836-1234-7.tmp", "graphnode", creator{}, false},
		{"graphnode-1-4026531836-1234-7.ring", "graphnode", creator{}, false},
	} {
		c, ok := parseName(tc.base, tc.prefix)
		if c != tc.want || ok != tc.ok {
			t.Errorf("parseName(%q, %q) = %+v, %v; want %+v, %v", tc.base, tc.prefix, c, ok, tc.want, tc.ok)
		}
	}
	if got, want := Name("gn", 3), fmt.Sprintf("gn-%d-%d-3.ring", pidNamespace(), os.Getpid()); got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
}

// here is the creator pid would be in this process's pid namespace.
func here(pid int) creator { return creator{ns: pidNamespace(), pid: pid} }

// TestRemoveStale: files of format 1.0 (no FlagCreatorLock), whose
// creator pids decide.
func TestRemoveStale(t *testing.T) {
	dir := testDir(t)
	// live is another process (go test's), alive while this test runs.
	// This process calls RemoveStale as a daemon does at start, before it
	// creates rings: a file naming it is a predecessor's that had its pid.
	dead, live, self := deadPID(t), os.Getppid(), os.Getpid()
	opts := Options{SubRings: 1, Capacity: PageSize}
	mk := func(name string, creator int) string {
		path := filepath.Join(dir, name)
		r, err := Create(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		putCreator(r, creator)
		putFlags(r, 0)
		r.Close()
		return path
	}
	deadRing := mk(here(dead).name("gn", 1), live)       // header says live, name says dead
	liveRing := mk(here(live).name("gn", 2), live)       // live creator
	otherPrefix := mk(here(dead).name("other", 3), dead) // not ours to sweep
	// An unreadable header and a dead pid in a name of the older form.
	junk := filepath.Join(dir, fmt.Sprintf("gn-%d-4.ring", dead))
	if err := os.WriteFile(junk, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	ownRing := mk(here(self).name("gn", 5), self) // a predecessor's with this pid
	removed, err := RemoveStale(dir, "gn")
	if err != nil {
		t.Fatal(err)
	}
	// The header of deadRing names a live creator, so it is kept: the
	// name alone does not condemn a live creator's file.
	want := []string{junk, ownRing}
	slices.Sort(want)
	if slices.Sort(removed); !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	if r, err := Create(ownRing, opts); err != nil {
		t.Fatalf("Create after the sweep, of the name a predecessor left: %v", err)
	} else {
		r.Remove()
	}
	for _, p := range []string{deadRing, liveRing, otherPrefix} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
	// A file whose name and header both name the dead pid goes.
	r, err := Open(deadRing)
	if err != nil {
		t.Fatal(err)
	}
	putCreator(r, dead)
	r.Close()
	removed, err = RemoveStale(dir, "gn")
	if err != nil || !slices.Equal(removed, []string{deadRing}) {
		t.Fatalf("removed %v, %v; want [%s]", removed, err, deadRing)
	}
	if _, err := RemoveStale(filepath.Join(dir, "missing"), "gn"); err == nil {
		t.Fatal("RemoveStale of a missing directory: nil error")
	}
}

// TestRemoveOwn: a creator removes its own rings, live (its lock held,
// a ring still open) or not, and nobody else's: not those of a process
// with its pid in another pid namespace, nor names of the older form,
// which this build never gives.
func TestRemoveOwn(t *testing.T) {
	dir := testDir(t)
	self, other := os.Getpid(), os.Getppid()
	opts := Options{SubRings: 1, Capacity: PageSize}
	open1, err := Create(filepath.Join(dir, Name("gn", 1)), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer open1.Close()
	closed, err := Create(filepath.Join(dir, Name("gn", 2)), opts)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	keep := []string{
		filepath.Join(dir, here(other).name("gn", 1)),
		filepath.Join(dir, here(self).name("other", 3)),
		filepath.Join(dir, creator{ns: pidNamespace() + 1, pid: self}.name("gn", 4)),
		filepath.Join(dir, fmt.Sprintf("gn-%d-5.ring", self)),
		filepath.Join(dir, "gn-notes.txt"),
	}
	for _, p := range keep {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveOwn(dir, "gn")
	want := []string{filepath.Join(dir, Name("gn", 1)), filepath.Join(dir, Name("gn", 2))}
	if slices.Sort(removed); err != nil || !slices.Equal(removed, want) {
		t.Fatalf("removed %v, %v; want %v", removed, err, want)
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
	if _, err := RemoveOwn(filepath.Join(dir, "missing"), "gn"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("RemoveOwn of a missing directory: %v", err)
	}
}

// TestRemoveStaleByLock: in a file with FlagCreatorLock the creator's lock
// decides, not the pids: a reused pid does not keep a dead creator's file,
// and a live creator whose pid means nothing here (another pid namespace
// sharing the directory) keeps its own.
func TestRemoveStaleByLock(t *testing.T) {
	dir := testDir(t)
	dead, live, self := deadPID(t), os.Getppid(), os.Getpid()
	opts := Options{SubRings: 1, Capacity: PageSize}
	var ownRing *Ring // the last ring mk kept open
	mk := func(name string, creator int, keepOpen bool) string {
		path := filepath.Join(dir, name)
		r, err := Create(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		putCreator(r, creator)
		if keepOpen {
			ownRing = r
			t.Cleanup(func() { r.Remove() })
		} else {
			r.Close()
		}
		return path
	}
	reused := mk(here(live).name("gn", 1), live, false)  // creator died, its pid now another live process's
	foreign := mk(here(dead).name("gn", 2), dead, true)  // live creator whose pid is dead here
	own := mk(here(self).name("gn", 3), self, true)      // this process's live ring
	ownDead := mk(here(self).name("gn", 4), self, false) // a predecessor's with this pid
	// The creator's own consumer waiting on a sub-ring with no producer
	// asks whether the creator is gone; that must not drop its lock.
	c, err := ownRing.Consumer()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Next(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the creator's consumer: %v, want the deadline", err)
	}
	removed, err := RemoveStale(dir, "gn")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{reused, ownDead}
	slices.Sort(want)
	if slices.Sort(removed); !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	for _, p := range []string{foreign, own} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
}

// TestRemoveStaleOtherNamespace: two daemons in containers sharing the
// ring directory are each pid 1 of their own pid namespace. Their ring
// names differ (they used to be the same, and the second daemon's rings
// were refused as existing), and one's sweep at start never removes the
// other's live rings: the lock decides, and a pid of another namespace,
// even this process's own, condemns nothing. A header-less file of
// another namespace goes once nobody has locked it for headerGrace.
func TestRemoveStaleOtherNamespace(t *testing.T) {
	dir := testDir(t)
	self, dead := os.Getpid(), deadPID(t)
	other := pidNamespace() + 1
	opts := Options{SubRings: 1, Capacity: PageSize}
	if a, b := (creator{ns: 11, pid: 1}).name("gn", 1), (creator{ns: 12, pid: 1}).name("gn", 1); a == b {
		t.Fatalf("pid 1 of two namespaces: both name their first ring %s", a)
	}
	// This process's name, then one of another namespace with the same
	// pid and loader id: both are created.
	mine, err := Create(filepath.Join(dir, Name("gn", 1)), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mine.Remove() })
	path := func(pid int, id uint64) string {
		return filepath.Join(dir, creator{ns: other, pid: pid}.name("gn", id))
	}
	live, err := Create(path(self, 1), opts) // its creator's lock held
	if err != nil {
		t.Fatalf("a ring of this pid in another namespace: %v", err)
	}
	t.Cleanup(func() { live.Remove() })
	gone, err := Create(path(self, 2), opts)
	if err != nil {
		t.Fatal(err)
	}
	gone.Close() // its creator ended
	old10, err := Create(path(dead, 3), opts)
	if err != nil {
		t.Fatal(err)
	}
	putFlags(old10, 0) // format 1.0: only pids to go by, and they mean nothing here
	old10.Close()
	headerless := func(id uint64, age time.Duration) string {
		p := path(dead, id)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		then := time.Now().Add(-age)
		if err := os.Chtimes(p, then, then); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fresh := headerless(4, 0)                 // being created, maybe
	abandoned := headerless(5, 2*headerGrace) // its creator died before the header
	locked := headerless(6, 2*headerGrace)    // locked: its creator is still at it
	lock, err := os.Open(locked)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveStale(dir, "gn")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{path(self, 2), abandoned}
	slices.Sort(want)
	if slices.Sort(removed); !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	for _, p := range []string{mine.Path(), live.Path(), path(dead, 3), fresh, locked} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
}
