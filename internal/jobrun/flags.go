package jobrun

import (
	"context"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamdedup/beamdedup/internal/prismexp"
)

// beam.Run reads a job's settings from the process's global flags (Beam
// Go 2.77, package jobopts) and beam.PipelineOptions, not per job. So a
// submission sets them, and puts them back once the job is on the job
// server; submissions in one process take turns (flagsMu). This file is the
// one place that writes them.

// flagsMu makes submissions take turns with Beam's global flags.
var flagsMu sync.Mutex

// flagDefaults reads the flags Options defaults to, in turn with
// submissions.
func flagDefaults() (endpoint, envType, envConfig, name, worker string) {
	flagsMu.Lock()
	defer flagsMu.Unlock()
	return *jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.EnvironmentConfig, *jobopts.JobName, *jobopts.WorkerBinary
}

// submitWithFlags submits p with beam.Run (j.run, on ctx) under the job's
// flags, which it puts back once the job is on the job server (Wait waits
// for that).
func (j *Job) submitWithFlags(ctx context.Context, p *beam.Pipeline) error {
	o := j.o
	flagsMu.Lock()
	vals := map[*string]string{
		jobopts.Endpoint: o.Endpoint, jobopts.EnvironmentType: o.EnvironmentType,
		jobopts.EnvironmentConfig: o.EnvironmentConfig, jobopts.JobName: o.Name,
		jobopts.WorkerBinary: o.WorkerBinary,
	}
	if MayBePrism(o.Runner) && !splitsAllowed.Load() {
		vals[jobopts.Experiments] = prismexp.WithExperiment(*jobopts.Experiments)
	}
	if err := j.serveLoopback(vals); err != nil {
		flagsMu.Unlock()
		return err
	}
	restoreFlags, restoreRunner := setFlags(vals), setRunnerOptions(o)
	restore := func() { restoreRunner(); restoreFlags() }
	if err := j.beforeSubmit(p); err != nil {
		restore()
		flagsMu.Unlock()
		return err
	}
	go j.run(ctx, p)
	j.flagsBack = make(chan struct{})
	go func() {
		defer close(j.flagsBack)
		defer flagsMu.Unlock()
		defer restore()
		j.awaitSubmission()
	}()
	return nil
}

// awaitSubmission returns once the job is on the job server (so beam.Run
// has read the flags) or beam.Run returned.
func (j *Job) awaitSubmission() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := j.remote.ID(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-j.done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// setFlags sets Beam's flag variables and returns a function restoring
// them. A flag that has its value already is not written, so that readers
// outside flagsMu do not race with a submission that leaves it as it was.
func setFlags(vals map[*string]string) func() {
	old := map[*string]string{}
	for p, v := range vals {
		if *p != v {
			old[p] = *p
			*p = v
		}
	}
	return func() {
		for p, v := range old {
			*p = v
		}
	}
}

// setRunnerOptions sets the job's parallelism flag and its Flink options
// (as Go options, which Beam sends with every job) and returns a function
// that puts them back. An option left empty is sent empty, which the job
// server reads as unset (a Go option cannot be removed).
func setRunnerOptions(o Options) func() {
	oldPar := *jobopts.Parallelism
	if o.Parallelism > 0 {
		*jobopts.Parallelism = o.Parallelism
	}
	vals := o.Flink.Values()
	for name, v := range vals {
		beam.PipelineOptions.Set(name, v)
	}
	return func() {
		*jobopts.Parallelism = oldPar
		for name := range vals {
			beam.PipelineOptions.Set(name, "")
		}
	}
}
