// Package dedup is deduplication for Apache Beam Go pipelines, with the
// semantics of Flink SQL's: KeepFirst (DEDUPLICATE_KEEP_FIRST, insert-only
// output), KeepLast (keep-last, a changelog of each key's current row) and
// WindowFirst/WindowLast (one row per key and window), as Beam transforms
// that work on streams and files and on every runner.
//
//	res := dedup.KeepFirst(s, rows,
//	    dedup.PartitionBy("user_id"),   // key columns; omitted = one global partition
//	    dedup.OnTime("rowtime"),        // event-time mode; omitted = watermarkless
//	    dedup.StateTTL(5*time.Minute),  // processing-time retention; 0 = forever
//	    dedup.UID("user-events-dedup")) // stable identity of the transform and its state
//	kept, dead := res.Rows, res.DeadLetters
//
// rows is a PCollection of a Go struct type, whose columns the options name
// (a column's name is its `beam:"name"` tag, else the field name), or of
// KV<K,V>, keyed by K (a string, []byte, bool, integer or float; the options
// then name columns of V). The output has the input's type.
//
// Each transform has two forms: X panics on a construction error, TryX
// returns it. Both return a Result: the kept rows, the rows that could not
// be processed as deadletter.DeadLetter (with the reason and the row under
// its column names), and with OutputDropped the rows dropped. Every input
// row is counted (ReadCounters, CountersOf).
//
// On Prism (Beam Go v2.77.0; the default runner of beamx.Run and ptest)
// run the job with --experiments=prism_disable_sdf_split, or call
// prismsplit.Disable after flag.Parse, as in a test's TestMain: under load
// Prism splits a stateful step's bundle in the middle of a key and can emit
// the key twice. A stateful expansion warns, once per process, when it is
// built or runs without it. docs/testing.md has a TestMain, TestStream
// patterns, and the order in which Prism hands a key its rows.
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
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"

	"github.com/beamdedup/beamdedup/coders/keycoder"
	"github.com/beamdedup/beamdedup/transforms/internal/pcol"
	"github.com/beamdedup/beamdedup/transforms/prismsplit"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Result is what a transform of the family returns.
type Result struct {
	// Rows are the kept rows, of the input's type: KeepFirst's first row
	// per key (its kind set to +I), KeepLast's changelog, window dedup's
	// row per key and window.
	Rows beam.PCollection
	// DeadLetters are the rows the transform could not process (an
	// unknown kind, a NULL event time or sequence value), as
	// deadletter.DeadLetter with the reason.
	DeadLetters beam.PCollection
	// Dropped are, with OutputDropped, the input rows the transform
	// dropped, of the input's type; without it, the zero PCollection.
	Dropped beam.PCollection
	// Spec is the roles of Rows' columns as a sink needs them
	// (pgsink.Spec): the key columns (none for a KV input, keyed by K);
	// for KeepLast also its kind and ordering columns, and whether its
	// rows are upserts (Upsert). KeepFirst's and window dedup's rows are
	// insert-only: a sink only inserts them.
	Spec rowspec.Spec
}

// KeepFirst keeps the first row per key of rows: by arrival, or with OnTime
// the earliest event time, emitted once the watermark passes it. On bounded
// input, where arrival has no order, it keeps the row with the smallest
// OnTime or SequenceBy value, ties broken by the smaller encoded row, so a
// rerun keeps the same rows. It panics on a construction error (see
// TryKeepFirst).
func KeepFirst(s beam.Scope, rows beam.PCollection, opts ...Option) Result {
	return must(TryKeepFirst(s, rows, opts...))
}

// TryKeepFirst is KeepFirst returning construction errors instead of
// panicking.
func TryKeepFirst(s beam.Scope, rows beam.PCollection, opts ...Option) (Result, error) {
	return build(s, rows, opts, keepFirst)
}

func must(r Result, err error) Result {
	if err != nil {
		panic(err)
	}
	return r
}

// shape is what the construction reads of the input's type.
type shape struct {
	kv      bool         // KV<K,V>, keyed by K
	rowType reflect.Type // the struct rows, or V
	keyType reflect.Type // K, or []byte (the encoded key columns)
	columns []string     // struct rows: the key columns
	checks  columns
}

