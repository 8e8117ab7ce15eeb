package multilevel

// Progress receives a long step's progress: stage names the step, done
// of total units are finished (total 0: unknown). It is called on the
// partitioning goroutine and must return quickly.
type Progress func(stage string, done, total int64)

func (p Progress) report(stage string, done, total int64) {
	if p != nil {
		p(stage, done, total)
	}
}
