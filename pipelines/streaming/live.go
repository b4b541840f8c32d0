package streaming

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamdedup/beamdedup/pipelines/internal/watchdog"
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

	// build replaces Build in tests.
	build func(beam.Scope, Config) (Outputs, error)
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
// A watchdog follows each step of the job (LiveStatus.stages): when one
// holds work and finishes none of it for cfg.StallLimit, RunLive cancels
// the job and returns a *watchdog.Stall naming the step. A quiet
// subscription is never a stall.
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
	build := Build
	if cfg.build != nil {
		build = cfg.build
	}
	if _, err := build(s, pc); err != nil {
		return LiveResult{}, err
	}

	endpoint, err := watchdog.PrismEndpoint()
	if err != nil {
		return LiveResult{}, fmt.Errorf("streaming: %w", err)
	}
	name := jobName()
	job, err := watchdog.Follow(endpoint, name)
	if err != nil {
		return LiveResult{}, fmt.Errorf("streaming: %w", err)
	}
	defer job.Close()
	restore := setFlags(map[*string]string{
		jobopts.Endpoint: endpoint, jobopts.EnvironmentType: "LOOPBACK", jobopts.JobName: name,
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

	w := &liveWatch{job: job, stopper: st, start: start}
	// The watchdog runs until the job is cancelled, the drain included; a
	// stop request (ctx) is not the end of the job.
	stalls := make(chan error, 1)
	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	if cfg.StallLimit >= 0 {
		go func() { stalls <- watchdog.Watch(wctx, w.watchConfig(cfg.StallLimit)) }()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	nextProgress := start.Add(cfg.ProgressEvery)
	var stopAt, cancelledAt time.Time
	var stall error
	stop := ctx.Done()
	res := LiveResult{}
	for {
		select {
		case r := <-done:
			if stall == nil && r.err != nil {
				return res, fmt.Errorf("streaming: job failed after %v: %w", time.Since(start).Round(time.Millisecond), r.err)
			}
			if r.pr != nil {
				res.LiveStatus = w.status(r.pr.Metrics())
			}
			res.Elapsed = time.Since(start)
			if stall != nil {
				return res, fmt.Errorf("streaming: %w; the job was cancelled, and what it had not acked will be redelivered", stall)
			}
			if !cancelledAt.IsZero() && !res.Drained(cfg.Readers) {
				return res, fmt.Errorf("streaming: not drained within %v of the stop (%v); the job was cancelled, and what it had not acked will be redelivered", cfg.DrainTimeout, res.LiveStatus)
			}
			return res, nil
		case <-stop:
			stop = nil
			stopAt = time.Now()
			st.Stop()
		case err := <-stalls:
			if err != nil && cancelledAt.IsZero() {
				stall, cancelledAt = err, time.Now()
				res.LiveStatus, _ = w.poll(ctx)
				if cerr := cancelJob(ctx, w.job); cerr != nil {
					jobCancel()
					return res, fmt.Errorf("streaming: %w (and cancelling the job failed: %v)", stall, cerr)
				}
			}
			continue
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
				stopWatch()
				if err := cancelJob(ctx, w.job); err != nil {
					jobCancel()
					return res, fmt.Errorf("streaming: cancelling the job: %w", err)
				}
			}
		} else if now.Sub(cancelledAt) > 30*time.Second {
			jobCancel()
			if stall != nil {
				return res, fmt.Errorf("streaming: %w; the job was cancelled and did not end within 30s", stall)
			}
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

// liveWatch follows the job through the job service.
type liveWatch struct {
	job     *watchdog.Job
	stopper *pubsubio.Stopper
	start   time.Time
}

// poll returns the job's current status, from its committed metrics.
func (w *liveWatch) poll(ctx context.Context) (LiveStatus, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	m, err := w.job.Metrics(ctx)
	if err != nil {
		return LiveStatus{}, err
	}
	return w.status(m), nil
}

// watchConfig watches the job's steps one by one (LiveStatus.stages): an
// idle subscription is normal here, a step that holds work and finishes
// none for limit (0: DefaultStallLimit) is not.
func (w *liveWatch) watchConfig(limit time.Duration) watchdog.Config {
	return stallConfig("streaming job on prism", limit, func(ctx context.Context) (watchdog.Sample, error) {
		s, err := w.poll(ctx)
		if err != nil {
			return watchdog.Sample{}, err
		}
		claimed, acked := w.stopper.Claimed(), w.stopper.Acked()
		return watchdog.Sample{Counters: s.counters(claimed, acked), Stages: s.stages(claimed, acked)}, nil
	})
}

// stages is the work each step of the job holds. The source's counts are
// the readers' own, live (claimed, acked): a bundle that never ends commits
// no metrics. The other steps' come from the committed metrics, so a
// crawling step whose bundles do not finish makes no progress.
func (s LiveStatus) stages(claimed, acked int64) []watchdog.Stage {
	d := s.Dedup
	return []watchdog.Stage{
		{Name: "source: messages pulled and not yet acked", Waiting: claimed - acked, Done: acked},
		// Rows enter KeepFirst (RowsIn) and settle (RowsIn - Pending).
		{Name: "KeepFirst: rows read and not yet deduplicated", Waiting: s.Read - s.DeadLettered - d.RowsIn + d.Pending(),
			Done: 2*d.RowsIn - d.Pending()},
		{Name: "publish: kept rows and dead letters not yet published", Waiting: d.Emitted + s.DeadLettered - s.Published, Done: s.Published},
	}
}

// counters are the numbers a stall message shows.
func (s LiveStatus) counters(claimed, acked int64) map[string]int64 {
	return map[string]int64{
		"source/claimed": claimed, "source/acked": acked,
		"pubsubio/messages_read": s.Read, "pubsubio/messages_acked": s.Acked, "pubsubio/messages_published": s.Published,
		"streaming/dead_lettered": s.DeadLettered,
		"beamdedup/rows_in":       s.Dedup.RowsIn, "beamdedup/emitted": s.Dedup.Emitted,
		"beamdedup/duplicates_dropped": s.Dedup.DuplicatesDropped,
	}
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