// build is the one construction of every transform of the family: it reads
// the options and the input, makes the plan and builds the expansion the
// plan names.
func build(s beam.Scope, col beam.PCollection, opts []Option, t transform) (Result, error) {
	c := newConfig(opts, t)
	fail := func(err error) (Result, error) {
		return Result{}, fmt.Errorf("dedup.%v: %w", t, err)
	}
	if err := c.validate(); err != nil {
		return fail(err)
	}
	sh, err := inspect(&c, col)
	if err != nil {
		return fail(err)
	}
	in := input{
		bounded: pcol.IsBounded(col), globalWindows: col.WindowingStrategy().Fn.Kind == window.GlobalWindows,
		perKey: sh.kv, floatKey: sh.kv && (sh.keyType.Kind() == reflect.Float32 || sh.keyType.Kind() == reflect.Float64),
	}
	if t.window() && in.globalWindows {
		return fail(fmt.Errorf("input is in the global window, which never closes on a stream: window it first, e.g. beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), rows), or use KeepFirst/KeepLast for per-row results"))
	}
	p, err := newPlan(&c, in)
	if err != nil {
		return fail(err)
	}
	uid := c.uid
	if uid == "" {
		uid = t.String()
	}
	b := builder{s: s.Scope(uid), c: &c, p: &p, sh: &sh, uid: uid, metrics: metricsNamespace(t, uid)}
	var r Result
	if p.expansion == statefulExpansion {
		prismsplit.Check(context.Background(), prismsplit.Construction, fmt.Sprintf("dedup.%v (UID %s)", t, uid))
		r = b.stateful(col)
	} else {
		r = b.merge(col)
	}
	r.Spec = rowspec.Spec{Key: sh.columns}
	if t == keepLast {
		r.Spec.Kind, r.Spec.OnTime, r.Spec.SequenceBy, r.Spec.Upsert = c.kindCol, c.onTime, c.sequenceBy, c.upsert
	}
	return r, nil
}

// inspect validates the input's type and the options that name its
// columns.
func inspect(c *config, col beam.PCollection) (shape, error) {
	if !col.IsValid() {
		return shape{}, fmt.Errorf("input PCollection is invalid")
	}
	if typex.IsKV(col.Type()) {
		return inspectKV(c, col)
	}
	t := col.Type().Type()
	if t.Kind() != reflect.Struct {
		return shape{}, fmt.Errorf("input must be a PCollection of a Go struct type (a Beam schema row) or of KV<K,V>, got %v", t)
	}
	cols := c.partitionBy
	if c.partitionAll {
		all, err := keycoder.Columns(t)
		if err != nil {
			return shape{}, err
		}
		cols = nil
		for _, col := range all {
			if col.Name == c.kindCol {
				continue // the row kind is not part of the row's identity
			}
			cols = append(cols, col.Name)
		}
	}
	if _, err := keycoder.New(t, cols); err != nil {
		return shape{}, fmt.Errorf("PartitionBy(%q): %w", cols, err)
	}
	sh := shape{rowType: t, keyType: reflect.TypeFor[[]byte](), columns: cols, checks: c.rowChecks()}
	return sh, sh.checks.setup(t)
}

// inspectKV validates a KV<K,V> input: K is the key, the options name
// columns of V.
func inspectKV(c *config, col beam.PCollection) (shape, error) {
	if c.transform.window() {
		return shape{}, fmt.Errorf("input is %v; window deduplication takes struct rows and keys them by PartitionBy columns", col.Type())
	}
	if c.partitionSet || c.partitionAll {
		return shape{}, fmt.Errorf("PartitionBy/PartitionByAll is not allowed on KV input: the key of each KV is the partition key; drop the option, or key struct rows by their columns")
	}
	kt := col.Type().Components()[0].Type()
	vt := col.Type().Components()[1].Type()
	switch kt.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
	case reflect.Slice:
		if kt.Elem().Kind() != reflect.Uint8 {
			return shape{}, keyTypeError(kt)
		}
	default:
		return shape{}, keyTypeError(kt)
	}
	sh := shape{kv: true, rowType: vt, keyType: kt, checks: c.rowChecks()}
	if c.onTime != "" || c.kindCol != "" || c.sequenceBy != "" {
		if err := sh.checks.setup(vt); err != nil {
			return shape{}, err
		}
	}
	return sh, nil
}

func keyTypeError(kt reflect.Type) error {
	return fmt.Errorf("KV key type %v cannot be a deterministic key; use a string, []byte, bool, integer or float key (or struct rows with PartitionBy)", kt)
}

// rowChecks are the reader of the columns the options name.
func (c *config) rowChecks() columns {
	return columns{TimeCol: c.onTime, KindCol: c.kindCol, SeqCol: c.sequenceBy}
}

// builder builds the expansion of a plan.
type builder struct {
	s   beam.Scope // the transform's scope, named by its UID
	c   *config
	p   *plan
	sh  *shape
	uid string
	// metrics is the namespace of the transform's counters.
	metrics string
}

// keyRows is the keying step's configuration for struct rows.
func (b *builder) keyRows() keyRowsFn {
	return keyRowsFn{
		RowType: beam.EncodedType{T: b.sh.rowType}, Columns: b.sh.columns, Checks: b.sh.checks, UID: b.uid,
		Clock: b.c.hooks.Clock, Dropped: b.c.dropped, Metrics: b.metrics,
	}
}

// result is the Result of kept rows and dead letters, with the dropped
// rows flattened when OutputDropped asked for them.
func (b *builder) result(rows, dead beam.PCollection, dropped ...beam.PCollection) Result {
	r := Result{Rows: rows, DeadLetters: dead}
	if b.c.dropped {
		r.Dropped = beam.Flatten(b.s.Scope("Dropped"), dropped...)
	}
	return r
}

// dropKey drops the encoded key of struct rows' KV<key, row> collections.
func (b *builder) dropKey(name string, kvs beam.PCollection) beam.PCollection {
	if b.sh.kv {
		return kvs
	}
	return beam.DropKey(b.s.Scope(name), kvs)
}
