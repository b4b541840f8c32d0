package streaming

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	// read has been published and acked (default 1 minute). Past it the job
	// is cancelled and RunLive fails; nothing that was not yet safe was
	// acked, so Pub/Sub redelivers it to the next run.
	DrainTimeout time.Duration
	// Progress, when set, is called every ProgressEvery (default 10s) with
	// the job's counters.
	Progress      func(LiveStatus)
	ProgressEvery time.Duration

	// build replaces Build in tests.
	build func(beam.Scope, Config) (Outputs, error)
}

// LiveStatus is what the job's metrics say. Read counts the deliveries
// the source emitted (redeliveries of acked messages included; those of a
// message in flight are absorbed and not emitted), and every one of them
// ends in one ack attempt once it is safe: Acked + AckFailed == Read once
// nothing is in flight.
type LiveStatus struct {
	Read         int64 // deliveries the source emitted
	Acked        int64 // of those, acked once safe
	AckFailed    int64 // acks Pub/Sub refused; those messages come back
	DeadLettered int64 // undecodable, sent to the dead-letter topic
	Published    int64 // messages published to the output and dead-letter topics
	// With Config.Postgres: rows written into the table (or there
	// already), and refused by it (dead-lettered).
	PostgresWritten, PostgresRefused int64
	Dedup                            dedup.Counters
	ReadersEnded                     int
	Elapsed                          time.Duration
}

// String is one line for a progress report.
func (s LiveStatus) String() string {
	return fmt.Sprintf("read %d, acked %d; dedup: %d in, %d emitted, %d duplicates dropped; %d dead-lettered; %d published (%v)",
		s.Read, s.Acked+s.AckFailed, s.Dedup.RowsIn, s.Dedup.Emitted, s.Dedup.DuplicatesDropped, s.DeadLettered, s.Published,
		s.Elapsed.Round(time.Second))
}

// Drained reports whether the job has nothing left in flight after a stop:
// all readers ended, every message read reached KeepFirst or the
// dead-letter topic, everything KeepFirst emitted and every dead letter
// was published, and every message read was acked (each only once its row
// was safe).
func (s LiveStatus) Drained(readers int) bool {
	return s.ReadersEnded >= readers &&
		s.Acked+s.AckFailed == s.Read &&
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
// the readers stop pulling and end; elsewhere (a worker pool, PROCESS,
// DOCKER) the readers cannot be reached and keep pulling. Either way
// RunLive waits until what the job read has been published and acked, at
// most DrainTimeout, then cancels the job. A message is acked only once
// its row is safe, so whatever the job had not finished, after a stop, a
// failure or a crash, is redelivered by Pub/Sub to the next run.
//
// A watchdog follows each step of the job (LiveStatus.stages): when one
// holds work and finishes none of it for job.StallLimit, RunLive cancels
// the job and returns a *jobrun.Stall naming the step. A quiet
// subscription is never a stall. (The source's own step is seen only when
// the readers run in this process.)
//
// Prism keeps KeepFirst's state in memory: a new run starts with no keys
// seen, so a key published again across a restart is emitted again (at
// most the keys with a message unacked at the restart: docs/streaming.md).
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
	pc.Read = append(append([]pubsubio.Option{}, pc.Read...), pubsubio.Readers(cfg.Readers), pubsubio.StopWith(st))
	p, s := beam.NewPipelineWithRoot()
	build := Build
	if cfg.build != nil {
		build = cfg.build
	}
	if _, err := build(s, pc); err != nil {
		return LiveResult{}, err
	}

	w := &liveWatch{stopper: st, inProcess: job.Loopback(), service: pubsubio.Target(cfg.Endpoint)}
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
					w.mu.Lock()
					w.last = st
					w.mu.Unlock()
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
	} else {
		// A failed job reports no metrics: the watchdog's last sample.
		res.LiveStatus = w.lastSeen()
	}
	res.Elapsed = j.Elapsed()
	var stall *jobrun.Stall
	if errors.As(err, &stall) {
		w.explain(stall)
		return res, fmt.Errorf("streaming: %w; the job was cancelled, and Pub/Sub redelivers what it had not acked (%v)", err, res.LiveStatus)
	}
	if err != nil {
		return res, fmt.Errorf("streaming: %w; nothing the job had not published was acked, so Pub/Sub redelivers it to the next run (last seen: %v)", err, res.LiveStatus)
	}
	if stopped && !drained && !w.drained(res.LiveStatus, cfg.Readers) {
		return res, fmt.Errorf("streaming: not drained within %v of the stop (%v); the job was cancelled, and Pub/Sub redelivers what it had not acked", cfg.DrainTimeout, res.LiveStatus)
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
	service   string // the Pub/Sub service, for stall messages

	mu      sync.Mutex
	last    LiveStatus // the last sample
	pulling bool       // at the last sample: a reader waited on a Pull Pub/Sub had not answered
}

func (w *liveWatch) pullingAtLastSample() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pulling
}

