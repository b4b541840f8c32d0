package pubsubio

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// A Stopper ends the readers of a Read on request, keeping the acking
// invariant: a reader that sees the request stops pulling, ends its bundle
// with a checkpoint (so the runner commits what it emitted), acks those
// messages at the start of its next bundle and ends there without pulling
// again. Messages it pulled and did not claim are nacked; anything else
// outstanding is redelivered when its lease expires.
//
// The request travels through process memory, so it reaches only readers
// running in the process that created the Stopper: Prism in process, or any
// runner with the LOOPBACK environment. Elsewhere use the runner's own stop
// (Dataflow drain, Flink stop with a savepoint).
//
// It also counts, in the same memory, the messages its readers claimed and
// acked, as they happen: the job's metrics show a bundle's counts only
// once it commits, so they cannot tell a reader stuck in a bundle from an
// idle one.
type Stopper struct {
	id        string
	requested atomic.Bool
	ended     atomic.Int64
	claimed   atomic.Int64
	acked     atomic.Int64
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

// Stop asks the readers to end. It returns at once; Ended counts the
// readers that have.
func (s *Stopper) Stop() { s.requested.Store(true) }

// Requested reports whether Stop was called.
func (s *Stopper) Requested() bool { return s.requested.Load() }

// Ended is the number of readers that have ended (on request or, with
// IdleStop, idle): each has acked every message it emitted.
func (s *Stopper) Ended() int { return int(s.ended.Load()) }

// Claimed is the number of messages the readers claimed (emitted into the
// job), redeliveries included.
func (s *Stopper) Claimed() int64 { return s.claimed.Load() }

// Acked is the number of claimed messages the readers acked, once the
// bundle that claimed them committed (a rejected ack of an expired lease
// included: the message was processed and will be deduplicated).
func (s *Stopper) Acked() int64 { return s.acked.Load() }

// Close unregisters the Stopper.
func (s *Stopper) Close() { stoppers.Delete(s.id) }

// StopWith makes the readers end when s.Stop is called (see Stopper).
func StopWith(s *Stopper) ReadOption {
	return func(c *readConfig) error {
		if s == nil {
			return fmt.Errorf("pubsubio: StopWith(nil)")
		}
		c.StopID = s.id
		return nil
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
