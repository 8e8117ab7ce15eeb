package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"graphnode/node/control"
	"graphnode/sample"
	"graphnode/shm"
)

// States of a sampler subprocess, as reported by stats.
const (
	stateRunning = "running"
	stateDone    = "done"   // exited 0
	stateFailed  = "failed" // exited non-zero or by a signal the node did not send
	stateKilled  = "killed" // stopped by the node (loader closed or node draining)
)

// proc is one sampler subprocess of a loader.
type proc struct {
	worker int
	pid    int
	cmd    *exec.Cmd
	done   chan struct{} // closed once the process is reaped

	batches  atomic.Uint64 // batch records written, from its progress lines
	edges    atomic.Uint64 // edges of those batches
	epoch    atomic.Int64
	stopping atomic.Bool // the node asked it to stop

	mu struct {
		sync.Mutex
		state, status string
		// failure is the error the sampler reported before it exited
		// (its "error" line: ReportSamplerError), "" without one.
		failure string
	}
}

// samplerPartFD is the descriptor of the node's partition file in a
// sampler: ExtraFiles[0] (startProc), after stdin, stdout and stderr.
const samplerPartFD = 3

// SamplerCrashFD is the descriptor in a sampler of the pipe its node
// reads the Go runtime's crash report from (SetSamplerCrashOutput):
// ExtraFiles[1].
const SamplerCrashFD = 4

// SetSamplerCrashOutput makes the Go runtime write the report of this
// sampler's crash, should it crash (an unrecovered panic in any
// goroutine, a fatal error), to its node as well as to stderr: to
// descriptor fd, spec.CrashFD, which the node opened for that (startProc)
// and which is closed here once the runtime holds its own copy.
func SetSamplerCrashOutput(fd int) error {
	f := os.NewFile(uintptr(fd), "crash report")
	defer f.Close()
	if err := debug.SetCrashOutput(f, debug.CrashOptions{}); err != nil {
		return fmt.Errorf("crash report to descriptor %d: %w", fd, err)
	}
	return nil
}

// maxCrashReport bounds what the node keeps of a sampler's crash report
// (the panic and the goroutines' stacks); it reads the rest and drops it.
const maxCrashReport = 64 << 10

// startProc re-executes this binary as `node sampler` for worker w, with
// spec (its encoded SamplerSpec) on stdin. Its stdout carries progress
// lines ("progress <batches> <epoch> <edges>", "mesh <report>") and, last,
// the error it fails with ("error <JSON string>": ReportSamplerError),
// which the node logs with its exit status; its stderr is the node's.
// Pdeathsig makes the kernel kill it if the node dies, so a sampler never
// outlives its node. It inherits the node's open partition file as
// samplerPartFD, so that it maps what the node checked and describes, not
// whatever the path holds now, and as SamplerCrashFD the pipe its crash
// report comes back on, which the node logs with its exit.
//
// The spec goes through a pipe the node writes and closes: given as
// cmd.Stdin (a reader the command keeps), it stayed in the node's memory
// for as long as the sampler ran, W copies per loader of up to
// MaxSamplerSpec each (a cluster's split travels in every spec). In a
// cluster it holds the node's private key (SamplerMesh.Identity): that
// pipe is the only way it leaves the node — never argv (the command line
// is "node sampler" alone, readable by every user in /proc), the
// environment or a file — and neither the node nor the sampler logs the
// spec (a sampler's error and crash report carry no part of it).
func (n *Node) startProc(l *loader, w int, spec []byte) (*proc, error) {
	cmd := exec.Command(n.Executable, "sampler")
	cmd.Stderr = n.SamplerStderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	crashR, crashW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("node: loader %d worker %d: %w", l.id, w, err)
	}
	cmd.ExtraFiles = []*os.File{nil, crashW}
	if n.graph != nil { // a client node has none (and starts no sampler)
		cmd.ExtraFiles[0] = n.graph.File()
	}
	in, specW, err := os.Pipe()
	if err != nil {
		crashR.Close()
		crashW.Close()
		return nil, fmt.Errorf("node: loader %d worker %d: %w", l.id, w, err)
	}
	cmd.Stdin = in
	out, err := cmd.StdoutPipe()
	if err != nil {
		in.Close()
		specW.Close()
		crashR.Close()
		crashW.Close()
		return nil, fmt.Errorf("node: loader %d worker %d: %w", l.id, w, err)
	}
	err = cmd.Start()
	in.Close()     // the sampler's end, now its stdin
	crashW.Close() // and its crash report's
	if err != nil {
		specW.Close()
		crashR.Close()
		return nil, fmt.Errorf("node: loader %d worker %d: start %s sampler: %w", l.id, w, n.Executable, err)
	}
	go func() {
		// A sampler that dies before reading it all ends the write
		// (EPIPE); its exit is reported below.
		specW.Write(spec)
		specW.Close()
	}()
	p := &proc{worker: w, pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	p.mu.state = stateRunning
	crash := make(chan string, 1)
	go func() {
		// Read to the end, whatever the size: a sampler must not block
		// on its crash report.
		defer crashR.Close()
		b, _ := io.ReadAll(io.LimitReader(crashR, maxCrashReport))
		io.Copy(io.Discard, crashR)
		crash <- string(b)
	}()
	go func() {
		defer close(p.done)
		skipped, rerr := readLines(out, maxProgressLine, func(line string) { n.progress(l, p, line) })
		if skipped > 0 || rerr != nil {
			n.log.Warn("sampler progress lines lost", "loader", l.id, "worker", w, "pid", p.pid, "over_limit", skipped, "limit_bytes", maxProgressLine, "err", rerr)
		}
		err := cmd.Wait() // reads finished: the pipe is at EOF
		n.exited(l, p, err, <-crash)
	}()
	return p, nil
}

