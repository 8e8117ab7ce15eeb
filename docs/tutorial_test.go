// Package docs tests the documents in this folder. TestTutorial runs
// the shell blocks of tutorial.md as they are written, in order, in one
// bash, and holds their output to the sample output the tutorial shows,
// so that a flag, a message or an output line changed under it fails.
package docs

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"graphnode/internal/datasets"
)

const (
	// tutorialLimit bounds the whole tutorial (about 30s): a safety net
	// for a step that hangs (the wait for "node ready" loops until both
	// nodes say it), not a timing.
	tutorialLimit = 5 * time.Minute
	// blockMark starts the line the script prints before each block
	// (and after the last), which cuts its output back into blocks.
	blockMark = "@@ docs/tutorial_test.go: block "
)

// TestTutorial runs tutorial.md's sh blocks, from `make build` to the
// stop of the nodes, in a directory laid out as the tutorial expects (see
// layOut), and checks the output of each against the lines starting
// with "# " under it (see matchSample): a sample line must match a whole
// line of the output, in order, "…" standing for any text, and the last
// one (unless it is "…") the block's last line. Once the tutorial ends
// nothing it started may run, and nothing it made may be left in
// /dev/shm or in its directory.
//
// The tutorial's loopback ports are replaced with free ones, and
// MASTER_PORT (train_sage.py's rendezvous, 29500 by default) is set to
// one: two runs at once, or anything else on the machine, may hold them.
func TestTutorial(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, starts two nodes and trains on Cora twice; skipped with -short")
	}
	cora := datasets.Dir(t, "cora")
	md, err := os.ReadFile("tutorial.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := shellBlocks(onFreePorts(t, string(md)))
	if err != nil {
		t.Fatalf("tutorial.md: %v", err)
	}
	if len(blocks) == 0 {
		t.Fatal("tutorial.md: no sh blocks")
	}

	root := t.TempDir()
	work := layOut(t, root, cora)
	script := filepath.Join(root, "tutorial.sh")
	if err := os.WriteFile(script, []byte(bashScript(blocks)), 0o644); err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(root, "output")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command("bash", script)
	// The output goes to a file, not through a pipe: the nodes of a
	// step that failed still hold it, and Wait would wait for them.
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = work, tutorialEnv(t), out, out
	start := time.Now()
	g := startGroup(t, cmd)
	t.Cleanup(func() { g.finish(t) }) // whether the test passes or fails
	var runErr error
	select {
	case runErr = <-g.exited:
	case <-time.After(tutorialLimit):
		runErr = fmt.Errorf("still running after %v", tutorialLimit)
	}
	took := time.Since(start)
	text, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	outputs, reached := cutOutput(string(text), len(blocks))
	if runErr != nil || reached < len(blocks) {
		b := blocks[max(reached, 0)]
		t.Fatalf("tutorial.md %v: bash: %v; the block:\n%s\nits output:\n%s%s", b, runErr, indent(strings.Split(b.script, "\n")), indent(outputs[max(reached, 0)]), logs(work))
	}
	t.Logf("the tutorial's %d blocks ran in %.1fs", len(blocks), took.Seconds())

	for i, b := range blocks {
		trains := slices.ContainsFunc(trainers, func(c string) bool { return strings.Contains(b.script, c) })
		if err := matchSample(b.sample, outputs[i], trains); err != nil {
			t.Errorf("tutorial.md %v: %v; the output:\n%s", b, err, indent(outputs[i]))
			continue
		}
		if trains {
			acc, err := accuracyHolds(b.sample, outputs[i])
			if err != nil {
				t.Errorf("tutorial.md %v: %v", b, err)
				continue
			}
			t.Logf("tutorial.md %v: test accuracy %.4f (quoted: %s)", b, acc, b.sample[len(b.sample)-1])
		}
	}

	// The processes and /dev/shm are checked by g.finish.
	if left := leftInWork(t, work); len(left) > 0 {
		t.Errorf("the tutorial left %v in its directory", left)
	}
}

