package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress draws one status line per stage on a terminal and stays silent
// otherwise (pipes, CI logs), apart from the final line of each stage
// that finished. Callers defer stop and call done once a stage's work
// succeeded; a stage that another one follows is done.
type progress struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	stage string
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w, tty: isTerminal(w)} }

// isTerminal reports whether w is a terminal, or a writer that wraps one
// (Unwrap, as node demo's demoOutput).
func isTerminal(w io.Writer) bool {
	if u, ok := w.(interface{ Unwrap() io.Writer }); ok {
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// report matches partition.Progress: done out of total (0 = unknown).
func (p *progress) report(stage string, done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if stage != p.stage {
		p.finishLocked(now)
		p.stage, p.start = stage, now
	}
	if !p.tty || now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	if total > 0 {
		fmt.Fprintf(p.w, "\r\033[K%s: %5.1f%% (%s / %s)", stage, 100*float64(done)/float64(total), count(done), count(total))
	} else {
		fmt.Fprintf(p.w, "\r\033[K%s: %s", stage, count(done))
	}
}

// done ends the current stage's line.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finishLocked(time.Now())
	p.stage = ""
}

// stop ends the current stage without calling it done: the work failed
// or was cut off, and its error follows. A terminal's status line is
// cleared; nothing is printed otherwise.
func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stage != "" && p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	p.stage = ""
}

// p.mu must be held.
func (p *progress) finishLocked(now time.Time) {
	if p.stage == "" {
		return
	}
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "%s: done in %.1fs\n", p.stage, now.Sub(p.start).Seconds())
}

// count prints n with a k/M/G suffix.
func count(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
