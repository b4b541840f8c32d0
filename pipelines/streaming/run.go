package streaming

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/internal/unbounded"
	"github.com/beamdedup/beamdedup/pipelines/orders"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// Defaults of RunConfig.
const (
	DefaultDrainTimeout  = time.Minute
	DefaultProgressEvery = 10 * time.Second
)

// RunConfig configures Run.
type RunConfig struct {
	// Config is the pipeline.
	Config
	// IdleStop, when set, ends the run by itself once every reader was
	// idle this long (Kafka: every partition read to its end). 0: the run
	// goes on until ctx is done.
	IdleStop time.Duration
	// DrainTimeout bounds the stop, until every element read is safe and
	// settled (default 1 minute); past it the job is cancelled and Run
	// fails.
	DrainTimeout time.Duration
	// Progress, when set, is called every ProgressEvery (default 10s) with
	// the job's counters.
	Progress      func(Status)
	ProgressEvery time.Duration
	// Savepoints, for a job followed on its Flink cluster
	// (jobrun.Options.FlinkREST), makes the stop a stop with a savepoint
	// into this directory (a URI) instead of a drain: the readers' positions
	// and KeepFirst's state are kept for the next run, which restores them
	// (flinkopts.Options.SavepointPath; jobrun.Resume finds the newest).
	// With IdleStop on Kafka the idle end is such a stop too, once the group
	// was committed at the end of every partition for IdleStop (a job that
	// ends by itself keeps no state on Flink).
	Savepoints string
}

// Status is what the job's metrics say. Every element read is settled
// once safe: Settled == Read once nothing is in flight.
type Status struct {
	Read         int64 // elements the source emitted (Pub/Sub: deliveries, redeliveries of acked messages included)
	Settled      int64 // of those, settled once safe (Kafka: marked safe, committed once every record before is; Pub/Sub: acked, or the ack refused and the message redelivered)
	Written      int64 // elements written to the output and dead-letter topics
	DeadLettered int64 // elements that did not decode, to the dead-letter topic
	// With Config.Postgres: rows written into the table (or there
	// already), and refused by it (dead-lettered).
	PostgresWritten, PostgresRefused int64
	Dedup                            dedup.Counters
	// ReadersEnded of Readers ended (the partitions' readers, or the
	// subscription's), as seen when they run in this process.
	ReadersEnded, Readers int
	Elapsed               time.Duration

	sp spec // the source's words
}

// String is one line for a progress report.
func (s Status) String() string {
	return fmt.Sprintf("read %d, %s %d; dedup: %d in, %d emitted, %d duplicates dropped; %d dead-lettered; %d %s (%v)",
		s.Read, s.sp.settled, s.Settled, s.Dedup.RowsIn, s.Dedup.Emitted, s.Dedup.DuplicatesDropped, s.DeadLettered,
		s.Written, s.sp.written, s.Elapsed.Round(time.Second))
}

// Drained reports whether nothing is left in flight: every reader ended,
// every element read reached KeepFirst or the dead letters, everything
// KeepFirst emitted or refused and every dead letter was written, and
// every element read was settled.
func (s Status) Drained() bool {
	return s.ReadersEnded >= s.Readers &&
		s.Settled == s.Read &&
		s.Read == s.Dedup.RowsIn+s.DeadLettered &&
		s.Dedup.Pending() == 0 &&
		s.Written == s.toWrite()
}

// toWrite is what the job writes for what KeepFirst emitted and what was
// dead-lettered: every kept element to the output (or, refused by the
// table, to the dead letters), and every dead letter.
func (s Status) toWrite() int64 {
	return s.Dedup.Emitted + s.DeadLettered + s.Dedup.DeadLettered
}

