package step

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// Overlapped state requests (the overlapped stateIO). The Go SDK sends
// each state request and blocks until its answer (harness/statemgr.go
// StateChannel.Send), so a step that waits for each in turn spends most of
// a row waiting for round trips. The step instead keeps several in flight
// within a bundle:
//
//   - OverlapBatch (no timer family, global windows): rows are buffered,
//     batchRows at a time, until a row of another pane arrives or until
//     the bundle ends; the reads of the keys the bundle has not cached go
//     out together, then the rows are decided one after the other in their
//     arrival order on the bundle cache, exactly as they would have been
//     one by one, and their output is emitted then, with each row's own
//     timestamp: every output of the step leaves in the order it was
//     decided in.
//   - OverlapWrites (a timer family, or windows): a row is decided in its
//     own ProcessElement, because a timer can only be set there (the
//     SDK's timer provider sets it on the key of the element being
//     processed, exec/timers.go userTimerAdapter) and an emitter only
//     emits into that element's window; its read is waited for, its writes
//     are not.
//   - WaitEach: every request is made and waited for in turn (the waiting
//     stateIO: a test's deduptest.OverlapState(false), an SDK this was not
//     checked on, a state provider of another kind than Beam's harness).
//
// Either way a key's requests are made in order (each after the key's
// previous one is answered), a key with requests in flight is read only
// after they are answered, every request is answered before the bundle
// finishes (FinishBundle waits), and a failed request fails the bundle, so
// the runner retries it whole. What this rests on in the SDK is
// undocumented: notes/overlapped-state.md has the lines, and
// TestBeamStateProvidersOutliveTheirElement fails if they stop holding.
type OverlapMode uint8

const (
	WaitEach OverlapMode = iota
	OverlapWrites
	OverlapBatch
)

var overlapNames = [...]string{"wait for each request", "overlap writes", "overlap reads and writes"}

func (o OverlapMode) String() string { return overlapNames[o] }

// batchRows is how many rows a batch holds before its reads go out: a row
// waits at most this many rows or its bundle's end.
const batchRows = 128

// fetched is a read issued for a batch: the key's state once op is done.
type fetched struct {
	op  *op
	was stored
}

// overlapped keeps a bundle's state requests in flight together: it owns
// the requests (their chain per key, their deadlines), the batch, and the
// checks of the SDK and of each element's provider that this relies on.
type overlapped struct {
	batching bool // rows wait in a batch (OverlapBatch)
	// off: a provider of another type than the harness's came; the
	// bundle's requests are waited for one by one, and the next bundle's
	// go to the waiting stateIO.
	off     bool
	sw      *switches
	req     *requests
	cell    cell
	cache   *bundleCache
	m       *metricSet
	batch   []pendingRow
	fetched map[string]*fetched
	spType  reflect.Type // the provider type vetted
}

// newStateIO is the stateIO of a step in mode: overlapped, or waiting on an
// SDK the reliance was not checked on and once the step saw a reused
// provider.
func newStateIO(ctx context.Context, name string, mode OverlapMode, c cell, cache *bundleCache, m *metricSet) stateIO {
	sw := switchesOf(name)
	if mode != WaitEach && !sdkVetted(ctx, name, sw) {
		mode = WaitEach
	}
	if mode == WaitEach || sw.reused.Load() {
		return waiting{cell: c, m: m}
	}
	return &overlapped{batching: mode == OverlapBatch, sw: sw, req: newRequests(name), cell: c, cache: cache, m: m, fetched: make(map[string]*fetched)}
}

// on reports whether requests are issued apart from the DoFn.
func (o *overlapped) on() bool { return !o.off && !o.sw.reused.Load() }

func (o *overlapped) next() stateIO {
	if o.on() {
		return o
	}
	return waiting{cell: o.cell, m: o.m}
}

// vet checks, before relying on it, that sp is what the reliance test
// checked: a harness provider of this element alone. A provider of another
// type (a test's own state backend) makes the step wait for each request
// from here on. A provider that a row of the batch or a request in flight
// holds fails the bundle: they would read and write through it the state
// of another key; from then on the step waits for each request, so the
// runner's retry is exact.
func (o *overlapped) vet(ctx context.Context, sp state.Provider) error {
	t := reflect.TypeOf(sp)
	if t != o.spType {
		if !isHarnessProvider(t) {
			if _, told := o.sw.others.LoadOrStore(t, true); !told {
				log.Warnf(ctx, "dedup: the stateful step %s waits for each state request: its state provider is a %v, not Beam's harness provider", o.req.step, t)
			}
			o.off = true
			return nil
		}
		o.spType = t
	}
	reused := o.req.holds(sp)
	for i := range o.batch {
		reused = reused || o.batch[i].sp == sp
	}
	if reused {
		return o.providerReused()
	}
	return nil
}

