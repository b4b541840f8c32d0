package changelog

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/coders/ordercoder"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/internal/dofn"
	"github.com/beamdedup/beamdedup/transforms/internal/metricsum"
	"github.com/beamdedup/beamdedup/transforms/internal/pcol"
	"github.com/beamdedup/beamdedup/transforms/internal/prismwarn"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// GroupCount is one output row of CountPerKey: a group and its count.
type GroupCount struct {
	// Group is the group's values: the value of a single GroupBy column as
	// text (NULL for a nil pointer), or a JSON array of the values of
	// several; "" without GroupBy. The groups are counted apart, but a nil
	// *string and the string "NULL" give the same text: where a column
	// holds both, group by it and another column (a JSON array tells null
	// from "NULL") before keying a sink or Latest by Group.
	Group string `json:"group" beam:"group"`
	// Count is the group's +I/+U rows less its -U/-D rows.
	Count int64 `json:"count" beam:"count"`
	// Version is the number of changes applied to the group so far: an
	// upsert sink keeps the row with the highest Version, so a reordered
	// write cannot replace a newer count with an older one. A group's final
	// row is the same in both expansions, in whatever order its changes
	// arrived (without Spec's key; with it, see Spec).
	Version int64 `json:"version" beam:"version"`
}

// Namespace is the prefix of CountPerKey's Beam metrics namespaces: an
// instance counts in Namespace/<UID> (for example
// beamdedup/changelog/status-counts), so that each is read apart
// (CountersOf).
const Namespace = "beamdedup/changelog"

// The counters' names (Counters' fields).
const (
	metricRowsIn             = "rows_in"
	metricAdded              = "added"
	metricSubtracted         = "subtracted"
	metricRetractionsIgnored = "retractions_ignored"
	metricDeadLettered       = "dead_lettered"
	metricCountsEmitted      = "counts_emitted"
	metricGroupsBelowZero    = "groups_below_zero"
)

// countMetrics are the counters of one CountPerKey.
type countMetrics struct {
	rowsIn, added, subtracted, ignored, dead, emitted, groupsBelow0 beam.Counter
}

func newCountMetrics(uid string) *countMetrics {
	ns := Namespace + "/" + uid
	return &countMetrics{
		rowsIn: beam.NewCounter(ns, metricRowsIn), added: beam.NewCounter(ns, metricAdded), subtracted: beam.NewCounter(ns, metricSubtracted),
		ignored: beam.NewCounter(ns, metricRetractionsIgnored),
		dead:    beam.NewCounter(ns, metricDeadLettered), emitted: beam.NewCounter(ns, metricCountsEmitted), groupsBelow0: beam.NewCounter(ns, metricGroupsBelowZero),
	}
}

// Counters are CountPerKey's metrics, summed over a job's steps: each
// field the Beam counter of that name in namespace Namespace/<UID>. Every
// input row is counted once in rows_in and once in exactly one of added,
// subtracted, retractions_ignored and dead_lettered.
type Counters struct {
	RowsIn     int64 // rows_in: rows entering CountPerKey
	Added      int64 // added: +I/+U rows applied
	Subtracted int64 // subtracted: -U/-D rows applied
	// RetractionsIgnored, retractions_ignored: on bounded input with the
	// key (Spec), -U/-D rows of a key whose +I/+U rows they outnumber.
	RetractionsIgnored int64
	DeadLettered       int64 // dead_lettered: rows not applied: an unknown kind
	CountsEmitted      int64 // counts_emitted: GroupCount rows emitted
	// GroupsBelowZero, groups_below_zero: groups whose count ends below
	// zero (one dead letter each), at the end of the input or, on a
	// stream, of the window.
	GroupsBelowZero int64
}

// ReadCounters sums the counters of every CountPerKey of a pipeline run.
func ReadCounters(pr beam.PipelineResult) Counters { return CountersOf(pr, "") }

