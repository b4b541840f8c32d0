// Package jobrun runs a Beam pipeline as a job and follows it to its end:
// submit, follow, watchdog, cancel, drain. It is the one job sequence of
// the sample pipelines (pipelines/...) and of cmd/runjob, whatever the
// runner and wherever the SDK workers run.
//
// Submission goes through beam.Run, so the program must link the runner
// it names (a blank import of the runner's package, as in any Beam main);
// jobrun itself links no runner. A job on a portable job server (runners
// prism, universal/portable, flink, spark) is followed through the Job
// API: a watchdog (Watch) reads its metrics and cancels it in the runner
// when it stops making progress, with one line saying what did not happen
// and what to check, so that no run waits silently. Other runners
// (Dataflow, dot) are left to beam.Run: the Dataflow runner follows its
// job itself.
//
// Beam's runners read their settings from global flags (--endpoint,
// --environment_type, --environment_config, --job_name, --experiments).
// Start sets them for the submission only and puts them back as it found
// them once the job is on the job server; submissions in one process take
// turns. A job on a runner that may be Prism is submitted with Prism's
// bundle splitting off (NoSplitsExperiment).
package jobrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/metricsx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"

	"github.com/beamdedup/beamdedup/pipelines/jobrun/flinkopts"
	"github.com/beamdedup/beamdedup/pipelines/jobrun/flinkrest"
	"github.com/beamdedup/beamdedup/transforms/prismsplit"
)

// DefaultStallLimit is the stall limit of a job whose Options.StallLimit
// is 0.
const DefaultStallLimit = 60 * time.Second

// Options configure a job. The zero value of each field takes the
// default its comment gives.
type Options struct {
	// Runner is the Beam runner, as beam.Run names it (required).
	Runner string
	// Endpoint is the job server of a portable runner; empty means
	// --endpoint. Runner prism needs one too: a standalone Prism, or
	// Prism started in this process (pipelines/jobrun/localprism).
	Endpoint string
	// EnvironmentType and EnvironmentConfig say where the SDK workers run
	// (LOOPBACK, EXTERNAL, PROCESS, DOCKER); empty means the flags
	// --environment_type and --environment_config.
	EnvironmentType   string
	EnvironmentConfig string
	// WorkerBinary is the SDK worker binary the runner stages (a
	// linux-amd64 build of the pipeline's main, or a test binary); empty
	// means --worker_binary, else Beam compiles the main package.
	WorkerBinary string
	// Name is the job's name on the job server, by which it is followed;
	// empty means --job_name, or else a name of this run's own.
	Name string
	// StallLimit is how long a followed job may make no progress before
	// it is cancelled: 0 means DefaultStallLimit, a negative value turns
	// the watchdog off.
	StallLimit time.Duration
	// What names the job in messages ("orders job"); default "job".
	What string
	// Progress observes the job for the watchdog, from its committed
	// metrics, once a bundle has been committed or reported. Nil: any
	// committed or attempted element count that moves is progress, and
	// nothing moving for StallLimit is a stall (a batch job has work until
	// it ends).
	Progress func(ctx context.Context, committed metrics.Results) (Sample, error)
	// Hint ends the stall message of a job whose workers have reported
	// (where to read about the pipeline's known stalls); empty: what to
	// check of the environment.
	Hint string
	// Timeout bounds the job from Start to its end: past it the job is
	// cancelled in the runner and Wait returns a *TimedOut. 0: no bound
	// but Start's context.
	Timeout time.Duration
	// Parallelism is the job's parallelism on a runner that takes one
	// (Flink; Beam's --parallelism); 0: --parallelism, else the runner's.
	Parallelism int
	// Flink are the job's Flink runner options (checkpoints, max
	// parallelism, the savepoint to restore, ...), sent as the Go options
	// of their names, which the project's job server (cmd/flinkjobserver)
	// lifts into the runner's options (pipelines/jobrun/flinkopts). Their
	// flags, when set
	// (flinkopts.Register), reach the runner too; these take precedence.
	Flink flinkopts.Options
	// FlinkREST is the REST address ("host:port") of the Flink cluster the
	// job server submits to (its --flink-master). With runner flink, the
	// watchdog reads the job's progress there: Beam's Flink runner reports
	// a job's metrics to the Job API only when the job ends. Runner flink
	// without it has no watchdog (Timeout and Start's context still bound
	// the job): the Job API shows a healthy job as one that never moves.
	FlinkREST string
	// BeforeSubmit is called with the pipeline before it is submitted (to
	// write its graph, say), with Beam's flags as the submission sees
	// them; its error stops the job before it starts.
	BeforeSubmit func(*beam.Pipeline) error
}

