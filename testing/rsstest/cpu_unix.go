//go:build unix

package rsstest

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time (user+system) this process used so far: Prism,
// the SDK harness and the test. On a loaded machine it measures a
// benchmark better than wall time.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
