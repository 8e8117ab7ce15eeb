package multilevel

import "sync"

// Progress receives a long step's progress: stage names the step, done
// of total units are finished (total 0: unknown). Calls never overlap,
// but they may come from any goroutine of the call, so it must not
// assume the caller's; it must return quickly.
type Progress func(stage string, done, total int64)

// Stages Partition reports.
const (
	// StageBisect counts vertex-bisections: a bisection of a graph of m
	// vertices is m units, credited half when its coarsening ends and
	// the rest level by level as each is refined. The total is the
	// expected sum over recursive bisection, n × mlBisectWork(k).
	StageBisect = "multilevel bisect"
	// StageRefine is the k-way refinement at the end: 1 unit.
	StageRefine = "multilevel refine"
)

// mlProgress is the progress of one Partition call, credited by the
// goroutines of its bisections and tries as they go (see StageBisect).
// A nil *mlProgress reports nothing.
type mlProgress struct {
	fn    Progress
	mu    sync.Mutex
	done  float64
	total int64
}

// newMLProgress reports to fn, or is nil when fn is.
func newMLProgress(fn Progress, n, k int) *mlProgress {
	if fn == nil {
		return nil
	}
	return &mlProgress{fn: fn, total: int64(float64(n) * mlBisectWork(k))}
}

// add credits units and reports the total so far, never past the total:
// the sides of bisections are the expected sizes only within the balance
// bound.
func (p *mlProgress) add(units float64) {
	if p == nil || units <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += units
	p.fn(StageBisect, min(int64(p.done), p.total), p.total)
}

// report passes a stage's progress on.
func (p *mlProgress) report(stage string, done, total int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fn(stage, done, total)
}

// finish reports the bisections complete (done keeps what was credited).
func (p *mlProgress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fn(StageBisect, p.total, p.total)
}

// mlBisectWork is how many bisections a vertex takes part in on average
// when recursive bisection splits k parts into ⌊k/2⌋ and ⌈k/2⌉ with
// vertices in proportion: 1 for the first, then those of its halves.
func mlBisectWork(k int) float64 {
	if k <= 1 {
		return 0
	}
	k0 := k / 2
	return 1 + float64(k0)/float64(k)*mlBisectWork(k0) + float64(k-k0)/float64(k)*mlBisectWork(k-k0)
}
