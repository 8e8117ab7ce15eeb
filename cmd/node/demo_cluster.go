package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"graphnode/mesh"
	"graphnode/node/client"
	"graphnode/node/control"
)

// demoCluster is the demo's `node run` children on loopback: certificates,
// one node.toml and log per part in the work directory, and a private
// directory in /dev/shm for their rings and control sockets (a socket's
// path may not pass 107 bytes, which one in a deep --workdir or $TMPDIR
// did: the nodes refused it once the graph was partitioned).
type demoCluster struct {
	exe     string
	work    string
	ringDir string
	// ringLock holds ringDir's lock while the cluster runs (makeDemoDir).
	ringLock *os.File
	configs  []string
	sockets  []string
	logs     []string
	procs    []*exec.Cmd
	exited   []chan error
}

// startDemoCluster writes certificates and configs and starts one node
// per part; it returns once every node reports ready.
// A port is chosen free, then released for its node to bind: another
// process may take it in between, and the cluster is then started again
// on other ports, up to demoStartTries times in all.
func startDemoCluster(ctx context.Context, exe, work, parts string, n int, ringSize string, workers int) (*demoCluster, error) {
	for try := 1; ; try++ {
		c, err := newDemoCluster(exe, work, parts, n, ringSize, workers)
		for i := 0; err == nil && i < n; i++ {
			err = c.start(i, nil)
		}
		if err == nil {
			err = c.waitReady(ctx, 60*time.Second)
		}
		if err == nil || try == demoStartTries || !c.portTaken() {
			return c, err
		}
		c.stop()
		if err := os.RemoveAll(filepath.Join(work, "certs")); err != nil {
			return c, err
		}
	}
}

// demoStartTries bounds startDemoCluster's starts.
const demoStartTries = 3

// portTaken reports whether a node failed to bind its mesh address
// because another process holds it.
func (c *demoCluster) portTaken() bool {
	for _, l := range c.logs {
		if b, err := os.ReadFile(l); err == nil && bytes.Contains(b, []byte("address already in use")) {
			return true
		}
	}
	return false
}

// newDemoCluster writes the certificates and one node.toml per part of
// a cluster on loopback; start starts its nodes.
func newDemoCluster(exe, work, parts string, n int, ringSize string, workers int) (*demoCluster, error) {
	c := &demoCluster{exe: exe, work: work}
	var err error
	if c.ringDir, c.ringLock, err = makeDemoDir(demoRingDir); err != nil {
		return c, fmt.Errorf("ring directory: %w", err)
	}
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("node%d", i)
	}
	addrs, err := mesh.LoopbackAddrs(n)
	if err != nil {
		return c, err
	}
	certs := filepath.Join(work, "certs")
	if err := mesh.WriteCluster(certs, mesh.ClusterSpec{Cluster: "demo", Nodes: names}); err != nil {
		return c, err
	}
	var peers strings.Builder
	for i := range n {
		fmt.Fprintf(&peers, "[[mesh.peers]]\npart = %d\nname = %q\naddr = %q\n\n", i, names[i], addrs[i])
	}
	for i := range n {
		sock := filepath.Join(c.ringDir, names[i]+".sock")
		cfg := fmt.Sprintf(`version = 1
[node]
parts = %q
part = %d
name = %q
[control]
socket = %q
mode = "0600"
[rings]
dir = %q
size = %q
[samplers]
workers = %d
[mesh]
certs = %q
cluster = "demo"
%s[kv]
sync_timeout = "30s"
[log]
level = "warn"
format = "text"
`, parts, i, names[i], sock, c.ringDir, ringSize, workers, certs, peers.String())
		path := filepath.Join(work, names[i]+".toml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			return c, err
		}
		c.configs = append(c.configs, path)
		c.sockets = append(c.sockets, sock)
		c.logs = append(c.logs, filepath.Join(work, names[i]+".log"))
		c.procs = append(c.procs, nil)
		c.exited = append(c.exited, nil)
	}
	return c, nil
}

// start starts node i (`node run -c` its config, output to its log) with
// env added to this process's environment.
func (c *demoCluster) start(i int, env []string) error {
	logf, err := os.Create(c.logs[i])
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(c.exe, "run", "-c", c.configs[i])
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	// Pdeathsig: a node never outlives the demo, even when it is killed.
	// Setpgid: a terminal's Ctrl-C or hangup reaches the demo alone, which
	// stops its nodes with one SIGTERM (stop); in the demo's group they
	// got the signal too, and the SIGTERM, their second signal, ended
	// them at once instead of draining.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node%d: %w", i, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	c.procs[i], c.exited[i] = cmd, done
	return nil
}

// waitReady polls every started node's stats until it is ready.
func (c *demoCluster) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for i, sock := range c.sockets {
		if c.procs[i] == nil {
			continue
		}
		for {
			select {
			case err := <-c.exited[i]:
				c.exited[i] <- err
				return fmt.Errorf("node%d exited at start (%v); its log %s:\n%s", i, err, c.logs[i], tail(c.logs[i]))
			default:
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := client.Stats(sctx, sock)
			cancel()
			if err == nil && st.Ready {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("node%d not ready after %v (%v); its log %s:\n%s", i, limit, err, c.logs[i], tail(c.logs[i]))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// stats asks every node for its stats.
func (c *demoCluster) stats(ctx context.Context) ([]*control.Stats, error) {
	out := make([]*control.Stats, len(c.sockets))
	for i, s := range c.sockets {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := client.Stats(sctx, s)
		cancel()
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// stop sends SIGTERM to every node (they drain and remove their sockets
// and rings), waits, kills what is left after 15 s, and removes the ring
// directory. It reports what it found left in the ring directory.
func (c *demoCluster) stop() error {
	for _, p := range c.procs {
		if p != nil {
			p.Process.Signal(syscall.SIGTERM)
		}
	}
	var errs []error
	for i, p := range c.procs {
		if p == nil {
			continue // never started
		}
		select {
		case err := <-c.exited[i]:
			if err != nil {
				errs = append(errs, fmt.Errorf("node%d: %v (log %s)", i, err, c.logs[i]))
			}
		case <-time.After(15 * time.Second):
			p.Process.Kill()
			<-c.exited[i]
			errs = append(errs, fmt.Errorf("node%d did not stop within 15 s of SIGTERM; killed", i))
		}
	}
	if c.ringDir != "" {
		left, _ := os.ReadDir(c.ringDir)
		for _, e := range left {
			if e.Name() != demoLockName {
				errs = append(errs, fmt.Errorf("left behind in %s: %s", c.ringDir, e.Name()))
			}
		}
		if err := os.RemoveAll(c.ringDir); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ringLock != nil {
		c.ringLock.Close()
	}
	return errors.Join(errs...)
}

// tail is the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}
