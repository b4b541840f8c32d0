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
	p, s := beam.NewPipelineWithRoot()
	in := bench.Generate(s, w)
	opts = append([]dedup.Option{dedup.PartitionBy("key"), dedup.ForceStateful()}, opts...)
	bench.Sink(s, dedup.KeepFirst(s, in, opts...))
	pr, _ := runOnPrism(t, p, 3*time.Minute)
	c := dedup.ReadCounters(pr)
	t.Logf("%+v", c)
	require.Equal(t, keys, bench.OutCount(pr), "one row out per key")
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
