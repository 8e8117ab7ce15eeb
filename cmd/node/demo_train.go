package main

// The demo's training: one node train per node, and the report of each
// epoch once every trainer gave it, with the mesh's traffic and the cache's
// hits, and a live status line on a terminal meanwhile.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// rankEpoch is one trainer's epoch line.
type rankEpoch struct {
	rank int
	line epochLine
}

// train runs one `node train` per node and prints one line per epoch
// once every trainer reported it.
func (f *demoFlags) train(ctx context.Context, a *app, cl *demoCluster, exe string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lines := make(chan rankEpoch)
	errs := make([]error, f.parts)
	var wg sync.WaitGroup
	for r := range f.parts {
		cmd := exec.CommandContext(ctx, exe, f.trainArgs(cl.sockets[r], r)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		logPath := filepath.Join(cl.work, fmt.Sprintf("train%d.log", r))
		logf, err := os.Create(logPath)
		if err != nil {
			return err
		}
		defer logf.Close()
		cmd.Stderr = logf
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		wg.Go(func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var l epochLine
				if json.Unmarshal(sc.Bytes(), &l) == nil && (l.Batches > 0 || l.TrainS > 0) {
					select {
					case lines <- rankEpoch{r, l}:
					case <-ctx.Done():
					}
				}
			}
			io.Copy(io.Discard, stdout)
			if err := cmd.Wait(); err != nil && ctx.Err() == nil {
				errs[r] = fmt.Errorf("trainer %d: %v; its log %s:\n%s", r, err, logPath, tail(logPath))
				cancel()
			}
		})
	}
	go func() {
		wg.Wait()
		close(lines)
	}()
	f.report(ctx, a, cl, lines)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// report prints an epoch once every rank sent it, with the cluster's
// mesh traffic and cache hits over the epoch, and a live status line on
// a terminal meanwhile.
func (f *demoFlags) report(ctx context.Context, a *app, cl *demoCluster, lines <-chan rankEpoch) {
	got := map[int][]epochLine{}
	status := newStatusLine(a.stderr)
	var prevBatches uint64
	sample := func() (bytes, hits, miss, batches uint64) {
		sts, err := cl.stats(ctx)
		if err != nil {
			return 0, 0, 0, prevBatches
		}
		for _, s := range sts {
			hits += s.CacheHits
			miss += s.CacheMisses
			batches += s.Batches
			if s.Mesh != nil {
				for _, p := range s.Mesh.Peers {
					bytes += p.Out.BytesSent + p.Out.BytesReceived
				}
			}
		}
		return
	}
	_, _, _, prevBatches = sample()
	fmt.Fprintf(a.stdout, "training GraphSAGE on %d nodes, one trainer each (fanouts %s, batch %d, %d epochs)\n", f.parts, f.fanouts, f.batch, f.epochs)
	// Samplers run ahead of the trainers (as far as the rings allow), so
	// mesh traffic and cache hits are totals since the start.
	fmt.Fprintln(a.stdout, "epoch    loss  train    val   test  batches/s   edges/s  mesh MB  cache hits  epoch s  loader wait   (mesh, cache: totals so far)")
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	epoch := 0
	for {
		select {
		case re, ok := <-lines:
			if !ok {
				status.clear()
				return
			}
			got[re.line.Epoch] = append(got[re.line.Epoch], re.line)
			ls := got[epoch]
			if len(ls) < f.parts {
				continue
			}
			delete(got, epoch)
			bytes, hits, miss, _ := sample()
			var bps, eps, secs, wait float64
			for _, l := range ls {
				bps += l.BatchesPerS
				eps += l.EdgesPerS
				secs = max(secs, l.TrainS)
				wait = max(wait, l.WaitS/max(l.TrainS, 1e-9))
			}
			l := ls[0]
			hitRate := 0.0
			if hits+miss > 0 {
				hitRate = float64(hits) / float64(hits+miss)
			}
			val, test := "     -", "     -"
			if l.Evaluated {
				val, test = fmt.Sprintf("%6.3f", l.ValAcc), fmt.Sprintf("%6.3f", l.TestAcc)
			}
			status.clear()
			fmt.Fprintf(a.stdout, "%5d  %6.4f  %5.3f %s %s  %9.1f  %8s  %7.1f  %9.1f%%  %7.1f  %10.1f%%\n", l.Epoch, l.Loss, l.TrainAcc, val, test,
				bps, count(int64(eps)), float64(bytes)/1e6, 100*hitRate, secs, 100*wait)
			epoch++
		case <-tick.C:
			_, _, _, batches := sample()
			status.show(fmt.Sprintf("epoch %d/%d: %d batches sampled", epoch+1, f.epochs, batches-prevBatches))
		}
	}
}

// statusLine is a one-line live status on a terminal (nothing otherwise),
// cleared before each result line.
type statusLine struct {
	w   io.Writer
	tty bool
}

func newStatusLine(w io.Writer) *statusLine {
	p := newProgress(w)
	return &statusLine{w: w, tty: p.tty}
}

func (s *statusLine) show(text string) {
	if s.tty {
		fmt.Fprintf(s.w, "\r\033[K%s", text)
	}
}

func (s *statusLine) clear() {
	if s.tty {
		fmt.Fprint(s.w, "\r\033[K")
	}
}
