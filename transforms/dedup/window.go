package dedup

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/transforms/deadletter"
	"github.com/beamdedup/beamdedup/transforms/internal/pcol"
)

func init() {
	register.DoFn6x1[context.Context, beam.Window, beam.EventTime, beam.T, func(beam.EventTime, []byte, candidate), func(deadletter.DeadLetter), error](&windowKeyFn{})
}

// Window deduplication (Flink's Window Deduplication, docs/window.md): per
// key and window the first (or last) row, emitted once when the window
// closes. It is the bounded expansion applied to windowed input: a combine
// per key and window (candidateMerge, lifted by the runner, so rows are
// pre-aggregated before the shuffle), which the runner fires with the
// window's default trigger when the watermark passes the window's end. No
// per-row state, no timers; the runner drops the window's accumulator when
// the window expires.

// WindowFirst keeps, per key and window of rows (a windowed PCollection of a
// Go struct type), the row with the smallest timestamp, and emits it once
// when the window closes, in its window and with its own timestamp. Ties are
// broken by the smaller encoded row, so a rerun keeps the same rows. It
// panics on a construction error (see TryWindowFirst); rows it cannot
// process (a NULL OnTime or SequenceBy column) are counted as dead_lettered
// and dropped (see WindowFirstWithErrors).
//
// Options: PartitionBy, PartitionByAll, OnTime (order by that column; the
// output row then carries its value as timestamp), SequenceBy (order by
// that column first, then by timestamp), UID, MiniBatch (no effect: the
// runner's combiner lifting pre-aggregates). StateTTL,
// EventTimeTTL, CleanupTimers, Changelog and ForceStateful are construction
// errors, as is a globally windowed input.
func WindowFirst(s beam.Scope, rows beam.PCollection, opts ...Option) beam.PCollection {
	out, _, err := tryWindow(s, rows, opts, windowFirst)
	if err != nil {
		panic(err)
	}
	return out
}

// TryWindowFirst is WindowFirst returning construction errors instead of
// panicking.
func TryWindowFirst(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, error) {
	out, _, err := tryWindow(s, rows, opts, windowFirst)
	return out, err
}

// WindowFirstWithErrors is WindowFirst that also returns the rows it could
// not process, as a PCollection of DeadLetter in the rows' windows. It
// panics on a construction error.
func WindowFirstWithErrors(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, beam.PCollection) {
	out, dead, err := tryWindow(s, rows, opts, windowFirst)
	if err != nil {
		panic(err)
	}
	return out, dead
}

// TryWindowFirstWithErrors is WindowFirstWithErrors returning construction
// errors instead of panicking.
func TryWindowFirstWithErrors(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, beam.PCollection, error) {
	return tryWindow(s, rows, opts, windowFirst)
}

// WindowLast is WindowFirst keeping, per key and window, the row with the
// largest timestamp (or OnTime or SequenceBy value); ties are broken by the
// larger encoded row. Seed 002 is its example: the last row of every
// 10-minute tumbling window.
func WindowLast(s beam.Scope, rows beam.PCollection, opts ...Option) beam.PCollection {
	out, _, err := tryWindow(s, rows, opts, windowLast)
	if err != nil {
		panic(err)
	}
	return out
}

// TryWindowLast is WindowLast returning construction errors instead of
// panicking.
func TryWindowLast(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, error) {
	out, _, err := tryWindow(s, rows, opts, windowLast)
	return out, err
}

// WindowLastWithErrors is WindowLast that also returns the rows it could
// not process, as a PCollection of DeadLetter in the rows' windows. It
// panics on a construction error.
func WindowLastWithErrors(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, beam.PCollection) {
	out, dead, err := tryWindow(s, rows, opts, windowLast)
	if err != nil {
		panic(err)
	}
	return out, dead
}

// TryWindowLastWithErrors is WindowLastWithErrors returning construction
// errors instead of panicking.
func TryWindowLastWithErrors(s beam.Scope, rows beam.PCollection, opts ...Option) (beam.PCollection, beam.PCollection, error) {
	return tryWindow(s, rows, opts, windowLast)
}

func tryWindow(s beam.Scope, rows beam.PCollection, opts []Option, t transform) (beam.PCollection, beam.PCollection, error) {
	c := newConfig(opts, t)
	name := c.name(false)
	fail := func(err error) (beam.PCollection, beam.PCollection, error) {
		return beam.PCollection{}, beam.PCollection{}, fmt.Errorf("dedup.%s: %w", name, err)
	}
	if err := c.validate(); err != nil {
		return fail(err)
	}
	if err := c.validateWindow(); err != nil {
		return fail(err)
	}
	rt, cols, checks, err := structRows(&c, rows, name+" takes struct rows and keys them by PartitionBy columns; use KeepFirstPerKey for KV input")
	if err != nil {
		return fail(err)
	}
	if rows.WindowingStrategy().Fn.Kind == window.GlobalWindows {
		return fail(fmt.Errorf("input is in the global window, which never closes on a stream: window it first, e.g. beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), rows), or use KeepFirst/KeepLast for per-row results"))
	}
	p, err := newPlan(&c, input{bounded: pcol.IsBounded(rows)})
	if err != nil {
		return fail(err)
	}
	uid := scopeName(c.uid, name)
	s = s.Scope(uid)
	kr := keyRowsFn{RowType: beam.EncodedType{T: rt}, Columns: cols, Checks: checks, UID: uid}
	key := windowKeyFn{keyCandidatesFn{Rows: kr, Merge: bundleMerge{Dir: p.dir}}}
	cands, dead := beam.ParDo2(s.Scope("Key"), &key, rows)
	return combineRows(s, cands, p.dir, fromCandidateFn{ValueType: kr.RowType, Last: p.last}), dead, nil
}

// windowKeyFn is keyCandidatesFn (one candidate per row, no in-bundle
// merge, whose FinishBundle output would lose the window) observing the
// window, so the SDK hands it a row once per window: rows_in then counts a
// row of a sliding window once per window, as emitted and
// duplicates_dropped do.
type windowKeyFn struct {
	keyCandidatesFn
}

func (f *windowKeyFn) ProcessElement(ctx context.Context, _ beam.Window, ts beam.EventTime, row beam.T, emit func(beam.EventTime, []byte, candidate), dead func(deadletter.DeadLetter)) error {
	return f.keyCandidatesFn.ProcessElement(ctx, ts, row, emit, dead)
}

// validateWindow rejects the options window deduplication has no use for,
// each with the fix.
func (c *config) validateWindow() error {
	switch {
	case c.changelogCol != "":
		return fmt.Errorf("Changelog(%q): window deduplication takes insert-only input; deduplicate a changelog with KeepFirst or KeepLast", c.changelogCol)
	case c.stateTTLSet || c.eventTTLSet:
		return fmt.Errorf("StateTTL/EventTimeTTL: window deduplication keeps a key's row only until its window closes, so there is no retention to set; choose the window size instead, or use KeepFirst/KeepLast for retention")
	case c.cleanupSet:
		return fmt.Errorf("CleanupTimers: window deduplication sets no timers (the runner drops a window's state when it closes); remove the option")
	case c.forceStateful:
		return fmt.Errorf("ForceStateful: window deduplication has no stateful expansion; use KeepFirst/KeepLast for per-row state")
	}
	return nil
}
