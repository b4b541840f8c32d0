package step

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	beamcore "github.com/apache/beam/sdks/v2/go/pkg/beam/core"
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

const (
	// batchRows is how many rows a batch holds before its reads go out: a
	// row waits at most this many rows or its bundle's end.
	batchRows = 128
	// maxInFlight bounds the requests a step has issued and not yet seen
	// answered; the DoFn waits for a slot beyond it.
	maxInFlight = 128
)

// vettedSDKs are the Beam Go SDK versions the reliance was checked on
// (TestBeamStateProvidersOutliveTheirElement); on any other the step waits
// for each request.
var vettedSDKs = []string{"2.77.0"}

// harnessProvider is the type of the state provider Beam's harness hands
// a DoFn: the one whose behaviour the reliance test checks.
const harnessProvider = "github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/exec.stateProvider"

// requestDeadline is the longest a step waits for a state request's answer
// (or for a slot to issue one) before it fails the bundle: a runner that
// never answers a request would otherwise hang the bundle in FinishBundle,
// far from its cause. Runners answer in micro- to milliseconds; a request
// minutes old is lost.
const requestDeadline = 5 * time.Minute

// switches are what a step learns about the SDK while it runs: they hold
// for every DoFn instance of the step in the process (a failed bundle's
// retry may run on another instance) and for no other step.
type switches struct {
	// reused is set once the SDK handed two elements of a bundle the same
	// state provider: the step then waits for each request.
	reused atomic.Bool
	// unvetted and others log, once for the step, that it waits for each
	// request on an SDK not vetted or on a provider of another type (a
	// test's own state backend would otherwise log it per DoFn instance).
	unvetted sync.Once
	others   sync.Map // reflect.Type -> true
}

// stepSwitches are the switches of each step, by its counters' namespace
// (the transform and its UID).
var stepSwitches sync.Map

func switchesOf(step string) *switches {
	if sw, ok := stepSwitches.Load(step); ok {
		return sw.(*switches)
	}
	sw, _ := stepSwitches.LoadOrStore(step, &switches{})
	return sw.(*switches)
}

// resetSwitches forgets what every step learnt, for tests.
func resetSwitches() { stepSwitches.Clear() }

// requests issues a step's state requests apart from the DoFn's goroutine
// and tracks them until they are answered. Every wait of the DoFn's
// goroutine on them has a deadline; a request's goroutine recovers a panic
// (the stores' decoding runs there) into the request's failure, with its
// stack, so that it fails the bundle rather than the worker.
type requests struct {
	step     string         // the step's name, for errors
	deadline time.Duration  // requestDeadline, or a test's
	last     map[string]*op // each key's latest request, by the cache's id
	slots    chan struct{}
	timer    *time.Timer // the DoFn goroutine's, for its waits
	// stuck is set once a wait ran out: a request may never be answered,
	// so none is waited for again and the step makes new requests.
	stuck bool

	mu   sync.Mutex
	err  error                  // the first failure
	held map[state.Provider]int // providers with requests in flight
}

// op is a request (or a key's requests of one write) in flight.
type op struct {
	done chan struct{}
	err  error
	what string // "read" or "write"
	key  string // the cache's id of the key
}

func newRequests(step string) *requests {
	return &requests{step: step, deadline: requestDeadline, last: make(map[string]*op), slots: make(chan struct{}, maxInFlight),
		held: make(map[state.Provider]int)}
}

// issue makes f's requests through sp on another goroutine once the key's
// earlier ones are answered, and returns at once (or once a slot is free).
// what names them in errors.
func (r *requests) issue(sp state.Provider, id, what string, f func() error) (*op, error) {
	if err := r.acquire(); err != nil {
		return nil, err
	}
	o := &op{done: make(chan struct{}), what: what, key: id}
	prev := r.last[id]
	r.last[id] = o
	r.mu.Lock()
	r.held[sp]++
	r.mu.Unlock()
	go r.run(o, prev, sp, f)
	return o, nil
}

// run makes o's requests after prev, the key's request before them.
func (r *requests) run(o, prev *op, sp state.Provider, f func() error) {
	defer func() {
		if p := recover(); p != nil {
			o.err = fmt.Errorf("dedup: the stateful step %s: the %s of key %s panicked: %v\n%s", r.step, o.what, keyName(o.key), p, debug.Stack())
		}
		r.mu.Lock()
		if o.err != nil && r.err == nil {
			r.err = o.err
		}
		if r.held[sp]--; r.held[sp] <= 0 {
			delete(r.held, sp)
		}
		r.mu.Unlock()
		<-r.slots
		close(o.done)
	}()
	if prev != nil {
		<-prev.done
		o.err = prev.err // a key's requests after a failed one are not made
	}
	if o.err == nil {
		o.err = f()
	}
}

// acquire takes a slot for a request, waiting for one at most the
// deadline.
func (r *requests) acquire() error {
	select {
	case r.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case r.slots <- struct{}{}:
		r.timer.Stop()
		return nil
	case <-r.arm():
		return r.timedOut("a free slot for a request", r.unanswered())
	}
}

