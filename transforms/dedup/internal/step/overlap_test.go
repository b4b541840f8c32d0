package step

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/testhook"
	"github.com/beamdedup/beamdedup/testing/statetest"
	"github.com/beamdedup/beamdedup/transforms/dedup/internal/core"
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
func runUntimed(t *testing.T, newFn func() (untimedFn, *Untimed), in []stepInput, bundle int) ([]emitted, *statetest.Bags) {
	t.Helper()
	ctx := context.Background()
	fn, u := newFn()
	require.NoError(t, fn.Setup())
	trustTheBackend(&u.s) // the backend stands for the harness's
	backend := statetest.NewBags()
	var r stepRun
	emit, drop := r.emitter(false), r.emitter(true)
	for at := 0; len(in) > 0; at += bundle {
		n := min(bundle, len(in))
		backend.Bundle(true)
		r.pane, r.by = typex.NoFiringPane(), -1
		u.StartBundle(ctx, emit, drop)
		for i, e := range in[:n] {
			r.pane, r.by = e.pane, at+i
			sp := &statetest.Provider{Bags: backend, Key: e.row.Key}
			require.NoError(t, u.ProcessElement(ctx, e.pane, window.GlobalWindow{}, e.ts, sp, []byte(e.row.Key), e.row, emit, drop))
		}
		r.pane, r.by = typex.NoFiringPane(), -1 // FinishBundle's emitters
		require.NoError(t, u.FinishBundle(ctx, emit, drop))
		backend.Bundle(false)
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
	first := func(mode OverlapMode) func() (untimedFn, *Untimed) {
		return func() (untimedFn, *Untimed) {
			f := &testMarksFn{State: state.MakeBagState[int64]("keepfirst"), Untimed: Untimed{P: Params{
				Rules: core.Config{StateTTL: 1000, ResetOnDuplicate: true}, KeyType: keyType, ValueType: rowType,
				KindCol: "op", OutKindCol: "op", Dropped: true, Metrics: "test", Overlap: mode, Clock: "overlap-test",
			}}}
			return f, &f.Untimed
		}
	}
	last := func(mode OverlapMode) func() (untimedFn, *Untimed) {
		return func() (untimedFn, *Untimed) {
			f := &testVersionsFn{State: state.MakeBagState[[]byte]("keeplast"), Untimed: Untimed{P: Params{
				Rules: core.Config{}, Last: true, KeyType: keyType, ValueType: rowType,
				KindCol: "op", OutKindCol: "op", Dropped: true, Metrics: "test", Overlap: mode,
			}}}
			return f, &f.Untimed
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
		newFn func(OverlapMode) func() (untimedFn, *Untimed)
	}{{"keepfirst", first}, {"keeplast", last}} {
		for _, bundle := range []int{7, 300, len(in)} {
			t.Run(fmt.Sprintf("%s/bundles_of_%d", tc.name, bundle), func(t *testing.T) {
				want, wantState := runUntimed(t, tc.newFn(WaitEach), in, bundle)
				got, gotState := runUntimed(t, tc.newFn(OverlapBatch), in, bundle)
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
				assert.Equal(t, wantState.Log, gotState.Log, "each key's requests, in order")
				assert.Equal(t, wantState.Cells, gotState.Cells, "the state left")
				assert.Empty(t, gotState.Overlaps, "two requests of a key at once")
				assert.Zero(t, gotState.Late, "requests after their bundle")
			})
		}
	}
}

// BenchmarkOverlap_WhatBufferingAddsPerRow is what a row waits in the step
// from its ProcessElement to its output, waiting for each request and
// batched, on a backend whose requests take 35 µs (Prism's round trip on
// this machine, docs/state.md): a bundle of 1,000 new keys delivered at
// once, as a runner delivers a stateful stage's bundle after its shuffle
// (a get and an append per row). hold_p50_µs and hold_p99_µs are the
// rows' waits; request_µs the backend's requests as they came out.
//
//	go test -run='^$' -bench=WhatBufferingAdds -benchtime=20x ./transforms/dedup/internal/step/
func BenchmarkOverlap_WhatBufferingAddsPerRow(b *testing.B) {
	const rows = 1000
	rowType := beam.EncodedType{T: reflect.TypeFor[overlapRow]()}
	keyType := beam.EncodedType{T: reflect.TypeFor[[]byte]()}
	for _, mode := range []OverlapMode{WaitEach, OverlapBatch} {
		b.Run(strings.ReplaceAll(mode.String(), " ", "_"), func(b *testing.B) {
			ctx := context.Background()
			var holds []time.Duration
			var took time.Duration
			backend := statetest.NewBags()
			rtt, stop := statetest.NewRoundTrips(35 * time.Microsecond)
			b.Cleanup(stop)
			backend.Jitter, backend.RTT = false, rtt
			arrived := make([]time.Time, rows)
			emit := func(_ beam.EventTime, _ beam.T, v beam.V) {
				holds = append(holds, time.Since(arrived[v.(overlapRow).N]))
			}
			for range b.N {
				f := &testMarksFn{State: state.MakeBagState[int64]("keepfirst"), Untimed: Untimed{P: Params{
					KeyType: keyType, ValueType: rowType, Metrics: "bench", Overlap: mode,
				}}}
				require.NoError(b, f.Setup())
				trustTheBackend(&f.s) // the backend stands for the harness's
				backend.Cells = map[string][]any{}
				start := time.Now()
				f.StartBundle(ctx, emit, emit)
				for i := range rows {
					key := fmt.Sprint("k", i)
					arrived[i] = time.Now()
					require.NoError(b, f.ProcessElement(ctx, typex.NoFiringPane(), window.GlobalWindow{}, beam.EventTime(i), &statetest.Provider{Bags: backend, Key: key}, []byte(key), overlapRow{Key: key, N: i}, emit, emit))
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

// The stateful DoFns of the step tests, as package dedup declares its.
type (
	testMarksFn struct {
		State state.Bag[int64]
		Untimed
	}
	testVersionsFn struct {
		State state.Bag[[]byte]
		Untimed
	}
)

func (f *testMarksFn) Setup() error    { return f.Init(Marks(&f.State)) }
func (f *testVersionsFn) Setup() error { return f.Init(Versions(&f.State)) }

// trustTheBackend makes s take the test backend's providers for the
// harness's, so that it overlaps its requests on them.
func trustTheBackend(s *Step) { s.TrustProvider(reflect.TypeFor[*statetest.Provider]()) }

// requests are s's requests in flight (it overlaps them).
func (s *Step) requests() *requests { return s.io.(*overlapped).req }