// providerReused records that the SDK handed an element a provider that an
// earlier element of the bundle still holds, and fails the bundle: from
// then on the step waits for each request, so the runner's retry is exact.
func (o *overlapped) providerReused() error {
	o.sw.reused.Store(true)
	return fmt.Errorf("dedup: the stateful step %s: Beam handed an element a state provider that an earlier element of the bundle still holds, which the step's overlapped requests rely on it not doing (notes/overlapped-state.md); the bundle fails so that its retry waits for each request", o.req.step)
}

func (o *overlapped) admit(ctx context.Context, sp state.Provider) error {
	if err := o.req.failed(); err != nil {
		return o.abort(err)
	}
	if o.on() {
		if err := o.vet(ctx, sp); err != nil {
			return o.abort(err)
		}
	}
	return nil
}

// take batches a row in the no-firing pane, so that what the batch emits
// from a later row's ProcessElement or from FinishBundle is in its own
// pane (and the global window, the batch's). A row of another pane (a
// GroupByKey's output, in one bundle with rows a FinishBundle emitted) is
// decided at once, after the batch: the batch's output leaves first, in
// that row's pane, since Beam's emitters carry the pane of the element at
// hand, and a key's outputs must leave in the order they were decided in
// (a sink that keeps the last row it is sent depends on it).
func (o *overlapped) take(ctx context.Context, r pendingRow, d decider, emit, drop rowEmit) error {
	if o.batching && o.on() && r.pane == typex.NoFiringPane() {
		o.batch = append(o.batch, r)
		if len(o.batch) < batchRows {
			return nil
		}
		return o.flush(ctx, d, emit, drop)
	}
	if err := o.flush(ctx, d, emit, drop); err != nil {
		return err
	}
	if err := d.decideRow(ctx, r, emit, drop); err != nil {
		return o.abort(err)
	}
	return nil
}

// flush decides the batch: the reads of the keys it needs go out together,
// then each row is decided in its arrival order as its read is answered,
// and its output emitted.
func (o *overlapped) flush(ctx context.Context, d decider, emit, drop rowEmit) error {
	for i := range o.batch {
		r := &o.batch[i]
		id, err := o.cache.id(r.w, r.key)
		if err != nil {
			return o.abort(err)
		}
		if _, ok := o.cache.get(id); ok || o.fetched[string(id)] != nil {
			continue
		}
		o.m.read(ctx)
		k, f, sp := string(id), &fetched{}, r.sp // one copy of id for both maps
		if f.op, err = o.req.issue(sp, k, "read", func() (err error) {
			f.was, err = o.cell.fetch(sp)
			return err
		}); err != nil {
			return o.abort(err)
		}
		o.fetched[k] = f
	}
	for i := range o.batch {
		if err := d.decideRow(ctx, o.batch[i], emit, drop); err != nil {
			return o.abort(err)
		}
	}
	o.batch = emptied(o.batch)
	return nil
}

func (o *overlapped) read(ctx context.Context, sp state.Provider, id []byte) (stored, error) {
	if f, ok := o.fetched[string(id)]; ok {
		delete(o.fetched, string(id))
		if err := o.req.await(f.op); err != nil {
			return stored{}, err
		}
		return f.was, nil
	}
	if err := o.req.settle(id); err != nil {
		return stored{}, err
	}
	o.m.read(ctx)
	return o.cell.fetch(sp)
}

func (o *overlapped) write(sp state.Provider, id []byte, c change) error {
	if o.on() {
		_, err := o.req.issue(sp, string(id), "write", func() error { return o.cell.apply(sp, c) })
		return err
	}
	if err := o.req.settle(id); err != nil {
		return err
	}
	return o.cell.apply(sp, c)
}

func (o *overlapped) finish(ctx context.Context, d decider, emit, drop rowEmit) error {
	if err := o.flush(ctx, d, emit, drop); err != nil {
		return err
	}
	if err := o.req.wait(); err != nil {
		return o.abort(err)
	}
	return nil
}

// abort waits for the bundle's requests in flight, so that none outlives
// it, forgets its batch and returns err. After a wait that ran out, it
// waits no more: the next requests are made anew.
func (o *overlapped) abort(err error) error {
	o.req.wait()
	if o.req.stuck {
		o.req = newRequests(o.req.step)
	}
	o.batch = emptied(o.batch)
	clear(o.fetched)
	return err
}

// emptied is rows with none left, its backing array kept for the next
// rows and cleared, so that it holds on to no row, key or provider.
func emptied[T any](rows []T) []T {
	clear(rows)
	return rows[:0]
}
