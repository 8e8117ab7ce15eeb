package shm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestName(t *testing.T) {
	for _, tc := range []struct {
		base   string
		prefix string
		pid    int
		ok     bool
	}{
		{Name("graphnode", 1234, 7), "graphnode", 1234, true},
		{"graphnode-1234-7.ring", "graphnode", 1234, true},
		{"graphnode-1234-7.ring", "other", 0, false},
		{"graphnode-x-7.ring", "graphnode", 0, false},
		{"graphnode-0-7.ring", "graphnode", 0, false},
		{"graphnode-1234.ring", "graphnode", 0, false},
		{"graphnode-1234-7.tmp", "graphnode", 0, false},
		{"graphnode-1234-7-8.ring", "graphnode", 0, false},
	} {
		pid, ok := parseName(tc.base, tc.prefix)
		if pid != tc.pid || ok != tc.ok {
			t.Errorf("parseName(%q, %q) = %d, %v; want %d, %v", tc.base, tc.prefix, pid, ok, tc.pid, tc.ok)
		}
	}
	if got := Name("gn", 42, 3); got != "gn-42-3.ring" {
		t.Errorf("Name = %q, want gn-42-3.ring", got)
	}
}

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
	deadRing := mk(Name("gn", dead, 1), live)       // header says live, name says dead
	liveRing := mk(Name("gn", live, 2), live)       // live creator
	otherPrefix := mk(Name("other", dead, 3), dead) // not ours to sweep
	if err := os.WriteFile(filepath.Join(dir, Name("gn", dead, 4)), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, Name("gn", dead, 4)) // unreadable header, dead name pid
	ownRing := mk(Name("gn", self, 5), self)        // a predecessor's with this pid
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
// a ring still open) or not, and nobody else's.
func TestRemoveOwn(t *testing.T) {
	dir := testDir(t)
	self, other := os.Getpid(), os.Getppid()
	opts := Options{SubRings: 1, Capacity: PageSize}
	open1, err := Create(filepath.Join(dir, Name("gn", self, 1)), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer open1.Close()
	closed, err := Create(filepath.Join(dir, Name("gn", self, 2)), opts)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	keep := []string{filepath.Join(dir, Name("gn", other, 1)), filepath.Join(dir, Name("other", self, 3)), filepath.Join(dir, "gn-notes.txt")}
	for _, p := range keep {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveOwn(dir, "gn", self)
	want := []string{filepath.Join(dir, Name("gn", self, 1)), filepath.Join(dir, Name("gn", self, 2))}
	if slices.Sort(removed); err != nil || !slices.Equal(removed, want) {
		t.Fatalf("removed %v, %v; want %v", removed, err, want)
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
	if _, err := RemoveOwn(filepath.Join(dir, "missing"), "gn", self); err == nil || !strings.Contains(err.Error(), "missing") {
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
	reused := mk(Name("gn", live, 1), live, false)  // creator died, its pid now another live process's
	foreign := mk(Name("gn", dead, 2), dead, true)  // live creator whose pid is dead here
	own := mk(Name("gn", self, 3), self, true)      // this process's live ring
	ownDead := mk(Name("gn", self, 4), self, false) // a predecessor's with this pid
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
