package docs

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// group is a command run in a process group of its own, with everything
// it starts: bash runs background jobs (`cmd &`) in its own group when
// it has no job control, so a signal to the group reaches the nodes a
// script started and left running.
type group struct {
	cmd    *exec.Cmd
	exited chan error // the command's Wait, once it ends

	mu struct {
		sync.Mutex
		seen map[int]bool // every pid of the group seen so far
	}
	stopWatch chan struct{}
	watched   chan struct{}   // closed when watch returns
	shmBefore map[string]bool // /dev/shm before the start
}

// watchEvery is how often the group's members are listed: the processes
// worth knowing (the nodes, which create rings) live for seconds.
const watchEvery = 100 * time.Millisecond

// startGroup starts cmd in a group of its own and watches the group's
// members until stop.
func startGroup(t *testing.T, cmd *exec.Cmd) *group {
	t.Helper()
	g := &group{cmd: cmd, exited: make(chan error, 1), stopWatch: make(chan struct{}), watched: make(chan struct{}), shmBefore: shmEntries(t)}
	g.mu.seen = map[int]bool{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.exited <- cmd.Wait() }()
	go g.watch()
	return g
}

// finish stops what is left of the group and removes what its processes
// left in /dev/shm, failing t for each (the command should have stopped
// them), or saying so only when t failed already: a step failed before
// the one that stops the nodes.
func (g *group) finish(t *testing.T) {
	report := t.Errorf
	if t.Failed() {
		report = t.Logf
	}
	if left := g.stop(); len(left) > 0 {
		report("processes the tutorial left running (stopped now):\n%s", strings.Join(left, "\n"))
	}
	ours, others := g.leftInShm(t)
	for _, name := range ours {
		report("the tutorial left /dev/shm/%s (removed now)", name)
		os.Remove(filepath.Join("/dev/shm", name))
	}
	if len(others) > 0 {
		t.Logf("new in /dev/shm, by no process of the tutorial (other tests run meanwhile): %v", others)
	}
}

func (g *group) pgid() int { return g.cmd.Process.Pid }

func (g *group) watch() {
	defer close(g.watched)
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	for {
		pids := members(g.pgid())
		g.mu.Lock()
		for _, pid := range pids {
			g.mu.seen[pid] = true
		}
		g.mu.Unlock()
		select {
		case <-g.stopWatch:
			return
		case <-tick.C:
		}
	}
}

// seen is every pid the group had.
func (g *group) seen() map[int]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.mu.seen)
}

// stopGrace is how long the group's processes have to end after
// SIGTERM (a node drains its loaders and removes its rings) before they
// are killed.
const stopGrace = 30 * time.Second

// stop ends what is left of the group, SIGTERM first, and returns the
// command lines of the processes it found (none after a clean run). The
// command itself, if still running, is among them.
func (g *group) stop() (left []string) {
	close(g.stopWatch)
	<-g.watched
	pids := members(g.pgid())
	if len(pids) == 0 {
		return nil
	}
	g.mu.Lock()
	for _, pid := range pids {
		g.mu.seen[pid] = true // one started since the last look
		left = append(left, fmt.Sprintf("  pid %d: %s", pid, cmdline(pid)))
	}
	g.mu.Unlock()
	syscall.Kill(-g.pgid(), syscall.SIGTERM)
	for deadline := time.Now().Add(stopGrace); len(members(g.pgid())) > 0 && time.Now().Before(deadline); {
		time.Sleep(watchEvery)
	}
	syscall.Kill(-g.pgid(), syscall.SIGKILL)
	return left
}

// members is the pids of process group pgid, from /proc, but zombies:
// ended, and not yet reaped by init when their parent ended first.
func members(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		// "pid (comm) state ppid pgrp ...": comm may hold ") ".
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
}

// shmEntries is the names in /dev/shm.
func shmEntries(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name()] = true
	}
	return names
}

// ringCreator is the pid in the name of a node's ring file,
// "graphnode-<pid namespace>-<pid>-<loader>.ring" (shm.Name), or 0.
func ringCreator(name string) int {
	rest, ok := strings.CutPrefix(name, "graphnode-")
	if !ok {
		return 0
	}
	rest, ok = strings.CutSuffix(rest, ".ring")
	f := strings.Split(rest, "-")
	if !ok || len(f) < 2 {
		return 0
	}
	pid, _ := strconv.Atoi(f[len(f)-2])
	return pid
}

// leftInShm is what appeared in /dev/shm since the start: ours, made by
// a process of the group (a ring names its creator), and others. Other
// tests running at the same time make and remove rings there too; what
// they leave is theirs to find.
func (g *group) leftInShm(t *testing.T) (ours, others []string) {
	t.Helper()
	seen := g.seen()
	for name := range shmEntries(t) {
		switch {
		case g.shmBefore[name]:
		case seen[ringCreator(name)]:
			ours = append(ours, name)
		default:
			others = append(others, name)
		}
	}
	slices.Sort(ours)
	slices.Sort(others)
	return ours, others
}

// TestGroupLeftovers: a background process the command leaves running is
// found and stopped, and a ring it made, named after it, is found as the
// group's; a file in /dev/shm named after no process of the group is
// not.
func TestGroupLeftovers(t *testing.T) {
	other := fmt.Sprintf("graphnode-0-%d-7.ring", os.Getpid())
	script := `sleep 600 >/dev/null & : > /dev/shm/graphnode-0-$!-7.ring; : > /dev/shm/` + other + `; echo $!`
	var out bytes.Buffer
	cmd := exec.Command("bash", "-c", script)
	cmd.Stdout = &out
	g := startGroup(t, cmd)
	if err := <-g.exited; err != nil {
		t.Fatal(err)
	}
	sleep, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	ring := fmt.Sprintf("graphnode-0-%d-7.ring", sleep)
	defer os.Remove(filepath.Join("/dev/shm", ring))
	defer os.Remove(filepath.Join("/dev/shm", other))
	for safety := time.Now().Add(time.Minute); !g.seen()[sleep]; { // a safety net, not a timing
		if time.Now().After(safety) {
			t.Fatalf("pid %d of the group not seen in a minute", sleep)
		}
		time.Sleep(watchEvery)
	}
	left := g.stop()
	// Its command line may still be bash's, forked and not yet exec'd.
	if len(left) != 1 || !strings.HasPrefix(left[0], fmt.Sprintf("  pid %d: ", sleep)) {
		t.Errorf("left running: %q, want the sleep, pid %d", left, sleep)
	}
	if pids := members(g.pgid()); len(pids) != 0 {
		t.Errorf("the group after stop: %v, want none", pids)
	}
	ours, others := g.leftInShm(t)
	if !slices.Equal(ours, []string{ring}) || !slices.Contains(others, other) {
		t.Errorf("left in /dev/shm: ours %v, others %v; want ours [%s], and %s among the others", ours, others, ring, other)
	}
}