// CountersOf reads the counters of the CountPerKey whose UID (or default
// name) is uid; "" sums every one.
func CountersOf(pr beam.PipelineResult, uid string) Counters {
	var c Counters
	metricsum.Of(pr, Namespace+"/", uid, map[string]*int64{metricRowsIn: &c.RowsIn, metricAdded: &c.Added, metricSubtracted: &c.Subtracted,
		metricRetractionsIgnored: &c.RetractionsIgnored, metricDeadLettered: &c.DeadLettered, metricCountsEmitted: &c.CountsEmitted, metricGroupsBelowZero: &c.GroupsBelowZero})
	return c
}

// Option configures CountPerKey. A mistake in an option (a nil Option, an
// empty column name) is a construction error that names the option.
type Option func(*countConfig)

type countConfig struct {
	kindCol string
	key     []string // the rows' key (Spec.Key): bounded input matches a key's retractions with its rows
	groupBy []string
	uid     string
	stream  bool // AsStream
	errs    []error
}

func (c *countConfig) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// KindColumn names the column that holds each row's kind: a string ("+I",
// "-U", "+U", "-D"; "" reads as +I) or a rowkind.Kind, as dedup's
// KindColumn writes it. Required.
func KindColumn(col string) Option {
	return func(c *countConfig) {
		if col == "" {
			c.fail(`KindColumn(""): the column name is empty`)
		}
		c.kindCol = col
	}
}

// Spec takes the roles of the rows' columns from the deduplication that
// produced them (dedup.Result.Spec): the kind column, as KindColumn, and
// the key. With the key, bounded input matches each key's retractions with
// the key's own +I/+U rows: a -U/-D that outnumbers them retracts a row the
// input never added (the -D with which bounded KeepLast ends a key that
// ends deleted, the start of a history cut mid-way) and is ignored
// (retractions_ignored) instead of taking its group's count down. The
// group is GroupBy's.
func Spec(spec rowspec.Spec) Option {
	return func(c *countConfig) {
		if err := spec.Err(); err != nil {
			c.fail("Spec: %w", err)
		}
		if spec.Upsert {
			c.fail("Spec: the rows are upserts (Spec.Upsert), which retract nothing, and a count applies a changelog's retractions: count KeepLast's changelog (KindColumn, without Upsert)")
		}
		if spec.Kind != "" {
			c.kindCol = spec.Kind
		}
		if len(spec.Key) > 0 {
			c.key = spec.Key
		}
	}
}

// GroupBy names the columns whose values form the group (types as for
// dedup.PartitionBy). Without it every row counts towards one group, "".
func GroupBy(cols ...string) Option {
	return func(c *countConfig) {
		if len(cols) == 0 {
			c.fail("GroupBy() needs at least one column; omit it for one group")
		}
		for _, col := range cols {
			if col == "" {
				c.fail("GroupBy(%q): a column name is empty", cols)
				break
			}
		}
		c.groupBy = append([]string(nil), cols...)
	}
}

// UID names the transform's scope, and with it its state (default
// "CountPerKey"), and tells its counters apart (CountersOf).
func UID(uid string) Option {
	return func(c *countConfig) {
		if uid == "" {
			c.fail(`UID(""): the UID is empty; omit UID for the default name`)
		}
		c.uid = uid
	}
}

// AsStream counts bounded input as a stream: a count per group updated
// with each change, emitted every time it changes (the stateful
// expansion), rather than one total per group at the end. So a file gives
// the counts a stream would, to try the streaming pipeline on a file.
// Unbounded input always counts so.
func AsStream() Option { return func(c *countConfig) { c.stream = true } }

