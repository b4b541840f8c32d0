// Package dedup is deduplication for Apache Beam Go pipelines, with the
// semantics of Flink SQL's: KeepFirst (DEDUPLICATE_KEEP_FIRST, insert-only
// output), KeepLast (keep-last, a changelog of each key's current row) and
// WindowFirst/WindowLast (one row per key and window), as Beam transforms
// that work on streams and files and on every runner.
//
//	out := dedup.KeepFirst(s, rows,
//	    dedup.PartitionBy("user_id"),   // key columns; omitted = one global partition
//	    dedup.OnTime("rowtime"),        // event-time mode; omitted = watermarkless
//	    dedup.StateTTL(5*time.Minute),  // processing-time retention; 0 = forever
//	    dedup.UID("user-events-dedup")) // stable identity of the transform and its state
//
// rows is a PCollection of a Go struct type; a column's name is its
// `beam:"name"` tag, else the field name. The output has the input's type.
// Every transform has a Try form that returns construction errors and a
// WithErrors form that also returns the rows it could not process, as
// deadletter.DeadLetter; every input row is counted (metrics.go).
//
// How a row travels: the keying step (keyfn.go) counts and validates it and
// keys it by its encoded PARTITION BY columns (coders/keycoder). What
// follows is chosen once by the plan (plan.go) from the options and the
// input: on a stream the stateful step (stateful.go), which keeps a key's
// state in a bag (state.go, coders/statecoder) and asks the rules of
// package core (core.First or core.Last, no Beam imports) what to emit,
// store and time; on bounded input, or for window dedup, a merge of each
// key's rows (bounded.go, window.go) by core's one ordering. Which row wins
// is decided in core once, for every expansion. docs/keepfirst.md,
// docs/keeplast.md and docs/window.md have the semantics and where they
// differ from Flink's; docs/development.md the map of the code.
package dedup

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/internal/pcol"
)

func init() {
	register.DoFn5x0[context.Context, beam.EventTime, beam.T, func(beam.EventTime, []byte, beam.T), func(deadletter.DeadLetter)](&keyRowsFn{})
	register.DoFn6x0[context.Context, beam.EventTime, beam.U, beam.V, func(beam.EventTime, beam.U, beam.V), func(deadletter.DeadLetter)](&keyPairsFn{})
	register.DoFn7x1[context.Context, beam.Window, beam.EventTime, state.Provider, beam.T, beam.V, func(beam.EventTime, beam.T, beam.V), error](&marksFn{})
	register.DoFn7x1[context.Context, beam.Window, beam.EventTime, state.Provider, beam.T, beam.V, func(beam.EventTime, beam.T, beam.V), error](&versionsFn{})
	register.DoFn8x1[context.Context, beam.Window, beam.EventTime, state.Provider, timers.Provider, beam.T, beam.V, func(beam.EventTime, beam.T, beam.V), error](&marksEventFn{})
	register.DoFn8x1[context.Context, beam.Window, beam.EventTime, state.Provider, timers.Provider, beam.T, beam.V, func(beam.EventTime, beam.T, beam.V), error](&marksProcFn{})
	register.DoFn8x1[context.Context, beam.Window, beam.EventTime, state.Provider, timers.Provider, beam.T, beam.V, func(beam.EventTime, beam.T, beam.V), error](&versionsEventFn{})
	register.DoFn8x1[context.Context, beam.Window, beam.EventTime, state.Provider, timers.Provider, beam.T, beam.V, func(beam.EventTime, beam.T, beam.V), error](&versionsProcFn{})
	register.Emitter3[beam.EventTime, []byte, beam.T]()
	register.Emitter3[beam.EventTime, beam.U, beam.V]()
	register.Emitter3[beam.EventTime, beam.T, beam.V]()
	register.Combiner1[candidate](&candidateMerge{})
	register.DoFn4x1[beam.EventTime, beam.T, beam.V, func(beam.EventTime, beam.T, candidate), error](&toCandidateFn{})
	register.DoFn4x1[context.Context, beam.T, func(*candidate) bool, func(beam.EventTime, beam.T, beam.V), error](&mergeGroupKVFn{})
	register.DoFn4x1[context.Context, beam.T, candidate, func(beam.EventTime, beam.T, beam.V), error](&fromCandidateFn{})
	register.Emitter3[beam.EventTime, beam.T, candidate]()
	register.Emitter3[beam.EventTime, []byte, candidate]()
	register.Emitter2[beam.EventTime, beam.V]()
	register.DoFn5x1[context.Context, beam.EventTime, beam.T, func(beam.EventTime, []byte, candidate), func(deadletter.DeadLetter), error](&keyCandidatesFn{})
	register.DoFn4x1[context.Context, []byte, candidate, func(beam.EventTime, beam.V), error](&fromCandidateRowFn{})
	register.DoFn4x1[context.Context, []byte, func(*candidate) bool, func(beam.EventTime, beam.V), error](&mergeGroupFn{})
	register.Iter1[candidate]()
	// Registered so that the custom coder calls them without reflection.
	register.Function1x1(encodeCandidate)
	register.Function1x2(decodeCandidate)
	beam.RegisterCoder(reflect.TypeFor[candidate](), encodeCandidate, decodeCandidate)
}

