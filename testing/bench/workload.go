// Package bench holds the pipeline benchmarks of dedup.KeepFirst on Prism,
// side by side with the runner's floor (a bare keyed stateful identity
// DoFn), and the state-access budget test that runs in CI.
//
// Everything runs on input generated inside the pipeline (Impulse and a
// seeded generator DoFn), so reading input is not measured and every case
// of one run sees the same rows.
//
// The benchmarks only run with -bench; the full grid is
//
//	go test -bench=. -run=^$ -benchtime=1x -timeout=60m ./testing/bench/
//
// BEAMDEDUP_BENCH_ROWS sets the row count of the grid and
// BEAMDEDUP_BENCH_LARGE=1 adds the 1M-row point to the scaling benchmark.
// The results and how to read them are in notes/performance.md.
package bench

import (
	"context"
	"iter"
	"math/rand/v2"
	"reflect"
	"strconv"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

// Row is the generated input row: a key column, an event time and a
// changelog kind. Rows of one key differ in Seq and TS.
type Row struct {
	Key string `beam:"key"`
	Op  string `beam:"op"`  // "+I", "+U" or "-U" (read by Changelog mode only)
	TS  int64  `beam:"ts"`  // event time, Unix ms (read by OnTime mode only)
	Seq int64  `beam:"seq"` // position in the generated input
}

// Workload describes generated input: Rows rows over exactly Keys distinct
// keys, so the duplicate share is 1 - Keys/Rows.
type Workload struct {
	Rows, Keys int
	Seed       uint64
}

// DupShare is the share of rows that repeat an earlier key.
func (w Workload) DupShare() float64 { return 1 - float64(w.Keys)/float64(w.Rows) }

// BaseTime is the event time of the first generated row (2024-01-01 UTC).
const BaseTime int64 = 1704067200000

// Generate adds the workload's rows to the pipeline: one Impulse and a
// generator DoFn. Rows carry their event time as Beam timestamp.
func Generate(s beam.Scope, w Workload) beam.PCollection {
	s = s.Scope("Generate")
	return beam.ParDo(s, &genFn{W: w}, beam.Impulse(s))
}

// genFn emits the workload. Row i introduces a new key with probability
// (keys left)/(rows left), else repeats a uniformly chosen earlier key, so
// new keys and duplicates are interleaved and exactly Keys keys appear.
// Event times advance 1 ms per row with up to 10 s of jitter backwards, so
// event-time mode sees out-of-order rows and replaces candidates.
type genFn struct {
	W Workload
}

func (f *genFn) ProcessElement(_ []byte, emit func(beam.EventTime, Row)) {
	for r := range f.W.All() {
		emit(mtime.FromMilliseconds(r.TS), r)
	}
}

// All yields the workload's rows in the order the generator emits them.
func (w Workload) All() iter.Seq[Row] {
	return func(yield func(Row) bool) {
		r := rand.New(rand.NewPCG(w.Seed, 0x5eed))
		used := 0
		var buf []byte
		for i := range w.Rows {
			var k int
			op := "+I"
			if left := w.Keys - used; left > 0 && (used == 0 || r.IntN(w.Rows-i) < left) {
				k, used = used, used+1
			} else {
				k = r.IntN(used)
				op = [...]string{"+U", "-U", "+I"}[r.IntN(3)]
			}
			buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(k), 10)
			ts := BaseTime + int64(i) - r.Int64N(10_000)
			if !yield(Row{Key: string(buf), Op: op, TS: ts, Seq: int64(i)}) {
				return
			}
		}
	}
}

// KeyWindows is the number of distinct (key, fixed window of size) pairs
// of the workload: the output of window deduplication.
func (w Workload) KeyWindows(size time.Duration) int64 {
	type pair struct {
		key   string
		start int64
	}
	seen := map[pair]bool{}
	for r := range w.All() {
		seen[pair{r.Key, r.TS - r.TS%size.Milliseconds()}] = true // TS > 0
	}
	return int64(len(seen))
}

// KeyOf keys a row by its Key column, the floor's keying step.
func KeyOf(r Row) (string, Row) { return r.Key, r }

// FirstOfGroup emits one row of a key's group: the identity step after a
// GroupByKey.
func FirstOfGroup(_ string, rows func(*Row) bool, emit func(Row)) {
	var r Row
	if rows(&r) {
		emit(r)
	}
}

// KeyColumn projects a row to its key, the input of filter.Distinct.
func KeyColumn(r Row) string { return r.Key }

// PassThrough is the stateless identity ParDo.
func PassThrough(r Row) Row { return r }

// FloorFn is the runner's floor for a stateful step: per row, one value
// state read and one write of a small value (the size of KeepFirst's seen
// marker), and the row emitted.
type FloorFn struct {
	State state.Value[[]byte]
}

// NewFloorFn returns the floor DoFn with its value state.
func NewFloorFn() *FloorFn { return &FloorFn{State: state.MakeValueState[[]byte]("floor")} }

var floorValue = []byte{1, 2, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}

// ProcessElement reads and writes the key's state and emits the row.
func (f *FloorFn) ProcessElement(sp state.Provider, _ string, r Row, emit func(Row)) error {
	if _, _, err := f.State.Read(sp); err != nil {
		return err
	}
	if err := f.State.Write(sp, floorValue); err != nil {
		return err
	}
	emit(r)
	return nil
}

// Namespace and name of the counter of rows reaching the sink.
const (
	Namespace  = "bench"
	CounterOut = "out"
)

var cOut = beam.NewCounter(Namespace, CounterOut)

// CountOut counts an output element; the benchmarks check it.
func CountOut(ctx context.Context, _ beam.T) { cOut.Inc(ctx, 1) }

// Sink counts col's elements (bench/out) and drops them.
func Sink(s beam.Scope, col beam.PCollection) { beam.ParDo0(s.Scope("Sink"), CountOut, col) }

// OutCount reads the bench/out counter of a run.
func OutCount(pr beam.PipelineResult) int64 {
	var n int64
	for _, r := range pr.Metrics().AllMetrics().Counters() {
		if r.Namespace() == Namespace && r.Name() == CounterOut {
			n += r.Result()
		}
	}
	return n
}

func init() {
	beam.RegisterType(reflect.TypeFor[Row]())
	register.DoFn2x0[[]byte, func(beam.EventTime, Row)](&genFn{})
	register.Emitter2[beam.EventTime, Row]()
	register.DoFn4x1[state.Provider, string, Row, func(Row), error](&FloorFn{})
	register.Emitter1[Row]()
	register.Function1x2(KeyOf)
	register.Function1x1(KeyColumn)
	register.Function1x1(PassThrough)
	register.Function3x0(FirstOfGroup)
	register.Iter1[Row]()
	register.Function2x0[context.Context, beam.T](CountOut)
}
