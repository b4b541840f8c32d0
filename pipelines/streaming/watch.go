package streaming

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamdedup/beamdedup/pipelines/internal/watchdog"
)

// DefaultStallLimit is how long a job may make no progress while input
// remains before Run and RunDemo cancel it.
const DefaultStallLimit = 60 * time.Second

// stallHint ends a stall error: where the known cause is written down.
const stallHint = "unless a step of yours blocks, this is a known Prism defect, see notes/beam-defects.md (entry 8, \"A streaming job stalls\") and docs/streaming-reliability.md"

var prismServer sync.Mutex

// ensureJobServer points Beam at this process's Prism job server
// (watchdog.PrismEndpoint) before the job, where beam.Run("prism") would
// start one inside, so that the watchdog can reach the job's service.
// Other runners are watched through their --endpoint; "" means no job
// server to watch.
func ensureJobServer(runner string) (string, error) {
	prismServer.Lock()
	defer prismServer.Unlock()
	switch strings.ToLower(runner) {
	case "prism", "prismrunner":
		if *jobopts.Endpoint == "" {
			endpoint, err := watchdog.PrismEndpoint()
			if err != nil {
				return "", err
			}
			*jobopts.Endpoint = endpoint
			if *jobopts.EnvironmentType == "" {
				*jobopts.EnvironmentType = "loopback"
			}
		}
	case "universal", "portable", "flink", "spark":
	default:
		return "", nil // Dataflow and others: no portable job service to watch
	}
	return *jobopts.Endpoint, nil
}

// jobName is --job_name when given, else a name of this run's own, by
// which watchdog.Job finds it.
func jobName() string {
	if *jobopts.JobName != "" {
		return *jobopts.JobName
	}
	return fmt.Sprintf("beamdedup-streaming-%d", time.Now().UnixNano())
}

// setFlags sets Beam's flag variables and returns a function restoring them.
func setFlags(vals map[*string]string) func() {
	old := map[*string]string{}
	for p, v := range vals {
		old[p] = *p
		*p = v
	}
	return func() {
		for p, v := range old {
			*p = v
		}
	}
}

// watched runs p on runner under a watchdog. extra adds observations the
// caller has (say a Pub/Sub fake's acks); it may be nil. When nothing moved
// for limit while input remained, the job is cancelled in the runner and
// the error is a *watchdog.Stall.
func watched(ctx context.Context, runner string, p *beam.Pipeline, limit time.Duration,
	extra func(map[string]int64) (pending bool)) (beam.PipelineResult, error) {
	endpoint, err := ensureJobServer(runner)
	if err != nil {
		return nil, err
	}
	if endpoint == "" || limit < 0 {
		return beam.Run(ctx, runner, p)
	}
	name := jobName()
	job, err := watchdog.Follow(endpoint, name)
	if err != nil {
		return nil, err
	}
	defer job.Close()
	defer setFlags(map[*string]string{jobopts.JobName: name})()
	cfg := stallConfig("streaming job on "+runner, limit, func(ctx context.Context) (watchdog.Sample, error) {
		c, err := job.Counters(ctx)
		if err != nil {
			return watchdog.Sample{}, err
		}
		pending := inputPending(c)
		if extra != nil && extra(c) {
			pending = true
		}
		return watchdog.Sample{Counters: c, Pending: pending}, nil
	})
	var pr beam.PipelineResult
	err = watchdog.Run(ctx, cfg, func(ctx context.Context) error {
		var err error
		pr, err = beam.Run(ctx, runner, p)
		return err
	})
	if _, ok := err.(*watchdog.Stall); ok {
		// beam.Run returned when its context was cancelled, but the job
		// itself still runs inside the runner: stop it there.
		if cerr := cancelJob(ctx, job); cerr != nil {
			err = fmt.Errorf("%w (and cancelling the job failed: %v)", err, cerr)
		}
	}
	return pr, err
}

// stallConfig watches a streaming job for stalls: limit (0:
// DefaultStallLimit) without progress is a stall, sampled every tenth of
// it, at most every 2s.
func stallConfig(what string, limit time.Duration, sample func(context.Context) (watchdog.Sample, error)) watchdog.Config {
	if limit == 0 {
		limit = DefaultStallLimit
	}
	return watchdog.Config{Limit: limit, Every: min(limit/10, 2*time.Second), What: what, Hint: stallHint, Sample: sample}
}

// cancelJob stops job in the runner. It gets its own 10s deadline and
// outlives ctx's cancellation: a stop request must still cancel the job.
func cancelJob(ctx context.Context, job *watchdog.Job) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return job.Cancel(ctx)
}

// inputPending: the source read messages it has not acked yet, i.e. work
// is in flight in the job (the source acks a message only after the bundle
// that read it committed).
func inputPending(c map[string]int64) bool {
	return c["pubsubio/messages_read"] > c["pubsubio/messages_acked"]
}
