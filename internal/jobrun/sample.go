package jobrun

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/metricsx"
)

// noWorker is the stall note of a job of which nothing was ever committed
// or reported.
const noWorker = "no SDK worker finished or reported a bundle"

// watchConfig watches the job's metrics for progress, sampling every
// tenth of the limit, at most every 2 s.
func (j *Job) watchConfig() Config {
	limit := j.o.StallLimit
	return Config{
		Limit: limit, Every: min(max(limit/10, 10*time.Millisecond), 2*time.Second),
		What:   fmt.Sprintf("%s on %s", j.o.What, j.o.Runner),
		Sample: j.sample,
	}
}

func (j *Job) sample(ctx context.Context) (Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if j.flink != nil {
		return j.flinkSample(ctx)
	}
	committed, attempted, err := j.remote.monitoring(ctx)
	if err != nil {
		return Sample{}, err
	}
	var s Sample
	if j.o.Progress != nil {
		if s, err = j.o.Progress(ctx, *metricsx.FromMonitoringInfos(nil, nil, committed)); err != nil {
			return s, err
		}
	} else {
		s = Sample{
			Counters: map[string]int64{
				"committed elements": counters(committed)["elements"],
				"attempted elements": counters(attempted)["elements"],
			},
			Pending: true,
			Note:    "no bundle finished and no SDK worker reported progress",
		}
	}
	if s.Live != "" {
		// Every finished bundle reports the elements it read. Last: a stage
		// of the caller's that stalls is the more precise report.
		s.Stages = append(s.Stages, Stage{Name: s.Live, Always: true, Done: counters(committed)["elements"]})
	}
	if len(committed) == 0 && len(attempted) == 0 && !slices.ContainsFunc(s.Stages, func(st Stage) bool { return st.Waiting > 0 }) {
		// Not idle: the job has not started (a healthy job commits its first
		// bundle within seconds).
		s.Pending, s.Note = true, noWorker
	}
	return s, nil
}

// hint says what to check when the job stalled: the environment when no
// worker ever reported (or no Hint is given), else Options.Hint.
func (j *Job) hint(noWorkerYet bool) string {
	if !noWorkerYet && j.o.Hint != "" {
		return j.o.Hint
	}
	o := j.o
	switch strings.ToLower(o.EnvironmentType) {
	case "process":
		return fmt.Sprintf("check that the PROCESS command %s starts an SDK worker; on Prism (Beam v2.77.0) the boot loader alone cannot: Prism passes it the worker id in quotes (notes/beam-defects.md, \"Prism quotes the PROCESS worker id\"; docs/workers.md has the wrapper)", o.EnvironmentConfig)
	case "external":
		return fmt.Sprintf("check that a worker pool serves --environment_config=%s, is alive, and reaches the job server at %s", o.EnvironmentConfig, o.Endpoint)
	case "loopback":
		return fmt.Sprintf("the SDK worker runs in this process (LOOPBACK): check that the job server at %s reaches this machine, and that no step of the pipeline blocks", o.Endpoint)
	}
	return fmt.Sprintf("the runner starts SDK workers in Docker (--environment_type=%q): check that Docker runs where the job server at %s starts them and can pull the SDK image (docs/workers.md)", o.EnvironmentType, o.Endpoint)
}

// Live adapts a job's metrics as Job.Metrics or a watchdog's sample
// reads them (committed, while it runs) to a beam.PipelineResult, for the
// transforms' counter readers (dedup.ReadCounters, ...).
func Live(m metrics.Results) beam.PipelineResult { return liveResult{m} }

type liveResult struct{ m metrics.Results }

func (r liveResult) Metrics() metrics.Results { return r.m }
func (r liveResult) JobID() string            { return "" }