// TimedOut is the error of a job that outlived Options.Timeout.
type TimedOut struct {
	What  string
	After time.Duration
}

func (e *TimedOut) Error() string {
	return fmt.Sprintf("%s did not end within %v, its timeout; cancelled in the runner", e.What, e.After)
}

// Followed reports whether runner submits to a portable job server, where
// jobs are followed (and watched) through the Job API.
func Followed(runner string) bool {
	switch strings.ToLower(runner) {
	case "prism", "prismrunner", "universal", "portable", "portablerunner", "flink", "flinkrunner", "spark", "sparkrunner":
		return true
	}
	return false
}

var jobSeq atomic.Int64

// withDefaults fills in the fields the flags or defaults give. The flags
// are read in turn with submissions, which set and restore them.
func (o Options) withDefaults() Options {
	flagsMu.Lock()
	endpoint, envType, envConfig, name, worker := *jobopts.Endpoint, *jobopts.EnvironmentType, *jobopts.EnvironmentConfig, *jobopts.JobName, *jobopts.WorkerBinary
	flagsMu.Unlock()
	if o.WorkerBinary == "" {
		o.WorkerBinary = worker
	}
	if o.Endpoint == "" {
		o.Endpoint = endpoint
	}
	if o.EnvironmentType == "" {
		o.EnvironmentType = envType
	}
	if o.EnvironmentConfig == "" {
		o.EnvironmentConfig = envConfig
	}
	if o.Name == "" {
		o.Name = name
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("beamdedup-%d-%d", time.Now().UnixNano(), jobSeq.Add(1))
	}
	if o.StallLimit == 0 {
		o.StallLimit = DefaultStallLimit
	}
	if o.What == "" {
		o.What = "job"
	}
	return o
}

// Loopback reports whether the SDK workers run in this process.
func (o Options) Loopback() bool {
	return strings.EqualFold(o.withDefaults().EnvironmentType, "loopback")
}

// Job is a pipeline submitted by Start.
type Job struct {
	o      Options
	remote *Remote // nil: a runner that is not followed
	start  time.Time

	done      chan struct{} // closed when beam.Run returned
	flagsBack chan struct{} // closed when Beam's flags are restored; nil: none set
	pr        beam.PipelineResult
	runErr    error
	runCancel context.CancelCauseFunc // beam.Run's context
	stopWatch context.CancelFunc

	flink   *flinkrest.Client // nil: not on Flink, or no FlinkREST
	flinkID string            // the Flink job's id, once found (under mu)

	mu       sync.Mutex
	why      error // why the job was cancelled; nil: it ended by itself
	stall    *Stall
	gaveUp   error // ctx's cause when Start's context ended first
	notEnded bool  // cancelled, and beam.Run had to be abandoned
}

// flagsMu makes submissions take turns with Beam's global flags.
var flagsMu sync.Mutex

