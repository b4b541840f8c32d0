package dedup

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
)

// The DoFn types, one per state layout and timer family. Each holds its
// cell and its timer, and embeds the family's methods, which drive the
// step.

// untimed is the runtime of a step with no timer family.
type untimed struct {
	P params
	s step
}

// StartBundle takes the emitter only because Beam requires the emitters of
// ProcessElement there too.
func (u *untimed) StartBundle(context.Context, rowEmit, rowEmit) {
	u.s.startBundle()
}

// ProcessElement takes the row's pane: a row of the batch is emitted later,
// in the pane of the element at hand or FinishBundle's (overlap.go).
func (u *untimed) ProcessElement(ctx context.Context, pn typex.PaneInfo, w beam.Window, ts beam.EventTime, sp state.Provider, key beam.T, row beam.V, emit, drop rowEmit) error {
	return u.s.add(ctx, pn, w, ts, sp, key, row, emit, drop) // no family, no timer
}

// FinishBundle decides the rows the batch holds and waits until every
// state request of the bundle is answered.
func (u *untimed) FinishBundle(ctx context.Context, emit, drop rowEmit) error {
	return u.s.finishBundle(ctx, emit, drop)
}

// eventTimed is the runtime of a step with the event-time timer family:
// event-time finalization and cleanup.
type eventTimed struct {
	P     params
	s     step
	timer *timers.EventTime
}

func (e *eventTimed) StartBundle(context.Context, rowEmit, rowEmit) {
	e.s.startBundle()
}

func (e *eventTimed) ProcessElement(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, row beam.V, emit, drop rowEmit) error {
	a, err := e.s.decide(ctx, w, ts, sp, key, row, emit, drop)
	armEvent(ctx, e.s.m, *e.timer, tp, a, w)
	return err
}

func (e *eventTimed) OnTimer(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, timer timers.Context, emit, _ rowEmit) error {
	a, err := e.s.fire(ctx, w, ts, sp, false, key, timer.Tag, emit)
	armEvent(ctx, e.s.m, *e.timer, tp, a, w)
	return err
}

// FinishBundle waits until every state request of the bundle is answered.
func (e *eventTimed) FinishBundle(ctx context.Context, emit, drop rowEmit) error {
	return e.s.finishBundle(ctx, emit, drop)
}

// procTimed is the runtime of a step with the processing-time timer
// family: state cleanup.
type procTimed struct {
	P     params
	s     step
	timer *timers.ProcessingTime
}

func (p *procTimed) StartBundle(context.Context, rowEmit, rowEmit) {
	p.s.startBundle()
}

func (p *procTimed) ProcessElement(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, row beam.V, emit, drop rowEmit) error {
	a, err := p.s.decide(ctx, w, ts, sp, key, row, emit, drop)
	armProc(ctx, p.s.m, *p.timer, tp, a)
	return err
}

func (p *procTimed) OnTimer(ctx context.Context, w beam.Window, ts beam.EventTime, sp state.Provider, tp timers.Provider, key beam.T, timer timers.Context, emit, _ rowEmit) error {
	a, err := p.s.fire(ctx, w, ts, sp, true, key, "", emit)
	armProc(ctx, p.s.m, *p.timer, tp, a)
	return err
}

// FinishBundle waits until every state request of the bundle is answered.
func (p *procTimed) FinishBundle(ctx context.Context, emit, drop rowEmit) error {
	return p.s.finishBundle(ctx, emit, drop)
}

// marksFn keeps marks, no timer (KeepFirst watermarkless, no cleanup).
type marksFn struct {
	State state.Bag[int64]
	untimed
}

func (f *marksFn) Setup() error { return f.s.setup(&f.P, marksStore{&f.State}) }

// marksEventFn keeps marks, with event-time cleanup (EventTimeTTL).
type marksEventFn struct {
	State state.Bag[int64]
	Timer timers.EventTime
	eventTimed
}

func (f *marksEventFn) Setup() error {
	f.timer = &f.Timer
	return f.s.setup(&f.P, marksStore{&f.State})
}

// marksProcFn keeps marks, with processing-time cleanup (StateTTL).
type marksProcFn struct {
	State state.Bag[int64]
	Timer timers.ProcessingTime
	procTimed
}

func (f *marksProcFn) Setup() error {
	f.timer = &f.Timer
	return f.s.setup(&f.P, marksStore{&f.State})
}

// versionsFn keeps versions, no timer (KeepLast without cleanup).
type versionsFn struct {
	State state.Bag[[]byte]
	untimed
}

func (f *versionsFn) Setup() error { return f.s.setup(&f.P, versionsStore{&f.State}) }

// versionsEventFn keeps versions, with event-time timers (KeepFirst's
// event-time finalization and cleanup, KeepLast's EventTimeTTL cleanup).
type versionsEventFn struct {
	State state.Bag[[]byte]
	Timer timers.EventTime
	eventTimed
}

func (f *versionsEventFn) Setup() error {
	f.timer = &f.Timer
	return f.s.setup(&f.P, versionsStore{&f.State})
}

// versionsProcFn keeps versions, with processing-time cleanup (KeepLast
// with StateTTL).
type versionsProcFn struct {
	State state.Bag[[]byte]
	Timer timers.ProcessingTime
	procTimed
}

func (f *versionsProcFn) Setup() error {
	f.timer = &f.Timer
	return f.s.setup(&f.P, versionsStore{&f.State})
}