func init() {
	type deadEmit = func(deadletter.DeadLetter)
	dofn.Register(&keyChangeFn{}, func(fn any) dofn.Methods {
		f := fn.(*keyChangeFn)
		return dofn.Methods{
			"Setup": dofn.F0x1(f.Setup, func() any { return f.Setup() }),
			"ProcessElement": dofn.F4x0(f.ProcessElement, func(ctx, row, emit, dead any) {
				f.ProcessElement(ctx.(context.Context), row, emit.(func(string, delta)), dead.(deadEmit))
			}),
		}
	})
	dofn.Register(&countFn{}, func(fn any) dofn.Methods {
		f := fn.(*countFn)
		return dofn.Methods{
			"Setup": dofn.F0x0(f.Setup, f.Setup),
			"ProcessElement": dofn.F8x1(f.ProcessElement, func(ctx, w, sp, tp, k, d, emit, dead any) any {
				return f.ProcessElement(ctx.(context.Context), w.(beam.Window), sp.(state.Provider), tp.(timers.Provider), k.(string), d.(delta), emit.(func(GroupCount)), dead.(deadEmit))
			}),
			"OnTimer": dofn.F7x1(f.OnTimer, func(ctx, sp, tp, k, timer, emit, dead any) any {
				return f.OnTimer(ctx.(context.Context), sp.(state.Provider), tp.(timers.Provider), k.(string), timer.(timers.Context), emit.(func(GroupCount)), dead.(deadEmit))
			}),
		}
	})
	dofn.Register(&matchFn{}, func(fn any) dofn.Methods {
		f := fn.(*matchFn)
		return dofn.Methods{"ProcessElement": dofn.F4x0(f.ProcessElement, func(ctx, k, d, emit any) {
			f.ProcessElement(ctx.(context.Context), k.(string), d.(delta), emit.(func(string, delta)))
		})}
	})
	dofn.Register(&finalCountFn{}, func(fn any) dofn.Methods {
		f := fn.(*finalCountFn)
		return dofn.Methods{"ProcessElement": dofn.F5x0(f.ProcessElement, func(ctx, k, d, emit, dead any) {
			f.ProcessElement(ctx.(context.Context), k.(string), d.(delta), emit.(func(GroupCount)), dead.(deadEmit))
		})}
	})
	register.Function2x1(mergeDeltas)
	register.Function1x2(groupOf)
	register.Function2x1(laterCount)
	register.Emitter2[string, GroupCount]()
	register.Emitter2[string, delta]()
	register.Emitter1[GroupCount]()
	beam.RegisterType(reflect.TypeFor[delta]())
	beam.RegisterType(reflect.TypeFor[counter]())
	beam.RegisterType(reflect.TypeFor[GroupCount]())
}

// Result is what CountPerKey returns.
type Result struct {
	// Counts are GroupCount rows: on a stream the group's new count after
	// every change, on bounded input one total per group.
	Counts beam.PCollection
	// DeadLetters are deadletter.DeadLetter rows with the reason: a row of
	// an unknown kind (not applied), and a group whose count ends below
	// zero (one for the group, its GroupCount as the row).
	DeadLetters beam.PCollection
}

// CountPerKey applies a changelog of rows (a PCollection of a struct type
// with a kind column) to a count per group: +I and +U add one to the row's
// group, -U and -D subtract one.
//
// A count is a sum, so the result does not depend on the order in which
// the changes arrive: a -U may reach its group before the +I it retracts
// (after a shuffle, or on a runner that hands a key's rows over in no
// particular order, such as Flink in batch mode) and the count still ends
// right.
//
// On a stream (unbounded input) it keeps one count per group (and window)
// in value state and emits the group's new count after every change: an
// upsert stream of GroupCount by Group, whose last row per group is its
// current count (Latest reduces it to that). The count may go below zero
// on the way (a retraction that overtook its insertion); a count below
// zero is not emitted, and the next change that takes it back to zero or
// above emits it with a Version that counts every change applied. A group
// still below zero when its window ends (for the global window, at the end
// of the input) retracted rows the count never saw: it is one dead letter,
// as on bounded input. On bounded input it is a combine per group: one
// GroupCount per group with its total, and a group whose total is
// negative is one dead letter instead; given the rows' key (Spec), a
// retraction of a row the input never added is ignored instead (see Spec).
//
// Rows with an unknown kind are dead letters too. It panics on a
// construction error (see TryCountPerKey).
func CountPerKey(s beam.Scope, rows beam.PCollection, opts ...Option) Result {
	r, err := TryCountPerKey(s, rows, opts...)
	if err != nil {
		panic(err)
	}
	return r
}

