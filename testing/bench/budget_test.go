package bench_test

import (
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/bench"
	"github.com/beamdedup/beamdedup/transforms/dedup"
)

// budgetInput is the fixed input of the state-access budget: 2,000 rows
// over 200 keys (90% duplicates), event times out of order.
var budgetInput = bench.Workload{Rows: 2000, Keys: 200, Seed: 7}

// TestStateBudget counts (never times) the stateful expansion's state
// accesses on a fixed input, so it is deterministic on any machine and runs
// in CI. The budget, per mode:
//   - at most one state read per input row, in every mode: an event-time
//     candidate's timer carries the candidate in its tag, so its firing
//     reads nothing;
//   - a write only when the state changes: the first row of a key (emitted
//     or pending), a replaced candidate, an emission from a timer;
//   - StateTTL with refresh: a duplicate arriving within TTL/100 of the last
//     write costs no write. Arrivals here are milliseconds apart and the TTL
//     is a day, so writes == emitted;
//   - retractions (-U) of any key never write.
//
// Each mode runs with and without the mini-batch pre-filter: with it (the
// default) the generator's single bundle lets it drop every in-bundle
// duplicate, so the stateful step's own budget shows without it.
func TestStateBudget(t *testing.T) {
	w := budgetInput
	rows := int64(w.Rows)
	for _, tc := range []struct {
		name  string
		opts  []dedup.Option
		check func(t *testing.T, c dedup.Counters)
	}{
		{"watermarkless", nil, func(t *testing.T, c dedup.Counters) {
			assert.LessOrEqual(t, c.StateReads, rows, "reads ≤ 1 per row")
			assert.Equal(t, c.Emitted, c.StateWrites, "writes == emitted")
			assert.Zero(t, c.TimerSets)
		}},
		{"stateTTL_refresh", []dedup.Option{dedup.StateTTL(24 * time.Hour), dedup.ResetTTLOnDuplicate(true)}, func(t *testing.T, c dedup.Counters) {
			assert.LessOrEqual(t, c.StateReads, rows, "reads ≤ 1 per row")
			assert.Equal(t, c.Emitted, c.StateWrites, "refreshes within TTL/100 must not write")
			assert.Zero(t, c.TimerSets, "bounded input: no cleanup timers")
		}},
		{"stateTTL_no_refresh", []dedup.Option{dedup.StateTTL(24 * time.Hour), dedup.ResetTTLOnDuplicate(false)}, func(t *testing.T, c dedup.Counters) {
			assert.LessOrEqual(t, c.StateReads, rows, "reads ≤ 1 per row")
			assert.Equal(t, c.Emitted, c.StateWrites, "writes == emitted")
			assert.Zero(t, c.TimerSets)
		}},
		{"eventtime", []dedup.Option{dedup.OnTime("ts")}, func(t *testing.T, c dedup.Counters) {
			// On bounded input every candidate is emitted: candidates == emitted.
			candidates := c.Emitted
			assert.LessOrEqual(t, c.StateReads, rows, "reads ≤ 1 per row; firings read nothing")
			assert.LessOrEqual(t, c.StateWrites, candidates+c.CandidatesReplaced+c.Emitted, "writes ≤ candidates + replacements + emissions")
			// A replacement sets the new candidate's timer and moves the
			// replaced one's (so that it fires stale).
			assert.LessOrEqual(t, c.TimerSets, candidates+2*c.CandidatesReplaced, "timers set only for a new or replaced candidate")
		}},
		{"changelog", []dedup.Option{dedup.Changelog("op")}, func(t *testing.T, c dedup.Counters) {
			assert.LessOrEqual(t, c.StateReads, rows, "reads ≤ 1 per row")
			assert.Equal(t, c.Emitted, c.StateWrites, "writes == emitted; retractions never write")
			assert.Zero(t, c.TimerSets)
		}},
	} {
		for _, miniBatch := range []bool{true, false} {
			name := tc.name
			if !miniBatch {
				name += "/no_minibatch"
			}
			t.Run(name, func(t *testing.T) {
				budgetRun(t, w, append([]dedup.Option{dedup.MiniBatch(miniBatch)}, tc.opts...), tc.check)
			})
		}
	}
}