// Start submits p as a job and returns at once; Wait returns its end.
// When ctx is done before the job ends, the job is cancelled in the
// runner and Wait returns ctx's cause: pass a context that lives as long
// as the job should (RunLive's outlives its stop request, which drains).
func Start(ctx context.Context, p *beam.Pipeline, o Options) (*Job, error) {
	if o.Runner == "" {
		return nil, errors.New("jobrun: Options.Runner is required")
	}
	o = o.withDefaults()
	if err := o.Flink.Check(); err != nil {
		return nil, fmt.Errorf("jobrun: %w", err)
	}
	j := &Job{o: o, start: time.Now(), done: make(chan struct{}), stopWatch: func() {}}
	if isFlink(o.Runner) && o.FlinkREST != "" {
		j.flink = flinkrest.New(o.FlinkREST)
	}
	if Followed(o.Runner) {
		if o.Endpoint == "" {
			return nil, fmt.Errorf("jobrun: runner %s needs a job server (Options.Endpoint or --endpoint): a standalone one, or Prism in this process (pipelines/jobrun/localprism)", o.Runner)
		}
		r, err := Follow(o.Endpoint, o.Name)
		if err != nil {
			return nil, err
		}
		j.remote = r
	}
	giveUp := func() {}
	if o.Timeout > 0 {
		ctx, giveUp = context.WithTimeoutCause(ctx, o.Timeout, &TimedOut{What: o.What, After: o.Timeout})
	}
	// The job gets a context of its own: cancelling beam.Run's context
	// leaves the job running in the runner (and, with LOOPBACK, without
	// its workers). It is stopped through the job server instead.
	runCtx, runCancel := context.WithCancelCause(context.WithoutCancel(ctx))
	j.runCancel = runCancel
	if j.remote == nil {
		if err := j.beforeSubmit(p); err != nil {
			giveUp()
			return nil, err
		}
		go j.run(runCtx, p)
		go j.giveUpWith(ctx, giveUp)
		return j, nil
	}

	flagsMu.Lock()
	vals := map[*string]string{
		jobopts.Endpoint: o.Endpoint, jobopts.EnvironmentType: o.EnvironmentType,
		jobopts.EnvironmentConfig: o.EnvironmentConfig, jobopts.JobName: o.Name,
		jobopts.WorkerBinary: o.WorkerBinary,
	}
	if MayBePrism(o.Runner) && !splitsAllowed.Load() {
		vals[jobopts.Experiments] = prismsplit.WithExperiment(*jobopts.Experiments)
	}
	restoreFlags, restoreRunner := setFlags(vals), setRunnerOptions(o)
	restore := func() { restoreRunner(); restoreFlags() }
	if err := j.beforeSubmit(p); err != nil {
		restore()
		flagsMu.Unlock()
		giveUp()
		return nil, err
	}
	go j.run(runCtx, p)
	j.flagsBack = make(chan struct{})
	go func() {
		defer close(j.flagsBack)
		defer flagsMu.Unlock()
		defer restore()
		j.awaitSubmission()
	}()
	if o.StallLimit > 0 && (!isFlink(o.Runner) || j.flink != nil) {
		wctx, stop := context.WithCancel(context.Background())
		j.stopWatch = stop
		go func() {
			if err := Watch(wctx, j.watchConfig()); err != nil {
				j.stalled(err)
			}
		}()
	}
	go j.giveUpWith(ctx, giveUp)
	return j, nil
}

// beforeSubmit calls Options.BeforeSubmit; its error releases the job.
func (j *Job) beforeSubmit(p *beam.Pipeline) error {
	if j.o.BeforeSubmit == nil {
		return nil
	}
	err := j.o.BeforeSubmit(p)
	if err != nil {
		j.close()
	}
	return err
}

