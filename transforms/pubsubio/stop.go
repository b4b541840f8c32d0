package pubsubio

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// A Stopper ends the readers of a Read on request: a reader that sees the
// request stops pulling and ends its bundle, whose output the runner then
// commits as usual; what it emitted is acked downstream as it becomes safe.
// Messages it pulled and did not emit are handed back.
//
// The request travels through process memory, so it reaches only readers
// running in the process that created the Stopper: Prism in process, or any
// runner with the LOOPBACK environment. Elsewhere use the runner's own stop
// (Dataflow drain, Flink stop with a savepoint).
//
// It also counts, in the same memory, the messages its readers emitted, as
// they go: the job's metrics show a bundle's counts only once it commits,
// so they cannot tell a reader stuck in a bundle from an idle one.
type Stopper struct {
	id         string
	requested  atomic.Bool
	ended      atomic.Int64
	claimed    atomic.Int64
	answered   atomic.Int64
	unanswered atomic.Bool
	pullSince  atomic.Int64 // Unix nanos when the Pull in flight was sent; 0: none
}

var (
	stoppers  sync.Map // id -> *Stopper
	stopperID atomic.Int64
)

// NewStopper returns a Stopper registered in this process; Close it when
// the job is over.
func NewStopper() *Stopper {
	s := &Stopper{id: fmt.Sprintf("stopper-%d", stopperID.Add(1))}
	stoppers.Store(s.id, s)
	return s
}

// Stop asks the readers to end. It returns at once; Progress tells how
// many have.
func (s *Stopper) Stop() { s.requested.Store(true) }

// StopperProgress is what a Stopper saw of its readers so far.
type StopperProgress struct {
	// Requested: Stop was called.
	Requested bool
	// Ended is the number of readers that have ended (on request or, with
	// IdleStop, idle).
	Ended int
	// Claimed is the number of messages the readers emitted into the job,
	// redeliveries of acked messages included.
	Claimed int64
	// Answered is the number of Pull requests Pub/Sub answered (empty ones
	// included), and Unanswered whether the last one went unanswered for
	// the whole bundle: an idle subscription answers, a service that is
	// down or frozen does not.
	Answered   int64
	Unanswered bool
	// Pulling is how long the Pull a reader is waiting on has been out (0
	// when none is): a reader whose bundle commits nothing while it waits
	// on Pub/Sub is held up by the service, not by the runner.
	Pulling time.Duration
}

// Progress is what the Stopper saw of its readers so far.
func (s *Stopper) Progress() StopperProgress {
	p := StopperProgress{Requested: s.requested.Load(), Ended: int(s.ended.Load()), Claimed: s.claimed.Load(),
		Answered: s.answered.Load(), Unanswered: s.unanswered.Load()}
	if since := s.pullSince.Load(); since != 0 {
		p.Pulling = time.Since(time.Unix(0, since))
	}
	return p
}

// Close unregisters the Stopper and ends its Read's leases in this
// process: messages still held (the job failed or was cancelled with them
// in flight) are handed back to Pub/Sub at once, for the next run. It
// gives Pub/Sub 10s for that; past it they come back after their lease.
func (s *Stopper) Close() {
	stoppers.Delete(s.id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closeRun(ctx, s.id, true)
}

// StopWith makes the readers end when s.Stop is called (see Stopper). Read.
func StopWith(s *Stopper) Option {
	return func(c *config) {
		c.Set("StopWith")
		if s == nil {
			c.Errorf("StopWith(nil): want a Stopper from NewStopper")
			return
		}
		c.stopID = s.id
	}
}

// stopper returns the reader's Stopper, or nil when it has none or it is
// not in this process (warned once per DoFn instance).
func (fn *readFn) stopper(ctx context.Context) *Stopper {
	if fn.StopID == "" {
		return nil
	}
	if v, ok := stoppers.Load(fn.StopID); ok {
		return v.(*Stopper)
	}
	if !fn.stopMissingWarned {
		fn.stopMissingWarned = true
		log.Warnf(ctx, "pubsubio: the Stopper %s of %s is not in this worker process; the reader cannot be stopped from the submitting process (stop the job with the runner)", fn.StopID, fn.Subscription)
	}
	return nil
}