// budgetRun runs the stateful expansion with opts on w and checks the
// row accounting, then the mode's budget.
func budgetRun(t *testing.T, w bench.Workload, opts []dedup.Option, check func(*testing.T, dedup.Counters)) {
	rows, keys := int64(w.Rows), int64(w.Keys)
	c, out := statefulRun(t, dedup.KeepFirst, w, opts)
	require.Equal(t, keys, out, "one row out per key")
	require.Equal(t, rows, c.RowsIn)
	require.Equal(t, keys, c.Emitted)
	require.Zero(t, c.Pending(), "every row accounted for")
	// Rows the pre-filter dropped never reach state; every other row
	// costs at most one read when it is processed, and nothing else reads.
	assert.LessOrEqual(t, c.StateReads, rows-c.MiniBatchDropped, "reads ≤ 1 per row reaching the stateful step")
	check(t, c)
	t.Logf("per row: %.3f reads, %.3f writes, %.3f timer sets (%d rows dropped by the pre-filter)",
		float64(c.StateReads)/float64(rows), float64(c.StateWrites)/float64(rows), float64(c.TimerSets)/float64(rows), c.MiniBatchDropped)
}

// statefulRun runs keep (KeepFirst or KeepLast) by key on its stateful
// expansion with opts on w and returns its counters and output row count.
func statefulRun(t *testing.T, keep func(beam.Scope, beam.PCollection, ...dedup.Option) beam.PCollection, w bench.Workload, opts []dedup.Option) (dedup.Counters, int64) {
	p, s := beam.NewPipelineWithRoot()
	in := bench.Generate(s, w)
	opts = append([]dedup.Option{dedup.PartitionBy("key"), dedup.ForceStateful()}, opts...)
	// The Reshuffle keeps the step out of the sink's stage: fused with it,
	// a stage with no output and no timer makes Prism busy-wait, which
	// stalled a KeepLast run for minutes on a loaded machine
	// (notes/performance.md).
	bench.Sink(s, beam.Reshuffle(s.Scope("Shuffle"), keep(s, in, opts...)))
	pr, _ := runOnPrism(t, p, 3*time.Minute)
	c := dedup.ReadCounters(pr)
	t.Logf("%+v", c)
	return c, bench.OutCount(pr)
}

// lastBudgetInput is budgetInput with resends: about half the repeats are
// copies of the key's previous row, which KeepLast emits nothing for.
var lastBudgetInput = bench.Workload{Rows: 2000, Keys: 200, Seed: 7, Resends: true}

