package pgwrite

import (
	"context"
	"errors"
	"time"
)

// afterGivingUp is what happens once the sink gives up, by runner.
const afterGivingUp = "the bundle fails: on Prism (the default runner) the job fails with it, and rerunning the job " +
	"once the database is back completes the table (rows already written are not rewritten, and the guard keeps " +
	"older versions out, so the table ends exact); a runner that retries failed bundles (Dataflow, Flink) retries it"

// retrier retries work on a target after transient faults.
type retrier struct {
	target  target
	retries int
	backoff time.Duration
}

func newRetrier(t target, c *Config) retrier {
	return retrier{target: t, retries: c.Retries, backoff: c.Backoff}
}

// retry runs fn until it succeeds, fails with a fault that is not
// transient, or has been retried w.retries times, waiting w.backoff, then
// twice as long each time, up to maxBackoff.
func (w retrier) retry(ctx context.Context, what string, fn func(context.Context) error) (retries int64, err error) {
	start := time.Now()
	wait := w.backoff
	for attempt := 1; ; attempt++ {
		err = fn(ctx)
		if err == nil {
			return retries, nil
		}
		if ctx.Err() != nil {
			return retries, w.target.errorf("%s: %w (after %d attempts)", what, ctx.Err(), attempt)
		}
		var f *fault
		if !errors.As(err, &f) || f.class != transientFault {
			return retries, w.target.errorf("%s: %w", what, err)
		}
		if attempt > w.retries {
			return retries, w.target.errorf("%s: connection lost or transient error %d times over %v, giving up: %w; %s",
				what, attempt, time.Since(start).Round(time.Millisecond), err, afterGivingUp)
		}
		retries++
		select {
		case <-ctx.Done():
			return retries, w.target.errorf("%s: %w", what, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, maxBackoff)
	}
}
