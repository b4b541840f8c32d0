package dedup

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
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

// memBags is a state backend for the step tests: a bag per key, whose
// requests take a random few microseconds, so that overlapped ones finish
// out of order. It records each key's requests in the order they were
// made, and a key with two requests in flight at once.
type memBags struct {
	mu       sync.Mutex
	bags     map[string][]any
	log      map[string][]string
	inFlight map[string]int
	overlaps []string
	ended    bool // the bundle finished: no request may come now
	late     int
}

func newMemBags() *memBags {
	return &memBags{bags: map[string][]any{}, log: map[string][]string{}, inFlight: map[string]int{}}
}

func (m *memBags) do(key, what string, f func()) {
	m.mu.Lock()
	m.inFlight[key]++
	if m.inFlight[key] > 1 {
		m.overlaps = append(m.overlaps, key+": "+what)
	}
	if m.ended {
		m.late++
	}
	m.mu.Unlock()
	if rand.IntN(4) == 0 {
		time.Sleep(time.Duration(rand.IntN(30)) * time.Microsecond)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
	m.log[key] = append(m.log[key], what)
	m.inFlight[key]--
}

// memProvider is an element's provider on memBags: its key's bags.
type memProvider struct {
	state.Provider // the calls a bag makes are overridden
	m              *memBags
	key            string
}

func (p *memProvider) ReadBagState(string) ([]any, []state.Transaction, error) {
	var out []any
	p.m.do(p.key, "get", func() { out = slices.Clone(p.m.bags[p.key]) })
	return out, nil, nil
}

func (p *memProvider) WriteBagState(t state.Transaction) error {
	p.m.do(p.key, "append", func() { p.m.bags[p.key] = append(p.m.bags[p.key], t.Val) })
	return nil
}

func (p *memProvider) ClearBagState(state.Transaction) error {
	p.m.do(p.key, "clear", func() { p.m.bags[p.key] = nil })
	return nil
}

// emitted is an output row with the pane its emitter was in.
type emitted struct {
	ts      beam.EventTime
	row     overlapRow
	dropped bool
	pane    typex.PaneInfo
}

// stepRun drives one stateful DoFn through bundles of rows as Beam does,
// with emitters that record the pane Beam would have set them to.
type stepRun struct {
	out  []emitted
	pane typex.PaneInfo
}

func (r *stepRun) emitter(dropped bool) rowEmit {
	return func(ts beam.EventTime, _ beam.T, v beam.V) {
		r.out = append(r.out, emitted{ts: ts, row: v.(overlapRow), dropped: dropped, pane: r.pane})
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
	u.s.ov.spType = reflect.TypeFor[*memProvider]() // the backend stands for the harness's
	backend := newMemBags()
	var r stepRun
	emit, drop := r.emitter(false), r.emitter(true)
	for len(in) > 0 {
		n := min(bundle, len(in))
		backend.mu.Lock()
		backend.ended = false
		backend.mu.Unlock()
		r.pane = typex.NoFiringPane()
		u.StartBundle(ctx, emit, drop)
		for _, e := range in[:n] {
			r.pane = e.pane
			sp := &memProvider{m: backend, key: e.row.Key}
			require.NoError(t, u.ProcessElement(ctx, e.pane, window.GlobalWindow{}, e.ts, sp, []byte(e.row.Key), e.row, emit, drop))
		}
		r.pane = typex.NoFiringPane() // FinishBundle's emitters
		require.NoError(t, u.FinishBundle(ctx, emit, drop))
		backend.mu.Lock()
		backend.ended = true
		backend.mu.Unlock()
		in = in[n:]
	}
	return r.out, backend
}

// untimedFn is marksFn or versionsFn.
type untimedFn interface{ Setup() error }

// outputs renders emitted rows in row order.
func outputs(es []emitted) []string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("row %d %s of %s at %d, dropped %v, pane %+v", e.row.N, e.row.Op, e.row.Key, e.ts, e.dropped, e.pane))
	}
	slices.Sort(out)
	return out
}

// The batched step decides exactly as the one that waits for each request:
// the same rows out, each with its own timestamp and in its own pane (rows
// of another pane arrive now and then: the batch's output then waits for
// an emitter in its pane); the same requests per key
// in the same order, never two of a key at once, none after its bundle;
// the same state left. For KeepFirst's marks and KeepLast's versions, with
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
				// The order may differ only where a row of another pane came:
				// the batch's output then waits for an emitter in its own.
				assert.Equal(t, outputs(want), outputs(got), "the same output, each row at its time and in its pane")
				for _, e := range got {
					src := in[e.row.N]
					if !e.dropped && tc.name == "keeplast" {
						continue // KeepLast's -U is the stored row, at the arriving one's time
					}
					assert.Equal(t, src.ts, e.ts, "row %d at its own time", e.row.N)
					assert.Equal(t, src.pane, e.pane, "row %d in its own pane", e.row.N)
				}
				assert.Equal(t, wantState.log, gotState.log, "each key's requests, in order")
				assert.Equal(t, wantState.bags, gotState.bags, "the state left")
				assert.Empty(t, gotState.overlaps, "two requests of a key at once")
				assert.Zero(t, gotState.late, "requests after their bundle")
			})
		}
	}
}
