package streaming

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"

	"github.com/beamdedup/beamdedup/pipelines/jobrun"
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

// RunLive runs the pipeline as a job (job: the runner, its job server,
// the environment, the stall limit) until ctx is done, then stops it and
// returns its counters. beam.Init must have been called.
//
// The stop drains: when the SDK workers run in this process (LOOPBACK)
// the readers stop pulling, ack what they emitted once its bundle
// committed, and end; elsewhere (a worker pool, PROCESS, DOCKER) the
// readers cannot be reached and keep pulling, and RunLive waits until
// what the job read has been acked and published. Either way, at most
// DrainTimeout, then the job is cancelled. Messages pulled and not acked
// are never lost: Pub/Sub redelivers them when their lease expires.
//
// A watchdog follows each step of the job (LiveStatus.stages): when one
// holds work and finishes none of it for job.StallLimit, RunLive cancels
// the job and returns a *jobrun.Stall naming the step. A quiet
// subscription is never a stall. (The source's own step is seen only when
// the readers run in this process.)
//
// Prism keeps KeepFirst's state in memory: a new run starts with no keys
// seen, so a key published again across a restart is emitted again.
func RunLive(ctx context.Context, job jobrun.Options, cfg LiveConfig) (LiveResult, error) {
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

	w := &liveWatch{stopper: st, inProcess: job.Loopback()}
	job.What, job.Hint, job.Progress = "streaming job", stallHint, w.progress
	// The job outlives ctx: ctx's end is the stop request, which drains.
	j, err := jobrun.Start(context.WithoutCancel(ctx), p, job)
	if err != nil {
		return LiveResult{}, fmt.Errorf("streaming: %w", err)
	}
	tick := time.NewTicker(cfg.ProgressEvery)
	defer tick.Stop()
	stopped, drained := false, false
	for running := true; running; {
		select {
		case <-j.Done(): // by itself: a stall, a failure, or the runner
			running = false
		case <-ctx.Done():
			var stop func()
			if w.inProcess {
				stop = st.Stop
			}
			drained = j.Drain(stop, func(m metrics.Results) bool { return w.drained(w.status(m), cfg.Readers) }, cfg.DrainTimeout)
			stopped, running = true, false
		case <-tick.C:
			if cfg.Progress != nil {
				if m, err := j.Metrics(ctx); err == nil {
					st := w.status(m)
					st.Elapsed = j.Elapsed()
					cfg.Progress(st)
				}
			}
		}
	}
	pr, err := j.Wait()
	res := LiveResult{Cancelled: drained}
	if pr != nil {
		res.LiveStatus = w.status(pr.Metrics())
	}
	res.Elapsed = j.Elapsed()
	var stall *jobrun.Stall
	if errors.As(err, &stall) {
		return res, fmt.Errorf("streaming: %w; the job was cancelled, and what it had not acked will be redelivered", err)
	}
	if err != nil {
		return res, fmt.Errorf("streaming: %w", err)
	}
	if stopped && !drained && !w.drained(res.LiveStatus, cfg.Readers) {
		return res, fmt.Errorf("streaming: not drained within %v of the stop (%v); the job was cancelled, and what it had not acked will be redelivered", cfg.DrainTimeout, res.LiveStatus)
	}
	return res, nil
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

// liveWatch reads a RunLive job's status: its committed metrics, and
// the readers' own live counts when they run in this process.
type liveWatch struct {
	stopper   *pubsubio.Stopper
	inProcess bool
}

// drained is LiveStatus.Drained, without the readers' end when they run
// elsewhere (they are not stopped there, and their end is not seen).
func (w *liveWatch) drained(s LiveStatus, readers int) bool {
	if !w.inProcess {
		readers = 0
	}
	return s.Drained(readers)
}

// progress samples the job for the watchdog, step by step
// (LiveStatus.stages): an idle subscription is normal here, a step that
// holds work and finishes none is not.
func (w *liveWatch) progress(_ context.Context, m metrics.Results) (jobrun.Sample, error) {
	s := w.status(m)
	claimed, acked := w.stopper.Claimed(), w.stopper.Acked()
	sample := jobrun.Sample{Counters: s.counters(claimed, acked), Stages: s.stages(claimed, acked)}
	if !w.stopper.Requested() {
		// Its bundles commit every MaxBundleDuration, messages or not: a
		// frozen worker in another process shows as nothing committed.
		sample.Live = "Pub/Sub source"
	}
	return sample, nil
}

// stages is the work each step of the job holds. The source's counts are
// the readers' own, live (claimed, acked): a bundle that never ends commits
// no metrics. The other steps' come from the committed metrics, so a
// crawling step whose bundles do not finish makes no progress.
func (s LiveStatus) stages(claimed, acked int64) []jobrun.Stage {
	d := s.Dedup
	return []jobrun.Stage{
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
	s := LiveStatus{Dedup: dedup.ReadCounters(result{m}), ReadersEnded: w.stopper.Ended()}
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