// TryCountPerKey is CountPerKey returning construction errors: no
// KindColumn, an unknown column, a kind column of the wrong type, a group
// column that cannot be a key, a row type that is not a struct.
func TryCountPerKey(s beam.Scope, rows beam.PCollection, opts ...Option) (Result, error) {
	c := countConfig{uid: "CountPerKey"}
	for i, o := range opts {
		if o == nil {
			c.fail("option %d of %d is nil", i+1, len(opts))
			continue
		}
		o(&c)
	}
	fail := func(err error) (Result, error) { return Result{}, fmt.Errorf("changelog.CountPerKey: %w", err) }
	if len(c.errs) > 0 {
		return fail(errors.Join(c.errs...))
	}
	if !rows.IsValid() {
		return fail(errors.New("input PCollection is invalid"))
	}
	t := rows.Type().Type()
	if _, err := newCountParams(t, c.kindCol, c.groupBy, c.key); err != nil {
		return fail(err)
	}
	s = s.Scope(c.uid)
	p := countParams{RowType: beam.EncodedType{T: t}, KindCol: c.kindCol, GroupBy: c.groupBy, UID: c.uid}
	bounded := pcol.IsBounded(rows) && !c.stream
	p.Bounded = bounded
	if bounded {
		p.Key = c.key
	}
	keyed, bad := beam.ParDo2(s.Scope("Key"), &keyChangeFn{P: p}, rows)
	var counts, late beam.PCollection
	if bounded {
		if len(p.Key) > 0 {
			perKey := beam.CombinePerKey(s.Scope("SumPerKey"), mergeDeltas, keyed)
			keyed = beam.ParDo(s.Scope("Match"), &matchFn{UID: c.uid}, perKey)
		}
		totals := beam.CombinePerKey(s.Scope("Sum"), mergeDeltas, keyed)
		counts, late = beam.ParDo2(s.Scope("Final"), &finalCountFn{UID: c.uid}, totals)
	} else {
		prismwarn.Check(context.Background(), prismwarn.Construction, fmt.Sprintf("changelog.CountPerKey (UID %s)", c.uid))
		counts, late = beam.ParDo2(s.Scope("Count"), &countFn{UID: c.uid, End: timers.InEventTime("end")}, keyed)
	}
	return Result{Counts: counts, DeadLetters: beam.Flatten(s, bad, late)}, nil
}

// countParams is the serialized configuration of the keying step.
type countParams struct {
	RowType beam.EncodedType
	KindCol string
	GroupBy []string
	UID     string
	Bounded bool
	// Key is the rows' key, on bounded input: rows are summed per key and
	// group first (matchFn).
	Key []string
}

// columns reads a row's kind, group and key.
type columns struct {
	kind   rowspec.KindColumn
	enc    *keycoder.Encoder
	keyEnc *keycoder.Encoder // nil without a key
	groups []int             // field indexes of the GroupBy columns
}

func newCountParams(t reflect.Type, kindCol string, groupBy, key []string) (*columns, error) {
	if kindCol == "" {
		return nil, errors.New("KindColumn is required: name the column holding +I, -U, +U, -D")
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("input must be a PCollection of a Go struct type, got %v", t)
	}
	kc, err := rowspec.NewKindColumn(t, kindCol)
	if err != nil {
		return nil, err
	}
	enc, err := keycoder.New(t, groupBy)
	if err != nil {
		return nil, fmt.Errorf("GroupBy(%q): %w", groupBy, err)
	}
	c := &columns{kind: kc, enc: enc}
	if len(key) > 0 {
		if c.keyEnc, err = keycoder.New(t, key); err != nil {
			return nil, fmt.Errorf("Spec: PartitionBy(%q): %w", key, err)
		}
	}
	for _, g := range groupBy {
		col, err := keycoder.Lookup(t, g)
		if err != nil {
			return nil, fmt.Errorf("GroupBy(%q): %w", groupBy, err)
		}
		c.groups = append(c.groups, col.Index)
	}
	return c, nil
}

// group formats the row's group for GroupCount.Group.
func (c *columns) group(row reflect.Value) string {
	switch len(c.groups) {
	case 0:
		return ""
	case 1:
		v := fieldValue(row, c.groups[0])
		if v == nil {
			return "NULL"
		}
		if t, ok := v.(time.Time); ok {
			return t.UTC().Format(time.RFC3339Nano)
		}
		return fmt.Sprint(v)
	}
	vals := make([]any, len(c.groups))
	for i, idx := range c.groups {
		vals[i] = fieldValue(row, idx)
	}
	b, _ := json.Marshal(vals)
	return string(b)
}

