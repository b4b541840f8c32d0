//go:build unix

package core_test

import (
	"syscall"
	"time"
)

// processCPUTime is the CPU time (user+system) the test process used so
// far. On a loaded machine it measures a benchmark better than wall time.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
