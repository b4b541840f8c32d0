package localprism

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal/extworker"

	"github.com/beamdedup/beamdedup/internal/jobrun"
)

// A process hosting Prism serves its LOOPBACK workers from a pool that is
// never stopped: with Beam's, stopped as beam.Run returns, Prism panicked
// on starting the worker of a job cancelled early, and ended this process
// (notes/beam-defects.md, "Prism crashes when the worker pool is
// unreachable").
func init() { jobrun.ServeLoopbackFrom(loopbackPool) }

var (
	poolOnce sync.Once
	poolAddr string
	poolErr  error
)

// loopbackPool returns the address of this process's worker pool, on
// localhost, starting the pool on first use.
func loopbackPool() (string, error) {
	poolOnce.Do(func() {
		srv, err := extworker.StartLoopback(context.Background(), 0)
		if err != nil {
			poolErr = fmt.Errorf("localprism: starting the worker pool of LOOPBACK jobs: %w", err)
			return
		}
		poolAddr = srv.EnvironmentConfig(context.Background())
	})
	return poolAddr, poolErr
}
