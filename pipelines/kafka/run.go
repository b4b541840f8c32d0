package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beamdedup/beamdedup/pipelines/jobrun"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/kafkaio"
)

// Defaults of RunConfig.
const (
	DefaultDrainTimeout  = time.Minute
	DefaultProgressEvery = 10 * time.Second
)

// RunConfig configures Run.
type RunConfig struct {
	// Config is the pipeline (Brokers, the three topics and Group are
	// required).
	Config
	// IdleStop, when set, ends the run by itself once every partition was
	// read to its end and no record came for this long. 0: the run goes
	// on until ctx is done.
	IdleStop time.Duration
	// DrainTimeout bounds the stop: from the stop request until every
	// record read is safe (default 1 minute). Past it the job is cancelled
	// and Run fails; nothing that was not safe was committed, so the next
	// run reads it again.
	DrainTimeout time.Duration
	// Progress, when set, is called every ProgressEvery (default 10s) with
	// the job's counters.
	Progress      func(Status)
	ProgressEvery time.Duration
}

// Status is what the job's metrics say. Every record read ends in Commit
// once safe: Safe + Unheld == Read once nothing is in flight.
type Status struct {
	Read         int64 // records the source emitted
	Safe         int64 // of those, marked safe (committed once every record before them is)
	Unheld       int64 // marked safe where their reader does not run: never committed from there
	Written      int64 // records written to the output and dead-letter topics
	DeadLettered int64 // records that did not decode, to the dead-letter topic
	// With Config.Postgres: rows written into the table (or there
	// already), and refused by it (dead-lettered).
	PostgresWritten, PostgresRefused int64
	Dedup                            dedup.Counters
	ReadersEnded                     int
	Partitions                       int
	Elapsed                          time.Duration
}

// String is one line for a progress report.
func (s Status) String() string {
	return fmt.Sprintf("read %d, safe %d; dedup: %d in, %d emitted, %d duplicates dropped; %d dead-lettered; %d written (%v)",
		s.Read, s.Safe+s.Unheld, s.Dedup.RowsIn, s.Dedup.Emitted, s.Dedup.DuplicatesDropped, s.DeadLettered, s.Written,
		s.Elapsed.Round(time.Second))
}

// Drained reports whether nothing is left in flight: every reader ended,
// every record read reached KeepFirst or the dead letters, everything
// KeepFirst emitted and every dead letter was written, and every record
// read was marked safe.
func (s Status) Drained() bool {
	return s.ReadersEnded >= s.Partitions &&
		s.Safe+s.Unheld == s.Read &&
		s.Read == s.Dedup.RowsIn+s.DeadLettered &&
		s.Dedup.Pending() == 0 &&
		s.Written == s.toWrite()
}

// toWrite is what the job writes for what KeepFirst emitted and what was
// dead-lettered: every kept record to the output (or, refused by the
// table, to the dead letters), and every dead letter.
func (s Status) toWrite() int64 {
	return s.Dedup.Emitted + s.DeadLettered + s.Dedup.DeadLettered
}

// Result is the final status of a Run and the group's offsets after it.
type Result struct {
	Status
	// Committed are the group's committed offsets of the input topic and
	// End its end offsets, by partition, read after the run.
	Committed, End map[int32]int64
	// Stopped: the run was stopped (ctx) and drained.
	Stopped bool
}