// fieldValue is row's field idx, dereferenced; nil for a nil pointer.
func fieldValue(row reflect.Value, idx int) any {
	v := row.Field(idx)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	return v.Interface()
}

// delta is one change of a group on its way to the count: N is +1 (+I,
// +U) or -1 (-U, -D) and Rows 1 for a row, the sums for a combined group.
// GroupKey is the group's encoded key, which the count per key and group
// is keyed by again once matched (bounded input with the key).
type delta struct {
	Group    string
	GroupKey string
	N        int64
	Rows     int64
}

// counter is a group's state on a stream: its count, the number of
// changes applied, and the group as GroupCount names it (for the dead
// letter of a group that ends below zero).
type counter struct {
	Count, Version int64
	Group          string
}

type keyChangeFn struct {
	P countParams
	c *columns
	m *countMetrics
}

func (f *keyChangeFn) Setup() error {
	var err error
	f.m = newCountMetrics(f.P.UID)
	f.c, err = newCountParams(f.P.RowType.T, f.P.KindCol, f.P.GroupBy, f.P.Key)
	return err
}

func (f *keyChangeFn) ProcessElement(ctx context.Context, row beam.X, emit func(string, delta), dead func(deadletter.DeadLetter)) {
	f.m.rowsIn.Inc(ctx, 1)
	v := reflect.ValueOf(row)
	k, reason := f.c.kind.Read(v)
	if reason != "" {
		f.m.dead.Inc(ctx, 1)
		dead(deadletter.New(f.P.UID, row, reason))
		return
	}
	// The rule of the count: +I and +U add one, -U and -D subtract one.
	d := delta{Group: f.c.group(v), N: 1, Rows: 1}
	if k.IsRetraction() {
		d.N = -1
	}
	group := f.c.enc.Append(nil, v)
	if f.c.keyEnc != nil {
		// Summed per key and group first, and matched (matchFn), which
		// counts the row.
		d.GroupKey = string(group)
		k := binary.AppendUvarint(nil, uint64(len(group)))
		emit(string(f.c.keyEnc.Append(append(k, group...), v)), d)
		return
	}
	if f.P.Bounded {
		// A combine has no order: every row is applied, and a negative
		// total is judged per group at the end.
		if d.N > 0 {
			f.m.added.Inc(ctx, 1)
		} else {
			f.m.subtracted.Inc(ctx, 1)
		}
	}
	emit(string(group), d)
}

func mergeDeltas(a, b delta) delta {
	return delta{Group: a.Group, GroupKey: a.GroupKey, N: a.N + b.N, Rows: a.Rows + b.Rows}
}

// matchFn applies a key's changes of a group, summed, on bounded input: its
// retractions retract its +I/+U rows, and those it has more of than +I/+U
// rows retract rows the input never added, so they are ignored; it passes
// the key's part of the group's total on, keyed by the group, unless it
// applied nothing.
type matchFn struct {
	UID string

	m *countMetrics
}

func (f *matchFn) ProcessElement(ctx context.Context, _ string, d delta, emit func(string, delta)) {
	if f.m == nil {
		f.m = newCountMetrics(f.UID)
	}
	adds, rets := (d.Rows+d.N)/2, (d.Rows-d.N)/2
	if rets > adds {
		f.m.ignored.Inc(ctx, rets-adds)
		rets = adds
	}
	f.m.added.Inc(ctx, adds)
	f.m.subtracted.Inc(ctx, rets)
	if adds > 0 { // a key whose rows were all ignored gives its group nothing
		emit(d.GroupKey, delta{Group: d.Group, GroupKey: d.GroupKey, N: adds - rets, Rows: adds + rets})
	}
}

// countFn keeps a group's count in value state (stream expansion), and an
// event-time timer at the end of the group's window, set on its first
// change, that dead-letters a group whose count ends below zero. (Prism
// fires a timer as soon as the watermark reaches its time, ahead of a
// change of that same time: a change at a window's last millisecond can
// come after the judgement, and is applied but not judged again.)
type countFn struct {
	UID   string
	Count state.Value[counter]
	End   timers.EventTime

	m *countMetrics
}