// Result is the final status of a Run.
type Result struct {
	Status
	// Stopped: the run was stopped (ctx) and drained, then cancelled
	// (losing nothing but KeepFirst's in-memory state).
	Stopped bool
	// Committed are the group's committed offsets of the input topic and
	// End its end offsets, by partition, read after the run (Kafka).
	Committed, End map[int32]int64
	// Savepoint is the path of the savepoint the stop took
	// (RunConfig.Savepoints).
	Savepoint string
}

// Run runs the pipeline over src for the orders rows as a job until it
// ends by itself (IdleStop) or ctx is done, then stops it and returns its
// counters. beam.Init must have been called.
//
// The stop drains: the readers stop when they run in this process
// (LOOPBACK), and read on elsewhere; Run waits until every element read is
// safe and settled, at most DrainTimeout, then cancels the job. What the
// job had not finished is read again by the next run.
//
// A watchdog follows each step of the job: when one holds work and
// finishes none of it for job.StallLimit, or nothing of the job commits at
// all, Run cancels the job and returns a *jobrun.Stall naming the step and
// what to check. A quiet source is never a stall.
//
// Prism keeps KeepFirst's state in memory: a key read again across a
// restart (an element unsettled at the restart) is emitted again.
func Run[E any](ctx context.Context, job jobrun.Options, src Source[E], cfg RunConfig) (Result, error) {
	if len(cfg.PartitionBy) == 0 && !src.spec().byID {
		cfg.PartitionBy = []string{"order_id"}
	}
	return RunFor[orders.Order](ctx, job, src, cfg)
}

// RunFor is Run for row type T (BuildFor).
func RunFor[T any, E any](ctx context.Context, job jobrun.Options, src Source[E], cfg RunConfig) (Result, error) {
	sp := src.spec()
	if err := src.check(true); err != nil {
		return Result{}, err
	}
	cfg.DrainTimeout = cmp.Or(max(cfg.DrainTimeout, 0), DefaultDrainTimeout)
	cfg.ProgressEvery = cmp.Or(max(cfg.ProgressEvery, 0), DefaultProgressEvery)
	readers, err := src.preflight(ctx)
	if err != nil {
		return Result{}, err
	}
	ctl := unbounded.NewControl()
	defer ctl.Close()
	p, s := beam.NewPipelineWithRoot()
	w := &watch[E]{src: src, sp: sp, ctl: ctl, readers: readers, inProcess: job.Loopback()}
	idleStop := cfg.IdleStop
	if sw, ok := any(src).(settledToEnd); ok && cfg.Savepoints != "" && job.FlinkREST != "" && idleStop > 0 {
		w.settled, idleStop = sw, 0 // the readers read on; follow stops the job
	}
	if _, err := build[T](s, src, cfg.Config, ctl, idleStop); err != nil {
		return Result{}, err
	}
	job.What, job.Hint, job.Progress = sp.name+" job", sp.hint, w.progress
	// The job outlives ctx: ctx's end is the stop request, which drains.
	j, err := jobrun.Start(context.WithoutCancel(ctx), p, job)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", sp.name, err)
	}
	stopped, drained := w.follow(ctx, j, cfg)
	pr, err := j.Wait()
	// A failed job reports no metrics: the watchdog's last sample.
	last, polling := w.lastSample()
	res := Result{Status: last, Stopped: drained, Savepoint: w.savepoint}
	if pr != nil {
		res.Status = w.status(pr.Metrics())
	}
	res.Elapsed = j.Elapsed()
	closeErr := ctl.Close() // what is safe, settled (Kafka: the last offsets committed)
	var stall *jobrun.Stall
	if errors.As(err, &stall) {
		src.explain(stall, w.inProcess, polling)
		return res, fmt.Errorf("%s: %w; the job was cancelled, and what it had not made safe is read again by the next run (%v)", sp.name, err, res.Status)
	}
	if err != nil {
		return res, fmt.Errorf("%s: %w; nothing the job had not %s was %s, so the next run reads it again (last seen: %v)", sp.name, err, sp.written, sp.settledVerb, res.Status)
	}
	if w.savepointErr != nil {
		return res, fmt.Errorf("%s: the stop with a savepoint into %s failed (%w); the job was cancelled, and the next run restores its latest checkpoint", sp.name, cfg.Savepoints, w.savepointErr)
	}
	if stopped && !drained && !w.drained(res.Status) {
		return res, fmt.Errorf("%s: not drained within %v of the stop (%v); the job was cancelled, and the next run reads again what was not safe", sp.name, cfg.DrainTimeout, res.Status)
	}
	if closeErr != nil {
		return res, fmt.Errorf("%s: the job ended, but what was safe was not all settled: %w; the next run reads those %s again", sp.name, closeErr, sp.noun)
	}
	return res, src.finish(context.WithoutCancel(ctx), &res)
}

