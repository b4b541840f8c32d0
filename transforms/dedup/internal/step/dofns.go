package step

import (
	"context"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
)

// The runtimes of the stateful DoFns. Beam finds a DoFn's state cell and
// timer among its own fields only, and names the step after the DoFn's
// type, so the DoFn types are package dedup's (names.go there): each holds
// its cell and its timer and embeds one of these, whose methods drive the
// step; its Setup hands the runtime the cell (Marks, Versions) and timer.

// Untimed is the runtime of a stateful DoFn with no timer family.
type Untimed struct {
	P Params
	s Step
}

// Init sets the step up on its state cell: the DoFn's Setup.
func (u *Untimed) Init(cell Store) error { return u.s.setup(&u.P, cell) }

// Step is the step the DoFn drives, for the library's tests.
func (u *Untimed) Step() *Step { return &u.s }

// StartBundle takes the emitter only because Beam requires the emitters of
// ProcessElement there too.
func (u *Untimed) StartBundle(context.Context, rowEmit, rowEmit) {
	u.s.startBundle()
}

// ProcessElement takes the row's pane: a row of the batch is emitted later,
// in the pane of the element at hand or FinishBundle's (overlap.go).
func (u *Untimed) ProcessElement(ctx context.Context, pn typex.PaneInfo, w beam.Window, ts beam.EventTime, sp state.Provider, key beam.T, row beam.V, emit, drop rowEmit) error {
	return u.s.add(ctx, pn, w, ts, sp, key, row, emit, drop) // no family, no timer
}

// FinishBundle decides the rows the batch holds and waits until every
// state request of the bundle is answered.
func (u *Untimed) FinishBundle(ctx context.Context, emit, drop rowEmit) error {
	return u.s.finishBundle(ctx, emit, drop)
}

// Timed is the runtime of a stateful DoFn with a timer family: event time
// (finalization and cleanup) or processing time (cleanup).
type Timed struct {
	P Params
	s Step
	// proc: the family is processing time, whose timers carry no tag.
	proc bool
	arm  func(ctx context.Context, tp timers.Provider, a arming, w beam.Window)
}

// InitEvent sets the step up on its state cell and event-time timer: the
// DoFn's Setup.
func (t *Timed) InitEvent(cell Store, timer *timers.EventTime) error {
	t.arm = func(ctx context.Context, tp timers.Provider, a arming, w beam.Window) {
		armEvent(ctx, t.s.m, *timer, tp, a, w)
	}
	return t.s.setup(&t.P, cell)
}

// InitProc sets the step up on its state cell and processing-time timer:
// the DoFn's Setup.
func (t *Timed) InitProc(cell Store, timer *timers.ProcessingTime) error {
	t.proc = true
	t.arm = func(ctx context.Context, tp timers.Provider, a arming, _ beam.Window) {
		armProc(ctx, t.s.m, *timer, tp, a)
	}
	return t.s.setup(&t.P, cell)
}

// Step is the step the DoFn drives, for the library's tests.
func (t *Timed) Step() *Step { return &t.s }

func (t *Timed) StartBundle(context.Context, rowEmit, rowEmit) {
	t.s.startBundle()
}

func (t *Timed) ProcessElement(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, row beam.V, emit, drop rowEmit) error {
	a, err := t.s.decide(ctx, w, ts, sp, key, row, emit, drop)
	t.arm(ctx, tp, a, w)
	return err
}

func (t *Timed) OnTimer(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, timer timers.Context, emit, _ rowEmit) error {
	tag := timer.Tag
	if t.proc {
		tag = ""
	}
	a, err := t.s.fire(ctx, w, ts, sp, t.proc, key, tag, emit)
	t.arm(ctx, tp, a, w)
	return err
}

// FinishBundle waits until every state request of the bundle is answered.
func (t *Timed) FinishBundle(ctx context.Context, emit, drop rowEmit) error {
	return t.s.finishBundle(ctx, emit, drop)
}

// Overlapping reports whether the step issues its requests apart from the
// DoFn (for the library's tests).
func (s *Step) Overlapping() bool {
	o, ok := s.io.(*overlapped)
	return ok && o.on()
}

// TrustProvider makes the step take state providers of type t for the
// harness's, so that it overlaps its requests on a test's own backend
// (which must then lock its cells against the step's goroutines).
func (s *Step) TrustProvider(t reflect.Type) {
	if o, ok := s.io.(*overlapped); ok {
		o.spType = t
	}
}
