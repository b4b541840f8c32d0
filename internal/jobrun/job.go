package jobrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"

	"github.com/beamdedup/beamdedup/internal/flinkrest"
)

// Job is a pipeline submitted by Start.
type Job struct {
	o      Options
	remote *Remote // nil: a runner that is not followed
	start  time.Time

	done        chan struct{} // closed when beam.Run returned
	flagsBack   chan struct{} // closed when Beam's flags are restored; nil: none set
	placeholder string        // the placeholder worker binary to remove when beam.Run returns
	pr          beam.PipelineResult
	runErr      error
	runCancel   context.CancelCauseFunc // beam.Run's context
	stopWatch   context.CancelFunc

	flink   *flinkrest.Client // nil: not on Flink, or no FlinkREST
	flinkID string            // the Flink job's id, once found (under mu)

	mu       sync.Mutex
	why      error // why the job was cancelled; nil: it ended by itself
	stall    *Stall
	gaveUp   error // ctx's cause when Start's context ended first
	notEnded bool  // cancelled, and beam.Run had to be abandoned
}

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
			return nil, fmt.Errorf("jobrun: runner %s needs a job server (Options.Endpoint or --endpoint): a standalone one, or Prism in this process (internal/jobrun/localprism)", o.Runner)
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
	// Cancelling beam.Run's context leaves the job running in the runner
	// (and, with LOOPBACK, without its workers): it is stopped through the
	// job server instead.
	runCtx, runCancel := context.WithCancelCause(context.WithoutCancel(ctx))
	j.runCancel = runCancel
	var err error
	if j.remote == nil {
		if err = j.beforeSubmit(p); err == nil {
			go j.run(runCtx, p)
		}
	} else {
		err = j.submitWithFlags(runCtx, p)
	}
	if err != nil {
		giveUp()
		return nil, err
	}
	if j.remote != nil && o.StallLimit > 0 && (!isFlink(o.Runner) || j.flink != nil) {
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
	if err != nil && j.remote != nil {
		j.remote.Close()
	}
	return err
}

func (j *Job) run(ctx context.Context, p *beam.Pipeline) {
	j.pr, j.runErr = beam.Run(ctx, j.o.Runner, p)
	if j.placeholder != "" {
		os.Remove(j.placeholder)
	}
	if j.runErr != nil {
		// The universal runner returns a result without metrics with some
		// errors, and its Metrics then panics.
		j.pr = nil
	}
	close(j.done)
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
	// A live source's stall (nothing committed at all) is the
	// environment's doing (a worker that froze or lost its job server).
	st.Hint = j.hint(st.Note == noWorker || st.Stage.Always)
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
	if !j.claimStop(why) {
		return nil
	}
	if j.remote == nil {
		j.runCancel(why)
		return nil
	}
	// Its own deadline, whatever cancelled the job: the stop request must
	// still reach the runner.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A job cancelled as it is being submitted is cancelled once it is on
	// the job server, which lists it only then.
	select {
	case <-j.flagsBack:
	case <-ctx.Done():
	}
	select {
	case <-j.done:
		return nil // ended, or never submitted
	default:
	}
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
	j.abandonAfterGrace(why)
	return nil
}

// claimStop keeps why as the reason the job is stopped and stops the
// watchdog; false: the job is being stopped already.
func (j *Job) claimStop(why error) bool {
	j.mu.Lock()
	first := j.why == nil
	if first {
		j.why = why
	}
	j.mu.Unlock()
	if first {
		j.stopWatch()
	}
	return first
}

// abandonAfterGrace abandons beam.Run unless the job ends within
// cancelGrace.
func (j *Job) abandonAfterGrace(why error) {
	go func() {
		select {
		case <-j.done:
		case <-time.After(cancelGrace):
			j.abandon(why)
		}
	}()
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
		err = j.gaveUp
		if !errors.As(err, new(*TimedOut)) {
			err = fmt.Errorf("job cancelled: %w", err)
		}
	case j.why != errCancelled:
		return j.pr, j.runErr
	}
	if j.notEnded {
		notEnded := fmt.Errorf("the job did not end within %v of its cancellation", cancelGrace)
		if err == nil {
			return j.pr, notEnded
		}
		err = fmt.Errorf("%w; %v", err, notEnded)
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

// Drain ends the job without losing what it read: it calls stop (nil for
// none), waits until drained reports from the job's committed metrics that
// nothing is in flight, at most timeout, and then cancels the job. It
// reports whether the job drained; false at once when the job ends by
// itself meanwhile.
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
