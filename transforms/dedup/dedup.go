// Package dedup is deduplication for Apache Beam Go pipelines, with the
// semantics of Flink SQL's: KeepFirst (DEDUPLICATE_KEEP_FIRST, insert-only
// output), KeepLast (keep-last, a changelog of each key's current row) and
// WindowFirst/WindowLast (one row per key and window), as Beam transforms
// that work on streams and files and on every runner.
//
//	res := dedup.KeepFirst(s, rows,
//	    rowspec.PartitionBy("user_id"), // key columns; omitted = one global partition
//	    rowspec.OnTime("rowtime"),      // event-time mode; omitted = watermarkless
//	    dedup.StateTTL(5*time.Minute),  // processing-time retention; 0 = forever
//	    dedup.UID("user-events-dedup")) // stable identity of the transform and its state
//	kept, dead := res.Rows, res.DeadLetters
//
// rows is a PCollection of a Go struct type, whose columns the options name
// (a column's name is its `beam:"name"` tag, else the field name), or of
// KV<K,V>, keyed by K (a string, []byte, bool, integer or float; the options
// then name columns of V). The output has the input's type.
//
// The columns' roles are package rowspec's options, which every transform
// of beamdedup takes alike (the key, the kind, the event time, the
// ordering column); the options of this package set how the transform
// deduplicates (retention, its UID, its expansion).
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
// How a row travels: the keying step counts and validates it and keys it
// by its encoded PARTITION BY columns (coders/keycoder). What follows is
// chosen once by the plan (plan.go) from the options and the input: on a
// stream the stateful step, which keeps a key's state in a bag
// (internal/statecoder) and asks the rules (no Beam imports) what to emit,
// store and time; on bounded input, or for window dedup, a merge of each
// key's rows by the rules' one ordering. This package builds the pipeline
// (expand.go); what runs on the workers is in internal/step, the rules in
// internal/core. Which row wins
// is decided in core once, for every expansion. docs/keepfirst.md,
// docs/keeplast.md and docs/window.md have the semantics and where they
// differ from Flink's; docs/development.md the map of the code.
package dedup

import "github.com/apache/beam/sdks/v2/go/pkg/beam"

// KeepFirst keeps the first row per key of rows: by arrival, or with
// rowspec.OnTime the earliest event time, emitted once the watermark
// passes it. On bounded input, where arrival has no order, it keeps the
// row with the smallest OnTime or SequenceBy value, ties broken by the
// smaller encoded row, so a rerun keeps the same rows. With a
// rowspec.KindColumn the input may be a changelog: a key's first +I/+U is
// emitted as +I, and every later change of the key is swallowed (a -U/-D
// of an unseen key is ignored); it cannot be combined with OnTime. It
// panics on a construction error (see TryKeepFirst).
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

// KeepLast keeps the last row per key of rows and returns a changelog of
// the same type: a key's first row as +I, each replacement as -U (the
// previous row) then +U (the new one), a deletion as -D, with the kind
// written into the rowspec.KindColumn, which it needs unless
// rowspec.Upsert is set (then only the new rows, +I and +U). Without
// OnTime or SequenceBy the last row is the last to arrive; with them, the
// one with the largest value (ties: the later arrival). A row equal to the
// stored one in every column but the kind emits nothing. On bounded input
// the result is each key's final row, as +I. It panics on a construction
// error (see TryKeepLast).
func KeepLast(s beam.Scope, rows beam.PCollection, opts ...Option) Result {
	return must(TryKeepLast(s, rows, opts...))
}

// TryKeepLast is KeepLast returning construction errors instead of
// panicking.
func TryKeepLast(s beam.Scope, rows beam.PCollection, opts ...Option) (Result, error) {
	return build(s, rows, opts, keepLast)
}

// Window deduplication (Flink's Window Deduplication, docs/window.md): per
// key and window the first (or last) row, emitted once when the window
// closes. It is the bounded expansion applied to windowed input: a combine
// per key and window (candidateMerge, lifted by the runner, so rows are
// pre-aggregated before the shuffle), which the runner fires with the
// window's default trigger when the watermark passes the window's end. No
// per-row state, no timers; the runner drops the window's accumulator when
// the window expires. With OutputDropped a GroupByKey per key and window
// replaces the combine.

// WindowFirst keeps, per key and window of rows (a windowed PCollection of a
// Go struct type), the row with the smallest timestamp, and emits it once
// when the window closes, in its window and with its own timestamp. Ties are
// broken by the smaller encoded row, so a rerun keeps the same rows. It
// panics on a construction error (see TryWindowFirst).
//
// Options: rowspec.PartitionBy, PartitionByAll, rowspec.OnTime (order by
// that column; the output row then carries its value as timestamp),
// rowspec.SequenceBy (order by that column first, then by timestamp), UID,
// OutputDropped, MiniBatch (no effect: the runner's combiner lifting
// pre-aggregates). StateTTL, EventTimeTTL, CleanupTimers, AsStream and
// rowspec.KindColumn are construction errors, as is a globally windowed
// input or a KV input.
func WindowFirst(s beam.Scope, rows beam.PCollection, opts ...Option) Result {
	return must(TryWindowFirst(s, rows, opts...))
}

// TryWindowFirst is WindowFirst returning construction errors instead of
// panicking.
func TryWindowFirst(s beam.Scope, rows beam.PCollection, opts ...Option) (Result, error) {
	return build(s, rows, opts, windowFirst)
}

// WindowLast is WindowFirst keeping, per key and window, the row with the
// largest timestamp (or OnTime or SequenceBy value); ties are broken by the
// larger encoded row: for example the last row of every 10-minute tumbling
// window.
func WindowLast(s beam.Scope, rows beam.PCollection, opts ...Option) Result {
	return must(TryWindowLast(s, rows, opts...))
}

// TryWindowLast is WindowLast returning construction errors instead of
// panicking.
func TryWindowLast(s beam.Scope, rows beam.PCollection, opts ...Option) (Result, error) {
	return build(s, rows, opts, windowLast)
}