func (f *countFn) Setup() {
	prismwarn.Check(context.Background(), prismwarn.Run, "a changelog.CountPerKey step")
}

func (f *countFn) ProcessElement(ctx context.Context, w beam.Window, sp state.Provider, tp timers.Provider, _ string, d delta, emit func(GroupCount), dead func(deadletter.DeadLetter)) error {
	if f.m == nil {
		f.m = newCountMetrics(f.UID)
	}
	c, _, err := f.Count.Read(sp)
	if err != nil {
		return err
	}
	if c.Version == 0 {
		f.End.Set(tp, w.MaxTimestamp().ToTime())
	}
	c = counter{Count: c.Count + d.N, Version: c.Version + 1, Group: d.Group}
	if err := f.Count.Write(sp, c); err != nil {
		return err
	}
	if d.N > 0 {
		f.m.added.Inc(ctx, 1)
	} else {
		f.m.subtracted.Inc(ctx, 1)
	}
	if c.Count < 0 {
		// A retraction ahead of its insertion: no count to show yet.
		return nil
	}
	f.m.emitted.Inc(ctx, 1)
	emit(GroupCount{Group: d.Group, Count: c.Count, Version: c.Version})
	return nil
}

// OnTimer fires at the end of a group's window: a count still below zero
// is a dead letter, as a bounded group's negative total is.
func (f *countFn) OnTimer(ctx context.Context, sp state.Provider, _ timers.Provider, _ string, _ timers.Context, _ func(GroupCount), dead func(deadletter.DeadLetter)) error {
	if f.m == nil {
		f.m = newCountMetrics(f.UID)
	}
	c, _, err := f.Count.Read(sp)
	if err != nil || c.Count >= 0 {
		return err
	}
	f.m.groupsBelow0.Inc(ctx, 1)
	dead(belowZero(f.UID, GroupCount{Group: c.Group, Count: c.Count, Version: c.Version}))
	return nil
}

// belowZero is the dead letter of a group whose count ends below zero.
func belowZero(uid string, g GroupCount) deadletter.DeadLetter {
	return deadletter.New(uid, g, fmt.Sprintf("group %q ends below zero (%d): %d more -U/-D rows than +I/+U rows", g.Group, g.Count, -g.Count))
}

// finalCountFn emits a bounded group's total (combine expansion).
type finalCountFn struct {
	UID string

	m *countMetrics
}

func (f *finalCountFn) ProcessElement(ctx context.Context, _ string, d delta, emit func(GroupCount), dead func(deadletter.DeadLetter)) {
	if f.m == nil {
		f.m = newCountMetrics(f.UID)
	}
	if d.N < 0 {
		f.m.groupsBelow0.Inc(ctx, 1)
		dead(belowZero(f.UID, GroupCount{Group: d.Group, Count: d.N, Version: d.Rows}))
		return
	}
	f.m.emitted.Inc(ctx, 1)
	emit(GroupCount{Group: d.Group, Count: d.N, Version: d.Rows})
}

// Latest reduces CountPerKey's upsert stream to each group's current row,
// the one with the highest Version: what an upsert sink holds. It is a
// combine per group, so on a stream it emits when the window closes (for
// the global window, at the end of the input).
func Latest(s beam.Scope, counts beam.PCollection) beam.PCollection {
	s = s.Scope("Latest")
	keyed := beam.ParDo(s, groupOf, counts)
	return beam.DropKey(s, beam.CombinePerKey(s, laterCount, keyed))
}

func groupOf(c GroupCount) (string, GroupCount) { return c.Group, c }

// laterCount keeps the later of two counts of a group by the rows'
// comparator (rowspec.Order, Version its SequenceBy value) where there is
// no arrival order: the higher Version, or at an equal Version (counts of
// one group from different runs) the larger count, so that it is
// commutative, as a combine needs.
func laterCount(a, b GroupCount) GroupCount {
	stand := func(c GroupCount) []byte { return append(ordercoder.Int(nil, c.Count), c.Group...) }
	if rowspec.CompareRows(rowspec.Order{Seq: ordercoder.Int(nil, b.Version)}, stand(b), rowspec.Order{Seq: ordercoder.Int(nil, a.Version)}, stand(a)) > 0 {
		return b
	}
	return a
}
