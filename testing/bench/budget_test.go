package bench_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/testing/bench"
	"github.com/beamdedup/beamdedup/testing/deduptest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// budgetInput is the fixed input of the state-access budget: 2,000 rows
// over 200 keys (90% duplicates), event times out of order.
var budgetInput = bench.Workload{Rows: 2000, Keys: 200, Seed: 7}

// TestStateBudget counts (never times) the stateful expansion's state
// accesses and the Fn API state requests they make on a fixed input, so it
// is deterministic on any machine and runs in CI. The budget, per mode:
//   - the requests dedup counts (state_gets, state_appends, state_clears,
//     from the cost of each SDK call in transforms/dedup/internal/step/state.go) are the
//     requests the SDK sent (bench.CountStateRequests);
//   - watermarkless modes (with or without StateTTL, and changelog input):
//     exactly 2 requests per new key, its get and one append of a mark, and
//     one get per other row; no clear;
//   - event time: a candidate, its replacement and its emission each append
//     one version (two appends: Beam writes a byte slice's length and bytes
//     apart), with a clear only when a key's bag is rewritten;
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
			assertTwoRequestsPerNewKey(t, c)
			assert.Zero(t, c.TimerSets)
		}},
		{"stateTTL_refresh", []dedup.Option{dedup.StateTTL(24 * time.Hour), dedup.ResetTTLOnDuplicate(true)}, func(t *testing.T, c dedup.Counters) {
			assert.LessOrEqual(t, c.StateReads, rows, "reads ≤ 1 per row")
			assert.Equal(t, c.Emitted, c.StateWrites, "refreshes within TTL/100 must not write")
			assertTwoRequestsPerNewKey(t, c)
			assert.Zero(t, c.TimerSets, "bounded input: no cleanup timers")
		}},
		{"stateTTL_no_refresh", []dedup.Option{dedup.StateTTL(24 * time.Hour), dedup.ResetTTLOnDuplicate(false)}, func(t *testing.T, c dedup.Counters) {
			assert.LessOrEqual(t, c.StateReads, rows, "reads ≤ 1 per row")
			assert.Equal(t, c.Emitted, c.StateWrites, "writes == emitted")
			assertTwoRequestsPerNewKey(t, c)
			assert.Zero(t, c.TimerSets)
		}},
		{"eventTimeTTL", []dedup.Option{dedup.EventTimeTTL(24 * time.Hour)}, func(t *testing.T, c dedup.Counters) {
			assert.LessOrEqual(t, c.StateReads, rows, "reads ≤ 1 per row")
			assert.Equal(t, c.Emitted, c.StateWrites, "refreshes within TTL/100 must not write")
			assertTwoRequestsPerNewKey(t, c)
		}},
		{"eventtime", []dedup.Option{rowspec.OnTime("ts")}, func(t *testing.T, c dedup.Counters) {
			// On bounded input every candidate is emitted: candidates == emitted.
			candidates := c.Emitted
			assert.LessOrEqual(t, c.StateReads, rows, "reads ≤ 1 per row; firings read nothing")
			assert.LessOrEqual(t, c.StateWrites, candidates+c.CandidatesReplaced+c.Emitted, "writes ≤ candidates + replacements + emissions")
			// A replacement sets the new candidate's timer and moves the
			// replaced one's (so that it fires stale).
			assert.LessOrEqual(t, c.TimerSets, candidates+2*c.CandidatesReplaced, "timers set only for a new or replaced candidate")
			assertVersionWrites(t, c.Cost)
		}},
		{"changelog", []dedup.Option{rowspec.KindColumn("op")}, func(t *testing.T, c dedup.Counters) {
			assert.LessOrEqual(t, c.StateReads, rows, "reads ≤ 1 per row")
			assert.Equal(t, c.Emitted, c.StateWrites, "writes == emitted; retractions never write")
			assertTwoRequestsPerNewKey(t, c)
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

// assertTwoRequestsPerNewKey checks a watermarkless KeepFirst's requests:
// one get per row reaching the state, one append per new key, no clear, so
// that a new key costs exactly 2 requests and any other row 1.
func assertTwoRequestsPerNewKey(t *testing.T, c dedup.Counters) {
	t.Helper()
	assert.Equal(t, c.StateReads, c.StateGets, "one get per read")
	assert.Equal(t, c.Emitted, c.StateAppends, "one append per new key")
	assert.Zero(t, c.StateClears, "no clear")
	others := c.StateReads - c.Emitted // rows reaching the state that were not a new key
	assert.Equal(t, 2*c.Emitted, deduptest.StateRequests(c.Cost)-others, "requests per new key")
}

// assertVersionWrites checks a versions layout's requests: every write of
// a new version is two appends, with no clear but where a key's bag was
// rewritten (past maxVersions) or its state deleted.
// maxVersions is how many versions a key's bag holds before it is
// rewritten (docs/state.md, "The layouts").
const maxVersions = 8

func assertVersionWrites(t *testing.T, c dedup.Cost) {
	t.Helper()
	assert.Equal(t, c.StateReads, c.StateGets, "one get per read")
	assert.Zero(t, c.StateAppends%2, "two appends per version")
	versions := c.StateAppends / 2
	assert.LessOrEqual(t, versions, c.StateWrites)
	deletions := c.StateWrites - versions // writes that only cleared
	assert.LessOrEqual(t, c.StateClears, deletions+versions/maxVersions, "a clear only to delete or to rewrite a full bag")
}

// budgetRun runs the stateful expansion with opts on w and checks the
// row accounting, then the mode's budget.
func budgetRun(t *testing.T, w bench.Workload, opts []dedup.Option, check func(*testing.T, dedup.Counters)) {
	rows, keys := int64(w.Rows), int64(w.Keys)
	pr, out := statefulRun(t, dedup.KeepFirst, w, opts, "keepfirst")
	c := dedup.ReadCounters(pr)
	require.Equal(t, keys, out, "one row out per key")
	require.Equal(t, rows, c.RowsIn)
	require.Equal(t, keys, c.Emitted)
	require.Zero(t, c.Pending(), "every row accounted for")
	// Rows the pre-filter dropped never reach state; every other row
	// costs at most one read when it is processed, and nothing else reads.
	assert.LessOrEqual(t, c.StateReads, rows-c.MiniBatchDropped, "reads ≤ 1 per row reaching the stateful step")
	check(t, c)
	t.Logf("per row: %.3f reads, %.3f writes, %.3f requests (%.3f gets, %.3f appends, %.3f clears), %.3f timer sets (%d rows dropped by the pre-filter)",
		float64(c.StateReads)/float64(rows), float64(c.StateWrites)/float64(rows), float64(deduptest.StateRequests(c.Cost))/float64(rows),
		float64(c.StateGets)/float64(rows), float64(c.StateAppends)/float64(rows), float64(c.StateClears)/float64(rows),
		float64(c.TimerSets)/float64(rows), c.MiniBatchDropped)
}

// statefulRun runs keep (KeepFirst or KeepLast) by key on its stateful
// expansion with opts on w and returns its result and output row count:
// with a cell per key, as a stream gets by default, unless opts say
// StateBuckets. The state requests it counted must be those the SDK sent
// on its state cell, stateID: the measurement of
// transforms/dedup/internal/step/state.go's costs.
func statefulRun(t *testing.T, keep func(beam.Scope, beam.PCollection, ...dedup.Option) dedup.Result, w bench.Workload, opts []dedup.Option, stateID string) (beam.PipelineResult, int64) {
	p, s := beam.NewPipelineWithRoot()
	in := bench.Generate(s, w)
	opts = append([]dedup.Option{rowspec.PartitionBy("key"), dedup.AsStream(), dedup.StateBuckets(0)}, opts...)
	// The Reshuffle keeps the step out of the sink's stage: fused with it,
	// a stage with no output and no timer makes Prism busy-wait, which
	// stalled a KeepLast run for minutes on a loaded machine
	// (notes/performance.md).
	bench.Sink(s, beam.Reshuffle(s.Scope("Shuffle"), keep(s, in, opts...).Rows))
	bench.ResetStateRequests()
	pr, _ := runOnPrism(t, p, 3*time.Minute)
	c := dedup.ReadCounters(pr).Cost
	if strings.HasPrefix(stateID, "keeplast") {
		c = dedup.ReadLastCounters(pr).Cost
	}
	t.Logf("%+v", c)
	assert.Equal(t, bench.StateRequestsOf(stateID), bench.StateRequests{Gets: c.StateGets, Appends: c.StateAppends, Clears: c.StateClears},
		"the requests counted are the requests sent")
	return pr, bench.OutCount(pr)
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
		// upsert: no -U rows.
		upsert bool
		// insertOnly: the rows carry no kind; the kind column is only
		// written.
		insertOnly bool
	}{
		{name: "watermarkless", opts: []dedup.Option{rowspec.KindColumn("op")}, keepLastRules: true, insertOnly: true},
		{name: "stateTTL_refresh", opts: []dedup.Option{rowspec.KindColumn("op"), dedup.StateTTL(24 * time.Hour), dedup.ResetTTLOnDuplicate(true)}, keepLastRules: true, insertOnly: true},
		{name: "eventtime", opts: []dedup.Option{rowspec.KindColumn("op"), rowspec.OnTime("ts")}, keepLastRules: true, insertOnly: true},
		{name: "sequenceBy", opts: []dedup.Option{rowspec.KindColumn("op"), rowspec.SequenceBy("seq")}, insertOnly: true},
		{name: "upsert", opts: []dedup.Option{rowspec.Upsert()}, keepLastRules: true, upsert: true},
		{name: "changelog", opts: []dedup.Option{rowspec.KindColumn("op")}},
		{name: "changelog_eventtime", opts: []dedup.Option{rowspec.KindColumn("op"), rowspec.OnTime("ts")}, ordered: true},
	} {
		for _, miniBatch := range []bool{true, false} {
			name := tc.name
			if !miniBatch {
				name += "/no_minibatch"
			}
			t.Run(name, func(t *testing.T) {
				w := w
				w.InsertOnly = tc.insertOnly
				pr, out := statefulRun(t, dedup.KeepLast, w, append([]dedup.Option{dedup.MiniBatch(miniBatch)}, tc.opts...), "keeplast")
				c := dedup.ReadLastCounters(pr)
				t.Logf("%+v", c)
				rows := int64(w.Rows)
				require.Equal(t, rows, c.RowsIn)
				require.Zero(t, c.Unaccounted(), "every row in one outcome")
				require.Zero(t, c.DeadLettered)
				assert.Equal(t, out, c.Emitted(), "output rows == emitted by the counters")
				if tc.upsert {
					assert.Zero(t, c.EmittedUpdateBefore, "no -U")
				} else {
					assert.Equal(t, c.Updates, c.EmittedUpdateBefore, "a -U per update")
				}
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
				// A first version or an update is one get and two appends:
				// one request fewer than a value state's write (a clear and
				// two appends), but where a key's bag is rewritten.
				assertVersionWrites(t, c.Cost)
				if !miniBatch {
					require.Equal(t, rows, reaching, "without the fold every row reaches the state")
					assert.Positive(t, c.DuplicatesDropped, "the resends reach the state and are suppressed")
					if tc.keepLastRules {
						want := bench.KeepLast(w.ByEventTime(), false)
						assert.Equal(t, want, bench.LastCount{Inserts: c.Inserts, Updates: c.Updates, Duplicates: c.DuplicatesDropped, OutOfOrder: c.OutOfOrderDropped})
					}
				}
				t.Logf("per row: %.3f reads, %.3f writes, %.3f requests (%.3f gets, %.3f appends, %.3f clears), %.3f timer sets; %d rows merged before the state",
					float64(c.StateReads)/float64(rows), float64(c.StateWrites)/float64(rows), float64(deduptest.StateRequests(c.Cost))/float64(rows),
					float64(c.StateGets)/float64(rows), float64(c.StateAppends)/float64(rows), float64(c.StateClears)/float64(rows),
					float64(c.TimerSets)/float64(rows), rows-reaching)
			})
		}
	}
}

// TestStateBudget_PerBucket counts the state requests of the step that
// keeps state per key-hash bucket (StateBuckets) on the budget's inputs,
// every row reaching the step (no mini-batch): all in one bundle of the
// stateful stage, as the generator makes them (and in event time, the
// firings of the candidates' timers in a second), each bucket is read once
// a bundle and written once, its changes in one segment (a byte slice: two
// appends), so a bundle makes at most three requests per bucket, however
// many rows; with its requests waited for (OverlapState(false)), a bucket
// is written once per batch of its rows (or firing) instead. The requests
// counted are the requests sent, and every row is counted as with a cell
// per key.
func TestStateBudget_PerBucket(t *testing.T) {
	const buckets = 16
	for _, tc := range []struct {
		name string
		last bool
		opts []dedup.Option
	}{
		{"keepfirst", false, nil},
		{"keepfirst_stateTTL_refresh", false, []dedup.Option{dedup.StateTTL(24 * time.Hour)}},
		{"keepfirst_eventtime", false, []dedup.Option{rowspec.OnTime("ts")}},
		{"keeplast_changelog", true, []dedup.Option{rowspec.KindColumn("op")}},
		{"keeplast_upsert_eventTimeTTL", true, []dedup.Option{rowspec.Upsert(), dedup.EventTimeTTL(24 * time.Hour)}},
	} {
		bundles := int64(1)
		if tc.name == "keepfirst_eventtime" {
			bundles = 2 // the rows, then the candidates' firings
		}
		for _, on := range []bool{true, false} {
			name := tc.name
			if !on {
				name += "/waiting"
			}
			t.Run(name, func(t *testing.T) {
				w, keep, cell := budgetInput, dedup.KeepFirst, "keepfirst-buckets"
				if tc.last {
					w, keep, cell = lastBudgetInput, dedup.KeepLast, "keeplast-buckets"
					w.InsertOnly = true // every row a +I: a key is inserted once
				}
				opts := append([]dedup.Option{dedup.MiniBatch(false), deduptest.OverlapState(on), dedup.StateBuckets(buckets)}, tc.opts...)
				pr, out := statefulRun(t, keep, w, opts, cell)
				var c dedup.Cost
				if tc.last {
					lc := dedup.ReadLastCounters(pr)
					require.Equal(t, int64(w.Rows), lc.RowsIn)
					require.Zero(t, lc.Unaccounted(), "every row in one outcome")
					require.Equal(t, int64(w.Keys), lc.Inserts)
					assert.Equal(t, out, lc.Emitted())
					c = lc.Cost
				} else {
					fc := dedup.ReadCounters(pr)
					require.Equal(t, int64(w.Rows), fc.RowsIn)
					require.Equal(t, int64(w.Keys), fc.Emitted)
					require.Zero(t, fc.Pending(), "every row accounted for")
					require.Equal(t, int64(w.Keys), out)
					c = fc.Cost
				}
				t.Logf("%+v: %.4f requests a row", c, float64(deduptest.StateRequests(c))/float64(w.Rows))
				assert.Equal(t, c.StateReads, c.StateGets, "one get per read")
				assert.LessOrEqual(t, c.StateReads, bundles*buckets, "a read per bucket and bundle")
				assert.Equal(t, 2*c.StateWrites, c.StateAppends, "a segment, two appends, per write")
				assert.LessOrEqual(t, c.StateClears, c.StateWrites/2, "a rewrite once a cell's changes outweigh it")
				if on {
					assert.LessOrEqual(t, c.StateWrites, bundles*buckets, "a write per bucket and bundle")
					assert.LessOrEqual(t, deduptest.StateRequests(c)-c.StateClears, 3*bundles*buckets)
				}
			})
		}
	}
}
