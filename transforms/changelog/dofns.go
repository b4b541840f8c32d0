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

// A pipeline's proto names these types and functions, and a running job's
// state is matched and decoded by them: they stay as they are.

// countParams is the serialized configuration of the keying step.
type countParams struct {
	RowType beam.EncodedType
	KindCol string
	GroupBy []string
	UID     string
	Bounded bool
	Key     []string // bounded: rows are summed per key and group first (matchFn)
}

// delta is one change of a group: N is +1 or -1 and Rows 1 for a row,
// the sums for a combined group. GroupKey is the group's encoded key.
type delta struct {
	Group    string
	GroupKey string
	N        int64
	Rows     int64
}

// counter is a group's state on a stream.
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
	if ch.Key != nil { // matchFn counts the row
		d.GroupKey = string(ch.GroupKey)
		emit(string(ch.Key), d)
		return
	}
	if f.P.Bounded { // a negative total is judged per group at the end
		f.m.Applied(ctx, d.N)
	}
	emit(string(ch.GroupKey), d)
}

func mergeDeltas(a, b delta) delta {
	return delta{Group: a.Group, GroupKey: a.GroupKey, N: a.N + b.N, Rows: a.Rows + b.Rows}
}

// matchFn applies a key's summed changes of a group on bounded input
// (count.Match) and passes the key's part of the group's total on.
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

// countFn keeps a group's count in value state (stream expansion), and a
// timer at the end of the group's window that dead-letters a count below
// zero. (Prism fires a timer ahead of a change of its same time: such a
// change is applied but not judged again.)
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
	if c.Count < 0 { // a retraction ahead of its insertion
		return nil
	}
	f.m.Emitted.Inc(ctx, 1)
	emit(GroupCount{Group: d.Group, Count: c.Count, Version: c.Version})
	return nil
}

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
