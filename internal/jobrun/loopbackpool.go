package jobrun

import (
	"fmt"
	"os"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
)

// Beam's universal runner runs a LOOPBACK job's workers from a worker pool
// it stops as soon as beam.Run returns. Prism starts a job's worker on a
// goroutine of its own and panics when the pool refuses or is gone
// (notes/beam-defects.md, "Prism crashes when the worker pool is
// unreachable"): a job cancelled before its worker started took down the
// process hosting Prism. So where a process serves LOOPBACK workers from a
// pool that outlives its jobs (internal/jobrun/localprism's, which links
// Beam's worker pool, a runner package), a LOOPBACK job on a Prism runner
// is submitted as EXTERNAL to it; its workers still run in this process.

// loopbackPool returns the address of the process's pool; nil: Beam's
// LOOPBACK.
var loopbackPool func() (addr string, err error)

// ServeLoopbackFrom makes LOOPBACK jobs on Prism runners use the worker
// pool at the address pool returns, which must outlive every job. Call it
// from an init function, before any job starts.
func ServeLoopbackFrom(pool func() (addr string, err error)) { loopbackPool = pool }

// serveLoopback points the flags of a LOOPBACK job on a Prism runner at
// the process's pool, when there is one: EXTERNAL, the pool's address, and
// a placeholder worker binary unless the job names one.
func (j *Job) serveLoopback(vals map[*string]string) error {
	o := j.o
	if loopbackPool == nil || !MayBePrism(o.Runner) || !strings.EqualFold(o.EnvironmentType, "loopback") {
		return nil
	}
	addr, err := loopbackPool()
	if err != nil {
		return err
	}
	worker := o.WorkerBinary
	if worker == "" {
		if worker, err = placeholderWorker(); err != nil {
			return err
		}
		j.placeholder = worker
	}
	vals[jobopts.EnvironmentType], vals[jobopts.EnvironmentConfig], vals[jobopts.WorkerBinary] = "EXTERNAL", addr, worker
	return nil
}

// placeholderWorker creates the empty file a job submitted to the pool
// stages as its worker binary (the universal runner stages one; the pool's
// workers never run it, and Beam's LOOPBACK stages an empty file too).
// The job removes it when beam.Run returns.
func placeholderWorker() (string, error) {
	f, err := os.CreateTemp("", "beamdedup-loopback-worker-*")
	if err != nil {
		return "", fmt.Errorf("jobrun: the placeholder worker binary of a LOOPBACK job: %w", err)
	}
	f.Close()
	return f.Name(), nil
}