func (j *Job) run(ctx context.Context, p *beam.Pipeline) {
	j.pr, j.runErr = beam.Run(ctx, j.o.Runner, p)
	if j.runErr != nil {
		// The universal runner returns a result without metrics with some
		// errors, and its Metrics then panics.
		j.pr = nil
	}
	close(j.done)
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
// them. A flag that already has its value is not written, so that code
// reading it outside flagsMu (a test's own check of --endpoint) does not
// race with a submission that leaves it as it was.
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

func isFlink(runner string) bool {
	r := strings.ToLower(runner)
	return r == "flink" || r == "flinkrunner"
}

// giveUpWith cancels the job when ctx ends first; release frees ctx.
func (j *Job) giveUpWith(ctx context.Context, release func()) {
	defer release()
	select {
	case <-ctx.Done():
		j.mu.Lock()
		j.gaveUp = context.Cause(ctx)
		j.mu.Unlock()
		j.cancel(j.gaveUp)
	case <-j.done:
	}
}

func (j *Job) stalled(err error) {
	var st *Stall
	if !errors.As(err, &st) {
		return
	}
	st.Hint = j.hint(st.Note == noWorker || liveStalled(st))
	j.mu.Lock()
	j.stall = st
	j.mu.Unlock()
	j.cancel(st)
}

// cancelGrace is how long a cancelled job may take to end before Wait
// stops waiting for beam.Run.
const cancelGrace = 30 * time.Second

// cancel stops the job in the runner; why is kept as the reason of the
// first cancellation.
func (j *Job) cancel(why error) error {
	j.mu.Lock()
	first := j.why == nil
	if first {
		j.why = why
	}
	j.mu.Unlock()
	if !first {
		return nil
	}
	j.stopWatch()
	if j.remote == nil {
		j.runCancel(why)
		return nil
	}
	// Its own deadline, whatever cancelled the job: the stop request must
	// still reach the runner.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := j.remote.Cancel(ctx)
	if j.flink != nil {
		// Beam's job server (2.62.0) stops following a job on a remote
		// Flink cluster when cancelled, and leaves it running there
		// (notes/beam-defects.md, 19).
		if id, ferr := j.FlinkJobID(ctx); ferr == nil {
			if fj, ferr := j.flink.Job(ctx, id); ferr == nil && !flinkrest.Terminal(fj.State) {
				if ferr = j.flink.Cancel(ctx, id); ferr != nil && err == nil {
					err = ferr
				}
			}
		}
	}
	if err != nil {
		j.abandon(why)
		return fmt.Errorf("cancelling job %s on %s: %w", j.o.Name, j.o.Endpoint, err)
	}
	go func() {
		select {
		case <-j.done:
		case <-time.After(cancelGrace):
			j.abandon(why)
		}
	}()
	return nil
}

// abandon stops waiting for beam.Run.
func (j *Job) abandon(why error) {
	j.mu.Lock()
	j.notEnded = true
	j.mu.Unlock()
	j.runCancel(why)
}

// Cancel cancels the job in the runner; Wait then returns its end
// without an error of its own.
func (j *Job) Cancel() error { return j.cancel(errCancelled) }

var errCancelled = errors.New("cancelled on request")

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Name is the job's name on the job server.
func (j *Job) Name() string { return j.o.Name }

// Elapsed is the time since Start.
func (j *Job) Elapsed() time.Duration { return time.Since(j.start) }

// Wait waits for the job to end and returns its result (nil when
// beam.Run failed). The error says why it ended when it did not end by
// itself: a *Stall when the watchdog cancelled it, Start's context's cause
// when that ended first.
func (j *Job) Wait() (beam.PipelineResult, error) {
	<-j.done
	if j.flagsBack != nil {
		<-j.flagsBack // the caller may read the flags it set once Wait returns
	}
	j.stopWatch()
	if j.remote != nil {
		j.remote.Close()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	var err error
	switch {
	case j.stall != nil:
		err = j.stall
	case j.gaveUp != nil:
		var to *TimedOut
		if errors.As(j.gaveUp, &to) {
			err = j.gaveUp
		} else {
			err = fmt.Errorf("job cancelled: %w", j.gaveUp)
		}
	case j.why == errCancelled:
		err = nil
		if j.notEnded {
			err = fmt.Errorf("the job did not end within %v of its cancellation", cancelGrace)
		}
		return j.pr, err
	default:
		return j.pr, j.runErr
	}
	if j.notEnded {
		err = fmt.Errorf("%w; the job did not end within %v of its cancellation", err, cancelGrace)
	}
	return j.pr, err
}

// Metrics returns the committed metrics of a followed job, as it runs.
func (j *Job) Metrics(ctx context.Context) (metrics.Results, error) {
	if j.remote == nil {
		return metrics.Results{}, fmt.Errorf("jobrun: runner %s is not followed through a job server", j.o.Runner)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return j.remote.Metrics(ctx)
}

// Drain ends the job without losing what it read: it calls stop (to end
// the sources, say; nil for none), waits until drained reports from the
// job's committed metrics that nothing is in flight, at most timeout, and
// then cancels the job. It reports whether the job drained; it returns
// false at once when the job ends by itself meanwhile (read its final
// metrics from Wait). A stall during the drain cancels the job as ever.
func (j *Job) Drain(stop func(), drained func(metrics.Results) bool, timeout time.Duration) bool {
	if stop != nil {
		stop()
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-j.done:
			return false
		case <-tick.C:
		}
		m, err := j.Metrics(context.Background())
		ok := err == nil && drained(m)
		if ok || time.Now().After(deadline) {
			j.cancel(errCancelled)
			return ok
		}
	}
}

// Run runs p as a job until it ends (Start, then Wait).
func Run(ctx context.Context, p *beam.Pipeline, o Options) (beam.PipelineResult, error) {
	j, err := Start(ctx, p, o)
	if err != nil {
		return nil, err
	}
	return j.Wait()
}

// close releases a job that was never started.
func (j *Job) close() {
	if j.remote != nil {
		j.remote.Close()
	}
}

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
		// Every bundle a worker finishes reports the elements it read,
		// the source's own restriction among them. Last: a stage of the
		// caller's that stalls is the more precise report.
		s.Stages = append(s.Stages, Stage{Name: s.Live, Always: true, Done: counters(committed)["elements"]})
	}
	if len(committed) == 0 && len(attempted) == 0 && !holdsWork(s.Stages) {
		// Not idle: the job has not started. A healthy job commits its
		// first bundle within seconds, a streaming source's included.
		s.Pending, s.Note = true, noWorker
	}
	return s, nil
}