// arm starts the deadline of one wait.
func (r *requests) arm() <-chan time.Time {
	if r.timer == nil {
		r.timer = time.NewTimer(r.deadline)
	} else {
		r.timer.Reset(r.deadline)
	}
	return r.timer.C
}

// await waits until o is answered, at most the deadline, and returns its
// failure.
func (r *requests) await(o *op) error {
	select {
	case <-o.done:
		return o.err
	default:
	}
	select {
	case <-o.done:
		r.timer.Stop()
		return o.err
	case <-r.arm():
		return r.timedOut("the "+o.what+" of key "+keyName(o.key), o)
	}
}

// timedOut is the failure of a wait for what that ran out, o the request
// not answered (nil: none found).
func (r *requests) timedOut(what string, o *op) error {
	r.stuck = true
	unanswered := ""
	if o != nil {
		unanswered = fmt.Sprintf(" (the %s of key %s is not answered)", o.what, keyName(o.key))
	}
	return fmt.Errorf("dedup: the stateful step %s waited %v for %s%s: the runner did not answer a state request; the bundle fails so that the runner retries it",
		r.step, r.deadline, what, unanswered)
}

// unanswered is a request in flight not answered yet, or nil.
func (r *requests) unanswered() *op {
	for _, o := range r.last {
		select {
		case <-o.done:
		default:
			return o
		}
	}
	return nil
}

// keyName is a key's id as errors show it: quoted, and cut at 64 bytes.
func keyName(id string) string {
	if len(id) > 64 {
		return strconv.Quote(id[:64]) + "..."
	}
	return strconv.Quote(id)
}

// failed returns the first failure so far.
func (r *requests) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// holds reports whether a request in flight holds sp.
func (r *requests) holds(sp state.Provider) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[sp] > 0
}

// settle waits until the key's requests are answered.
func (r *requests) settle(id []byte) error {
	o, ok := r.last[string(id)]
	if !ok {
		return nil
	}
	if err := r.await(o); err != nil {
		return err
	}
	delete(r.last, string(id))
	return nil
}

// wait waits until every request issued is answered, at most the deadline
// for each, and returns the first failure. Each request in flight holds a
// slot, so holding them all means none is.
func (r *requests) wait() error {
	var late error
	for taken := 0; taken < cap(r.slots) && !r.stuck; taken++ {
		select {
		case r.slots <- struct{}{}:
			continue
		default:
		}
		select {
		case r.slots <- struct{}{}:
			r.timer.Stop()
		case <-r.arm():
			late = r.timedOut("every request of the bundle to be answered", r.unanswered())
		}
	}
	if !r.stuck {
		for range cap(r.slots) {
			<-r.slots
		}
	}
	clear(r.last)
	r.mu.Lock()
	defer r.mu.Unlock()
	err := errors.Join(r.err, late)
	r.err = nil
	return err
}

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
	store   Store
	cache   *bundleCache
	m       *metricSet
	batch   []pendingRow
	fetched map[string]*fetched
	spType  reflect.Type // the provider type vetted
}

// newStateIO is the stateIO of a step in mode: overlapped, or waiting on an
// SDK the reliance was not checked on and once the step saw a reused
// provider.
func newStateIO(ctx context.Context, name string, mode OverlapMode, st Store, cache *bundleCache, m *metricSet) stateIO {
	sw := switchesOf(name)
	if mode != WaitEach && !slices.Contains(vettedSDKs, beamcore.SdkVersion) {
		sw.unvetted.Do(func() {
			log.Warnf(ctx, "dedup: the stateful step %s waits for each state request: overlapping them was checked on Beam Go %v, not %v", name, vettedSDKs, beamcore.SdkVersion)
		})
		mode = WaitEach
	}
	if mode == WaitEach || sw.reused.Load() {
		return waiting{store: st, m: m}
	}
	return &overlapped{batching: mode == OverlapBatch, sw: sw, req: newRequests(name), store: st, cache: cache, m: m, fetched: make(map[string]*fetched)}
}

// on reports whether requests are issued apart from the DoFn.
func (o *overlapped) on() bool { return !o.off && !o.sw.reused.Load() }

func (o *overlapped) next() stateIO {
	if o.on() {
		return o
	}
	return waiting{store: o.store, m: o.m}
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
		if t == nil || t.Kind() != reflect.Pointer || t.Elem().PkgPath()+"."+t.Elem().Name() != harnessProvider {
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
		o.sw.reused.Store(true)
		return fmt.Errorf("dedup: the stateful step %s: Beam handed an element a state provider that an earlier element of the bundle still holds, which the step's overlapped requests rely on it not doing (notes/overlapped-state.md); the bundle fails so that its retry waits for each request", o.req.step)
	}
	return nil
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
			f.was, err = o.store.fetch(sp)
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
	return o.store.fetch(sp)
}

func (o *overlapped) write(sp state.Provider, id []byte, c change) error {
	if o.on() {
		_, err := o.req.issue(sp, string(id), "write", func() error { return o.store.apply(sp, c) })
		return err
	}
	if err := o.req.settle(id); err != nil {
		return err
	}
	return o.store.apply(sp, c)
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
