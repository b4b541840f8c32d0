package bench

import (
	"cmp"
	"context"
	"iter"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

// Row is the generated input row: a key column, an event time and a
// changelog kind. Rows of one key differ in Seq (and mostly in TS), unless
// one is a resend (Workload.Resends): a copy of the key's previous row.
type Row struct {
	Key string `beam:"key"`
	Op  string `beam:"op"`  // "+I", "+U" or "-U"; "" with InsertOnly
	TS  int64  `beam:"ts"`  // event time, Unix ms (read by OnTime mode only)
	Seq int64  `beam:"seq"` // position in the generated input (a resend keeps its original's)
}

// Workload describes generated input: Rows rows over exactly Keys distinct
// keys, so the duplicate share is 1 - Keys/Rows.
type Workload struct {
	Rows, Keys int
	Seed       uint64
	// Resends makes about half of the repeats of a key exact copies of the
	// key's previous row (every column), as a client resending: KeepLast
	// emits nothing for them. Without it every row of a key differs (in
	// Seq), so every repeat is a change. It draws extra random numbers, so
	// the rows of a workload with Resends differ from those without.
	Resends bool
	// InsertOnly leaves Op empty (read as +I): the input of KeepLast's
	// insert-only modes, whose KindColumn is only written. The rows are
	// otherwise the same.
	InsertOnly bool
}

// DupShare is the share of rows that repeat an earlier key.
func (w Workload) DupShare() float64 { return 1 - float64(w.Keys)/float64(w.Rows) }

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
		var prev []Row // each key's previous row, with Resends
		for i := range w.Rows {
			var k int
			op := "+I"
			if left := w.Keys - used; left > 0 && (used == 0 || r.IntN(w.Rows-i) < left) {
				k, used = used, used+1
			} else {
				k = r.IntN(used)
				if w.Resends && r.IntN(2) == 0 {
					if !yield(prev[k]) {
						return
					}
					continue
				}
				op = [...]string{"+U", "-U", "+I"}[r.IntN(3)]
			}
			buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(k), 10)
			ts := BaseTime + int64(i) - r.Int64N(10_000)
			if w.InsertOnly {
				op = ""
			}
			row := Row{Key: string(buf), Op: op, TS: ts, Seq: int64(i)}
			if w.Resends {
				if k == len(prev) {
					prev = append(prev, row)
				} else {
					prev[k] = row
				}
			}
			if !yield(row) {
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

// LastCount is where keep-last deduplication by the key column
// (dedup.KeepLast without retention or changelog input) puts each row of a
// workload: every row is exactly one of these.
type LastCount struct {
	Inserts    int64 // a key's first row: +I
	Updates    int64 // a row replacing the stored one: -U and +U
	Duplicates int64 // a row equal to the stored one: nothing
	OutOfOrder int64 // OnTime: a row older than the stored one: nothing
}

// Changelog is the number of rows of KeepLast's changelog output: +I per
// insert, a -U/+U pair per update.
func (c LastCount) Changelog() int64 { return c.Inserts + 2*c.Updates }

// Upsert is the number of rows of KeepLast's Upsert() output: +I per
// insert, +U per update.
func (c LastCount) Upsert() int64 { return c.Inserts + c.Updates }

// KeepLast applies KeepLast's rules to rows, in the order given, each row
// reaching the key's state (no mini-batch fold): a key's first row is
// inserted, a row equal to the stored one is a duplicate, and with onTime a
// row with TS below the stored row's is out of order (ties replace). Rows
// are compared whole: a workload's rows of one key differ in Seq unless one
// is a copy, so the kind column's normalization changes nothing.
func KeepLast(rows iter.Seq[Row], onTime bool) LastCount {
	var c LastCount
	stored := map[string]Row{}
	for r := range rows {
		old, ok := stored[r.Key]
		switch {
		case !ok:
			c.Inserts++
		case onTime && r.TS < old.TS:
			c.OutOfOrder++
			continue
		case r == old:
			c.Duplicates++
			continue
		default:
			c.Updates++
		}
		stored[r.Key] = r
	}
	return c
}

// ByEventTime yields the workload's rows sorted by TS, ties in generator
// order: the order in which Prism hands a key's rows to a stateful step
// (notes/beam-defects.md 4).
func (w Workload) ByEventTime() iter.Seq[Row] {
	rows := slices.Collect(w.All())
	slices.SortStableFunc(rows, func(a, b Row) int { return cmp.Compare(a.TS, b.TS) })
	return slices.Values(rows)
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

// FloorFn is the value-state floor for a stateful step: per row, one value
// state read and one write of a small value (the size of KeepFirst's
// earlier seen marker), and the row emitted: four state requests per row
// (a get, and a clear and two appends for the write).
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

// ProtocolFloorFn is the protocol's floor for a stateful dedup on the Fn
// API: per row, one read (has this key been seen?) and, for a new key, one
// blind append of a bool (remember it): two state requests per new key,
// one per duplicate, the least any stateful dedup can do. The row is
// emitted.
type ProtocolFloorFn struct {
	Seen state.Bag[bool]
}

// NewProtocolFloorFn returns the protocol floor DoFn with its bag state.
func NewProtocolFloorFn() *ProtocolFloorFn {
	return &ProtocolFloorFn{Seen: state.MakeBagState[bool]("seen")}
}

// ProcessElement reads the key's bag, appends to it when it is empty and
// emits the row.
func (f *ProtocolFloorFn) ProcessElement(sp state.Provider, _ string, r Row, emit func(Row)) error {
	_, ok, err := f.Seen.Read(sp)
	if err != nil {
		return err
	}
	if !ok {
		if err := f.Seen.Add(sp, true); err != nil {
			return err
		}
	}
	emit(r)
	return nil
}

// NoRequestFn is the runner's own ceiling for a stateful step: a keyed
// stateful DoFn that declares a bag, as the floors do, but makes no state
// request; the row is emitted. What is left of a stateful step's cost
// without its requests: the runner's and the SDK's handling of each keyed
// element.
type NoRequestFn struct {
	Seen state.Bag[bool]
}

// NewNoRequestFn returns the no-request DoFn with its (unused) bag state.
func NewNoRequestFn() *NoRequestFn { return &NoRequestFn{Seen: state.MakeBagState[bool]("seen")} }

// ProcessElement emits the row.
func (f *NoRequestFn) ProcessElement(_ state.Provider, _ string, r Row, emit func(Row)) error {
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
	register.DoFn4x1[state.Provider, string, Row, func(Row), error](&ProtocolFloorFn{})
	register.DoFn4x1[state.Provider, string, Row, func(Row), error](&NoRequestFn{})
	register.Emitter1[Row]()
	register.Function1x2(KeyOf)
	register.Function1x1(KeyColumn)
	register.Function1x1(PassThrough)
	register.Function3x0(FirstOfGroup)
	register.Iter1[Row]()
	register.Function2x0[context.Context, beam.T](CountOut)
}
