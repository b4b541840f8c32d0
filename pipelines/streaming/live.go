package streaming

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/metricsx"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/pubsubio"
)

// Defaults of LiveConfig.
const (
	DefaultDrainTimeout  = time.Minute
	DefaultProgressEvery = 10 * time.Second
)

// LiveConfig configures RunLive.
type LiveConfig struct {
	// Config is the pipeline. Subscription, OutputTopic and DeadLetterTopic
	// are required (full names); Endpoint empty means PUBSUB_EMULATOR_HOST
	// when set, else Google's Pub/Sub.
	Config
	// Readers is the number of concurrent readers (default 1).
	Readers int
	// DrainTimeout bounds the stop: from the stop request until everything
	// read has been published (default 1 minute). Past it the job is
	// cancelled and RunLive fails; nothing in flight was acked, so Pub/Sub
	// redelivers it to the next run.
	DrainTimeout time.Duration
	// Progress, when set, is called every ProgressEvery (default 10s) with
	// the job's counters.
	Progress      func(LiveStatus)
	ProgressEvery time.Duration
}

// LiveStatus is what the job's metrics say. Read counts deliveries
// (redeliveries included) and Acked the acked ones, so Acked == Read once
// the readers have ended.
type LiveStatus struct {
	Read         int64 // messages the source emitted (pubsubio/messages_read)
	Acked        int64 // of those, acked (pubsubio/messages_acked)
	DeadLettered int64 // undecodable, sent to the dead-letter topic
	Published    int64 // messages published to the output and dead-letter topics
	Dedup        dedup.Counters
	ReadersEnded int
	Elapsed      time.Duration
}

// String is one line for a progress report.
func (s LiveStatus) String() string {
	return fmt.Sprintf("read %d, acked %d; dedup: %d in, %d emitted, %d duplicates dropped; %d dead-lettered; %d published (%v)",
		s.Read, s.Acked, s.Dedup.RowsIn, s.Dedup.Emitted, s.Dedup.DuplicatesDropped, s.DeadLettered, s.Published,
		s.Elapsed.Round(time.Second))
}

// Drained reports whether the job has nothing left in flight after a stop:
// all readers ended with every emitted message acked, every message read
// reached KeepFirst or the dead-letter topic, and everything KeepFirst
// emitted and every dead letter was published.
func (s LiveStatus) Drained(readers int) bool {
	return s.ReadersEnded >= readers &&
		s.Acked == s.Read &&
		s.Read == s.Dedup.RowsIn+s.DeadLettered &&
		s.Dedup.Pending() == 0 &&
		s.Published == s.Dedup.Emitted+s.DeadLettered
}

// LiveResult is the final status of a RunLive job.
type LiveResult struct {
	LiveStatus
	// Cancelled: the job was drained and then cancelled. Prism keeps a
	// job with KeepFirst's pending cleanup timers alive; once nothing is in
	// flight, cancelling it loses nothing but that in-memory state.
	Cancelled bool
}