// TestStateBudget_KeepLast counts KeepLast's state accesses on a fixed
// input. The budget, in every mode (the design: core/last.go, stateful.go):
//   - at most one state read per row reaching the stateful step (rows a
//     mini-batch fold merged away never read);
//   - a write only when the stored row changes: an insert, an update, a
//     deletion (changelog input), and with OnTime or SequenceBy a retraction
//     of a key with no row that moves its tombstone; a duplicate, an
//     out-of-order row, a resent or unordered ignored retraction write
//     nothing, and a
//     StateTTL refresh within TTL/100 writes nothing (arrivals here are
//     seconds apart, the TTL is a day);
//   - no timer: KeepLast's output is immediate, and on bounded input no
//     cleanup timer is set.
//
// Without the fold, where each row goes is also checked against
// bench.KeepLast on the rows in Prism's order (event time,
// notes/beam-defects.md 4); with OnTime none is then out of order.
func TestStateBudget_KeepLast(t *testing.T) {
	w := lastBudgetInput
	for _, tc := range []struct {
		name string
		opts []dedup.Option
		// keepLastRules: when every row reaches the state, each row goes where
		// bench.KeepLast on the rows in event-time order puts it (false when
		// the mode's rules are not bench.KeepLast's). In that order no row is
		// older than the stored one, so OnTime changes nothing there.
		keepLastRules bool
		// ordered: changelog input with OnTime/SequenceBy (tombstones).
		ordered bool
	}{
		{"watermarkless", []dedup.Option{dedup.OutputKind("op")}, true, false},
		{"stateTTL_refresh", []dedup.Option{dedup.OutputKind("op"), dedup.StateTTL(24 * time.Hour), dedup.ResetTTLOnDuplicate(true)}, true, false},
		{"eventtime", []dedup.Option{dedup.OutputKind("op"), dedup.OnTime("ts")}, true, false},
		{"sequenceBy", []dedup.Option{dedup.OutputKind("op"), dedup.SequenceBy("seq")}, false, false},
		{"changelog", []dedup.Option{dedup.Changelog("op")}, false, false},
		{"changelog_eventtime", []dedup.Option{dedup.Changelog("op"), dedup.OnTime("ts")}, false, true},
	} {
		for _, miniBatch := range []bool{true, false} {
			name := tc.name
			if !miniBatch {
				name += "/no_minibatch"
			}
			t.Run(name, func(t *testing.T) {
				c, out := statefulRun(t, dedup.KeepLast, w, append([]dedup.Option{dedup.MiniBatch(miniBatch)}, tc.opts...))
				rows := int64(w.Rows)
				require.Equal(t, rows, c.RowsIn)
				require.Zero(t, c.LastUnaccounted(), "every row in one outcome")
				require.Zero(t, c.DeadLettered)
				assert.Equal(t, out, c.LastEmitted(), "output rows == emitted by the counters")
				assert.Equal(t, c.Updates, c.EmittedUpdateBefore, "a -U per update")
				assert.Equal(t, c.Updates, c.EmittedUpdateAfter, "a +U per update")
				assert.Equal(t, c.DeletesIn, c.EmittedDelete, "a -D per deletion")
				reaching := rows - c.MiniBatchDropped // the fold's rows, also counted in Superseded
				assert.LessOrEqual(t, c.StateReads, reaching, "reads ≤ 1 per row reaching the stateful step")
				writes := c.Inserts + c.Updates + c.DeletesIn
				if tc.ordered {
					// An ignored retraction at the state leaves (or raises) a
					// tombstone, so that an older row arriving later stays
					// deleted; a resent one (this input resends -U rows)
					// finds the tombstone as it was and writes nothing.
					assert.GreaterOrEqual(t, c.StateWrites, writes)
					tombstones := c.StateWrites - writes
					assert.LessOrEqual(t, tombstones, c.RetractionsIgnored, "writes ≤ inserts + updates + deletions + tombstones")
					if !miniBatch {
						assert.Less(t, tombstones, c.RetractionsIgnored, "a resent retraction rewrites no tombstone")
					}
				} else {
					assert.Equal(t, writes, c.StateWrites, "writes == inserts + updates + deletions")
				}
				assert.Zero(t, c.TimerSets, "no timers")
				assert.Zero(t, c.KeysExpired)
				if !miniBatch {
					require.Equal(t, rows, reaching, "without the fold every row reaches the state")
					assert.Positive(t, c.DuplicatesDropped, "the resends reach the state and are suppressed")
					if tc.keepLastRules {
						want := bench.KeepLast(w.ByEventTime(), false)
						assert.Equal(t, want, bench.LastCount{Inserts: c.Inserts, Updates: c.Updates, Duplicates: c.DuplicatesDropped, OutOfOrder: c.OutOfOrderDropped})
					}
				}
				t.Logf("per row: %.3f reads, %.3f writes, %.3f timer sets; %d rows merged before the state",
					float64(c.StateReads)/float64(rows), float64(c.StateWrites)/float64(rows), float64(c.TimerSets)/float64(rows), rows-reaching)
			})
		}
	}
}
