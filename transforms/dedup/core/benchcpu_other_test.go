//go:build !unix

package core_test

import "time"

// processCPUTime is unavailable here; benchmarks then report wall time only.
func processCPUTime() time.Duration { return 0 }