func holdsWork(stages []Stage) bool {
	for _, st := range stages {
		if st.Waiting > 0 {
			return true
		}
	}
	return false
}

// liveStalled reports whether the stall is the live source's: nothing
// committed at all, which is the environment's doing (a worker that
// froze or lost its job server), not a step's.
func liveStalled(st *Stall) bool { return st.Stage.Always }

// hint says what to check when the job stalled: the environment when no
// worker ever reported (or no Hint is given), else Options.Hint.
func (j *Job) hint(noWorkerYet bool) string {
	if !noWorkerYet && j.o.Hint != "" {
		return j.o.Hint
	}
	o := j.o
	switch strings.ToLower(o.EnvironmentType) {
	case "process":
		return fmt.Sprintf("check that the PROCESS command %s starts an SDK worker; on Prism (Beam v2.77.0) the boot loader alone cannot: Prism passes it the worker id in quotes (notes/beam-defects.md, \"Prism quotes the PROCESS worker id\"; docs/runners.md has the wrapper)", o.EnvironmentConfig)
	case "external":
		return fmt.Sprintf("check that a worker pool serves --environment_config=%s, is alive, and reaches the job server at %s", o.EnvironmentConfig, o.Endpoint)
	case "loopback":
		return fmt.Sprintf("the SDK worker runs in this process (LOOPBACK): check that the job server at %s reaches this machine, and that no step of the pipeline blocks", o.Endpoint)
	}
	return fmt.Sprintf("the runner starts SDK workers in Docker (--environment_type=%q): check that Docker runs where the job server at %s starts them and can pull the SDK image (docs/runners.md)", o.EnvironmentType, o.Endpoint)
}

// Live adapts a job's metrics as Job.Metrics or a watchdog's sample
// reads them (committed, while it runs) to a beam.PipelineResult, for the
// transforms' counter readers (dedup.ReadCounters, ...).
func Live(m metrics.Results) beam.PipelineResult { return liveResult{m} }

type liveResult struct{ m metrics.Results }

func (r liveResult) Metrics() metrics.Results { return r.m }
func (r liveResult) JobID() string            { return "" }