// watch reads a Run job's status: its committed metrics and the readers'
// live counts (the Control's) when they run in this process.
type watch[E any] struct {
	src       Source[E]
	sp        spec
	ctl       *unbounded.Control
	readers   int
	inProcess bool

	mu      sync.Mutex
	last    Status // the last sample
	polling bool   // at the last sample: a reader waited on a poll the service had not answered

	savepoint    string       // the stop's savepoint (RunConfig.Savepoints)
	savepointErr error        // why the stop with a savepoint failed
	settled      settledToEnd // with IdleStop and Savepoints: the source follow watches for the idle end
}

// settledToEnd is a source that tells from outside its job that the job
// settled everything there is to read (Kafka: the group committed at the
// end of every partition).
type settledToEnd interface {
	settledToEnd(ctx context.Context) (bool, error)
}

// follow reports progress until the job ends by itself or ctx is done,
// and then drains it: it reports whether it stopped the job, and whether
// the job drained.
func (w *watch[E]) follow(ctx context.Context, j *jobrun.Job, cfg RunConfig) (stopped, drained bool) {
	tick := time.NewTicker(cfg.ProgressEvery)
	defer tick.Stop()
	var idle <-chan time.Time
	var settledSince time.Time
	if w.settled != nil {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		idle = t.C
	}
	for {
		select {
		case <-j.Done(): // by itself: an idle stop, a stall, a failure, or the runner
			return false, false
		case now := <-idle:
			ok, err := w.settled.settledToEnd(ctx)
			switch {
			case err != nil || !ok:
				settledSince = time.Time{}
			case settledSince.IsZero():
				settledSince = now
			case now.Sub(settledSince) >= cfg.IdleStop:
				w.stopWithSavepoint(j, cfg)
				return false, false
			}
		case <-ctx.Done():
			if cfg.Savepoints != "" && j.Flink() != nil {
				return true, w.stopWithSavepoint(j, cfg)
			}
			var stop func()
			if w.inProcess {
				stop = w.ctl.Stop
			}
			return true, j.Drain(stop, func(m metrics.Results) bool { return w.drained(w.status(m)) }, cfg.DrainTimeout)
		case <-tick.C:
			if cfg.Progress != nil {
				if m, err := j.Metrics(ctx); err == nil {
					s := w.status(m)
					s.Elapsed = j.Elapsed()
					cfg.Progress(s)
				}
			}
		}
	}
}

// stopWithSavepoint stops the job with a savepoint into cfg.Savepoints,
// within cfg.DrainTimeout, and reports whether it did; the job is
// cancelled when it did not.
func (w *watch[E]) stopWithSavepoint(j *jobrun.Job, cfg RunConfig) bool {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout+10*time.Second)
	defer cancel()
	w.savepoint, w.savepointErr = j.StopWithSavepoint(ctx, cfg.Savepoints, cfg.DrainTimeout)
	if w.savepointErr == nil {
		return true
	}
	// The stop is claimed, so the job is cancelled on the cluster itself;
	// Wait reports its end.
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if id, err := j.FlinkJobID(ctx); err == nil {
		if err := j.Flink().Cancel(ctx, id); err != nil {
			w.savepointErr = fmt.Errorf("%w; cancelling the job failed too: %v", w.savepointErr, err)
		}
	}
	return false
}

