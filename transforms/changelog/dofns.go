package changelog

import (
	"context"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/transforms/changelog/internal/count"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/internal/dofn"
	"github.com/beamdedup/beamdedup/transforms/internal/prismwarn"
)

// What a pipeline's proto names after this package: the DoFn types (Beam
// names a step after its DoFn's type: <UID>/Count/changelog.countFn), the
// elements between the steps, the count's state (delta, counter) and the
// combine's functions. A running job's state is matched and decoded by
// them, so they stay here, and stay as they are; how a row is read and
// counted is package count's.

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

// keyChangeFn keys each row by its group (and key, count.Change).
type keyChangeFn struct {
	P countParams
	c *count.Columns
	m *count.Metrics
}

func (f *keyChangeFn) Setup() error {
	var err error
	f.m = count.NewMetrics(f.P.UID)
	f.c, err = count.NewColumns(f.P.RowType.T, f.P.KindCol, f.P.GroupBy, f.P.Key)
	return err
}

func (f *keyChangeFn) ProcessElement(ctx context.Context, row beam.X, emit func(string, delta), dead func(deadletter.DeadLetter)) {
	f.m.RowsIn.Inc(ctx, 1)
	ch, reason := f.c.Read(reflect.ValueOf(row))
	if reason != "" {
		f.m.Dead.Inc(ctx, 1)
		dead(deadletter.New(f.P.UID, row, reason))
		return
	}
	d := delta{Group: ch.Group, N: ch.Sign, Rows: 1}
	if ch.Key != nil {
		// Summed per key and group first, and matched (matchFn), which
		// counts the row.
		d.GroupKey = string(ch.GroupKey)
		emit(string(ch.Key), d)
		return
	}
	if f.P.Bounded {
		// A combine has no order: every row is applied, and a negative
		// total is judged per group at the end.
		f.m.Applied(ctx, d.N)
	}
	emit(string(ch.GroupKey), d)
}

func mergeDeltas(a, b delta) delta {
	return delta{Group: a.Group, GroupKey: a.GroupKey, N: a.N + b.N, Rows: a.Rows + b.Rows}
}

// matchFn applies a key's changes of a group, summed, on bounded input
// (count.Match), and passes the key's part of the group's total on, keyed
// by the group, unless it applied nothing.
type matchFn struct {
	UID string

	m *count.Metrics
}

func (f *matchFn) ProcessElement(ctx context.Context, _ string, d delta, emit func(string, delta)) {
	if f.m == nil {
		f.m = count.NewMetrics(f.UID)
	}
	adds, rets, ignored := count.Match(d.N, d.Rows)
	f.m.Ignored.Inc(ctx, ignored)
	f.m.Added.Inc(ctx, adds)
	f.m.Subtracted.Inc(ctx, rets)
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

	m *count.Metrics
}

func (f *countFn) Setup() {
	prismwarn.Check(context.Background(), prismwarn.Run, "a changelog.CountPerKey step")
}

func (f *countFn) ProcessElement(ctx context.Context, w beam.Window, sp state.Provider, tp timers.Provider, _ string, d delta, emit func(GroupCount), dead func(deadletter.DeadLetter)) error {
	if f.m == nil {
		f.m = count.NewMetrics(f.UID)
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
	f.m.Applied(ctx, d.N)
	if c.Count < 0 {
		// A retraction ahead of its insertion: no count to show yet.
		return nil
	}
	f.m.Emitted.Inc(ctx, 1)
	emit(GroupCount{Group: d.Group, Count: c.Count, Version: c.Version})
	return nil
}

// OnTimer fires at the end of a group's window: a count still below zero
// is a dead letter, as a bounded group's negative total is.
func (f *countFn) OnTimer(ctx context.Context, sp state.Provider, _ timers.Provider, _ string, _ timers.Context, _ func(GroupCount), dead func(deadletter.DeadLetter)) error {
	if f.m == nil {
		f.m = count.NewMetrics(f.UID)
	}
	c, _, err := f.Count.Read(sp)
	if err != nil || c.Count >= 0 {
		return err
	}
	f.m.GroupsBelow0.Inc(ctx, 1)
	dead(belowZero(f.UID, GroupCount{Group: c.Group, Count: c.Count, Version: c.Version}))
	return nil
}

// belowZero is the dead letter of a group whose count ends below zero.
func belowZero(uid string, g GroupCount) deadletter.DeadLetter {
	return deadletter.New(uid, g, count.BelowZero(g.Group, g.Count))
}

// finalCountFn emits a bounded group's total (combine expansion).
type finalCountFn struct {
	UID string

	m *count.Metrics
}

func (f *finalCountFn) ProcessElement(ctx context.Context, _ string, d delta, emit func(GroupCount), dead func(deadletter.DeadLetter)) {
	if f.m == nil {
		f.m = count.NewMetrics(f.UID)
	}
	if d.N < 0 {
		f.m.GroupsBelow0.Inc(ctx, 1)
		dead(belowZero(f.UID, GroupCount{Group: d.Group, Count: d.N, Version: d.Rows}))
		return
	}
	f.m.Emitted.Inc(ctx, 1)
	emit(GroupCount{Group: d.Group, Count: d.N, Version: d.Rows})
}

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