func (w *liveWatch) lastSeen() LiveStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
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
	pr := w.stopper.Progress()
	w.mu.Lock()
	w.last = s
	w.pulling = pr.Pulling > 0 || pr.Unanswered
	w.mu.Unlock()
	pulls := sourcePulls{answered: pr.Answered, unanswered: pr.Unanswered}
	sample := jobrun.Sample{Counters: s.counters(pr.Claimed), Stages: s.stages(pr.Claimed, pulls)}
	if !pr.Requested {
		// Its bundles commit every MaxBundleDuration, messages or not: a
		// frozen worker in another process shows as nothing committed.
		sample.Live = "Pub/Sub source"
	}
	return sample, nil
}

// Names of the steps the watchdog follows.
const (
	stageSource  = "source: messages pulled and not yet committed, or a Pull not answered"
	stageDedup   = "KeepFirst: rows read and not yet deduplicated"
	stagePublish = "publish: kept rows and dead letters not yet published"
)

// sourcePulls is what the readers' Pull requests got, live: a service
// that stops answering holds the source's work as much as a bundle that
// never ends.
type sourcePulls struct {
	answered   int64
	unanswered bool
}

// stages is the work each step of the job holds. The source's is the
// readers' own live count of what they emitted (claimed) against the
// committed count (a bundle that never ends commits no metrics), and one
// more while its Pull goes unanswered; answered Pulls count as done, so an
// idle subscription is no stall. The other
// steps' come from the committed metrics, so a crawling step whose bundles
// do not finish makes no progress. The acks run in the bundles of the
// steps they follow, so an ack that hangs shows as its step's.
func (s LiveStatus) stages(claimed int64, pulls sourcePulls) []jobrun.Stage {
	d := s.Dedup
	source := jobrun.Stage{Name: stageSource, Waiting: claimed - s.Read, Done: s.Read + pulls.answered}
	if pulls.unanswered {
		source.Waiting++
	}
	return []jobrun.Stage{
		source,
		// Rows enter KeepFirst (RowsIn) and settle (RowsIn - Pending).
		{Name: stageDedup, Waiting: s.Read - s.DeadLettered - d.RowsIn + d.Pending(), Done: 2*d.RowsIn - d.Pending()},
		{Name: stagePublish, Waiting: d.Emitted + s.DeadLettered - s.Published, Done: s.Published},
	}
}

// explain ends the message of a stall of a step that waits on Pub/Sub
// with the service: the source pulls, the publish publishes and acks, and
// KeepFirst's stage acks the duplicates it drops.
func (w *liveWatch) explain(st *jobrun.Stall) {
	if st.Stage.Always { // the source committed no bundle at all
		switch {
		case w.inProcess && w.pullingAtLastSample():
			st.Hint = fmt.Sprintf("its reader waits on a Pull that Pub/Sub does not answer: check that the Pub/Sub service (%s) answers", w.service)
		case !w.inProcess:
			st.Hint += fmt.Sprintf("; or the Pub/Sub service (%s) does not answer", w.service)
		}
		return
	}
	switch st.Stage.Name {
	case stageSource:
		st.Hint = fmt.Sprintf("the source's bundle waits on Pub/Sub (%s) or on a step fused with it: check that the service answers, and that no step of yours blocks", w.service)
	case stagePublish:
		st.Hint = fmt.Sprintf("the publish and its acks wait on Pub/Sub (%s): check that the service answers", w.service)
	case stageDedup:
		st.Hint = fmt.Sprintf("KeepFirst's bundles ack the duplicates they drop on Pub/Sub (%s): check that the service answers; if it does, %s", w.service, stallHint)
	}
}

// counters are the numbers a stall message shows.
func (s LiveStatus) counters(claimed int64) map[string]int64 {
	ns := pubsubio.Namespace + "/"
	return map[string]int64{
		"source/claimed":                     claimed,
		ns + pubsubio.MetricRead:             s.Read,
		ns + pubsubio.MetricAcked:            s.Acked,
		ns + pubsubio.MetricAckFailed:        s.AckFailed,
		ns + pubsubio.MetricPublished:        s.Published,
		Namespace + "/" + MetricDeadLettered: s.DeadLettered,
		"beamdedup/dedup/rows_in":            s.Dedup.RowsIn,
		"beamdedup/dedup/emitted":            s.Dedup.Emitted,
		"beamdedup/dedup/duplicates_dropped": s.Dedup.DuplicatesDropped,
	}
}

func (w *liveWatch) status(m metrics.Results) LiveStatus {
	return statusOf(jobrun.Live(m), w.stopper.Progress().Ended)
}

// statusOf reads a job's status from its metrics.
func statusOf(pr beam.PipelineResult, readersEnded int) LiveStatus {
	p := pubsubio.ReadCounters(pr)
	s := LiveStatus{Read: p.Read, Acked: p.Acked, AckFailed: p.AckFailed, Published: p.Published,
		Dedup: dedup.ReadCounters(pr), ReadersEnded: readersEnded}
	own := map[string]*int64{MetricDeadLettered: &s.DeadLettered,
		MetricPostgresWritten: &s.PostgresWritten, MetricPostgresRefused: &s.PostgresRefused}
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		if p := own[c.Name()]; p != nil && c.Namespace() == Namespace {
			*p += c.Result()
		}
	}
	return s
}