// crashCause is the line of a Go crash report that says what happened
// ("panic: …", "fatal error: …"), or its first line.
func crashCause(report string) string {
	lines := strings.Split(strings.TrimSpace(report), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			return l
		}
	}
	return lines[0]
}

// maxProgressLine bounds one line of a sampler's stdout. Its longest lines
// are the mesh reports, a few hundred bytes per peer (histograms
// included), so this holds thousands of peers.
const maxProgressLine = 4 << 20

// readLines calls apply with each line of r, without its newline, up to
// EOF. A line longer than max is skipped and counted, and reading goes
// on: the sampler writing r must never block on a full pipe, and its
// later lines still count. (bufio.Scanner stops at such a line for good,
// which left the sampler blocked on its next write.)
func readLines(r io.Reader, max int, apply func(string)) (skipped int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	long := false
	for {
		frag, err := br.ReadSlice('\n')
		if !long {
			if len(line)+len(frag) > max+1 { // +1: the newline
				long, line = true, line[:0]
			} else {
				line = append(line, frag...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil && err != io.EOF:
			return skipped, err
		}
		if long {
			skipped++
		} else if l := bytes.TrimSuffix(line, []byte{'\n'}); len(l) > 0 || err == nil {
			apply(string(l))
		}
		if err == io.EOF {
			return skipped, nil
		}
		line, long = line[:0], false
	}
}

// progress applies one progress line of p.
func (n *Node) progress(l *loader, p *proc, line string) {
	if rest, ok := strings.CutPrefix(line, "mesh "); ok {
		var r samplerReport
		if json.Unmarshal([]byte(rest), &r) == nil {
			n.mesh.traffic.report(p, &r)
		}
		return
	}
	if rest, ok := strings.CutPrefix(line, samplerErrorPrefix); ok {
		// A line cut short (the sampler killed while it wrote it) is
		// no JSON string, and is dropped: its exit status says enough.
		var msg string
		if json.Unmarshal([]byte(rest), &msg) == nil && msg != "" {
			p.mu.Lock()
			p.mu.failure = msg
			p.mu.Unlock()
		}
		return
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "progress" {
		return
	}
	b, err1 := strconv.ParseUint(f[1], 10, 64)
	e, err2 := strconv.ParseInt(f[2], 10, 64)
	edges, err3 := strconv.ParseUint(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	if old := p.batches.Swap(b); b > old {
		n.batches.Add(b - old)
	}
	if old := p.edges.Swap(edges); edges > old {
		n.sampledEdges.Add(edges - old)
	}
	p.epoch.Store(e)
}

// exited records how p ended. A sampler that fails on its own is logged
// with its exit status and the error it reported (progress), once, here:
// the sampler does not log it, so it reaches the node's log as one record
// in the node's format, not as a line of text in a JSON journal. The
// trainer learns of it from the ring (an error record, or the ring
// layer's dead-producer error within about a second). crash is the Go
// runtime's report of the sampler's crash (an unrecovered panic, a fatal
// error), "" without one.
func (n *Node) exited(l *loader, p *proc, err error, crash string) {
	status := p.cmd.ProcessState.String()
	state := stateDone
	p.mu.Lock()
	cause := p.mu.failure
	p.mu.Unlock()
	// A crash (a panic in any goroutine) reaches the node as the
	// runtime's report, whose text went to stderr too: the record in the
	// node's log format carries it whole, and the trainer's error its
	// cause. It said "exit status 2", and the panic was plain text in a
	// JSON journal.
	if crash != "" && cause == "" {
		cause = crashCause(crash)
	}
	attrs := func(why string) []any {
		a := []any{"loader", l.id, "worker", p.worker, "pid", p.pid, "status", status, "err", why}
		if crash != "" {
			a = append(a, "crash", crash)
		}
		return a
	}
	switch {
	case p.stopping.Load() && err != nil:
		state = stateKilled
		if cause != "" {
			// It failed while it stopped (its end-of-stream record, say):
			// it says why only to us.
			n.log.Warn("sampler failed while stopping", attrs(cause)...)
		}
	case err != nil:
		state = stateFailed
		n.failures.Add(1)
		why := cause
		if why == "" { // killed, or dead before it could say why
			why = err.Error()
		}
		n.log.Error("sampler failed", attrs(why)...)
	}
	p.mu.Lock()
	p.mu.state, p.mu.status = state, status
	p.mu.Unlock()
	n.mesh.traffic.done(p)
	switch {
	case state == stateFailed:
		msg := fmt.Sprintf("worker %d (pid %d) failed before producing: %s", p.worker, p.pid, status)
		if cause != "" {
			msg += ": " + cause
		}
		n.closeUnattached(l, p, sample.KindError, msg)
	case p.stopping.Load():
		// Stopped by the node, perhaps before it attached (SIGTERM during
		// start-up): the trainer must read "stopped", as from a sampler
		// that drained.
		n.closeUnattached(l, p, sample.KindEndOfStream, "")
	}
}

// closeUnattached writes the last record of a sampler that ended before it
// attached as the producer of its sub-ring — an error record when it
// failed (it could not map the ring, say), end-of-stream when the node
// stopped it — so that the trainer reads why instead of waiting for a
// producer that never comes. A sampler that did attach wrote its own last
// record, or is reported by the ring layer (shm.ErrProducerDead, within
// about a second): a producer's sub-ring cannot be taken over.
func (n *Node) closeUnattached(l *loader, p *proc, kind sample.Kind, msg string) {
	n.mu.Lock()
	ring := l.ring
	n.mu.Unlock()
	if ring == nil {
		return
	}
	prod, err := ring.Producer(p.worker)
	if err != nil {
		return // attached before: its own record, or shm's dead-producer error
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), finalWait)
	defer cancel()
	// A trainer that closed the ring reads nothing more: no warning for
	// a record it does not need (every sampler of a loader closed before
	// its samplers attached used to log one).
	if err := writeControl(ctx, prod, kind, msg); err != nil && !errors.Is(err, shm.ErrConsumerGone) {
		n.log.Warn("could not write the last record of a sampler on the ring", "loader", l.id, "worker", p.worker, "err", err)
	}
}

// stop asks p to finish the batch in hand and write end-of-stream
// (SIGTERM), waits up to grace, then kills it.
func (p *proc) stop(grace time.Duration) {
	p.stopping.Store(true)
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) stats() control.SamplerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return control.SamplerStats{
		Worker: p.worker, PID: p.pid, State: p.mu.state, Status: p.mu.status,
		Batches: p.batches.Load(), Epoch: int(p.epoch.Load()),
	}
}
