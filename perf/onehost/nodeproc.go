package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"graphnode/node/client"
)

// nodeProc is a `node run` started for the measurements, with its socket
// in a temporary directory and its rings in a directory of their own under
// /dev/shm, so that a ring file left behind is seen.
type nodeProc struct {
	cmd    *exec.Cmd
	dir    string // config and socket
	rings  string
	socket string
	done   chan error
}

func startNode(bin, parts string) (*nodeProc, error) {
	abs, err := filepath.Abs(parts)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "graphnode-onehost-")
	if err != nil {
		return nil, err
	}
	rings, err := os.MkdirTemp("/dev/shm", "graphnode-onehost-")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	n := &nodeProc{dir: dir, rings: rings, socket: filepath.Join(dir, "node.sock"), done: make(chan error, 1)}
	cfg := fmt.Sprintf(`version = 1
[node]
parts = %q
part = 0
name = "onehost"
[control]
socket = %q
[rings]
dir = %q
[log]
level = "warn"
format = "text"
`, abs, n.socket, rings)
	path := filepath.Join(dir, "node.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		n.cleanup()
		return nil, err
	}
	n.cmd = exec.Command(bin, "run", "-c", path)
	n.cmd.Stdout, n.cmd.Stderr = os.Stderr, os.Stderr
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := n.cmd.Start(); err != nil {
		n.cleanup()
		return nil, err
	}
	go func() { n.done <- n.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.Stats(ctx, n.socket)
		cancel()
		if err == nil {
			break
		}
		select {
		case werr := <-n.done:
			n.done <- werr
			n.kill()
			return nil, fmt.Errorf("node run exited before it was ready: %v", werr)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.kill()
			return nil, fmt.Errorf("node run not ready after 60s: %w", err)
		}
	}
	fmt.Printf("node run: pid %d, socket %s, rings in %s, load %s\n", n.cmd.Process.Pid, n.socket, rings, loadAvg())
	return n, nil
}

// measure runs one client and adds the CPU time the node and its
// samplers spent meanwhile: the node reaps each sampler when its loader
// closes, so once the node lists no loader its counters hold theirs.
func (n *nodeProc) measure(run func() (clientStats, error)) (clientStats, error) {
	pid := n.cmd.Process.Pid
	cpu0, err := cpuProc(pid)
	if err != nil {
		return clientStats{}, err
	}
	st, err := run()
	if err != nil {
		return st, err
	}
	if err := n.idle(); err != nil {
		return st, err
	}
	cpu1, err := cpuProc(pid)
	if err != nil {
		return st, err
	}
	st.cpu += (cpu1 - cpu0).Seconds()
	return st, nil
}

// idle waits until the node lists no loader, then checks that no ring
// file is left.
func (n *nodeProc) idle() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := client.Stats(ctx, n.socket)
		cancel()
		if err != nil {
			return err
		}
		if len(st.Loaders) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node still lists %d loaders 30s after the client closed", len(st.Loaders))
		}
		time.Sleep(50 * time.Millisecond)
	}
	left, err := ringFiles(n.rings)
	if err == nil && len(left) > 0 {
		err = fmt.Errorf("ring files left after the loader closed: %v", left)
	}
	return err
}

// stop sends SIGTERM, waits for the node, and checks that it removed its
// socket and left no ring file.
func (n *nodeProc) stop() error {
	n.cmd.Process.Signal(syscall.SIGTERM)
	var werr error
	select {
	case werr = <-n.done:
	case <-time.After(30 * time.Second):
		n.kill()
		return errors.New("node run did not exit 30s after SIGTERM")
	}
	var problems []error
	if werr != nil {
		problems = append(problems, fmt.Errorf("node run: %w", werr))
	}
	if _, err := os.Stat(n.socket); err == nil {
		problems = append(problems, fmt.Errorf("socket %s left after SIGTERM", n.socket))
	}
	left, err := ringFiles(n.rings)
	if err == nil && len(left) > 0 {
		problems = append(problems, fmt.Errorf("ring files left after SIGTERM: %v", left))
	}
	if len(problems) == 0 {
		fmt.Println("node run: stopped by SIGTERM; socket removed, no ring file left")
	}
	n.cleanup()
	return errors.Join(problems...)
}

// kill ends the node if it still runs and removes the directories.
func (n *nodeProc) kill() {
	if n.cmd != nil && n.cmd.ProcessState == nil {
		n.cmd.Process.Kill()
		select {
		case err := <-n.done:
			n.done <- err
		case <-time.After(10 * time.Second):
		}
	}
	n.cleanup()
}

func (n *nodeProc) cleanup() {
	os.RemoveAll(n.dir)
	os.RemoveAll(n.rings)
}

// pyLoader runs the Python benchmark script with the same loader options
// and reads its "RESULT-JSON {…}" line.
func pyLoader(exe, script, socket string, o clientOpts) (clientStats, error) {
	args := []string{script, "--socket", socket, "--workers", strconv.Itoa(o.workers),
		"--concurrency", strconv.Itoa(o.concurrency), "--batches", strconv.Itoa(o.batches),
		"--epochs", strconv.Itoa(max(o.epochs, 1)),
		"--fanouts", "15,10,5", "--batch-size", strconv.Itoa(benchBatch), "--seed", strconv.Itoa(benchSeed)}
	if o.ringSize != "" {
		args = append(args, "--ring-size", o.ringSize)
	}
	if o.prefill {
		args = append(args, "--prefill")
	}
	cmd := exec.Command(exe, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		os.Stdout.Write(out.Bytes())
		return clientStats{}, fmt.Errorf("%s: %w", script, err)
	}
	var r struct {
		Batches int     `json:"batches"`
		Edges   int64   `json:"edges"`
		Wall    float64 `json:"wall"`
		Total   int     `json:"total"`
		CPU     float64 `json:"cpu"`        // the script's CPU seconds, open to close
		Client  float64 `json:"client_cpu"` // its CPU seconds in the timed window
	}
	found := false
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "RESULT-JSON "); ok {
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				return clientStats{}, fmt.Errorf("%s: %q: %w", script, line, err)
			}
			found = true
		} else {
			fmt.Println("  | " + line)
		}
	}
	if !found {
		return clientStats{}, fmt.Errorf("%s printed no RESULT-JSON line", script)
	}
	// The interpreter's start-up and imports are not counted: the script
	// reports its CPU time from open to close, as goLoader does.
	return clientStats{batches: r.Batches, edges: r.Edges, wall: r.Wall, total: r.Total, cpu: r.CPU, client: r.Client}, nil
}