// KeepFirst keeps the first row per key of rows, a PCollection of a Go
// struct type, and returns a PCollection of the same type. It panics on a
// construction error (see TryKeepFirst). Rows that cannot be processed (an
// unknown changelog kind, a NULL event time) are counted as dead_lettered
// and dropped; use KeepFirstWithErrors to keep them.
func KeepFirst(s beam.Scope, rows beam.PCollection, opts ...Option) beam.PCollection {
	out, _, err := tryKeep(s, rows, opts, keepFirst)
	if err != nil {
		panic(err)
	}
	return out
}

// TryKeepFirst is KeepFirst returning construction errors instead of
// panicking.
func TryKeepFirst(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, error) {
	out, _, err := tryKeep(s, rows, opts, keepFirst)
	return out, err
}

// KeepFirstWithErrors is KeepFirst that also returns the rows it could not
// process, as a PCollection of DeadLetter with the reason. It panics on a
// construction error.
func KeepFirstWithErrors(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, beam.PCollection) {
	out, dead, err := tryKeep(s, rows, opts, keepFirst)
	if err != nil {
		panic(err)
	}
	return out, dead
}

// TryKeepFirstWithErrors is KeepFirstWithErrors returning construction
// errors instead of panicking.
func TryKeepFirstWithErrors(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, beam.PCollection, error) {
	return tryKeep(s, rows, opts, keepFirst)
}

// KeepFirstPerKey keeps the first value per key of kvs, a PCollection of
// KV<K,V>, and returns KV<K,V>. K must be a string, []byte, bool, integer or
// float (floats: -0 equals 0, all NaNs are equal). PartitionBy and
// PartitionByAll are not allowed: the key is K. OnTime and Changelog name
// columns of V, which must then be a struct. It panics on a construction
// error.
func KeepFirstPerKey(s beam.Scope, kvs beam.PCollection, opts ...Option) beam.PCollection {
	out, err := TryKeepFirstPerKey(s, kvs, opts...)
	if err != nil {
		panic(err)
	}
	return out
}

// TryKeepFirstPerKey is KeepFirstPerKey returning construction errors.
func TryKeepFirstPerKey(s beam.Scope, kvs beam.PCollection, opts ...Option) (beam.PCollection, error) {
	return tryKeepPerKey(s, kvs, opts, keepFirst)
}

// newConfig applies opts to the defaults of transform t.
func newConfig(opts []Option, t transform) config {
	c := defaultConfig()
	c.transform = t
	for _, o := range opts {
		o(&c)
	}
	return c
}

func tryKeepPerKey(s beam.Scope, kvs beam.PCollection, opts []Option, t transform) (beam.PCollection, error) {
	c := newConfig(opts, t)
	name := c.name(true)
	fail := func(err error) (beam.PCollection, error) {
		return beam.PCollection{}, fmt.Errorf("dedup.%s: %w", name, err)
	}
	if err := c.validate(); err != nil {
		return fail(err)
	}
	if c.partitionSet || c.partitionAll {
		return fail(fmt.Errorf("PartitionBy/PartitionByAll is not allowed: the key of each KV is the partition key; use %s on a PCollection of structs to key by columns", c.name(false)))
	}
	if !typex.IsKV(kvs.Type()) {
		return fail(fmt.Errorf("input must be a PCollection of KV<K,V>, got %v; use %s for a PCollection of structs", kvs.Type(), c.name(false)))
	}
	kt := kvs.Type().Components()[0].Type()
	vt := kvs.Type().Components()[1].Type()
	switch kt.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
	case reflect.Slice:
		if kt.Elem().Kind() != reflect.Uint8 {
			return fail(keyTypeError(kt))
		}
	default:
		return fail(keyTypeError(kt))
	}
	checks := rowChecks{TimeCol: c.onTime, KindCol: c.changelogCol, SeqCol: c.sequenceBy}
	if c.onTime != "" || c.changelogCol != "" || c.sequenceBy != "" || c.kindColumn() != "" {
		if err := checks.setup(vt); err != nil {
			return fail(err)
		}
		if _, err := optionalKindField(vt, c.kindColumn()); err != nil {
			return fail(fmt.Errorf("OutputKind: %w", err))
		}
	}
	p, err := newPlan(&c, input{
		bounded: pcol.IsBounded(kvs), globalWindows: kvs.WindowingStrategy().Fn.Kind == window.GlobalWindows,
		perKey: true, floatKey: kt.Kind() == reflect.Float32 || kt.Kind() == reflect.Float64,
	})
	if err != nil {
		return fail(err)
	}
	uid := scopeName(c.uid, name)
	s = s.Scope(uid)
	keyed, _ := beam.ParDo2(s.Scope("Key"), &keyPairsFn{ValueType: beam.EncodedType{T: vt}, KeyKind: int(kt.Kind()), Checks: checks, UID: uid}, kvs)
	if p.expansion == mergeExpansion {
		return mergeKeyed(s, keyed, &c, &p, vt), nil
	}
	return statefulStep(s, keyed, &c, &p, vt), nil
}