// lastSample is the watchdog's last sample, and whether a reader then
// waited on a poll.
func (w *watch[E]) lastSample() (Status, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.polling
}

// drained is Status.Drained, without the readers' end when they run
// elsewhere (they are not stopped there, and their end is not seen).
func (w *watch[E]) drained(s Status) bool {
	if !w.inProcess {
		s.ReadersEnded = s.Readers
	}
	return s.Drained()
}

// The steps the watchdog follows.
const (
	stageSource = iota
	stageDedup
	stageWrite
)

// stageName names a step the watchdog follows, in the source's words.
func stageName(stage int, sp spec) string {
	switch stage {
	case stageSource:
		return fmt.Sprintf("source: %s read and not yet committed, or a poll not answered", sp.noun)
	case stageDedup:
		return fmt.Sprintf("KeepFirst: %s read and not yet deduplicated", sp.noun)
	}
	return fmt.Sprintf("%s: kept %s and dead letters not yet %s", sp.write, sp.noun, sp.written)
}

// progress samples the job for the watchdog, step by step. The source's
// work is the readers' live count of what they emitted (the Control's)
// against the committed count, plus one while a poll goes unanswered;
// answered polls count as done, so an idle source is no stall. The other
// steps' come from the committed metrics. The settling runs in the bundles
// of the steps it follows, so a commit or ack that hangs shows as its
// step's.
func (w *watch[E]) progress(_ context.Context, m metrics.Results) (jobrun.Sample, error) {
	s := w.status(m)
	pr := w.ctl.Progress()
	w.mu.Lock()
	w.last = s
	w.polling = pr.Polling > 0 || pr.Unanswered
	w.mu.Unlock()
	d := s.Dedup
	source := jobrun.Stage{Name: stageName(stageSource, w.sp), Waiting: pr.Claimed - s.Read, Done: s.Read + pr.Answered}
	if pr.Unanswered {
		source.Waiting++
	}
	sample := jobrun.Sample{
		Counters: map[string]int64{
			"source/claimed":                     pr.Claimed,
			"source/read":                        s.Read,
			"source/" + w.sp.settled:             s.Settled,
			"source/" + w.sp.written:             s.Written,
			namespace(w.sp) + "/" + deadLettered: s.DeadLettered,
			"beamdedup/dedup/rows_in":            d.RowsIn,
			"beamdedup/dedup/emitted":            d.Emitted,
			"beamdedup/dedup/duplicates_dropped": d.DuplicatesDropped,
		},
		Pending: s.Read > s.Settled,
		Stages: []jobrun.Stage{
			source,
			// Rows enter KeepFirst (RowsIn) and settle (RowsIn - Pending).
			{Name: stageName(stageDedup, w.sp), Waiting: s.Read - s.DeadLettered - d.RowsIn + d.Pending(), Done: 2*d.RowsIn - d.Pending()},
			{Name: stageName(stageWrite, w.sp), Waiting: s.toWrite() - s.Written, Done: s.Written},
		},
	}
	if !pr.Requested {
		sample.Live = w.sp.live
	}
	return sample, nil
}

// status reads the job's status from its metrics.
func (w *watch[E]) status(m metrics.Results) Status {
	pr := jobrun.Live(m)
	c := w.src.counts(pr)
	s := Status{Read: c.read, Settled: c.settled, Written: c.written, Dedup: dedup.ReadCounters(pr),
		ReadersEnded: w.ctl.Progress().Ended, Readers: w.readers, sp: w.sp}
	own := map[string]*int64{deadLettered: &s.DeadLettered, postgresWritten: &s.PostgresWritten, postgresRefused: &s.PostgresRefused}
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		if p := own[c.Name()]; p != nil && c.Namespace() == namespace(w.sp) {
			*p += c.Result()
		}
	}
	return s
}