// Run runs the pipeline as a job (job: the runner, its job server, the
// environment, the stall limit) until it ends by itself (IdleStop) or ctx
// is done, then stops it and returns its counters. beam.Init must have
// been called.
//
// The stop drains: when the SDK workers run in this process (LOOPBACK)
// the readers stop reading and end; elsewhere they cannot be reached and
// read on. Either way Run waits until every record the job read is safe,
// at most DrainTimeout, then cancels the job. An offset is committed only
// once its record is safe, so whatever the job had not finished, after a
// stop, a failure or a crash, is read again by the next run.
//
// A watchdog follows the job: when a step holds work and finishes none of
// it for job.StallLimit, or nothing of the job commits at all, Run cancels
// the job and returns a *jobrun.Stall naming the step and the brokers.
func Run(ctx context.Context, job jobrun.Options, cfg RunConfig) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	partitions, err := CheckTopics(cctx, cfg.Brokers, cfg.InputTopic, cfg.OutputTopic, cfg.DeadLetterTopic)
	cancel()
	if err != nil {
		return Result{}, err
	}

	st := kafkaio.NewStopper()
	defer st.Close()
	pc := cfg.Config
	pc.Read = append(append([]kafkaio.Option{}, pc.Read...), kafkaio.StopWith(st))
	if cfg.IdleStop > 0 {
		pc.Read = append(pc.Read, kafkaio.IdleStop(cfg.IdleStop))
	}
	p, s := beam.NewPipelineWithRoot()
	if _, err := Build(s, pc); err != nil {
		return Result{}, err
	}
	w := &watch{stopper: st, partitions: partitions, inProcess: job.Loopback()}
	job.What = "kafka job"
	job.Hint = fmt.Sprintf("the job waits on Kafka (brokers %s) or on a step of yours: check that the brokers answer, and that no step blocks", cfg.Brokers)
	job.Progress = w.progress
	// The job outlives ctx: ctx's end is the stop request, which drains.
	j, err := jobrun.Start(context.WithoutCancel(ctx), p, job)
	if err != nil {
		return Result{}, fmt.Errorf("kafka: %w", err)
	}
	tick := time.NewTicker(cfg.ProgressEvery)
	defer tick.Stop()
	stopped, drained := false, false
	for running := true; running; {
		select {
		case <-j.Done():
			running = false
		case <-ctx.Done():
			var stop func()
			if w.inProcess {
				stop = st.Stop
			}
			drained = j.Drain(stop, func(m metrics.Results) bool { return w.drained(w.status(m)) }, cfg.DrainTimeout)
			stopped, running = true, false
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
	pr, err := j.Wait()
	res := Result{Stopped: drained}
	if pr != nil {
		res.Status = w.status(pr.Metrics())
	} else {
		res.Status = w.lastSeen()
	}
	res.Elapsed = j.Elapsed()
	flushErr := st.Close() // the last safe offsets, committed
	var stall *jobrun.Stall
	if errors.As(err, &stall) {
		return res, fmt.Errorf("kafka: %w; the job was cancelled, and what it had not made safe is read again by the next run (%v)", err, res.Status)
	}
	if err != nil {
		return res, fmt.Errorf("kafka: %w; no offset of a record that was not safe was committed, so the next run reads it again (last seen: %v)", err, res.Status)
	}
	if stopped && !drained && !w.drained(res.Status) {
		return res, fmt.Errorf("kafka: not drained within %v of the stop (%v); the job was cancelled, and the next run reads again what was not safe", cfg.DrainTimeout, res.Status)
	}
	if flushErr != nil {
		return res, fmt.Errorf("kafka: the job ended, but the last offsets were not committed: %w; the next run reads those records again", flushErr)
	}
	octx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res.Committed, res.End, err = Offsets(octx, cfg.Brokers, cfg.Group, cfg.InputTopic)
	if err != nil {
		return res, err
	}
	return res, nil
}

// CheckTopics looks the topics up on brokers, so that a job does not start
// against one that is not there, and returns the first one's partition
// count. The errors name the topic and the brokers.
func CheckTopics(ctx context.Context, brokers string, topics ...string) (partitions int, err error) {
	adm, closeAdm, err := admin(brokers)
	if err != nil {
		return 0, err
	}
	defer closeAdm()
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return 0, fmt.Errorf("kafka: looking up topics %v on %s: %w", topics, brokers, err)
	}
	for i, t := range topics {
		d, ok := details[t]
		if !ok || d.Err != nil {
			return 0, fmt.Errorf("kafka: topic %s does not exist on %s", t, brokers)
		}
		if i == 0 {
			partitions = len(d.Partitions)
		}
	}
	return partitions, nil
}