func keyTypeError(kt reflect.Type) error {
	return fmt.Errorf("key type %v cannot be a deterministic key; use a string, []byte, bool, integer or float key (or KeepFirst with PartitionBy on struct rows)", kt)
}

func scopeName(uid, def string) string {
	if uid != "" {
		return uid
	}
	return def
}

// tryKeep is the construction of KeepFirst and KeepLast on struct rows.
func tryKeep(s beam.Scope, rows beam.PCollection, opts []Option, t transform) (beam.PCollection, beam.PCollection, error) {
	c := newConfig(opts, t)
	name := c.name(false)
	fail := func(err error) (beam.PCollection, beam.PCollection, error) {
		return beam.PCollection{}, beam.PCollection{}, fmt.Errorf("dedup.%s: %w", name, err)
	}
	if err := c.validate(); err != nil {
		return fail(err)
	}
	rt, cols, checks, err := structRows(&c, rows, "use "+c.name(true)+" for KV input")
	if err != nil {
		return fail(err)
	}
	if _, err := optionalKindField(rt, c.kindColumn()); err != nil {
		return fail(fmt.Errorf("OutputKind: %w", err))
	}
	p, err := newPlan(&c, input{bounded: pcol.IsBounded(rows), globalWindows: rows.WindowingStrategy().Fn.Kind == window.GlobalWindows})
	if err != nil {
		return fail(err)
	}
	uid := scopeName(c.uid, name)
	s = s.Scope(uid)
	kr := keyRowsFn{RowType: beam.EncodedType{T: rt}, Columns: cols, Checks: checks, UID: uid, Clock: c.clock}
	if p.expansion == mergeExpansion {
		kept, dead := mergeRows(s, rows, kr, &c, &p)
		return kept, dead, nil
	}
	kr.PreFilter, kr.Rules = p.preFilter, p.rules
	var keyed, dead beam.PCollection
	if p.fold {
		keyed, dead = beam.ParDo2(s.Scope("Key"), &foldRowsFn{Rows: kr}, rows)
	} else {
		keyed, dead = beam.ParDo2(s.Scope("Key"), &kr, rows)
	}
	kept := statefulStep(s, keyed, &c, &p, rt)
	return beam.DropKey(s.Scope("DropKey"), kept), dead, nil
}

// structRows validates rows, a PCollection of a Go struct type, and the
// options that name its columns; it returns the row type, the key columns
// and the row checks. kvHint is what the error for KV input advises.
func structRows(c *config, rows beam.PCollection, kvHint string) (reflect.Type, []string, rowChecks, error) {
	if !rows.IsValid() {
		return nil, nil, rowChecks{}, fmt.Errorf("input PCollection is invalid")
	}
	t := rows.Type().Type()
	if typex.IsKV(rows.Type()) {
		return nil, nil, rowChecks{}, fmt.Errorf("input is %v; %s", rows.Type(), kvHint)
	}
	if t.Kind() != reflect.Struct {
		return nil, nil, rowChecks{}, fmt.Errorf("input must be a PCollection of a Go struct type (a Beam schema row), got %v", t)
	}
	cols := c.partitionBy
	if c.partitionAll {
		all, err := keycoder.Columns(t)
		if err != nil {
			return nil, nil, rowChecks{}, err
		}
		cols = nil
		for _, col := range all {
			if col.Name == c.changelogCol {
				continue // the row kind is not part of the row's identity
			}
			cols = append(cols, col.Name)
		}
	}
	if _, err := keycoder.New(t, cols); err != nil {
		return nil, nil, rowChecks{}, fmt.Errorf("PartitionBy: %w", err)
	}
	checks := rowChecks{TimeCol: c.onTime, KindCol: c.changelogCol, SeqCol: c.sequenceBy}
	if err := checks.setup(t); err != nil {
		return nil, nil, rowChecks{}, err
	}
	return t, cols, checks, nil
}
