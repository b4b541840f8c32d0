package dedup

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

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
// Options: PartitionBy, PartitionByAll, OnTime (order by that column; the
// output row then carries its value as timestamp), SequenceBy (order by
// that column first, then by timestamp), UID, OutputDropped, MiniBatch (no
// effect: the runner's combiner lifting pre-aggregates). StateTTL,
// EventTimeTTL, CleanupTimers and KindColumn are construction errors, as is
// a globally windowed input or a KV input.
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

// windowKeyFn is keyCandidatesFn (one candidate per row, no in-bundle
// merge, whose FinishBundle output would lose the window) observing the
// window, so the SDK hands it a row once per window: rows_in then counts a
// row of a sliding window once per window, as emitted and
// duplicates_dropped do.
type windowKeyFn struct {
	keyCandidatesFn
}

func (f *windowKeyFn) ProcessElement(ctx context.Context, _ beam.Window, ts beam.EventTime, row beam.T, emit candEmit, dead deadEmit, drop dropEmit) error {
	return f.keyCandidatesFn.ProcessElement(ctx, ts, row, emit, dead, drop)
}
