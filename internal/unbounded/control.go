package unbounded

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// A Control stops the readers of one Read on request and counts, live,
// what they did: a reader that sees the request ends its bundle and its
// restriction. The job's metrics show a bundle's counts only once it
// commits, so they cannot tell a reader stuck in a bundle from an idle
// one; the Control's counts can.
//
// The request and the counts travel through process memory: they reach
// only readers in the process that made the Control (Prism in process, or
// LOOPBACK). A source package takes it through the option it registers
// (RegisterControlOption), which is no public name of its own.
type Control struct {
	id         string
	requested  atomic.Bool
	ended      atomic.Int64
	claimed    atomic.Int64
	answered   atomic.Int64
	unanswered atomic.Bool
	pollSince  atomic.Int64 // Unix nanos when the poll in flight was sent; 0: none

	mu      sync.Mutex
	closers []func(context.Context) error
}

var (
	controls  sync.Map // id -> *Control
	controlID atomic.Int64
)

// NewControl returns a Control registered in this process; Close it when
// the job is over.
func NewControl() *Control {
	c := &Control{id: fmt.Sprintf("control-%d", controlID.Add(1))}
	controls.Store(c.id, c)
	return c
}

// ID names the Control in the readers' settings (Reading.Control).
func (c *Control) ID() string { return c.id }

// Stop asks the readers to end. It returns at once; Progress tells how
// many have.
func (c *Control) Stop() { c.requested.Store(true) }

// Progress is what a Control saw of its readers so far.
type Progress struct {
	// Requested: Stop was called.
	Requested bool
	// Ended is the number of readers (partitions, subscription readers)
	// that have ended, on request or idle.
	Ended int
	// Claimed is the number of elements the readers emitted into the job.
	Claimed int64
	// Answered is the number of polls the service answered (empty ones
	// included), and Unanswered whether the last one went unanswered for
	// the whole bundle: an idle source answers, a service that is down
	// does not. Only pubsubio reports its polls.
	Answered   int64
	Unanswered bool
	// Polling is how long the poll a reader waits on has been out (0 when
	// none is).
	Polling time.Duration
}

// Progress is what the Control saw of its readers so far.
func (c *Control) Progress() Progress {
	p := Progress{Requested: c.requested.Load(), Ended: int(c.ended.Load()), Claimed: c.claimed.Load(),
		Answered: c.answered.Load(), Unanswered: c.unanswered.Load()}
	if since := c.pollSince.Load(); since != 0 {
		p.Polling = time.Since(time.Unix(0, since))
	}
	return p
}

// Close ends what the readers' runs hold in this process (their source's
// OnClose: kafkaio commits what is safe, pubsubio hands the messages it
// still holds back to Pub/Sub) for at most 10s, and unregisters the
// Control.
func (c *Control) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.mu.Lock()
	closers := c.closers
	c.closers = nil
	c.mu.Unlock()
	var errs []error
	for _, f := range closers {
		errs = append(errs, f(ctx))
	}
	controls.Delete(c.id)
	return errors.Join(errs...)
}

// LookupControl returns the Control id of this process, or nil when id
// is empty or the Control is in another process (warned once per
// *warned: the readers of what, "topic t", cannot be stopped from the
// submitting process). A nil Control's reader methods do nothing.
func LookupControl(ctx context.Context, id, what string, warned *bool) *Control {
	if id == "" {
		return nil
	}
	if v, ok := controls.Load(id); ok {
		return v.(*Control)
	}
	if !*warned {
		*warned = true
		log.Warnf(ctx, "the control %s of the readers of %s is not in this worker process; they cannot be stopped from the submitting process (stop the job with the runner)", id, what)
	}
	return nil
}

// OnClose adds f to what Close does (once per run of a Read).
func (c *Control) OnClose(f func(context.Context) error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closers = append(c.closers, f)
}

// Requested reports whether Stop was called.
func (c *Control) Requested() bool { return c != nil && c.requested.Load() }

// ReaderEnded counts a reader that ended.
func (c *Control) ReaderEnded() {
	if c != nil {
		c.ended.Add(1)
	}
}

// Claimed counts n elements a reader is about to emit (before the emit,
// which may block in fused steps).
func (c *Control) Claimed(n int) {
	if c != nil {
		c.claimed.Add(int64(n))
	}
}

// Polling notes that a reader sent a poll.
func (c *Control) Polling() {
	if c != nil {
		c.pollSince.Store(time.Now().UnixNano())
	}
}

// Polled notes the poll's end: answered by the service (empty or not), or
// not answered in time.
func (c *Control) Polled(answered bool) {
	if c == nil {
		return
	}
	c.pollSince.Store(0)
	c.unanswered.Store(!answered)
	if answered {
		c.answered.Add(1)
	}
}

// controlOptions are the source packages' options that attach a Control,
// by the option's type.
var controlOptions sync.Map // reflect.Type -> func(*Control) any

// RegisterControlOption registers, from a source package's init, the
// option of type O that attaches a Control to its Read: the option stays
// out of the package's public API, and ControlOption hands it out.
func RegisterControlOption[O any](f func(*Control) O) {
	controlOptions.Store(reflect.TypeFor[O](), func(c *Control) any { return f(c) })
}

// ControlOption returns the option of type O (kafkaio.Option,
// pubsubio.Option) that attaches c to a Read. It panics when the source
// package registered none (it is not linked).
func ControlOption[O any](c *Control) O {
	f, ok := controlOptions.Load(reflect.TypeFor[O]())
	if !ok {
		panic(fmt.Sprintf("unbounded: no control option of type %v is registered", reflect.TypeFor[O]()))
	}
	return f.(func(*Control) any)(c).(O)
}
