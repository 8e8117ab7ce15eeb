//go:build unix

package sample

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time, so that benchmarks can
// report throughput per busy core even on a loaded machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