// loopback is a loopback address in the tutorial.
var loopback = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// onFreePorts is md with each loopback address in it (the nodes' mesh
// addresses) on a port of its own that is free now.
func onFreePorts(t *testing.T, md string) string {
	t.Helper()
	var addrs []string
	for _, a := range loopback.FindAllString(md, -1) {
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	ports := freePorts(t, "udp", len(addrs)) // the mesh is QUIC
	to := map[string]string{}
	for i, a := range addrs {
		to[a] = "127.0.0.1:" + ports[i]
	}
	return loopback.ReplaceAllStringFunc(md, func(a string) string { return to[a] })
}

// tutorialEnv is this process's environment as a user's shell has it:
// without the variables of a make that runs the tests (make build would
// print "make[2]: Entering directory" around its line), nor a bash
// startup file, nor the rendezvous of a torchrun around the tests; and
// with MASTER_PORT on a free port.
func tutorialEnv(t *testing.T) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "BASH_ENV", "ENV", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE":
		default:
			env = append(env, kv)
		}
	}
	return append(env, "MASTER_PORT="+freePorts(t, "tcp", 1)[0])
}

// bashScript is blocks as one script, stopping at the first command that
// fails (a reader would stop there too), with blockMark and the block's index printed before each block
// and the number of blocks after the last.
func bashScript(blocks []block) string {
	var b strings.Builder
	b.WriteString("set -euo pipefail\n")
	for i, bl := range blocks {
		fmt.Fprintf(&b, "printf '\\n%s%d\\n'\n%s", blockMark, i, bl.script)
	}
	fmt.Fprintf(&b, "printf '\\n%s%d\\n'\n", blockMark, len(blocks))
	return b.String()
}

// cutOutput cuts text, the script's output, into the output lines of
// each of its n blocks, without the blank lines the marks put at their
// ends; reached is the index of the last mark in it: n once every block
// ran, the block that failed otherwise, -1 if bash failed before the
// first.
func cutOutput(text string, n int) (outputs [][]string, reached int) {
	outputs = make([][]string, n+1)
	reached = -1
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, blockMark); ok {
			if i, err := strconv.Atoi(rest); err == nil && i >= 0 && i <= n {
				reached = i
				continue
			}
		}
		if reached >= 0 {
			outputs[reached] = append(outputs[reached], line)
		}
	}
	for i, out := range outputs {
		for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
			out = out[:len(out)-1]
		}
		outputs[i] = out
	}
	return outputs[:n], reached
}

// layOut makes the directory the tutorial runs in, root/repo, and returns
// it: a link to each entry of this checkout but those the tutorial makes
// (bin, by make build, and cora) and those make build does not need
// (dot files, build/ of make demo), and root/shared/data/cora, the
// tutorial's ../shared/data/cora, a link to Cora's files. make build
// writes bin/node there, not in the checkout.
func layOut(t *testing.T, root, cora string) string {
	t.Helper()
	checkout, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(checkout)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "repo")
	data := filepath.Join(root, "shared", "data")
	for _, dir := range []string{work, data} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{filepath.Join(data, "cora"): cora}
	for _, e := range ents {
		if name := e.Name(); !strings.HasPrefix(name, ".") && !slices.Contains([]string{"bin", "build", "cora"}, name) {
			links[filepath.Join(work, name)] = filepath.Join(checkout, name)
		}
	}
	for link, to := range links {
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	return work
}

// leftInWork is what the tutorial left in its directory but the links
// layOut made and the binary it built.
func leftInWork(t *testing.T, work string) []string {
	t.Helper()
	ents, err := os.ReadDir(work)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		if e.Type()&os.ModeSymlink == 0 && e.Name() != "bin" {
			left = append(left, e.Name())
		}
	}
	return left
}

// logs is the last lines of each log the tutorial writes in cora/, for
// the message of a step that failed.
func logs(work string) string {
	const tail = 40
	paths, _ := filepath.Glob(filepath.Join(work, "cora", "*.log"))
	var b strings.Builder
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(text), "\n"), "\n")
		fmt.Fprintf(&b, "\ncora/%s:\n%s", filepath.Base(p), indent(lines[max(len(lines)-tail, 0):]))
	}
	return b.String()
}

// indent is lines indented for a test's message.
func indent(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// freePorts is n distinct loopback ports free now for network ("udp"
// or "tcp"): each socket is held until all are chosen, as a port let go
// may be handed out again at once.
func freePorts(t *testing.T, network string, n int) []string {
	t.Helper()
	var ports []string
	for range n {
		var addr net.Addr
		if network == "udp" {
			c, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			addr = c.LocalAddr()
		} else {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			addr = l.Addr()
		}
		_, port, _ := net.SplitHostPort(addr.String())
		ports = append(ports, port)
	}
	return ports
}