// RunLive runs the pipeline on Prism in this process until ctx is done,
// then stops it: the readers stop pulling, ack what they emitted once its
// bundle committed, and end; RunLive waits until everything read has been
// deduplicated and published (at most DrainTimeout), ends the job and
// returns its counters. Messages pulled and not emitted are never acked:
// Pub/Sub redelivers them when their lease expires. beam.Init must have
// been called.
//
// Prism keeps KeepFirst's state in memory: a new run starts with no keys
// seen, so a key published again across a restart is emitted again.
func RunLive(ctx context.Context, cfg LiveConfig) (LiveResult, error) {
	if err := cfg.check(); err != nil {
		return LiveResult{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err := pubsubio.CheckExists(cctx, cfg.Endpoint, cfg.Subscription, cfg.OutputTopic, cfg.DeadLetterTopic)
	cancel()
	if err != nil {
		return LiveResult{}, fmt.Errorf("streaming: %w", err)
	}

	st := pubsubio.NewStopper()
	defer st.Close()
	pc := cfg.Config
	pc.Read = append(append([]pubsubio.ReadOption{}, pc.Read...), pubsubio.Readers(cfg.Readers), pubsubio.StopWith(st))
	p, s := beam.NewPipelineWithRoot()
	if _, err := Build(s, pc); err != nil {
		return LiveResult{}, err
	}

	js, err := liveJobServer(ctx)
	if err != nil {
		return LiveResult{}, err
	}
	name := *jobopts.JobName
	if name == "" {
		name = fmt.Sprintf("beamdedup-streaming-%d", time.Now().UnixNano())
	}
	restore := setFlags(map[*string]string{
		jobopts.Endpoint: js.endpoint, jobopts.EnvironmentType: "LOOPBACK", jobopts.JobName: name,
	})
	defer restore()

	// The job gets its own context: cancelling beam.Run's context would
	// stop the in-process workers under a running job. It is stopped
	// through the job service instead.
	jobCtx, jobCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer jobCancel()
	type ran struct {
		pr  beam.PipelineResult
		err error
	}
	done := make(chan ran, 1)
	start := time.Now()
	go func() {
		pr, err := beam.Run(jobCtx, "prism", p)
		done <- ran{pr, err}
	}()

	w := &liveWatch{js: js, name: name, stopper: st, start: start}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	nextProgress := start.Add(cfg.ProgressEvery)
	var stopAt, cancelledAt time.Time
	stop := ctx.Done()
	res := LiveResult{}
	for {
		select {
		case r := <-done:
			if r.err != nil {
				return res, fmt.Errorf("streaming: job failed after %v: %w", time.Since(start).Round(time.Millisecond), r.err)
			}
			if r.pr != nil {
				res.LiveStatus = w.status(r.pr.Metrics())
			}
			res.Elapsed = time.Since(start)
			if !cancelledAt.IsZero() && !res.Drained(cfg.Readers) {
				return res, fmt.Errorf("streaming: not drained within %v of the stop (%v); the job was cancelled, and what it had not acked will be redelivered", cfg.DrainTimeout, res.LiveStatus)
			}
			return res, nil
		case <-stop:
			stop = nil
			stopAt = time.Now()
			st.Stop()
		case <-tick.C:
		}
		now := time.Now()
		if cancelledAt.IsZero() {
			cur, err := w.poll(ctx)
			if err == nil && cfg.Progress != nil && !now.Before(nextProgress) {
				cfg.Progress(cur)
				nextProgress = now.Add(cfg.ProgressEvery)
			}
			drained := err == nil && !stopAt.IsZero() && cur.Drained(cfg.Readers)
			if drained || (!stopAt.IsZero() && now.Sub(stopAt) > cfg.DrainTimeout) {
				res.Cancelled = drained
				cancelledAt = now
				if err := w.cancel(ctx); err != nil {
					jobCancel()
					return res, fmt.Errorf("streaming: cancelling the job: %w", err)
				}
			}
		} else if now.Sub(cancelledAt) > 30*time.Second {
			jobCancel()
			return res, fmt.Errorf("streaming: the job did not end within 30s of its cancellation")
		}
	}
}

func (c *LiveConfig) check() error {
	for _, n := range []struct{ flag, name, kind string }{
		{"Subscription", c.Subscription, "subscriptions"},
		{"OutputTopic", c.OutputTopic, "topics"},
		{"DeadLetterTopic", c.DeadLetterTopic, "topics"},
	} {
		if n.name == "" {
			return fmt.Errorf("streaming: RunLive needs %s", n.flag)
		}
		check := pubsubio.CheckTopicName
		if n.kind == "subscriptions" {
			check = pubsubio.CheckSubscriptionName
		}
		if err := check(n.name); err != nil {
			return err
		}
	}
	if c.Native {
		return errors.New("streaming: RunLive runs the Go-native source on Prism; Native is for Dataflow")
	}
	if c.Readers <= 0 {
		c.Readers = 1
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = DefaultProgressEvery
	}
	return nil
}

// liveServer is the Prism job server of RunLive's jobs, one per process
// (Prism's own in-process server cannot be reached from outside beam.Run).
type liveServer struct {
	endpoint string
	client   jobpb.JobServiceClient
}

var (
	liveOnce sync.Once
	liveJS   *liveServer
	liveErr  error
)

func liveJobServer(ctx context.Context) (*liveServer, error) {
	liveOnce.Do(func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			liveErr = err
			return
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		c, err := prism.CreateJobServer(dctx, prism.Options{Port: port})
		if err != nil {
			liveErr = fmt.Errorf("streaming: starting Prism: %w", err)
			return
		}
		liveJS = &liveServer{endpoint: fmt.Sprintf("localhost:%d", port), client: c}
	})
	return liveJS, liveErr
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

// liveWatch follows the job through the job service.
type liveWatch struct {
	js      *liveServer
	name    string
	stopper *pubsubio.Stopper
	start   time.Time
	jobID   string
}

func (w *liveWatch) id(ctx context.Context) (string, error) {
	if w.jobID != "" {
		return w.jobID, nil
	}
	resp, err := w.js.client.GetJobs(ctx, &jobpb.GetJobsRequest{})
	if err != nil {
		return "", err
	}
	for _, j := range resp.GetJobInfo() {
		if j.GetJobName() == w.name && !terminal(j.GetState()) {
			w.jobID = j.GetJobId()
			return w.jobID, nil
		}
	}
	return "", fmt.Errorf("job %s not submitted yet", w.name)
}

func terminal(s jobpb.JobState_Enum) bool {
	switch s {
	case jobpb.JobState_DONE, jobpb.JobState_FAILED, jobpb.JobState_CANCELLED, jobpb.JobState_DRAINED, jobpb.JobState_UPDATED:
		return true
	}
	return false
}

// poll returns the job's current status.
func (w *liveWatch) poll(ctx context.Context) (LiveStatus, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	id, err := w.id(ctx)
	if err != nil {
		return LiveStatus{}, err
	}
	resp, err := w.js.client.GetJobMetrics(ctx, &jobpb.GetJobMetricsRequest{JobId: id})
	if err != nil {
		return LiveStatus{}, err
	}
	m := resp.GetMetrics()
	return w.status(*metricsx.FromMonitoringInfos(nil, m.GetAttempted(), m.GetCommitted())), nil
}

func (w *liveWatch) cancel(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	id, err := w.id(ctx)
	if err != nil {
		return err
	}
	_, err = w.js.client.Cancel(ctx, &jobpb.CancelJobRequest{JobId: id})
	return err
}

func (w *liveWatch) status(m metrics.Results) LiveStatus {
	s := LiveStatus{Dedup: dedup.ReadCounters(result{m}), ReadersEnded: w.stopper.Ended(), Elapsed: time.Since(w.start)}
	for _, c := range m.AllMetrics().Counters() {
		switch c.Namespace() + "/" + c.Name() {
		case "pubsubio/messages_read":
			s.Read += c.Result()
		case "pubsubio/messages_acked":
			s.Acked += c.Result()
		case "pubsubio/messages_published":
			s.Published += c.Result()
		case "streaming/dead_lettered":
			s.DeadLettered += c.Result()
		}
	}
	return s
}

// result adapts live metrics to beam.PipelineResult for dedup.ReadCounters.
type result struct{ m metrics.Results }

func (r result) Metrics() metrics.Results { return r.m }
func (r result) JobID() string            { return "" }
