package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// A Stopper ends the readers of a Read on request: a reader that sees the
// request ends its bundle, whose output the runner then commits as usual,
// and its partition is done; what it emitted is committed for the group
// as it becomes safe.
//
// The request travels through process memory, so it reaches only readers
// running in the process that created the Stopper: Prism in process, or
// any runner with the LOOPBACK environment. Elsewhere use the runner's
// own stop (Flink: stop with a savepoint).
//
// It also counts, live, the records its readers emitted (the job's
// metrics show a bundle's counts only once it commits), and tells the
// offsets that are safe and committed.
type Stopper struct {
	id        string
	requested atomic.Bool
	ended     atomic.Int64
	claimed   atomic.Int64
}

var (
	stoppers  sync.Map // id -> *Stopper
	stopperID atomic.Int64
)

// NewStopper returns a Stopper registered in this process; Close it when
// the job is over.
func NewStopper() *Stopper {
	s := &Stopper{id: fmt.Sprintf("kafkaio-stopper-%d", stopperID.Add(1))}
	stoppers.Store(s.id, s)
	return s
}

// Stop asks the readers to end. It returns at once; Ended counts the
// readers that have.
func (s *Stopper) Stop() { s.requested.Store(true) }

// Requested reports whether Stop was called.
func (s *Stopper) Requested() bool { return s.requested.Load() }

// Ended is the number of partition readers that have ended (on request
// or, with IdleStop, idle).
func (s *Stopper) Ended() int { return int(s.ended.Load()) }

// Claimed is the number of records the readers emitted into the job.
func (s *Stopper) Claimed() int64 { return s.claimed.Load() }

// Offsets are, for each partition read in this process, the offset below
// which every record is safe and the offset committed for the group.
func (s *Stopper) Offsets() (safe, committed map[int32]int64) {
	safe, committed = map[int32]int64{}, map[int32]int64{}
	for _, r := range runsOf(s.id) {
		sf, c := r.positions()
		for p, o := range sf {
			safe[p] = o
		}
		for p, o := range c {
			committed[p] = o
		}
	}
	return safe, committed
}

// Flush commits for the group, now, every offset that is safe and not yet
// committed.
func (s *Stopper) Flush(ctx context.Context) error {
	var errs []error
	for _, r := range runsOf(s.id) {
		errs = append(errs, r.flush(ctx))
	}
	return errors.Join(errs...)
}

// Close commits what is safe (Flush, for at most 10s), ends the
// committing of its Read's runs in this process and unregisters the
// Stopper.
func (s *Stopper) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.Flush(ctx)
	runsMu.Lock()
	for _, r := range runs {
		if r.id == s.id {
			r.end()
		}
	}
	runsMu.Unlock()
	stoppers.Delete(s.id)
	return err
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
	return stopperOf(ctx, fn.StopID, fn.Topic, &fn.stopMissingWarned)
}

// stopperOf is the Stopper id in this process, or nil when id is empty or
// it is elsewhere (warned once per *warned).
func stopperOf(ctx context.Context, id, topic string, warned *bool) *Stopper {
	if id == "" {
		return nil
	}
	if v, ok := stoppers.Load(id); ok {
		return v.(*Stopper)
	}
	if !*warned {
		*warned = true
		log.Warnf(ctx, "kafkaio: the Stopper %s of topic %s is not in this worker process; the reader cannot be stopped from the submitting process (stop the job with the runner)", id, topic)
	}
	return nil
}
