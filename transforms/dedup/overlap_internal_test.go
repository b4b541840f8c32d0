package dedup

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/transforms/dedup/core"
	"github.com/beamdedup/beamdedup/transforms/internal/testhook"
)

// overlapRow is the rows of the step tests: N tells them apart.
type overlapRow struct {
	Key string `beam:"key"`
	Op  string `beam:"op"`
	N   int    `beam:"n"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[overlapRow]())
	// Processing time is the row's event time: expiry is decided the same
	// however long a run takes.
	testhook.RegisterClock("overlap-test", func(et time.Time) time.Time { return et })
}

// requestLog follows a test state backend's requests: each key's in the
// order they were made, a key with two in flight at once, and any made
// between bundles. With jitter a request takes a random few microseconds,
// so that overlapped ones finish out of order.
type requestLog struct {
	mu       sync.Mutex // also guards the backend's cells (do runs f under it)
	jitter   bool
	rtt      *roundTrips // each request waits for one, outside the lock
	log      map[string][]string
	inFlight map[string]int
	overlaps []string
	ended    bool // the bundle finished: no request may come now
	late     int
}

func newRequestLog(jitter bool) *requestLog {
	return &requestLog{jitter: jitter, log: map[string][]string{}, inFlight: map[string]int{}}
}

// do makes the request what of key: f, under the log's lock.
func (m *requestLog) do(key, what string, f func()) {
	m.mu.Lock()
	m.inFlight[key]++
	if m.inFlight[key] > 1 {
		m.overlaps = append(m.overlaps, key+": "+what)
	}
	if m.ended {
		m.late++
	}
	m.mu.Unlock()
	if m.jitter && rand.IntN(4) == 0 {
		time.Sleep(time.Duration(rand.IntN(30)) * time.Microsecond)
	}
	if m.rtt != nil {
		m.rtt.wait()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
	m.log[key] = append(m.log[key], what)
	m.inFlight[key]--
}

// bundle marks a bundle started (or, with false, ended).
func (m *requestLog) bundle(active bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended = !active
}

// memBags is a state backend for the step tests: a bag per key, its
// requests followed, with jitter. before, when set, runs first in each
// request ("get", "append", "clear") on the request's goroutine: a test's
// failure, panic or hang.
type memBags struct {
	*requestLog
	bags   map[string][]any
	before func(what, key string) error
}

func (m *memBags) hook(what, key string) error {
	if m.before == nil {
		return nil
	}
	return m.before(what, key)
}

func newMemBags() *memBags {
	return &memBags{requestLog: newRequestLog(true), bags: map[string][]any{}}
}

// memProvider is an element's provider on memBags: its key's bags.
type memProvider struct {
	state.Provider // the calls a bag makes are overridden
	m              *memBags
	key            string
}

func (p *memProvider) ReadBagState(string) ([]any, []state.Transaction, error) {
	if err := p.m.hook("get", p.key); err != nil {
		return nil, nil, err
	}
	var out []any
	p.m.do(p.key, "get", func() { out = slices.Clone(p.m.bags[p.key]) })
	return out, nil, nil
}

func (p *memProvider) WriteBagState(t state.Transaction) error {
	if err := p.m.hook("append", p.key); err != nil {
		return err
	}
	p.m.do(p.key, "append", func() { p.m.bags[p.key] = append(p.m.bags[p.key], t.Val) })
	return nil
}

func (p *memProvider) ClearBagState(state.Transaction) error {
	if err := p.m.hook("clear", p.key); err != nil {
		return err
	}
	p.m.do(p.key, "clear", func() { p.m.bags[p.key] = nil })
	return nil
}

// emitted is an output row with the pane its emitter was in, and the
// input row whose ProcessElement emitted it (-1: FinishBundle).
type emitted struct {
	ts      beam.EventTime
	row     overlapRow
	dropped bool
	pane    typex.PaneInfo
	by      int
}

// stepRun drives one stateful DoFn through bundles of rows as Beam does,
// with emitters that record the pane Beam would have set them to.
type stepRun struct {
	out  []emitted
	pane typex.PaneInfo
	by   int
}

func (r *stepRun) emitter(dropped bool) rowEmit {
	return func(ts beam.EventTime, _ beam.T, v beam.V) {
		r.out = append(r.out, emitted{ts: ts, row: v.(overlapRow), dropped: dropped, pane: r.pane, by: r.by})
	}
}

// arrival is an input row of the step tests, with its pane.
type stepInput struct {
	row  overlapRow
	ts   beam.EventTime
	pane typex.PaneInfo
}

// runUntimed runs rows through a DoFn without timers made by newFn, in
// bundles of bundle rows, and returns what it emitted and the backend.
func runUntimed(t *testing.T, newFn func() (untimedFn, *untimed), in []stepInput, bundle int) ([]emitted, *memBags) {
	t.Helper()
	ctx := context.Background()
	fn, u := newFn()
	require.NoError(t, fn.Setup())
	u.s.trust(reflect.TypeFor[*memProvider]()) // the backend stands for the harness's
	backend := newMemBags()
	var r stepRun
	emit, drop := r.emitter(false), r.emitter(true)
	for at := 0; len(in) > 0; at += bundle {
		n := min(bundle, len(in))
		backend.bundle(true)
		r.pane, r.by = typex.NoFiringPane(), -1
		u.StartBundle(ctx, emit, drop)
		for i, e := range in[:n] {
			r.pane, r.by = e.pane, at+i
			sp := &memProvider{m: backend, key: e.row.Key}
			require.NoError(t, u.ProcessElement(ctx, e.pane, window.GlobalWindow{}, e.ts, sp, []byte(e.row.Key), e.row, emit, drop))
		}
		r.pane, r.by = typex.NoFiringPane(), -1 // FinishBundle's emitters
		require.NoError(t, u.FinishBundle(ctx, emit, drop))
		backend.bundle(false)
		in = in[n:]
	}
	return r.out, backend
}

// untimedFn is marksFn or versionsFn.
type untimedFn interface{ Setup() error }

// outputs renders emitted rows in the order they were emitted.
func outputs(es []emitted) []string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("row %d %s of %s at %d, dropped %v", e.row.N, e.row.Op, e.row.Key, e.ts, e.dropped))
	}
	return out
}

// The batched step decides exactly as the one that waits for each request:
// the same rows out in the same order, each with its own timestamp, and in
// its own pane but where a row of another pane (which arrives now and
// then) came after it in its batch: the batch is then emitted before that
// row, by its emitters; the same requests per key in the same order, never
// two of a key at once, none after its bundle; the same state left. For KeepFirst's marks and KeepLast's versions, with
// the rows' bundles small and large.
func TestOverlapBatch_DecidesAsWaitingForEachRequest(t *testing.T) {
	rowType := beam.EncodedType{T: reflect.TypeFor[overlapRow]()}
	keyType := beam.EncodedType{T: reflect.TypeFor[[]byte]()}
	first := func(mode overlapMode) func() (untimedFn, *untimed) {
		return func() (untimedFn, *untimed) {
			f := &marksFn{State: state.MakeBagState[int64]("keepfirst"), untimed: untimed{P: params{
				Rules: core.Config{StateTTL: 1000, ResetOnDuplicate: true}, KeyType: keyType, ValueType: rowType,
				KindCol: "op", OutKindCol: "op", Dropped: true, Metrics: "test", Overlap: mode, Clock: "overlap-test",
			}}}
			return f, &f.untimed
		}
	}
	last := func(mode overlapMode) func() (untimedFn, *untimed) {
		return func() (untimedFn, *untimed) {
			f := &versionsFn{State: state.MakeBagState[[]byte]("keeplast"), untimed: untimed{P: params{
				Rules: core.Config{}, Last: true, KeyType: keyType, ValueType: rowType,
				KindCol: "op", OutKindCol: "op", Dropped: true, Metrics: "test", Overlap: mode,
			}}}
			return f, &f.untimed
		}
	}
	other := typex.PaneInfo{Timing: typex.PaneOnTime, IsFirst: true, IsLast: true}
	rng := rand.New(rand.NewPCG(1, 2))
	var in []stepInput
	for i := range 1500 {
		op := [...]string{"+I", "+I", "+U", "-U", "-D"}[rng.IntN(5)]
		e := stepInput{row: overlapRow{Key: fmt.Sprint("k", rng.IntN(150)), Op: op, N: i}, ts: beam.EventTime(1000 + 7*i), pane: typex.NoFiringPane()}
		if rng.IntN(40) == 0 {
			e.pane = other
		}
		in = append(in, e)
	}
	for _, tc := range []struct {
		name  string
		newFn func(overlapMode) func() (untimedFn, *untimed)
	}{{"keepfirst", first}, {"keeplast", last}} {
		for _, bundle := range []int{7, 300, len(in)} {
			t.Run(fmt.Sprintf("%s/bundles_of_%d", tc.name, bundle), func(t *testing.T) {
				want, wantState := runUntimed(t, tc.newFn(waitEach), in, bundle)
				got, gotState := runUntimed(t, tc.newFn(overlapBatch), in, bundle)
				require.NotEmpty(t, want)
				assert.Equal(t, outputs(want), outputs(got), "the same output, in the same order")
				require.Len(t, got, len(want))
				for i, e := range got {
					if e.pane != want[i].pane {
						// Emitted early, by the row of another pane that cut its
						// batch short: the next such row of its bundle.
						n := want[i].by // the arriving row it was decided for
						next := n + 1
						for next < len(in) && next/bundle == n/bundle && in[next].pane == in[n].pane {
							next++
						}
						require.Less(t, next, len(in), "output %d in the pane of a later row of its bundle", i)
						assert.Equal(t, n/bundle, next/bundle, "output %d in the pane of a later row of its bundle", i)
						assert.Equal(t, in[next].pane, e.pane, "output %d in the pane of the row that cut its batch short", i)
					}
					src := in[e.row.N]
					if !e.dropped && tc.name == "keeplast" {
						continue // KeepLast's -U is the stored row, at the arriving one's time
					}
					assert.Equal(t, src.ts, e.ts, "row %d at its own time", e.row.N)
				}
				assert.Equal(t, wantState.log, gotState.log, "each key's requests, in order")
				assert.Equal(t, wantState.bags, gotState.bags, "the state left")
				assert.Empty(t, gotState.overlaps, "two requests of a key at once")
				assert.Zero(t, gotState.late, "requests after their bundle")
			})
		}
	}
}

// Every mode of the stateful step, the timed ones too (their reads waited
// for, their writes overlapped) and the batched ones, decides with its
// requests overlapped exactly as waiting for each: on a random stream of
// bundles (some past a batch), watermark and clock moves through each of
// the restore test's modes and the DoFns they leave out, the same output in
// the same order, the same state and timers left, each key's requests the
// same and in the same order, never two of a key at once, none between
// bundles. The backend's requests finish out of order.
func TestOverlap_EveryModeDecidesAsWaitingForEachRequest(t *testing.T) {
	const m = time.Minute
	modes := append(restoreCases(),
		restoreCase{name: "KeepFirst, watermarkless, EventTimeTTL (event-time cleanup)", opts: []Option{PartitionBy("id"), EventTimeTTL(m), OutputDropped()}},
		restoreCase{name: "KeepLast, no TTL, upsert", last: true, opts: []Option{PartitionBy("id"), Upsert(), OutputDropped()}},
		restoreCase{name: "KeepLast, no TTL, changelog", last: true, opts: []Option{PartitionBy("id"), KindColumn("op"), OutputDropped()},
			events: []restoreEvent{rows(rr("+I", "a", "", 0))}},
	)
	fns := map[string]bool{}
	for i, tc := range modes {
		t.Run(tc.name, func(t *testing.T) {
			events := randomStream(tc, rand.New(rand.NewPCG(uint64(i), 7)))
			run := func(overlap bool) *restoreDriver {
				d := newRestoreDriver(t, tc, nil, overlap)
				d.req.jitter = true
				d.run(events)
				require.Equal(t, overlap, d.step.overlapping())
				fns[fmt.Sprintf("%T", d.fn.Interface())] = true
				return d
			}
			want, got := run(false), run(true)
			require.NotEmpty(t, want.out)
			assert.Equal(t, want.out, got.out, "the same output, in the same order")
			assert.Equal(t, want.snapshot(), got.snapshot(), "the same state and timers left")
			assert.Equal(t, want.req.log, got.req.log, "each key's requests, in order")
			assert.Empty(t, got.req.overlaps, "two requests of a key at once")
			assert.Zero(t, got.req.late, "requests between bundles")
		})
	}
	assert.Len(t, fns, 6, "every stateful DoFn: %v", fns)
}

// randomStream is 80 random events in tc's mode: bundles of 1 to 300 rows
// of 25 keys (with kinds where the case's own rows have them), at times around
// a moving base, and moves of the watermark and of the processing clock.
func randomStream(tc restoreCase, rng *rand.Rand) []restoreEvent {
	kinds := []string{""}
	for _, e := range tc.events {
		for _, r := range e.rows {
			if r.Op != "" {
				kinds = []string{"+I", "+U", "-U", "-D"}
			}
		}
	}
	var events []restoreEvent
	base, wm, n := time.Duration(0), -time.Hour, 0
	for range 80 {
		switch rng.IntN(5) {
		case 0:
			wm = max(wm, base-time.Duration(rng.IntN(120))*time.Second)
			events = append(events, wmAt(wm))
		case 1:
			events = append(events, procBy(time.Duration(1+rng.IntN(40))*time.Second))
		default:
			var rs []restoreRow
			for range 1 + rng.IntN(300) {
				at := base + time.Duration(rng.IntN(240_000_000)-120_000_000)*time.Microsecond
				rs = append(rs, rr(kinds[rng.IntN(len(kinds))], fmt.Sprint("k", rng.IntN(25)), fmt.Sprint(n), at))
				n++
			}
			events = append(events, rows(rs...))
			base += 10 * time.Second
		}
	}
	return append(events, wmAt(base+time.Hour))
}

// BenchmarkOverlap_WhatBufferingAddsPerRow is what a row waits in the step
// from its ProcessElement to its output, waiting for each request and
// batched, on a backend whose requests take 35 µs (Prism's round trip on
// this machine, docs/state.md): a bundle of 1,000 new keys delivered at
// once, as a runner delivers a stateful stage's bundle after its shuffle
// (a get and an append per row). hold_p50_µs and hold_p99_µs are the
// rows' waits; request_µs the backend's requests as they came out.
//
//	go test -run='^$' -bench=WhatBufferingAdds -benchtime=20x ./transforms/dedup/
func BenchmarkOverlap_WhatBufferingAddsPerRow(b *testing.B) {
	const rows = 1000
	rowType := beam.EncodedType{T: reflect.TypeFor[overlapRow]()}
	keyType := beam.EncodedType{T: reflect.TypeFor[[]byte]()}
	for _, mode := range []overlapMode{waitEach, overlapBatch} {
		b.Run(strings.ReplaceAll(mode.String(), " ", "_"), func(b *testing.B) {
			ctx := context.Background()
			var holds []time.Duration
			var took time.Duration
			backend := newMemBags()
			backend.jitter, backend.rtt = false, newRoundTrips(b, 35*time.Microsecond)
			arrived := make([]time.Time, rows)
			emit := func(_ beam.EventTime, _ beam.T, v beam.V) {
				holds = append(holds, time.Since(arrived[v.(overlapRow).N]))
			}
			for range b.N {
				f := &marksFn{State: state.MakeBagState[int64]("keepfirst"), untimed: untimed{P: params{
					KeyType: keyType, ValueType: rowType, Metrics: "bench", Overlap: mode,
				}}}
				require.NoError(b, f.Setup())
				f.s.trust(reflect.TypeFor[*memProvider]()) // the backend stands for the harness's
				backend.bags = map[string][]any{}
				start := time.Now()
				f.StartBundle(ctx, emit, emit)
				for i := range rows {
					key := fmt.Sprint("k", i)
					arrived[i] = time.Now()
					require.NoError(b, f.ProcessElement(ctx, typex.NoFiringPane(), window.GlobalWindow{}, beam.EventTime(i), &memProvider{m: backend, key: key}, []byte(key), overlapRow{Key: key, N: i}, emit, emit))
				}
				require.NoError(b, f.FinishBundle(ctx, emit, emit))
				took += time.Since(start)
			}
			require.Len(b, holds, b.N*rows)
			slices.Sort(holds)
			b.ReportMetric(float64(holds[len(holds)/2].Microseconds()), "hold_p50_µs")
			b.ReportMetric(float64(holds[len(holds)*99/100].Microseconds()), "hold_p99_µs")
			b.ReportMetric(float64(b.N*rows)/took.Seconds(), "rows/s")
		})
	}
}

// roundTrips answers each request a fixed time after it was made, as a
// server would, however many are in flight: a goroutine spins on the queue
// (a timer's granularity is about a millisecond on this machine, far above
// a state request's round trip).
type roundTrips struct {
	d  time.Duration
	in chan *roundTrip
}

type roundTrip struct {
	due  time.Time
	done chan struct{}
}

func newRoundTrips(tb testing.TB, d time.Duration) *roundTrips {
	r := &roundTrips{d: d, in: make(chan *roundTrip, 1024)}
	stop := make(chan struct{})
	tb.Cleanup(func() { close(stop) })
	go func() {
		var queue []*roundTrip // in order of due: each waits d
		for {
			if len(queue) == 0 {
				select {
				case rt := <-r.in:
					queue = append(queue, rt)
				case <-stop:
					return
				}
			}
			for more := true; more; {
				select {
				case rt := <-r.in:
					queue = append(queue, rt)
				default:
					more = false
				}
			}
			now := time.Now()
			for len(queue) > 0 && !now.Before(queue[0].due) {
				close(queue[0].done)
				queue = queue[1:]
			}
		}
	}()
	return r
}

// wait makes a round trip.
func (r *roundTrips) wait() {
	rt := &roundTrip{due: time.Now().Add(r.d), done: make(chan struct{})}
	r.in <- rt
	<-rt.done
}

// trust makes s take providers of type t for the harness's, so that it
// overlaps its requests on a test's backend.
func (s *step) trust(t reflect.Type) {
	if o, ok := s.io.(*overlapped); ok {
		o.spType = t
	}
}

// requests are s's requests in flight (it overlaps them).
func (s *step) requests() *requests { return s.io.(*overlapped).req }
