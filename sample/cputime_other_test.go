//go:build !unix

package sample

import "time"

// cpuTime is not measured here; benchmarks then report wall-clock rates only.
func cpuTime() time.Duration { return 0 }
