//go:build !unix

package rsstest

import "time"

// CPUTime is unavailable here: 0, and benchmarks report wall time only.
func CPUTime() time.Duration { return 0 }
