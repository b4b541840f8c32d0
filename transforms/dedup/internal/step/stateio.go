package step

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
)

// stateIO is how a stateful step makes its state requests: waiting for
// each in turn (waiting), or keeping a bundle's in flight together
// (overlapped, overlap.go). Both make the same requests, through the same
// cell, for the same decisions: the step decides a row the same way
// whichever it has, and only when its output leaves differs.
type stateIO interface {
	// admit is called before a row or a firing is decided through sp: it
	// returns the failure of an earlier request of the bundle, or why sp
	// cannot be relied on; either fails the bundle.
	admit(ctx context.Context, sp state.Provider) error
	// take hands over a row of a step without timers, to be decided by d
	// now or, batched, later; emit and drop are the call's emitters.
	take(ctx context.Context, r pendingRow, d decider, emit, drop rowEmit) error
	// read reads the state of the key called id through sp: a read already
	// issued for it, or one made now.
	read(ctx context.Context, sp state.Provider, id []byte) (stored, error)
	// write makes the requests of c through sp: now, or issued.
	write(sp state.Provider, id []byte, c change) error
	// finish decides what is batched and waits until every request of the
	// bundle is answered.
	finish(ctx context.Context, d decider, emit, drop rowEmit) error
	// abort forgets what the bundle has in flight, once it is answered,
	// and returns err.
	abort(err error) error
	// next is the stateIO of the next bundle.
	next() stateIO
}

// pendingRow is a row handed to a stateIO, with what deciding it later
// needs: its pane, its element's state provider and its processing time at
// arrival.
type pendingRow struct {
	pane typex.PaneInfo
	w    beam.Window
	ts   beam.EventTime
	at   time.Time
	sp   state.Provider
	key  beam.T
	row  beam.V
}

// rowEmit is the stateful step's emitter of KV<key, row>, for its kept and
// its dropped rows.
type rowEmit = func(beam.EventTime, beam.T, beam.V)

// decider decides a row: the step.
type decider interface {
	decideRow(ctx context.Context, r pendingRow, emit, drop rowEmit) error
}

// waiting makes each request and waits for its answer, in the DoFn's
// call.
type waiting struct {
	cell cell
	m    *metricSet
}

func (waiting) admit(context.Context, state.Provider) error { return nil }

func (waiting) take(ctx context.Context, r pendingRow, d decider, emit, drop rowEmit) error {
	return d.decideRow(ctx, r, emit, drop)
}

func (w waiting) read(ctx context.Context, sp state.Provider, _ []byte) (stored, error) {
	w.m.read(ctx)
	return w.cell.fetch(sp)
}

func (w waiting) write(sp state.Provider, _ []byte, c change) error { return w.cell.apply(sp, c) }

func (waiting) finish(context.Context, decider, rowEmit, rowEmit) error { return nil }

func (waiting) abort(err error) error { return err }

func (w waiting) next() stateIO { return w }