// Offsets are group's committed offsets of topic and topic's end offsets,
// by partition.
func Offsets(ctx context.Context, brokers, group, topic string) (committed, end map[int32]int64, err error) {
	adm, closeAdm, err := admin(brokers)
	if err != nil {
		return nil, nil, err
	}
	defer closeAdm()
	resp, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: fetching the offsets of group %s on %s: %w", group, brokers, err)
	}
	committed = map[int32]int64{}
	for p, o := range resp[topic] {
		committed[p] = o.At
	}
	l, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: listing the end offsets of %s on %s: %w", topic, brokers, err)
	}
	end = map[int32]int64{}
	for p, o := range l[topic] {
		end[p] = o.Offset
	}
	return committed, end, nil
}

func admin(brokers string) (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seedsOf(brokers)...))
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: a client of %s: %w", brokers, err)
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// seedsOf splits a comma-separated broker list.
func seedsOf(brokers string) []string {
	var seeds []string
	for b := range strings.SplitSeq(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			seeds = append(seeds, b)
		}
	}
	return seeds
}

// watch reads a Run job's status: its committed metrics and the readers'
// live counts when they run in this process.
type watch struct {
	stopper    *kafkaio.Stopper
	partitions int
	inProcess  bool

	mu   sync.Mutex
	last Status
}

func (w *watch) lastSeen() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// drained is Status.Drained, without the readers' end when they run
// elsewhere (they are not stopped there, and their end is not seen).
func (w *watch) drained(s Status) bool {
	if !w.inProcess {
		s.ReadersEnded = s.Partitions
	}
	return s.Drained()
}

// Names of the steps the watchdog follows.
const (
	stageDedup = "KeepFirst: records read and not yet deduplicated"
	stageWrite = "write: kept records and dead letters not yet written"
)

func (w *watch) progress(_ context.Context, m metrics.Results) (jobrun.Sample, error) {
	s := w.status(m)
	w.mu.Lock()
	w.last = s
	w.mu.Unlock()
	d := s.Dedup
	sample := jobrun.Sample{
		Counters: map[string]int64{
			kafkaio.Namespace + "/" + kafkaio.MetricRead:    s.Read,
			kafkaio.Namespace + "/" + kafkaio.MetricSafe:    s.Safe,
			kafkaio.Namespace + "/" + kafkaio.MetricWritten: s.Written,
			Namespace + "/" + MetricDeadLettered:            s.DeadLettered,
			"beamdedup/dedup/rows_in":                       d.RowsIn,
			"beamdedup/dedup/emitted":                       d.Emitted,
			"beamdedup/dedup/duplicates_dropped":            d.DuplicatesDropped,
			"source/claimed":                                w.stopper.Claimed(),
		},
		Pending: s.Read > s.Safe+s.Unheld,
		Stages: []jobrun.Stage{
			{Name: stageDedup, Waiting: s.Read - s.DeadLettered - d.RowsIn + d.Pending(), Done: 2*d.RowsIn - d.Pending()},
			{Name: stageWrite, Waiting: s.toWrite() - s.Written, Done: s.Written},
		},
	}
	if !w.stopper.Requested() {
		// Its bundles commit every MaxBundleDuration, records or not.
		sample.Live = "Kafka source"
	}
	return sample, nil
}

func (w *watch) status(m metrics.Results) Status {
	return statusOf(jobrun.Live(m), w.stopper.Ended(), w.partitions)
}

// statusOf reads a job's status from its metrics.
func statusOf(pr beam.PipelineResult, readersEnded, partitions int) Status {
	k := kafkaio.ReadCounters(pr)
	s := Status{Read: k.Read, Safe: k.Safe, Unheld: k.Unheld, Written: k.Written, Dedup: dedup.ReadCounters(pr),
		ReadersEnded: readersEnded, Partitions: partitions}
	own := map[string]*int64{MetricDeadLettered: &s.DeadLettered,
		MetricPostgresWritten: &s.PostgresWritten, MetricPostgresRefused: &s.PostgresRefused}
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		if p := own[c.Name()]; p != nil && c.Namespace() == Namespace {
			*p += c.Result()
		}
	}
	return s
}
